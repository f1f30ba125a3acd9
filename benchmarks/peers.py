#!/usr/bin/env python3
"""Quadrants beside its peers on the same atomic workloads, on the CPU, in one run.

    pip install taichi warp-lang   # optional: peers that are not installed are left out
    python3 benchmarks/peers.py [--log2n 24]

Workloads (n operations each): a 256-bin histogram of random bytes (atomic add i32), a sum of n
floats into one address (atomic add f32), and an atomic max of n floats into one address. Times
are the best of 5 after a warm-up call; the ratio is peer time / Quadrants time (>1: Quadrants is
faster). Warp runs CPU kernels on one thread, so its ratio mostly measures that.
"""
import argparse
import time

import numpy as np


def best_of(fn, sync, repeat=5):
    fn()
    sync()
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        sync()
        best = min(best, time.perf_counter() - t)
    return best


def quadrants_suite(data, x):
    import quadrants as qd
    qd.init(arch=qd.cpu)
    hist = qd.field(qd.i32, shape=256)
    acc = qd.field(qd.f32, shape=2)

    @qd.kernel
    def histogram(d: qd.types.ndarray(dtype=qd.u8, ndim=1)):
        for i in range(d.shape[0]):
            qd.atomic_add(hist[d[i]], 1)

    @qd.kernel
    def total(v: qd.types.ndarray(dtype=qd.f32, ndim=1)):
        for i in range(v.shape[0]):
            qd.atomic_add(acc[0], v[i])

    @qd.kernel
    def biggest(v: qd.types.ndarray(dtype=qd.f32, ndim=1)):
        for i in range(v.shape[0]):
            qd.atomic_max(acc[1], v[i])

    return {"histogram": best_of(lambda: histogram(data), qd.sync),
            "sum f32": best_of(lambda: total(x), qd.sync),
            "max f32": best_of(lambda: biggest(x), qd.sync)}


def taichi_suite(data, x):
    import taichi as ti
    ti.init(arch=ti.cpu, log_level=ti.ERROR)
    hist = ti.field(ti.i32, shape=256)
    acc = ti.field(ti.f32, shape=2)

    @ti.kernel
    def histogram(d: ti.types.ndarray(dtype=ti.u8, ndim=1)):
        for i in range(d.shape[0]):
            ti.atomic_add(hist[ti.cast(d[i], ti.i32)], 1)

    @ti.kernel
    def total(v: ti.types.ndarray(dtype=ti.f32, ndim=1)):
        for i in range(v.shape[0]):
            ti.atomic_add(acc[0], v[i])

    @ti.kernel
    def biggest(v: ti.types.ndarray(dtype=ti.f32, ndim=1)):
        for i in range(v.shape[0]):
            ti.atomic_max(acc[1], v[i])

    return {"histogram": best_of(lambda: histogram(data), ti.sync),
            "sum f32": best_of(lambda: total(x), ti.sync),
            "max f32": best_of(lambda: biggest(x), ti.sync)}


def warp_suite(data, x):
    import warp as wp
    wp.config.quiet = True
    wp.init()
    hist = wp.zeros(256, dtype=wp.int32, device="cpu")
    acc = wp.zeros(2, dtype=wp.float32, device="cpu")
    d = wp.array(data.astype(np.int32), dtype=wp.int32, device="cpu")
    v = wp.array(x, dtype=wp.float32, device="cpu")

    @wp.kernel
    def histogram(d: wp.array(dtype=wp.int32), h: wp.array(dtype=wp.int32)):
        i = wp.tid()
        wp.atomic_add(h, d[i], 1)

    @wp.kernel
    def total(v: wp.array(dtype=wp.float32), a: wp.array(dtype=wp.float32)):
        i = wp.tid()
        wp.atomic_add(a, 0, v[i])

    @wp.kernel
    def biggest(v: wp.array(dtype=wp.float32), a: wp.array(dtype=wp.float32)):
        i = wp.tid()
        wp.atomic_max(a, 1, v[i])

    n = len(x)
    sync = wp.synchronize
    return {"histogram": best_of(lambda: wp.launch(histogram, dim=n, inputs=[d, hist], device="cpu"), sync),
            "sum f32": best_of(lambda: wp.launch(total, dim=n, inputs=[v, acc], device="cpu"), sync),
            "max f32": best_of(lambda: wp.launch(biggest, dim=n, inputs=[v, acc], device="cpu"), sync)}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--log2n", type=int, default=24)
    a = p.parse_args()
    n = 2**a.log2n
    rng = np.random.default_rng(0)
    data = rng.integers(0, 256, n, dtype=np.uint8)
    x = rng.random(n, dtype=np.float32)
    results = {"quadrants": quadrants_suite(data, x)}
    for name, suite in (("taichi", taichi_suite), ("warp", warp_suite)):
        try:
            results[name] = suite(data, x)
        except ImportError:
            print(f"({name} is not installed: left out)")
    base = results["quadrants"]
    print(f"cpu, n=2^{a.log2n}: ms per kernel (best of 5); in brackets peer / quadrants")
    print(f"{'workload':>10} | " + " | ".join(f"{k:>18}" for k in results))
    for w in base:
        cells = [f"{r[w] * 1e3:8.2f}" + ("" if k == "quadrants" else f" ({r[w] / base[w]:5.2f}x)")
                 for k, r in results.items()]
        print(f"{w:>10} | " + " | ".join(f"{c:>18}" for c in cells))


if __name__ == "__main__":
    main()
