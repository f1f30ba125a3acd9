#!/usr/bin/env python3
"""Parallel speedup of a compute-bound kernel over one thread, first-call compile time and the
cached call overhead of a small kernel, measured in one run.

    python3 benchmarks/parallel.py
"""
import os
import time


import quadrants as qd
from timing import best_of

N = 1 << 20


def compute_bound_seconds(threads):
    qd.init(arch=qd.cpu, cpu_max_num_threads=threads)
    out = qd.field(qd.f32, shape=N)

    @qd.kernel
    def work():
        for i in range(N):
            x = qd.cast(i, qd.f32) * 1e-6
            for _ in range(200):
                x = qd.sin(x) * 0.5 + x * 0.75
            out[i] = x

    return best_of(work, 3, qd.sync)


def compile_and_overhead():
    qd.init(arch=qd.cpu)
    x = qd.field(qd.i32, shape=16)

    @qd.kernel
    def small(v: qd.i32):
        for i in range(16):
            x[i] = v

    t = time.perf_counter()
    small(1)
    first = time.perf_counter() - t
    reps = 2000
    t = time.perf_counter()
    for i in range(reps):
        small(i)
    cached = (time.perf_counter() - t) / reps
    return first, cached


def main():
    one = compute_bound_seconds(1)
    cores = os.cpu_count()
    allc = compute_bound_seconds(0)
    print(f"compute-bound kernel: 1 thread {one * 1e3:.1f} ms, {cores} threads {allc * 1e3:.1f} ms, "
          f"speedup {one / allc:.2f}x")
    first, cached = compile_and_overhead()
    print(f"small kernel: first call (compile) {first * 1e3:.1f} ms, cached call {cached * 1e6:.1f} us")


if __name__ == "__main__":
    main()
