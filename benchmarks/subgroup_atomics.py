#!/usr/bin/env python3
"""Automatic subgroup aggregation of atomics (docs/atomics.md, issue 15 item 2): same-address
atomics and compaction against a copy kernel, with the rewrite on and off, each in its own process.

    python3 benchmarks/subgroup_atomics.py [--arch vulkan] [--log2n 22] [--repeat 7] [--rounds 3]

Prints ns per element (the best of --repeat calls after a warm-up, synchronised; the best of
--rounds processes per setting, run alternately, so load on the machine hits both alike) and each
workload's time over the copy's. Every result is checked against numpy (integers exactly).
Workloads, n elements each:
  copy            y[i] = x[i]
  sum f32         qd.atomic_add(total[None], x[i])
  sum i32         qd.atomic_add(total[None], k[i])
  max f32         qd.atomic_max(m[None], x[i])
  count           if x[i] > 0.5: qd.atomic_add(c[None], 1)
  compaction      if x[i] > 0.5: out[qd.atomic_add(c[None], 1)] = i
"""
import argparse
import json
import os
import subprocess
import sys

from timing import best_of

WORKLOADS = ["copy", "sum f32", "sum i32", "max f32", "count", "compaction"]


def worker(arch, log2n, repeat, aggregation):
    import numpy as np
    import quadrants as qd
    qd.init(arch=getattr(qd, arch), **({} if aggregation is None else {"subgroup_aggregation": aggregation}))
    n = 1 << log2n
    xs = np.random.default_rng(0).random(n, dtype=np.float32)
    ks = (xs * 200 - 100).astype(np.int32)
    x, y, k, out = qd.field(qd.f32, shape=n), qd.field(qd.f32, shape=n), qd.field(qd.i32, shape=n), qd.field(qd.i32, shape=n)
    total, m = qd.field(qd.f32, shape=()), qd.field(qd.f32, shape=())
    ti, c = qd.field(qd.i32, shape=()), qd.field(qd.i32, shape=())
    x.from_numpy(xs)
    k.from_numpy(ks)

    @qd.kernel
    def copy():
        for i in range(n):
            y[i] = x[i]

    @qd.kernel
    def sum_f32():
        for i in range(n):
            qd.atomic_add(total[None], x[i])

    @qd.kernel
    def sum_i32():
        for i in range(n):
            qd.atomic_add(ti[None], k[i])

    @qd.kernel
    def max_f32():
        for i in range(n):
            qd.atomic_max(m[None], x[i])

    @qd.kernel
    def count():
        c[None] = 0
        for i in range(n):
            if x[i] > 0.5:
                qd.atomic_add(c[None], 1)

    @qd.kernel
    def compaction():
        c[None] = 0
        for i in range(n):
            if x[i] > 0.5:
                out[qd.atomic_add(c[None], 1)] = i

    res = {name: best_of(fn, repeat, qd.sync) / n * 1e9 for name, fn in zip(WORKLOADS, (copy, sum_f32, sum_i32, max_f32, count, compaction))}
    # The results are exact (a broken rewrite must not look fast).
    ti[None] = 0
    sum_i32()
    m[None] = -1.0
    max_f32()
    assert ti[None] == int(ks.astype(np.int64).sum()) and m[None] == xs.max()
    count()
    assert c[None] == int((xs > 0.5).sum())
    compaction()
    got = out.to_numpy()[:c[None]]
    assert c[None] == int((xs > 0.5).sum()) and (np.sort(got) == np.flatnonzero(xs > 0.5)).all()
    total[None] = 0
    sum_f32()
    assert abs(total[None] - xs.astype(np.float64).sum()) < 1e-3 * n
    return res


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--arch", default="vulkan")
    parser.add_argument("--log2n", type=int, default=22)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--worker", choices=["on", "off", "default"])
    args = parser.parse_args()
    if args.worker:
        agg = {"on": True, "off": False, "default": None}[args.worker]
        print("RESULT " + json.dumps(worker(args.arch, args.log2n, args.repeat, agg)))
        return
    settings = ["on", "off"]
    best = {s: {} for s in settings}
    for _ in range(args.rounds):
        for s in settings:
            r = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", s, "--arch", args.arch,
                                "--log2n", str(args.log2n), "--repeat", str(args.repeat)],
                               capture_output=True, text=True, check=True)
            res = json.loads([line for line in r.stdout.splitlines() if line.startswith("RESULT ")][-1][7:])
            for w, t in res.items():
                best[s][w] = min(best[s].get(w, float("inf")), t)
    print(f"{args.arch}, n = 2^{args.log2n}, ns per element (x copy):")
    print(f"  {'workload':12s} {'aggregation on':>18s} {'off':>18s}")
    for w in WORKLOADS:
        cells = [f"{best[s][w]:7.2f} ({best[s][w] / best[s]['copy']:4.2f}x)" for s in settings]
        print(f"  {w:12s} {cells[0]:>18s} {cells[1]:>18s}")


if __name__ == "__main__":
    main()
