"""A 256-bin histogram counted per block in shared memory (qd.simt.block.SharedArray): each thread
adds into its block's private bins with shared-memory atomics, and each block then flushes one
global atomic per bin. Compare with examples/histogram.py, where every byte is a global atomic.

    python3 examples/block_histogram.py [--arch vulkan|cuda|amdgpu|metal|cpu] [--n 10000000]

Runs on every arch (the cpu runs each block on one worker: docs/backends.md); benchmarks/block_histogram.py
times both.
"""
import argparse
import time

import numpy as np

import quadrants as qd

BINS = 256
BLOCK_DIM = 256  # one thread per bin: each thread zeroes and flushes one bin
BLOCKS = 64      # each block counts one contiguous chunk of the data


@qd.kernel
def block_histogram(data: qd.types.ndarray(dtype=qd.u8, ndim=1), hist: qd.types.ndarray(dtype=qd.i32, ndim=1)):
    qd.loop_config(block_dim=BLOCK_DIM)
    for t in range(BLOCKS * BLOCK_DIM):  # every thread of every block runs this body once
        tid = qd.simt.block.thread_idx()
        bins = qd.simt.block.SharedArray((BINS,), qd.i32)  # one copy per block
        bins[tid] = 0
        qd.simt.block.sync()
        # Block b counts the b-th contiguous chunk of the data; its threads read neighbouring bytes.
        n = data.shape[0]
        chunk = (n + BLOCKS - 1) // BLOCKS
        end = qd.min(n, (t // BLOCK_DIM + 1) * chunk)
        j = t // BLOCK_DIM * chunk + tid
        while j < end:
            qd.atomic_add(bins[qd.cast(data[j], qd.i32)], 1)  # a shared-memory atomic
            j += BLOCK_DIM
        qd.simt.block.sync()
        if bins[tid] != 0:
            qd.atomic_add(hist[tid], bins[tid])  # one global atomic per bin per block


@qd.kernel
def global_histogram(data: qd.types.ndarray(dtype=qd.u8, ndim=1), hist: qd.types.ndarray(dtype=qd.i32, ndim=1)):
    for i in range(data.shape[0]):
        qd.atomic_add(hist[qd.cast(data[i], qd.i32)], 1)  # a global atomic per byte


def histogram(data, kernel=block_histogram):
    hist = qd.ndarray(qd.i32, (BINS,))
    hist.fill(0)
    kernel(data, hist)
    return hist.to_numpy()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--arch", default="vulkan")
    parser.add_argument("--n", type=int, default=10**7)
    args = parser.parse_args()
    qd.init(arch=getattr(qd, args.arch))
    data = np.random.default_rng(0).integers(0, BINS, args.n, dtype=np.uint8)
    device_data = qd.ndarray(qd.u8, (args.n,))
    device_data.from_numpy(data)
    expected = np.bincount(data, minlength=BINS)
    for kernel in (block_histogram, global_histogram):
        counts = histogram(device_data, kernel)  # the first call compiles
        t = time.perf_counter()
        counts = histogram(device_data, kernel)
        elapsed = time.perf_counter() - t
        assert (counts == expected).all(), kernel.__name__
        print(f"{kernel.__name__}: {args.n} bytes in {elapsed * 1e3:.1f} ms; bins 0..4: {counts[:5]}")


if __name__ == "__main__":
    main()
