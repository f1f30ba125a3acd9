#!/usr/bin/env python3
"""Time per atomic operation at three contention levels, beside a plain store of the same size.

    python3 benchmarks/atomics.py [--arch cpu|vulkan|cuda|amdgpu] [--log2n 24] [--repeat 3]

Contention levels over n = 2**24 operations: every thread on one address ("one address"), a
256-bin histogram of random data ("histogram"), and a distinct address per operation ("unique").
Addresses come from an index array read in the kernel, so the compiler cannot prove them unique
and every atomic stays atomic; the plain-store baseline uses the same indices.
"""
import argparse

import numpy as np

import quadrants as qd
from timing import best_of

CASES = [("add", qd.i32), ("add", qd.f32), ("min", qd.f32), ("cas", qd.i32), ("mul", qd.f32)]


def make_kernels(op, dtype, n):
    target = qd.field(dtype, shape=n)
    fn = getattr(qd, f"atomic_{op}")

    @qd.kernel
    def atomic_kernel(idx: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        for i in range(n):
            if qd.static(op == "cas"):
                fn(target[idx[i]], 0, 1)
            elif qd.static(op == "mul"):
                fn(target[idx[i]], 1.0000001)
            else:
                fn(target[idx[i]], 1)

    @qd.kernel
    def store_kernel(idx: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        for i in range(n):
            target[idx[i]] = 1

    return atomic_kernel, store_kernel


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--arch", default="cpu")
    p.add_argument("--log2n", type=int, default=24)
    p.add_argument("--repeat", type=int, default=3)
    a = p.parse_args()
    qd.init(arch=getattr(qd, a.arch))
    n = 2**a.log2n
    rng = np.random.default_rng(0)
    levels = {
        "one address": np.zeros(n, np.int32),
        "histogram": rng.integers(0, 256, n).astype(np.int32),
        "unique": rng.permutation(n).astype(np.int32),
    }
    print(f"arch={a.arch} n=2^{a.log2n}: ns per operation (best of {a.repeat}); ratio = atomic / plain store")
    print(f"{'op':>8} {'dtype':>5} | " + " | ".join(f"{k:>28}" for k in levels))
    for op, dtype in CASES:
        cells = []
        atomic_kernel, store_kernel = make_kernels(op, dtype, n)
        for idx in levels.values():
            ta = best_of(lambda: atomic_kernel(idx), a.repeat, qd.sync) / n * 1e9
            ts = best_of(lambda: store_kernel(idx), a.repeat, qd.sync) / n * 1e9
            cells.append(f"{ta:7.2f} vs store {ts:6.2f} ({ta / ts:5.1f}x)")
        print(f"{op:>8} {dtype.name:>5} | " + " | ".join(f"{c:>28}" for c in cells))


if __name__ == "__main__":
    main()
