#!/usr/bin/env python3
"""Constant folding (csrc/transforms/fold.cpp, docs/performance.md): y[i] = x[i] * qd.tanh(1.2) +
qd.exp(1.2) over 4M f32 elements, with the pass and with qd.init(constant_folding=False), side by
side in one run, and numpy's time for the same expression.

    python3 benchmarks/constant_folding.py [--arch cpu] [--log2n 22] [--repeat 10]

Without folding the cpu calls tanhf for every element (LLVM keeps the call: it may set errno) and
GPUs compute f64 math through the core's math library per element; folded, the loop is a
multiply-add of two constants (a Vulkan driver folds the f32 tanh / exp of constants itself: no
change there). Prints the best time per launch (to qd.sync()) of each, their ratio, and checks that
both compute the same y.
"""
import argparse

import numpy as np

import quadrants as qd
from timing import best_of


@qd.kernel
def scale_shift(x: qd.types.ndarray(dtype=qd.f32, ndim=1), y: qd.types.ndarray(dtype=qd.f32, ndim=1)):
    for i in range(x.shape[0]):
        y[i] = x[i] * qd.tanh(1.2) + qd.exp(1.2)


def run(arch, folding, x_host, repeat):
    """ms per launch and the result, under qd.init(constant_folding=folding)."""
    qd.init(arch=getattr(qd, arch), constant_folding=folding, offline_cache=False)
    x = qd.ndarray(qd.f32, shape=x_host.shape[0])
    y = qd.ndarray(qd.f32, shape=x_host.shape[0])
    x.from_numpy(x_host)
    t = best_of(lambda: scale_shift(x, y), repeat, qd.sync)
    result = y.to_numpy()
    qd.reset()
    return t * 1e3, result


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--arch", default="cpu")
    parser.add_argument("--log2n", type=int, default=22)
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args(argv)
    n = 1 << args.log2n
    x = np.random.default_rng(0).random(n, dtype=np.float32)
    # Alternated, twice each, best of both: a shared machine's load drifts between runs.
    best = {}
    for folding in (True, False, True, False):
        ms, y = run(args.arch, folding, x, args.repeat)
        if folding not in best or ms < best[folding][0]:
            best[folding] = (ms, y)
    (folded_ms, folded), (plain_ms, plain) = best[True], best[False]
    c = np.float32(1.2)
    numpy_ms = best_of(lambda: x * np.tanh(c) + np.exp(c), args.repeat) * 1e3
    # Unfolded, LLVM (cpu) or the driver folds the values itself, possibly 1 ulp from the C library.
    np.testing.assert_allclose(folded, plain, rtol=1e-6)
    np.testing.assert_allclose(folded, x * np.tanh(c) + np.exp(c), rtol=1e-6)
    print(f"{args.arch}, n = 2^{args.log2n} f32, y[i] = x[i] * qd.tanh(1.2) + qd.exp(1.2):")
    print(f"  constant_folding=True   {folded_ms:9.3f} ms")
    print(f"  constant_folding=False  {plain_ms:9.3f} ms   ({plain_ms / folded_ms:.1f}x the folded time)")
    print(f"  numpy                   {numpy_ms:9.3f} ms   ({numpy_ms / folded_ms:.1f}x the folded time)")
    return {"folded_ms": folded_ms, "unfolded_ms": plain_ms, "numpy_ms": numpy_ms}


if __name__ == "__main__":
    main()
