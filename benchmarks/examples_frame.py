#!/usr/bin/env python3
"""Milliseconds per frame of the simulation examples, beside the peers, in one run: this checkout
("ours"), the reference's PyPI release (quadrants==1.3.3) and Taichi.

    python3 benchmarks/examples_frame.py [--archs cpu,vulkan] [--frames 50] [--repeat 7] [--no-install]
                                         [--peers "ours,reference 1.3.3,taichi"] [--init KEY=VALUE,...]
                                         [--examples mpm2d,pbf2d,nbody,fem2d,particles,rasterizer] [--cpu-time]

A frame is one simulation step of the example (its `step()`), then a sync. Every peer runs the
example's own source file, unchanged, at the size its main() uses: the reference imports it as
it is; Taichi through a module object named `quadrants` whose attributes are Taichi's
(`qd.kernel` is `ti.kernel` ...; `qd.init` adds log_level="error"). An example that a peer cannot
run (one using something that peer lacks) is left out for that peer, with the error.

Each peer runs in its own process (the reference and Taichi in their venvs under --venvs), through
benchmarks/peers.py's venv / worker machinery. A worker first runs CHECK_STEPS frames from the
example's initial state and saves the state: ours is compared with the numpy versions of the
steps in tests/python/test_simulation_examples.py (particles, rasterizer: the example's own numpy
reference(), for every peer) at that test's tolerances, and every peer's state with ours at twice
them; a peer that disagrees is left out, so no broken code is timed. Then the state is reloaded
and the time is the best of --repeat batches of --frames synchronised frames (after one warm-up
batch, which also compiles), divided by --frames.

--cpu-time times in process CPU seconds instead (every thread of the worker: the cpu's pool,
lavapipe's threads), which other work on a shared machine disturbs less.

--init passes the same extra qd.init / ti.init options to every peer, for a diagnosis: e.g.
`--init fast_math=False,cpu_max_num_threads=1` (the defaults differ: fast_math is True in the
reference and Taichi, False here).
"""
import argparse
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time
import traceback
import types

from peers import PEERS, peer_python, run_worker
from timing import best_of

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
EXAMPLES = ["mpm2d", "pbf2d", "nbody", "fem2d", "particles", "rasterizer"]
CHECK_STEPS = 5
# Each state array's tolerance (absolute), from tests/python/test_simulation_examples.py and
# tests/python/test_examples.py (those are f32 against numpy f64; two f32 peers: twice it).
TOLERANCE = {
    "mpm2d": {"x": 1e-6, "v": 1e-5, "C": 5e-4, "J": 3e-6, "grid_m": 1e-8, "grid_v": 3e-5},
    "pbf2d": {"x": 2e-4, "v": 5e-3, "lam": 5e-6, "dx": 5e-6},
    "nbody": {"x": 2e-6, "v": 2e-6, "a": 2e-5},
    "fem2d": {"x": 1e-6, "v": 1e-3, "f": 1e-2},
    "particles": {"x": 1e-5, "v": 1e-5, "density": 1e-3},
    "rasterizer": {"v": 0, "vel": 0, "key": 0, "image": 0},  # integer geometry: the same pixels
}


def load_example(name):
    spec = importlib.util.spec_from_file_location(f"{name}_example", os.path.join(ROOT, "examples", f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def taichi_as_quadrants():
    """A module `quadrants` whose attributes are taichi's, so that `import quadrants as qd` in an
    example gives Taichi."""
    import taichi as ti
    shim = types.ModuleType("quadrants")
    shim.__getattr__ = lambda name: getattr(ti, name)
    shim.init = lambda arch=None, **kw: ti.init(arch=arch, log_level="error", **kw)
    sys.modules["quadrants"] = shim
    return shim


def setup(name, m):
    """The example as its main() sets it up: (load the initial state, one frame, the state as numpy
    arrays, the numpy reference of the state after `steps` frames or None)."""
    import numpy as np
    if name == "mpm2d":
        n = 400
        sim = m.MPM(n)
        x0, v0 = m.initial_state(n)
        fields = {"x": sim.x, "v": sim.v, "C": sim.C, "J": sim.J, "grid_m": sim.grid_m, "grid_v": sim.grid_v}

        def ref(t, steps):
            x, v, C, J, grid_v, grid_m = t.mpm_reference(x0, v0, np.zeros((n, 2, 2), np.float32),
                                                         np.ones(n, np.float32), steps)
            return {"x": x, "v": v, "C": C, "J": J, "grid_m": grid_m, "grid_v": grid_v}
        return (lambda: sim.load(x0, v0)), sim.step, fields, ref
    if name == "pbf2d":
        x0, v0 = m.initial_state()
        sim = m.PBF(len(x0))
        fields = {"x": sim.x, "v": sim.v, "lam": sim.lam, "dx": sim.dx}

        def ref(t, steps):
            x, v, lam, dx, _ = t.pbf_reference(x0, v0, steps)
            return {"x": x, "v": v, "lam": lam, "dx": dx}
        return (lambda: sim.load(x0, v0)), sim.step, fields, ref
    if name == "nbody":
        n = 512
        sim = m.NBody(n)
        x0, v0, mass = m.initial_state(n)
        fields = {"x": sim.x, "v": sim.v, "a": sim.a}

        def ref(t, steps):
            return dict(zip("xva", t.nbody_reference(x0, v0, mass, steps)))
        return (lambda: sim.load(x0, v0, mass)), sim.step, fields, ref
    if name == "fem2d":
        nx, ny = 17, 5
        sim, rest = m.cantilever(nx, ny)
        _, tris = m.beam_mesh(nx, ny)
        fixed = (np.arange(nx * ny) < ny).astype(np.int32)
        zero = np.zeros_like(rest)
        fields = {"x": sim.x, "v": sim.v, "f": sim.f}

        def ref(t, steps):
            x, v, f, _ = t.fem_reference(rest, tris, fixed, rest, zero, steps, m.GRAVITY, m.DAMPING)
            return {"x": x, "v": v, "f": f}
        return (lambda: sim.load(rest, zero)), sim.step, fields, ref
    if name == "particles":
        n = 10000
        sim = m.Simulation(n)
        x0, v0, mass = m.initial_state(n)
        fields = {"x": sim.particles.x, "v": sim.particles.v, "density": sim.density}

        def ref(t, steps):
            x, v = m.reference(x0, v0, mass, steps)
            return {"x": x, "v": v, "density": m.density_of(x, mass)}
        return (lambda: sim.load(x0, v0, mass)), (lambda: sim.step(m.DT)), fields, ref
    if name == "rasterizer":
        n, size = 2000, 256
        sim = m.Rasterizer(n, size)
        state = m.initial_state(n, size)
        fields = {"v": sim.v, "vel": sim.vel, "key": sim.key, "image": sim.image}

        def ref(t, steps):
            return dict(zip(fields, m.reference(*state, size, steps)))
        return (lambda: sim.load(*state)), sim.step, fields, ref
    raise ValueError(name)


def compare(got, want, tolerance, factor=1.0):
    """None, or what differs by more than factor * its tolerance."""
    import numpy as np
    bad = []
    for k, atol in tolerance.items():
        err = float(np.abs(np.asarray(got[k], np.float64) - np.asarray(want[k], np.float64)).max())
        if not err <= factor * atol:
            bad.append(f"{k} off by {err:.2e} > {factor * atol:.1e}")
    return "; ".join(bad) or None


def init_options(text):
    """"a=1,b=False" -> {"a": 1, "b": False}."""
    import ast
    return {k.strip(): ast.literal_eval(v.strip()) for k, v in (kv.split("=", 1) for kv in text.split(",") if kv)}


def worker(peer, arch, frames, repeat, state_dir, init, examples):
    import numpy as np
    if peer == "taichi":
        qd = taichi_as_quadrants()
    else:
        import quadrants as qd
    qd.init(arch=getattr(qd, arch), **init_options(init))
    tests = None
    if peer == "ours":  # the numpy versions of the steps
        sys.path[:0] = [os.path.join(ROOT, "tests"), os.path.join(ROOT, "tests", "python")]
        import test_simulation_examples as tests
    res = {}
    for name in examples:
        try:
            m = load_example(name)
            load, step, fields, ref = setup(name, m)

            def frame():
                step()
                qd.sync()

            load()
            for _ in range(CHECK_STEPS):
                frame()
            state = {k: f.to_numpy() for k, f in fields.items()}
            np.savez(os.path.join(state_dir, f"{peer.split()[0]}-{arch}-{name}.npz"), **state)
            if tests is not None or name in ("particles", "rasterizer"):
                bad = compare(state, ref(tests, CHECK_STEPS), TOLERANCE[name])
                if bad:
                    res[name] = {"error": f"differs from numpy after {CHECK_STEPS} frames: {bad}"}
                    continue
            load()

            def batch():
                for _ in range(frames):
                    frame()

            clock = time.process_time if os.environ.get("QD_BENCH_CPU_TIME") == "1" else time.perf_counter
            res[name] = {"ms": best_of(batch, repeat, clock=clock) / frames * 1e3}
        except Exception as e:  # noqa: BLE001 (left out with its error)
            traceback.print_exc()
            res[name] = {"error": f"{type(e).__name__}: {str(e).strip().splitlines()[-1] if str(e).strip() else ''}"}
    return res


def cpu_model():
    import subprocess
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    return next((line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name:")), "?")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--archs", default="cpu,vulkan")
    p.add_argument("--frames", type=int, default=50, help="frames per timed batch")
    p.add_argument("--repeat", type=int, default=7, help="timed batches (the best is kept)")
    p.add_argument("--venvs", default="/tmp/qd-peers")
    p.add_argument("--no-install", action="store_true", help="use existing venvs only")
    p.add_argument("--peers", default=",".join(PEERS), help="a subset of: " + ", ".join(PEERS))
    p.add_argument("--timeout", type=int, default=900, help="seconds per peer and arch")
    p.add_argument("--examples", default=",".join(EXAMPLES), help="a subset of: " + ", ".join(EXAMPLES))
    p.add_argument("--init", default="", help="extra init options for every peer: KEY=VALUE,...")
    p.add_argument("--cpu-time", action="store_true", help="process CPU time instead of wall time")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--arch", help=argparse.SUPPRESS)
    p.add_argument("--log2n", type=int, help=argparse.SUPPRESS)  # (peers.run_worker passes it: unused)
    a = p.parse_args()
    if a.worker:
        res = worker(a.worker, a.arch, int(os.environ["QD_FRAMES"]), a.repeat, os.environ["QD_STATE_DIR"],
                     os.environ.get("QD_INIT", ""), os.environ["QD_EXAMPLES"].split(","))
        print("RESULT " + json.dumps(res))
        return

    state_dir = tempfile.mkdtemp(prefix="examples_frame-")
    base_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    examples = [e for e in EXAMPLES if e in a.examples.split(",")]
    base_env.update(QD_FRAMES=str(a.frames), QD_STATE_DIR=state_dir, QD_INIT=a.init, QD_EXAMPLES=",".join(examples),
                    QD_BENCH_CPU_TIME="1" if a.cpu_time else "0")
    archs, peers = a.archs.split(","), [p_ for p_ in PEERS if p_ in a.peers.split(",")]
    ms, notes = {}, []  # (arch, example, peer) -> ms per frame
    load_start = os.getloadavg()[0]
    for peer in peers:
        python, env, why = peer_python(peer, a.venvs, not a.no_install, base_env)
        if python is None:
            notes.append(f"{peer}: left out ({why})")
            continue
        for arch in archs:
            print(f"running {peer} on {arch} ...", file=sys.stderr, flush=True)
            res, why = run_worker(python, peer, arch, 0, a.repeat, env, a.timeout, os.path.abspath(__file__))
            if res is None:
                notes.append(f"{peer} {arch}: left out ({why})")
                continue
            for name, r in res.items():
                if "error" in r:
                    notes.append(f"{name}, {peer} {arch}: left out ({r['error']})")
                else:
                    ms[arch, name, peer] = r["ms"]

    import numpy as np
    # Every peer's state after CHECK_STEPS frames against ours (ours against numpy in its worker).
    for (arch, name, peer) in list(ms):
        if peer == "ours":
            continue
        path = os.path.join(state_dir, f"{{}}-{arch}-{name}.npz")
        if (arch, name, "ours") not in ms:
            notes.append(f"{name}, {peer} {arch}: not compared with ours (ours did not run)")
            continue
        bad = compare(np.load(path.format(peer.split()[0])), np.load(path.format("ours")), TOLERANCE[name], 2.0)
        if bad:
            notes.append(f"{name}, {peer} {arch}: left out (differs from ours after {CHECK_STEPS} frames: {bad})")
            del ms[arch, name, peer]
    shutil.rmtree(state_dir, ignore_errors=True)

    ref_name = next((p_ for p_ in peers if p_.startswith("reference")), "reference 1.3.3")
    rows = [f"| arch | example | ours ms | {ref_name} ms | taichi ms | ours / reference | ours / taichi |",
            "|---|---|---|---|---|---|---|"]

    def cell(v, fmt):
        return "-" if v is None else format(v, fmt)

    for arch in archs:
        for name in examples:
            o, r, t = (ms.get((arch, name, p_)) for p_ in ("ours", ref_name, "taichi"))
            if o is None and r is None and t is None:
                continue
            rows.append(f"| {arch} | {name} | {cell(o, '.3f')} | {cell(r, '.3f')} | {cell(t, '.3f')} | "
                        f"{cell(o / r if o and r else None, '.2f')} | {cell(o / t if o and t else None, '.2f')} |")
    print(f"host: {cpu_model()}, {os.cpu_count()} cores; load average {load_start:.1f} at the start, "
          f"{os.getloadavg()[0]:.1f} at the end; {time.strftime('%Y-%m-%d', time.gmtime())}")
    print(f"ms per frame (step + sync) of {'process CPU time' if a.cpu_time else 'wall time'}, best of {a.repeat} batches of {a.frames} frames after a warm-up batch; "
          "the machine is shared, so times are noisy"
          + (f"; every peer with init options {a.init}" if a.init else "") + "\n")
    print("\n".join(rows))
    for n_ in notes:
        print("note:", n_)


if __name__ == "__main__":
    main()
