#!/usr/bin/env python3
"""Quadrants beside its peers on the same workloads, in one run: this checkout, the reference's
PyPI release (quadrants==1.3.3), Taichi and NumPy.

    python3 benchmarks/peers.py [--log2n-cpu 24] [--log2n-vulkan 22] [--no-install]

Each peer runs in its own process; the reference and Taichi each in their own venv under
--venvs (default /tmp/qd-peers), created with pip on first use. A peer, or a peer's arch, that
cannot be installed or initialised is left out with a note. Times are the best of --repeat calls
after a warm-up, synchronised; cells are ns per element (launch: us per call). Writes the
markdown table to docs/performance.md and a bar chart to docs/performance.png (matplotlib).

Workloads, n elements each (fields, filled once before timing):
  copy          y[i] = x[i]                                      numpy: np.copyto
  sum f32       atomic_add(total[None], x[i])                    numpy: x.sum()
  max f32       atomic_max(m[None], x[i])                        numpy: x.max()
  histogram     atomic_add(hist[d[i]], 1), 256 bins              numpy: np.bincount
  scatter-add   atomic_add(y[p[i]], x[i]), p a permutation       numpy: np.add.at
  scatter store y[p[i]] = x[i] (what scatter-add is measured against)   numpy: y[p] = x
  compaction    if x[i] > .5: out[atomic_add(c[None], 1)] = i    numpy: np.flatnonzero
  launch        a kernel storing one field element (us / call: 200 calls, then one sync)
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time

from timing import best_of

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
WORKLOADS = ["copy", "sum f32", "max f32", "histogram", "scatter-add", "scatter store", "compaction", "launch"]
NUMPY_NAMES = {"copy": "copyto", "sum f32": "sum", "max f32": "max", "histogram": "bincount",
               "scatter-add": "add.at", "scatter store": "y[p] = x", "compaction": "flatnonzero"}
PEERS = {  # name: (pip requirement or None for this checkout, module)
    "ours": (None, "quadrants"),
    "reference 1.3.3": ("quadrants==1.3.3", "quadrants"),
    "taichi": ("taichi", "taichi"),
}


def data(n):
    import numpy as np
    rng = np.random.default_rng(0)
    return (rng.random(n, dtype=np.float32), rng.integers(0, 256, n, dtype=np.int32),
            rng.permutation(n).astype(np.int32))


def numpy_worker(n, repeat):
    import numpy as np
    x, d, p = data(n)
    y = np.zeros_like(x)
    t = {"copy": best_of(lambda: np.copyto(y, x), repeat),
         "sum f32": best_of(lambda: x.sum(), repeat),
         "max f32": best_of(lambda: x.max(), repeat),
         "histogram": best_of(lambda: np.bincount(d, minlength=256), repeat),
         "scatter-add": best_of(lambda: np.add.at(y, p, x), max(1, repeat // 2)),
         "scatter store": best_of(lambda: y.__setitem__(p, x), repeat),
         "compaction": best_of(lambda: np.flatnonzero(x > 0.5), repeat)}
    return {k: v / n * 1e9 for k, v in t.items()}


def lib_worker(module, arch, n, repeat):
    """The same kernels through quadrants (either version) or taichi: their APIs agree here."""
    import numpy as np
    qd = __import__(module)
    kw = {"log_level": "error"} if module == "taichi" else {}
    qd.init(arch=getattr(qd, arch), **kw)
    xs, ds, ps = data(n)
    x, y, out = qd.field(qd.f32, shape=n), qd.field(qd.f32, shape=n), qd.field(qd.i32, shape=n)
    d, p = qd.field(qd.i32, shape=n), qd.field(qd.i32, shape=n)
    hist = qd.field(qd.i32, shape=256)
    total, m, c, one = (qd.field(t, shape=()) for t in (qd.f32, qd.f32, qd.i32, qd.f32))
    x.from_numpy(xs)
    d.from_numpy(ds)
    p.from_numpy(ps)

    @qd.kernel
    def copy():
        for i in range(n):
            y[i] = x[i]

    @qd.kernel
    def sum_():
        for i in range(n):
            qd.atomic_add(total[None], x[i])

    @qd.kernel
    def max_():
        for i in range(n):
            qd.atomic_max(m[None], x[i])

    @qd.kernel
    def histogram():
        for i in range(n):
            qd.atomic_add(hist[d[i]], 1)

    @qd.kernel
    def scatter_add():
        for i in range(n):
            qd.atomic_add(y[p[i]], x[i])

    @qd.kernel
    def scatter_store():
        for i in range(n):
            y[p[i]] = x[i]

    @qd.kernel
    def compaction():
        c[None] = 0
        for i in range(n):
            if x[i] > 0.5:
                out[qd.atomic_add(c[None], 1)] = i

    @qd.kernel
    def store_one():
        one[None] = 1.0

    sync = qd.sync
    t = {"copy": best_of(copy, repeat, sync), "sum f32": best_of(sum_, repeat, sync),
         "max f32": best_of(max_, repeat, sync), "histogram": best_of(histogram, repeat, sync),
         "scatter-add": best_of(scatter_add, repeat, sync), "scatter store": best_of(scatter_store, repeat, sync),
         "compaction": best_of(compaction, repeat, sync)}
    res = {k: v / n * 1e9 for k, v in t.items()}
    calls = 200

    def launches():
        for _ in range(calls):
            store_one()

    res["launch"] = best_of(launches, repeat, sync) / calls * 1e6
    # Sanity: the results agree with numpy (a broken peer must not look fast).
    m[None] = -1.0
    max_()
    compaction()
    hist.fill(0)
    histogram()
    assert m[None] == xs.max() and c[None] == int((xs > 0.5).sum())
    assert (hist.to_numpy() == np.bincount(ds, minlength=256)).all()
    return res


def ensure_venv(venvs, name, requirement, install):
    """The python of a venv holding `requirement` (with numpy), or None with a reason."""
    path = os.path.join(venvs, name.split()[0])
    python = os.path.join(path, "bin", "python")
    mod = PEERS[name][1]
    if os.path.exists(python) and subprocess.run([python, "-c", f"import {mod}, numpy"],
                                                 capture_output=True).returncode == 0:
        return python, None
    if not install:
        return None, f"no venv at {path} (--no-install)"
    r = subprocess.run([sys.executable, "-m", "venv", path], capture_output=True, text=True)
    if r.returncode == 0:
        r = subprocess.run([python, "-m", "pip", "install", "-q", requirement, "numpy"], capture_output=True, text=True)
    if r.returncode != 0:
        return None, f"pip install {requirement} failed: {(r.stderr or r.stdout).strip().splitlines()[-1:]}"
    return python, None


def peer_python(peer, venvs, install, base_env):
    """(python, env, None) to run `peer` with: ours is this interpreter with this checkout on
    PYTHONPATH, another peer its venv's (made with pip unless install is False); or (None, None,
    why) when it cannot be had."""
    req = PEERS[peer][0]
    if req is None:
        return sys.executable, dict(base_env, PYTHONPATH=ROOT), None
    python, why = ensure_venv(venvs, peer, req, install)
    return (python, base_env, None) if python else (None, None, why)


def run_worker(python, peer, arch, log2n, repeat, env, timeout, script=None):
    """Runs `script --worker peer ...` (default this file) under `python`; its last "RESULT {json}"
    line, or None with the reason."""
    args = [python, script or os.path.abspath(__file__), "--worker", peer, "--arch", arch, "--log2n", str(log2n),
            "--repeat", str(repeat)]
    try:
        r = subprocess.run(args, capture_output=True, text=True, env=env, timeout=timeout, cwd="/tmp")
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout} s"
    lines = [line for line in r.stdout.splitlines() if line.startswith("RESULT ")]
    if r.returncode != 0 or not lines:
        tail = (r.stderr or r.stdout).strip().splitlines()
        return None, tail[-1] if tail else f"exit {r.returncode}"
    return json.loads(lines[-1][7:]), None


def chart(columns, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(11, 5))
    width = 0.8 / max(1, len(columns))
    for j, (label, res) in enumerate(columns):
        xs = [i + j * width for i, w in enumerate(WORKLOADS) if res.get(w)]
        ax.bar(xs, [res[w] for w in WORKLOADS if res.get(w)], width, label=label)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(WORKLOADS))])
    ax.set_xticklabels([w if w != "launch" else "launch (us)" for w in WORKLOADS])
    ax.set_yscale("log")
    ax.set_ylabel("ns per element (launch: us per call), lower is better")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--log2n-cpu", type=int, default=24)
    p.add_argument("--log2n-vulkan", type=int, default=22)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--venvs", default="/tmp/qd-peers")
    p.add_argument("--no-install", action="store_true", help="use existing venvs only")
    p.add_argument("--out", default=os.path.join(ROOT, "docs"), help="where performance.md/.png go")
    p.add_argument("--timeout", type=int, default=900, help="seconds per peer and arch")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--arch", help=argparse.SUPPRESS)
    p.add_argument("--log2n", type=int, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.worker:
        n = 2 ** a.log2n
        res = numpy_worker(n, a.repeat) if a.worker == "numpy" else lib_worker(PEERS[a.worker][1], a.arch, n, a.repeat)
        print("RESULT " + json.dumps(res))
        return

    columns, notes = [], []
    base_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    res, why = run_worker(sys.executable, "numpy", "cpu", a.log2n_cpu, a.repeat, base_env, a.timeout)
    if res:
        columns.append(("NumPy", res))
    else:
        notes.append(f"NumPy: {why}")
    for peer in PEERS:
        python, env, why = peer_python(peer, a.venvs, not a.no_install, base_env)
        if python is None:
            notes.append(f"{peer}: left out ({why})")
            continue
        for arch, log2n in (("cpu", a.log2n_cpu), ("vulkan", a.log2n_vulkan)):
            print(f"running {peer} on {arch} (n = 2^{log2n}) ...", file=sys.stderr, flush=True)
            res, why = run_worker(python, peer, arch, log2n, a.repeat, env, a.timeout)
            if res:
                columns.append((f"{peer} {arch}", res))
            else:
                notes.append(f"{peer} {arch}: left out ({why})")

    # Ours next to each peer, cpu columns first.
    order = sorted(columns, key=lambda c: (c[0].endswith("vulkan"), c[0].startswith("ours")))
    head = "| workload | " + " | ".join(c[0] for c in order) + " |"
    rows = [head, "|---" * (len(order) + 1) + "|"]
    for w in WORKLOADS:
        cells = []
        for label, r in order:
            v = r.get(w)
            cells.append("-" if v is None else (f"{v:.1f} us" if w == "launch" else f"{v:.2f}") +
                         (f" ({NUMPY_NAMES[w]})" if label == "NumPy" and w in NUMPY_NAMES else ""))
        rows.append(f"| {w} | " + " | ".join(cells) + " |")
    table = "\n".join(rows)
    print(table)
    for n_ in notes:
        print("note:", n_)
    machine = f"{platform.machine()}, {os.cpu_count()} cores, {platform.processor() or platform.system()}"
    md = f"""# Performance beside the peers

Produced by `python3 benchmarks/peers.py` in one run ({time.strftime('%Y-%m-%d', time.gmtime())}; {machine};
vulkan is Mesa lavapipe on the same CPU). 2^{a.log2n_cpu} elements on cpu, 2^{a.log2n_vulkan} on vulkan;
ns per element, best of {a.repeat} synchronised calls after a warm-up; lower is better. The
"launch" row is microseconds per call of a cached kernel storing one field element (200 calls,
then one sync). NumPy runs on one core; the others use every core. The machine is shared, so
compare columns of the same run, not runs.

{table}

{chr(10).join('- ' + n_ for n_ in notes)}

![bar chart](performance.png)

Workloads (the same kernels through each library, on fields):

| workload | kernel | NumPy |
|---|---|---|
| copy | `y[i] = x[i]` | `np.copyto(y, x)` |
| sum f32 | `qd.atomic_add(total[None], x[i])` | `x.sum()` |
| max f32 | `qd.atomic_max(m[None], x[i])` | `x.max()` |
| histogram | `qd.atomic_add(hist[d[i]], 1)`, 256 bins | `np.bincount(d)` |
| scatter-add | `qd.atomic_add(y[p[i]], x[i])`, `p` a permutation | `np.add.at(y, p, x)` |
| scatter store | `y[p[i]] = x[i]` (the bound for scatter-add) | `y[p] = x` |
| compaction | `if x[i] > 0.5: out[qd.atomic_add(c[None], 1)] = i` | `np.flatnonzero(x > 0.5)` |
"""
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "performance.md"), "w") as f:
        f.write(md)
    try:
        chart(order, os.path.join(a.out, "performance.png"))
    except ImportError:
        print("note: matplotlib is not installed: no chart", file=sys.stderr)


if __name__ == "__main__":
    main()
