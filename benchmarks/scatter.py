#!/usr/bin/env python3
"""Scatter-add on the cpu (docs/atomics.md, "Scatter-add"): `qd.atomic_add(y[p[i]], x[i])` with the
old value unused (rewritten into a bucketed scatter) against a plain scatter store `y[p[i]] = x[i]`
(the goal: within 1.5x of it) and the same atomics left as atomics (an AcqRel order keeps them:
on x86 the same instruction as a relaxed one).

    python3 benchmarks/scatter.py [--log2n 24] [--repeat 11] [--dtype f32] [--index permutation|random]

The kernels run interleaved (the machine may be shared) and each is timed from launch to
qd.sync(); prints ns per element (min and median) and the ratios to the scatter store. The
rewritten result is checked against the atomic one (integers: exact).
"""
import argparse
import statistics
import time

import numpy as np

import quadrants as qd


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--log2n", type=int, default=24)
    parser.add_argument("--repeat", type=int, default=11)
    parser.add_argument("--dtype", default="f32", choices=["f32", "f64", "i32", "i64"])
    parser.add_argument("--index", default="permutation", choices=["permutation", "random"])
    args = parser.parse_args()
    qd.init(arch=qd.cpu)
    n = 1 << args.log2n
    dt = getattr(qd, args.dtype)
    rng = np.random.default_rng(0)
    x = qd.field(dt, n)
    y = qd.field(dt, n)
    p = qd.field(qd.i32, n)
    x.from_numpy(rng.integers(0, 100, n).astype(dt.np))
    p.from_numpy((rng.permutation(n) if args.index == "permutation" else rng.integers(0, n, n)).astype(np.int32))

    @qd.kernel
    def scatter_add():
        for i in x:
            qd.atomic_add(y[p[i]], x[i])

    @qd.kernel
    def scatter_store():
        for i in x:
            y[p[i]] = x[i]

    @qd.kernel
    def atomic_scatter_add():
        for i in x:
            qd.atomic_add(y[p[i]], x[i], memory_order=qd.MemoryOrder.AcqRel)

    kernels = {"scatter-add": scatter_add, "scatter store": scatter_store, "atomic scatter-add": atomic_scatter_add}
    assert "with scratch" in qd.compile(scatter_add).ir, "the scatter-add was not bucketed"
    results = {}
    for name in ("scatter-add", "atomic scatter-add"):
        y.fill(0)
        kernels[name]()
        results[name] = y.to_numpy()
    if dt.is_real:
        np.testing.assert_allclose(results["scatter-add"], results["atomic scatter-add"], rtol=1e-6)
    else:
        np.testing.assert_array_equal(results["scatter-add"], results["atomic scatter-add"])

    times = {name: [] for name in kernels}
    for _ in range(args.repeat):
        for name, k in kernels.items():
            t = time.perf_counter()
            k()
            qd.sync()
            times[name].append((time.perf_counter() - t) / n * 1e9)
    store = times["scatter store"]
    print(f"cpu, 2^{args.log2n} {args.dtype}, {args.index} indices, {args.repeat} interleaved runs (ns per element):")
    for name, ts in times.items():
        print(f"  {name:20s} min {min(ts):6.2f}  median {statistics.median(ts):6.2f}  "
              f"/ store: min {min(ts) / min(store):5.2f}x  median {statistics.median(ts) / statistics.median(store):5.2f}x")


if __name__ == "__main__":
    main()
