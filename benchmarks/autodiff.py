#!/usr/bin/env python3
"""Autodiff beside the peers: forward and reverse-mode (kernel.grad()) time of the same kernels in
this checkout ("ours"), the reference's PyPI release (quadrants==1.3.3) and Taichi, in one run.

    python3 benchmarks/autodiff.py [--log2n-cpu 20] [--log2n-vulkan 18] [--repeat 7] [--no-install]
                                   [--archs cpu,vulkan] [--peers "ours,reference 1.3.3,taichi"] [--cpu-time]

Each peer runs in its own process (and, but for ours, its own venv under --venvs), through the
venv / worker machinery of benchmarks/peers.py; a peer, or a peer's arch, that cannot be installed
or initialised, or whose results are wrong, is left out with a note. Times are the best of
--repeat synchronised calls after a warm-up (benchmarks/timing.py); before each timed backward the
seeds are restored and the input gradients zeroed, untimed, and the same is done before each timed
forward, so that both passes start from the same cache state (the reset's host copies evict the
caches: timed straight after one another, forwards run on warm caches and backwards on cold ones).
Every worker first checks the forward results and the gradients against numpy. For ours it also
reads the reverse kernel's compiled IR and says what the atomic rewrites made of each adjoint
accumulation.

--cpu-time counts each worker process's CPU seconds instead of wall time (lavapipe's threads
included), which other work on a shared machine disturbs less.

Workloads, n elements (f32 fields, needs_grad=True, y.grad seeded with random values):
  gather 4096   y[i] = x[p[i]] * w[i], p random into x of 4096   backward: scatter-add into x.grad
  gather n/16   the same into x of n/16 elements (over the rewrites' private-copy limit of 4096)
  loss x*x      loss[None] += x[i] * x[i]                         backward: x.grad[i], unique
  broadcast s   y[i] = s[None] * w[i]                             backward: every iteration into s.grad
"""
import argparse
import json
import os
import platform
import re
import subprocess
import sys

from peers import PEERS, peer_python, run_worker
from timing import best_of

CPU_TIME_ENV = "QD_BENCH_CPU_TIME"  # set for the workers: time.process_time instead of wall time
WORKLOADS = ["gather 4096", "gather n/16", "loss x*x", "broadcast s"]
SMALL = 4096


def reverse_rewrites(ir, grads):
    """What the reverse kernel does with each input gradient, read off its IR. grads: the IR's
    name of each gradient field -> the name to print."""
    ptr = {}  # statement id -> the field it points into
    in_loop, after = {}, {}  # field -> atomics on it in the parallel loop / after each thread's share
    private, section = set(), None
    for line in ir.splitlines():
        body = line.strip()
        indent = len(line) - len(line.lstrip())
        if body.startswith("task "):
            section = None
        elif indent == 4 and re.match(r"\$\d+ = for range", body):
            section = "loop"
        elif indent == 4 and body.startswith("each thread, after its share of the loop"):
            section = "after"
        elif indent == 4 and body.startswith("each thread, before"):
            section = None
        m = re.match(r"(\$\d+) : \S+ = global ptr (field|private copy of) (\S+?)\[", body)
        if m:
            ptr[m.group(1)] = m.group(3)
            if m.group(2) == "private copy of":
                private.add(m.group(3))
        m = re.search(r"global atomic \w+ (\$\d+)", body)
        if m and section and m.group(1) in ptr:
            counts = in_loop if section == "loop" else after
            counts[ptr[m.group(1)]] = counts.get(ptr[m.group(1)], 0) + 1
    subgroup = "subgroup.reduce" in ir
    out = []
    for raw, nice in grads.items():
        if raw not in ir:
            continue
        if raw in private:
            how = "private copy per thread, flushed after the loop"
        elif in_loop.get(raw):
            how = "atomic per iteration" + (", combined per subgroup among lanes sharing a target"
                                            if "subgroup.broadcast_first" in ir else "")
        elif after.get(raw):
            how = "per-thread sum, " + ("subgroup reduce, one atomic per subgroup" if subgroup else "one atomic per thread")
        else:
            how = "plain add"
        out.append(f"{nice}: {how}")
    if ".counts" in ir:
        out.append("bucketed scatter")
    return "; ".join(out)


def worker(peer, arch, n, repeat):
    import time

    import numpy as np
    clock = time.process_time if os.environ.get(CPU_TIME_ENV) == "1" else time.perf_counter
    module = PEERS[peer][1]
    qd = __import__(module)
    qd.init(arch=getattr(qd, arch), **({"log_level": "error"} if module == "taichi" else {}))
    rng = np.random.default_rng(0)
    big = n // 16
    xs_small, xs_big = rng.random(SMALL, dtype=np.float32), rng.random(big, dtype=np.float32)
    ws = (rng.random(n, dtype=np.float32) + 0.5).astype(np.float32)
    gs = (rng.random(n, dtype=np.float32) + 0.5).astype(np.float32)  # y.grad seed
    ps_small = rng.integers(0, SMALL, n, dtype=np.int32)
    ps_big = rng.integers(0, big, n, dtype=np.int32)
    sv = 1.5

    def f32(shape):
        return qd.field(qd.f32, shape=shape, needs_grad=True)

    x_small, x_big, w, y, s, loss = f32(SMALL), f32(big), f32(n), f32(n), f32(()), f32(())
    p_small, p_big = qd.field(qd.i32, shape=n), qd.field(qd.i32, shape=n)
    x_small.from_numpy(xs_small)
    x_big.from_numpy(xs_big)
    w.from_numpy(ws)
    p_small.from_numpy(ps_small)
    p_big.from_numpy(ps_big)
    s[None] = sv

    @qd.kernel
    def gather_small():
        for i in y:
            y[i] = x_small[p_small[i]] * w[i]

    @qd.kernel
    def gather_big():
        for i in y:
            y[i] = x_big[p_big[i]] * w[i]

    @qd.kernel
    def loss_sq():
        for i in w:
            loss[None] += w[i] * w[i]

    @qd.kernel
    def broadcast():
        for i in y:
            y[i] = s[None] * w[i]

    def seed_y():  # y.grad seeded, the inputs' gradients zeroed
        y.grad.from_numpy(gs)
        for g in (x_small.grad, x_big.grad, w.grad, s.grad):
            g.fill(0)

    def seed_loss():
        loss.grad[None] = 1.0
        w.grad.fill(0)

    def close(got, want, what, rtol=1e-5):
        np.testing.assert_allclose(got, want, rtol=rtol, atol=0, err_msg=f"{peer} {arch}: {what}")

    def check_gather(x, xs, ps, label):
        close(y.to_numpy(), xs[ps] * ws, f"{label} forward")
        close(x.grad.to_numpy(), np.bincount(ps, weights=gs * ws, minlength=len(xs)), f"{label} x.grad", 1e-4)
        close(w.grad.to_numpy(), gs * xs[ps], f"{label} w.grad")

    def check_loss():
        close(loss[None], float((ws.astype(np.float64) ** 2).sum()), "loss forward", 1e-4)
        close(w.grad.to_numpy(), 2 * ws, "loss w.grad")

    def check_broadcast():
        close(y.to_numpy(), sv * ws, "broadcast forward")
        close(w.grad.to_numpy(), gs * sv, "broadcast w.grad")
        close(s.grad[None], float((gs.astype(np.float64) * ws).sum()), "broadcast s.grad", 1e-4)

    def reset_loss():
        loss[None] = 0.0

    cases = {"gather 4096": (gather_small, seed_y, None, lambda: check_gather(x_small, xs_small, ps_small, "gather 4096")),
             "gather n/16": (gather_big, seed_y, None, lambda: check_gather(x_big, xs_big, ps_big, "gather n/16")),
             "loss x*x": (loss_sq, seed_loss, reset_loss, check_loss),
             "broadcast s": (broadcast, seed_y, None, check_broadcast)}
    grads = {}
    if peer == "ours":
        grads = {x_small.grad.name: "x.grad", x_big.grad.name: "x.grad", w.grad.name: "w.grad", s.grad.name: "s.grad"}
    res = {}
    for name, (k, seed, reset, check) in cases.items():
        def once():  # one forward and one backward from a fresh state, checked
            if reset:
                reset()
            k()
            seed()
            k.grad()
            qd.sync()
            check()

        def before_each():  # the same untimed state change before every timed call of either pass
            if reset:
                reset()
            seed()

        once()
        fwd = best_of(k, repeat, qd.sync, reset=before_each, clock=clock)
        bwd = best_of(k.grad, repeat, qd.sync, reset=before_each, clock=clock)
        once()  # (after the timed calls, still right)
        r = {"fwd": fwd * 1e3, "bwd": bwd * 1e3}
        if peer == "ours":
            r["rewrite"] = reverse_rewrites(next(iter(k.grad.cache.values()))[0].compiled.artifacts["ir"], grads)
        res[name] = r
    if peer == "ours" and arch == "vulkan":
        from quadrants._lib.runtime import program
        res["device"] = program().runtime.vulkan_caps.get("device_name")
    return res


def cpu_model():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--log2n-cpu", type=int, default=20)
    p.add_argument("--log2n-vulkan", type=int, default=18)
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--venvs", default="/tmp/qd-peers")
    p.add_argument("--no-install", action="store_true", help="use existing venvs only")
    p.add_argument("--archs", default="cpu,vulkan")
    p.add_argument("--peers", default=",".join(PEERS), help="a subset of: " + ", ".join(PEERS))
    p.add_argument("--timeout", type=int, default=900, help="seconds per peer and arch")
    p.add_argument("--cpu-time", action="store_true", help="time in process CPU seconds (lavapipe's threads included)")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--arch", help=argparse.SUPPRESS)
    p.add_argument("--log2n", type=int, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.worker:
        print("RESULT " + json.dumps(worker(a.worker, a.arch, 2 ** a.log2n, a.repeat)))
        return

    base_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if a.cpu_time:
        base_env[CPU_TIME_ENV] = "1"
    sizes = {"cpu": a.log2n_cpu, "vulkan": a.log2n_vulkan}
    archs = a.archs.split(",")
    results, notes, device = {}, [], None  # (arch, peer) -> workload -> {fwd, bwd[, rewrite]}
    for peer in PEERS:
        if peer not in a.peers.split(","):
            continue
        python, env, why = peer_python(peer, a.venvs, not a.no_install, base_env)
        if python is None:
            notes.append(f"{peer}: left out ({why})")
            continue
        for arch in archs:
            print(f"running {peer} on {arch} (n = 2^{sizes[arch]}) ...", file=sys.stderr, flush=True)
            res, why = run_worker(python, peer, arch, sizes[arch], a.repeat, env, a.timeout, os.path.abspath(__file__))
            if res:
                device = res.pop("device", device)
                results[arch, peer] = res
            else:
                notes.append(f"{peer} {arch}: left out ({why})")

    rows = ["| arch | workload | peer | forward ms | backward ms | backward / forward | ours / this backward |",
            "|---|---|---|---|---|---|---|"]
    goals = ["| arch | workload | ours: backward <= 3x forward | ours: backward <= every peer's | "
             "our reverse kernel's adjoint accumulation |", "|---|---|---|---|---|"]
    for arch in archs:
        for w in WORKLOADS:
            ours = results.get((arch, "ours"), {}).get(w)
            for peer in PEERS:
                r = results.get((arch, peer), {}).get(w)
                if r is None:
                    continue
                vs = f"{ours['bwd'] / r['bwd']:.2f}" if ours and peer != "ours" else "-"
                rows.append(f"| {arch} 2^{sizes[arch]} | {w} | {peer} | {r['fwd']:.3f} | {r['bwd']:.3f} | "
                            f"{r['bwd'] / r['fwd']:.2f} | {vs} |")
            if ours:
                theirs = [r[w]["bwd"] for (ar, peer), r in results.items() if ar == arch and peer != "ours"]
                slower = max((ours["bwd"] / t for t in theirs), default=None)
                goals.append(f"| {arch} | {w} | {'yes' if ours['bwd'] <= 3 * ours['fwd'] else 'no'} "
                             f"({ours['bwd'] / ours['fwd']:.2f}x) | "
                             + ("-" if slower is None else f"{'yes' if slower <= 1 else 'no'} (worst {slower:.2f}x)")
                             + f" | {ours.get('rewrite', '')} |")
    print(f"host: {cpu_model()}, {os.cpu_count()} cores; vulkan device: {device or 'not run'}")
    print(f"best of {a.repeat} synchronised calls after a warm-up, "
          f"{'process CPU time' if a.cpu_time else 'wall time'}; the machine is shared, so times are noisy\n")
    print("\n".join(rows) + "\n")
    print("\n".join(goals))
    for n_ in notes:
        print("note:", n_)


if __name__ == "__main__":
    main()
