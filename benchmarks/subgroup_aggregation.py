#!/usr/bin/env python3
"""Subgroup pre-aggregation before an atomic (docs/atomics.md): every thread adding into one counter
with its own atomic, against a subgroup reduce in registers and one atomic per subgroup.

    python3 benchmarks/subgroup_aggregation.py [--arch vulkan] [--log2n 22] [--repeat 5]

Prints the best time of each kernel (launch to qd.sync()), their ratio and a copy kernel's time
for scale; both sums are checked against numpy (i32: exact).
"""
import argparse

import numpy as np

import quadrants as qd
from timing import best_of


@qd.kernel
def per_thread(x: qd.types.ndarray(dtype=qd.i32, ndim=1), total: qd.types.ndarray(dtype=qd.i32, ndim=1)):
    for i in range(x.shape[0]):
        qd.atomic_add(total[0], x[i])  # one atomic per element


@qd.kernel
def per_subgroup(x: qd.types.ndarray(dtype=qd.i32, ndim=1), total: qd.types.ndarray(dtype=qd.i32, ndim=1)):
    for i in range(x.shape[0]):  # the range is a multiple of the grid: every lane active
        s = qd.simt.subgroup.reduce_add(x[i])  # in registers, no memory traffic
        if qd.simt.subgroup.invocation_id() == 0:
            qd.atomic_add(total[0], s)  # one atomic per subgroup


@qd.kernel
def copy(x: qd.types.ndarray(dtype=qd.i32, ndim=1), y: qd.types.ndarray(dtype=qd.i32, ndim=1)):
    for i in range(x.shape[0]):
        y[i] = x[i]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--arch", default="vulkan")
    parser.add_argument("--log2n", type=int, default=22)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    qd.init(arch=getattr(qd, args.arch))
    n = 1 << args.log2n
    x = qd.ndarray(qd.i32, shape=n)
    x.from_numpy(np.random.default_rng(0).integers(-100, 100, n, dtype=np.int32))
    want = int(x.to_numpy().astype(np.int64).sum())
    total = qd.ndarray(qd.i32, shape=1)
    y = qd.ndarray(qd.i32, shape=n)
    times = {}
    for k in (per_thread, per_subgroup):
        times[k.__name__] = best_of(lambda: k(x, total), args.repeat, qd.sync, reset=lambda: total.fill(0))
        total.fill(0)
        k(x, total)
        got = int(total.to_numpy()[0])
        assert got == want, (k.__name__, got, want)
    times["copy"] = best_of(lambda: copy(x, y), args.repeat, qd.sync)
    print(f"{args.arch}, n = 2^{args.log2n}, subgroup size {qd.simt.subgroup.group_size()}:")
    for name, t in times.items():
        print(f"  {name:13s} {t * 1e3:8.2f} ms  {t * 1e9 / n:6.2f} ns/element")
    print(f"  per_thread / per_subgroup = {times['per_thread'] / times['per_subgroup']:.2f}x; "
          f"per_subgroup / copy = {times['per_subgroup'] / times['copy']:.2f}x")


if __name__ == "__main__":
    main()
