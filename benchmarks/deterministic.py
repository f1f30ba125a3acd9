#!/usr/bin/env python3
"""Deterministic mode's cost (docs/atomics.md "Deterministic mode"): each pattern compiled twice,
@qd.kernel(deterministic=False) and @qd.kernel(deterministic=True), timed in one run on the cpu and
on Vulkan (lavapipe).

    python3 benchmarks/deterministic.py [--log2n-cpu 22] [--log2n-vulkan 20] [--repeat 5] [--rounds 3]
                                        [--archs cpu,vulkan] [--cpu-time]

Patterns, n elements (fields, filled once before timing):
  same-address sum  qd.atomic_add(total[None], x[i])                  f32
  histogram         hist[d[i]] += x[i], 256 bins                      f32
  scatter-add       y[p[i]] += x[i], p a permutation of n             f32
  compaction        if x[i] > .5: out[qd.atomic_add(c[None], 1)] = i

Cells: ns per element, the best of --repeat synchronised calls after a warm-up (benchmarks/timing.py),
taken --rounds times with the two modes alternating (each pattern off, then on), the best over the
rounds; and on / off. --cpu-time counts CPU seconds instead of wall time, which other work on a shared
machine disturbs less: on the cpu with one thread (cpu_max_num_threads=1, the calling thread's
time), on Vulkan the whole process's (lavapipe's threads included). Checked: the deterministic results are the same bits on two runs, and the counter
and the sum agree with numpy.
"""
import argparse
import subprocess
import sys
import os

from timing import best_of

HERE = os.path.dirname(os.path.abspath(__file__))
PATTERNS = ["same-address sum", "histogram", "scatter-add", "compaction"]
GOALS = {"same-address sum": 1.5, "histogram": 2.0, "scatter-add": 3.0, "compaction": 2.0}


def worker(arch, log2n, repeat, cpu_time, rounds):
    import time
    import numpy as np
    import quadrants as qd

    qd.init(arch=getattr(qd, arch), offline_cache=False, enable_fallback=False,
            **({"cpu_max_num_threads": 1} if cpu_time and arch == "cpu" else {}))
    clock = (time.thread_time if arch == "cpu" else time.process_time) if cpu_time else time.perf_counter
    n = 1 << log2n
    rng = np.random.default_rng(0)
    xs = rng.random(n, dtype=np.float32)
    x = qd.field(qd.f32, shape=n)
    d = qd.field(qd.i32, shape=n)
    p = qd.field(qd.i32, shape=n)
    out = qd.field(qd.i32, shape=n)
    y = qd.field(qd.f32, shape=n)
    hist = qd.field(qd.f32, shape=256)
    total = qd.field(qd.f32, shape=())
    c = qd.field(qd.i32, shape=())
    x.from_numpy(xs)
    d.from_numpy(rng.integers(0, 256, n, dtype=np.int32))
    p.from_numpy(rng.permutation(n).astype(np.int32))

    def make(det):
        @qd.kernel(deterministic=det)
        def sum_():
            for i in range(n):
                qd.atomic_add(total[None], x[i])

        @qd.kernel(deterministic=det)
        def histogram():
            for i in range(n):
                hist[d[i]] += x[i]

        @qd.kernel(deterministic=det)
        def scatter():
            for i in range(n):
                y[p[i]] += x[i]

        @qd.kernel(deterministic=det)
        def compaction():
            for i in range(n):
                if x[i] > 0.5:
                    out[qd.atomic_add(c[None], 1)] = i

        return {"same-address sum": (sum_, lambda: total.fill(0)), "histogram": (histogram, lambda: hist.fill(0)),
                "scatter-add": (scatter, lambda: y.fill(0)), "compaction": (compaction, lambda: c.fill(0))}

    kernels = {det: make(det) for det in (False, True)}
    res = {}
    # Rounds: each pattern off, then on, then the next pattern; a round's best of `repeat` calls, and
    # the best over the rounds, so that a slow spell of the machine falls on both modes alike.
    for _ in range(rounds):
        for name in PATTERNS:
            for det in (False, True):
                k, reset = kernels[det][name]
                reset()  # (the warm-up call too: a compaction's counter must start at 0)
                t = best_of(k, repeat, qd.sync, reset, clock) / n * 1e9
                res[(name, det)] = min(res.get((name, det), t), t)
    snaps = []  # the same bits twice, and sane
    for _ in range(2):
        for name, (k, reset) in kernels[True].items():
            reset()
            k()
        snaps.append([total.to_numpy().tobytes(), hist.to_numpy().tobytes(), y.to_numpy().tobytes(),
                      out.to_numpy()[:c[None]].tobytes(), int(c[None])])
    assert snaps[0] == snaps[1]
    assert c[None] == int((xs > 0.5).sum())
    assert np.array_equal(out.to_numpy()[:c[None]], np.flatnonzero(xs > 0.5))
    assert abs(float(total[None]) - xs.astype(np.float64).sum()) <= 1e-6 * n
    return {f"{k[0]}|{int(k[1])}": v for k, v in res.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--log2n-cpu", type=int, default=22)
    ap.add_argument("--log2n-vulkan", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--archs", default="cpu,vulkan")
    ap.add_argument("--cpu-time", action="store_true", help="CPU seconds (cpu: one thread) instead of wall time")
    ap.add_argument("--rounds", type=int, default=3, help="alternations of the two modes (best over them)")
    ap.add_argument("--worker", nargs=5, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        import json
        print("RESULT " + json.dumps(worker(a.worker[0], int(a.worker[1]), int(a.worker[2]), a.worker[3] == "1", int(a.worker[4]))))
        return
    import json
    rows = {}
    for arch in a.archs.split(","):
        log2n = a.log2n_cpu if arch == "cpu" else a.log2n_vulkan
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", arch, str(log2n), str(a.repeat),
                            str(int(a.cpu_time)), str(a.rounds)],
                           capture_output=True, text=True, cwd=HERE)
        line = [x for x in r.stdout.splitlines() if x.startswith("RESULT ")]
        if r.returncode or not line:
            print(f"{arch}: failed\n{r.stdout}{r.stderr}", file=sys.stderr)
            continue
        rows[(arch, log2n)] = json.loads(line[0][7:])
    print("| pattern | arch (n) | off ns/elem | on ns/elem | on / off | goal |")
    print("|---|---|---|---|---|---|")
    for name in PATTERNS:
        for (arch, log2n), res in rows.items():
            off, on = res[f"{name}|0"], res[f"{name}|1"]
            print(f"| {name} | {arch} (2^{log2n}) | {off:.2f} | {on:.2f} | {on / off:.2f}x | {GOALS[name]}x |")


if __name__ == "__main__":
    main()
