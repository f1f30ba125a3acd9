#!/usr/bin/env python3
"""A 256-bin histogram two ways (examples/block_histogram.py): per-block bins in shared memory
flushed with one global atomic per bin per block, against one global atomic per byte.

    python3 benchmarks/block_histogram.py [--arch vulkan] [--log2n 24] [--repeat 5]

Prints the best time of each kernel (launch to qd.sync(), histogram zeroed before) and the ratio.
"""
import argparse
import importlib.util
import os

import numpy as np

import quadrants as qd
from timing import best_of

_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "block_histogram.py")
_spec = importlib.util.spec_from_file_location("block_histogram_example", _PATH)
example = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(example)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--arch", default="vulkan")
    parser.add_argument("--log2n", type=int, default=24)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    qd.init(arch=getattr(qd, args.arch))
    n = 1 << args.log2n
    data_np = np.random.default_rng(0).integers(0, example.BINS, n, dtype=np.uint8)
    data = qd.ndarray(qd.u8, (n,))
    data.from_numpy(data_np)
    hist = qd.ndarray(qd.i32, (example.BINS,))
    expected = np.bincount(data_np, minlength=example.BINS)
    times = {}
    for kernel in (example.block_histogram, example.global_histogram):
        times[kernel.__name__] = best_of(lambda: kernel(data, hist), args.repeat, qd.sync, reset=lambda: hist.fill(0))
        assert (hist.to_numpy() == expected).all(), kernel.__name__
        print(f"{kernel.__name__:18s} {times[kernel.__name__] * 1e3:8.2f} ms  "
              f"{n / times[kernel.__name__] / 1e9:6.3f} G bytes/s")
    print(f"shared / global time: {times['block_histogram'] / times['global_histogram']:.2f}")


if __name__ == "__main__":
    main()
