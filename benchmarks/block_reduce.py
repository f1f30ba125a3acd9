#!/usr/bin/env python3
"""A block reduction against a plain privatized reduction (issue 16, docs/backends.md "Blocks on
the cpu"): the same f32 sum over 2^24 elements, once as `qd.simt.block.reduce_add` in blocks of 256
threads (thread 0 of each block adds its block's sum with an atomic, which the cpu accumulates per
worker as well), once as
`qd.atomic_add(total[None], x[i])`, which the core privatizes (one accumulator per worker thread).

    python3 benchmarks/block_reduce.py [--arch cpu] [--log2n 24] [--block 256] [--repeat 5] [--rounds 4]

Prints the best time of each (launch to qd.sync(); the two alternate for `rounds` rounds) and
their ratio; both sums are checked against numpy (the values are small integers: every order of
the f32 additions is exact). On a 2-core shared machine: 1.2x to 1.7x (issue 16's goal: 2x).
"""
import argparse

import numpy as np

import quadrants as qd
from timing import best_of

BLOCK = 256


@qd.kernel
def block_reduce(x: qd.types.ndarray(dtype=qd.f32, ndim=1), total: qd.types.ndarray(dtype=qd.f32, ndim=1)):
    qd.loop_config(block_dim=BLOCK)
    for i in range(x.shape[0]):  # a multiple of the block: every thread of every block present
        s = qd.simt.block.reduce_add(x[i], BLOCK, qd.f32)
        if qd.simt.block.thread_idx() == 0:
            qd.atomic_add(total[0], s)


@qd.kernel
def privatized(x: qd.types.ndarray(dtype=qd.f32, ndim=1), total: qd.types.ndarray(dtype=qd.f32, ndim=1)):
    for i in range(x.shape[0]):
        qd.atomic_add(total[0], x[i])


def main():
    global BLOCK
    parser = argparse.ArgumentParser()
    parser.add_argument("--arch", default="cpu")
    parser.add_argument("--log2n", type=int, default=24)
    parser.add_argument("--block", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    BLOCK = args.block
    qd.init(arch=getattr(qd, args.arch))
    n = 1 << args.log2n
    x = qd.ndarray(qd.f32, shape=n)
    x.from_numpy(np.random.default_rng(0).integers(0, 4, n).astype(np.float32))
    want = float(x.to_numpy().astype(np.float64).sum())
    total = qd.ndarray(qd.f32, shape=1)
    times = {}
    for _ in range(args.rounds):  # the two alternate, so that a busy machine slows both alike
        for k in (block_reduce, privatized):
            t = best_of(lambda: k(x, total), args.repeat, qd.sync, reset=lambda: total.fill(0))
            times[k.__name__] = min(times.get(k.__name__, t), t)
    for k in (block_reduce, privatized):
        total.fill(0)
        k(x, total)
        got = float(total.to_numpy()[0])
        assert abs(got - want) <= 1e-4 * want, (k.__name__, got, want)
    print(f"{args.arch}, n = 2^{args.log2n}, f32, block {BLOCK}:")
    for name, t in times.items():
        print(f"  {name:13s} {t * 1e3:8.2f} ms  {t * 1e9 / n:6.2f} ns/element")
    print(f"  block_reduce / privatized = {times['block_reduce'] / times['privatized']:.2f}x")


if __name__ == "__main__":
    main()
