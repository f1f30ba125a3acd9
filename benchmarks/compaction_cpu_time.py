#!/usr/bin/env python3
"""The user's compaction kernel (if f[i]: y[qd.atomic_add(k[0], 1)] = x[i]) on the cpu, timed in
process CPU time rather than wall time: on a machine shared with other work, CPU time is not
inflated by the process waiting to be scheduled (docs/performance.md). One worker thread by default.

    python3 benchmarks/compaction_cpu_time.py [--log2n 18] [--pass-fraction 1.0] [--threads 1] [--reps 3000]

Prints the CPU time per call (the mean over reps, after a warm-up that compiles) and checks the result.
"""
import argparse
import time

import numpy as np

import quadrants as qd


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--log2n", type=int, default=18)
    p.add_argument("--pass-fraction", type=float, default=1.0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--reps", type=int, default=3000)
    args = p.parse_args()
    qd.init(arch=qd.cpu, cpu_max_num_threads=args.threads)
    nd = qd.types.ndarray

    @qd.kernel
    def compaction(x: nd(qd.f32, 1), f: nd(qd.i32, 1), y: nd(qd.f32, 1), k: nd(qd.i32, 1), m: qd.i32):
        k[0] = 0
        for i in range(m):
            if f[i] != 0:
                y[qd.atomic_add(k[0], 1)] = x[i]

    n = 1 << args.log2n
    rng = np.random.default_rng(0)
    xs = rng.standard_normal(n).astype(np.float32)
    keep = rng.random(n) < args.pass_fraction
    x, f, y, k = qd.ndarray(qd.f32, (n,)), qd.ndarray(qd.i32, (n,)), qd.ndarray(qd.f32, (n,)), qd.ndarray(qd.i32, (1,))
    x.from_numpy(xs)
    f.from_numpy(keep.astype(np.int32))
    compaction(x, f, y, k, n)
    qd.sync()
    c = int(keep.sum())
    assert k.to_numpy()[0] == c and np.array_equal(np.sort(y.to_numpy()[:c]), np.sort(xs[keep]))
    t = time.process_time()
    for _ in range(args.reps):
        compaction(x, f, y, k, n)
    qd.sync()
    t = time.process_time() - t
    print(f"n = 2^{args.log2n}, {args.pass_fraction:g} passing, {args.threads} thread(s): "
          f"{t / args.reps * 1e6:.1f} us CPU time per call ({t / args.reps / n * 1e9:.2f} ns per element)")


if __name__ == "__main__":
    main()
