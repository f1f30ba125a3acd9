#!/usr/bin/env python3
"""qd.algorithms against NumPy and against a copy of the same bytes (the memory-speed yardstick),
on each arch in one run (docs/algorithms.md, "Speed").

    python3 benchmarks/algorithms.py [--log2n 22] [--repeat 5] [--arch cpu,vulkan] [--cpu-time]

For n = 2**log2n elements, each op runs in a kernel of its own, timed from launch to qd.sync()
(each op warmed up, which also compiles, then all run in turn `repeat` times, NumPy's among them;
the best of each):
  exclusive_scan_add (u32)      vs a u32 copy (n read, n written) and np.cumsum; in the lowering the
                                   target records (qd.algorithms.scan_lowering()) and, where that is
                                   the look-back, also forced to reduce-then-scan
  select (f32, half the flags)  vs a copy reading the values and the flags and writing n values,
                                   np.flatnonzero and boolean indexing (a[flags != 0]); both lowerings
                                   as for the scan; and the user's own compaction kernel
                                   (if f[i]: out[qd.atomic_add(k[None], 1)] = x[i], unordered), also
                                   with every flag set (the copy's bytes exactly)
  sort (u32 keys)               vs np.sort (and the copy); key-value (u32 keys, u32 values) vs np.argsort
  reduce_add (f32)              vs np.sum
  reduce_by_key_add (i32)       vs np.add.reduceat (runs of 1..8 equal keys, heads precomputed for numpy)
Each result is checked against NumPy's. Prints ms, ns per element and the ratios. --cpu-time
counts the process's CPU seconds (every thread: the cpu's workers, lavapipe's) instead of wall
time: a loaded machine disturbs it less, and lavapipe's cost is CPU time.
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import best_of  # noqa: E402  (NumPy's)

import quadrants as qd  # noqa: E402
import quadrants.algorithms as A  # noqa: E402


def nd(dtype):
    return qd.types.ndarray(dtype, ndim=1)


CLOCK = time.perf_counter  # --cpu-time: time.process_time


def interleaved(cases, repeat, sync=qd.sync):
    """Best time of each case, the cases run in turn `repeat` times (the machine may be shared: a
    busy moment then slows all of them alike); each is warmed up (and compiled) first."""
    best = {}
    for name, (fn, reset) in cases.items():
        if reset is not None:
            reset()
        fn()
        sync()
        best[name] = float("inf")
    for _ in range(repeat):
        for name, (fn, reset) in cases.items():
            if reset is not None:
                reset()
            sync()
            t0 = CLOCK()
            fn()
            sync()
            best[name] = min(best[name], CLOCK() - t0)
    return best


def bench_arch(arch, n, repeat, rng):
    qd.init(arch=getattr(qd, arch))
    D = max(1, A._reduce._reduce_depth_for_n(n))
    u32, f32, i32 = qd.u32, qd.f32, qd.i32
    keys_h = rng.integers(0, 2 ** 32, n, dtype=np.uint32)
    vals_h = rng.standard_normal(n).astype(np.float32)
    flags_h = (rng.random(n) < 0.5).astype(np.int32)
    run_keys_h = np.repeat(np.arange(n), rng.integers(1, 9, n))[:n].astype(np.int32)
    ones_h = rng.integers(0, 10, n).astype(np.int32)

    a, b, tmp, sk = (qd.ndarray(u32, (n,)) for _ in range(4))  # sk: the sorts' keys
    fa, fo = qd.ndarray(f32, (n,)), qd.ndarray(f32, (n,))
    flags, num = qd.ndarray(i32, (n,)), qd.ndarray(i32, (1,))
    all_pass = qd.ndarray(i32, (n,))  # the compaction kernel's body for every element: a copy's bytes
    va, vt = qd.ndarray(u32, (n,)), qd.ndarray(u32, (n,))
    rk, rv, rko, rvo = (qd.ndarray(i32, (n,)) for _ in range(4))
    fsum = qd.ndarray(f32, (1,))
    slots = max(A.sort_scratch_slots(n, D), A.select_scratch_slots(n), A.exclusive_scan_scratch_slots(n, D),
                A.reduce_by_key_scratch_slots(n))
    scratch = qd.ndarray(u32, (slots,))
    a.from_numpy(keys_h)
    fa.from_numpy(vals_h)
    flags.from_numpy(flags_h)
    all_pass.from_numpy(np.ones(n, np.int32))
    rk.from_numpy(run_keys_h)
    rv.from_numpy(ones_h)

    @qd.kernel
    def copy(x: nd(u32), y: nd(u32), m: qd.i32):
        for i in range(m):
            y[i] = x[i]

    @qd.kernel
    def copy_select_bytes(x: nd(f32), f: nd(i32), y: nd(f32), m: qd.i32):
        for i in range(m):
            y[i] = x[i] if f[i] != 0 else 0.0

    @qd.kernel
    def scan(x: nd(u32), y: nd(u32), s: nd(u32), m: qd.i32):
        A.exclusive_scan_add(x, y, s, m, u32, D)

    @qd.kernel
    def select(x: nd(f32), f: nd(i32), y: nd(f32), k: nd(i32), s: nd(u32), m: qd.i32):
        A.select(x, f, y, k, s, m, D)

    lowering = A.scan_lowering()
    with A._lookback.forced("reduce_then_scan"):  # kernels compile at their first call: made inside
        @qd.kernel
        def scan_rts(x: nd(u32), y: nd(u32), s: nd(u32), m: qd.i32):
            A.exclusive_scan_add(x, y, s, m, u32, D)

        @qd.kernel
        def select_rts(x: nd(f32), f: nd(i32), y: nd(f32), k: nd(i32), s: nd(u32), m: qd.i32):
            A.select(x, f, y, k, s, m, D)

        scan_rts(a, b, scratch, n)
        select_rts(fa, flags, fo, num, scratch, n)

    @qd.kernel
    def compaction(x: nd(f32), f: nd(i32), y: nd(f32), k: nd(i32), m: qd.i32):
        k[0] = 0
        for i in range(m):
            if f[i] != 0:
                y[qd.atomic_add(k[0], 1)] = x[i]

    @qd.kernel
    def sort_keys(k: nd(u32), t: nd(u32), s: nd(u32), m: qd.i32):
        A.sort(k, t, k, t, s, m, u32, False, 32, D)

    @qd.kernel
    def sort_kv(k: nd(u32), t: nd(u32), v: nd(u32), tv: nd(u32), s: nd(u32), m: qd.i32):
        A.sort(k, t, v, tv, s, m, u32, True, 32, D)

    @qd.kernel
    def reduce(x: nd(f32), o: nd(f32), s: nd(u32), m: qd.i32):
        A.reduce_add(x, o, s, m, f32, D)

    @qd.kernel
    def rbk(ki: nd(i32), vi: nd(i32), ko: nd(i32), vo: nd(i32), nr: nd(i32), s: nd(u32), m: qd.i32):
        A.reduce_by_key_add(ki, vi, ko, vo, nr, s, m, i32, D)

    def reset_keys():
        sk.from_numpy(keys_h)

    def reset_kv():
        sk.from_numpy(keys_h)
        va.from_numpy(np.arange(n, dtype=np.uint32))

    cases = {
        "copy u32": (lambda: copy(a, b, n), None),
        "copy select bytes": (lambda: copy_select_bytes(fa, flags, fo, n), None),
        "exclusive_scan_add u32": (lambda: scan(a, b, scratch, n), None),
        "select f32": (lambda: select(fa, flags, fo, num, scratch, n), None),
        "compaction kernel f32": (lambda: compaction(fa, flags, fo, num, n), None),
        "compaction kernel all pass": (lambda: compaction(fa, all_pass, fo, num, n), None),
        "sort u32 keys": (lambda: sort_keys(sk, tmp, scratch, n), reset_keys),
        "sort u32 key-value": (lambda: sort_kv(sk, tmp, va, vt, scratch, n), reset_kv),
        "reduce_add f32": (lambda: reduce(fa, fsum, scratch, n), None),
        "reduce_by_key_add i32": (lambda: rbk(rk, rv, rko, rvo, num, scratch, n), None),
    }
    if lowering != "reduce_then_scan":
        cases["exclusive_scan_add u32 reduce_then_scan"] = (lambda: scan_rts(a, b, scratch, n), None)
        cases["select f32 reduce_then_scan"] = (lambda: select_rts(fa, flags, fo, num, scratch, n), None)
    cases.update(numpy_cases(keys_h, vals_h, flags_h, run_keys_h, ones_h))
    t = interleaved(cases, repeat)
    t["lowering"] = lowering
    # the results of the last runs, against NumPy's
    scan(a, b, scratch, n)
    want = np.concatenate([np.zeros(1, np.uint32), np.cumsum(keys_h, dtype=np.uint32)[:-1]])
    assert np.array_equal(b.to_numpy(), want), "scan"
    select(fa, flags, fo, num, scratch, n)
    k = num.to_numpy()[0]
    assert np.array_equal(fo.to_numpy()[:k], vals_h[flags_h != 0]), "select"
    if lowering != "reduce_then_scan":
        scan_rts(a, b, scratch, n)
        assert np.array_equal(b.to_numpy(), want), "scan (reduce-then-scan)"
        select_rts(fa, flags, fo, num, scratch, n)
        assert np.array_equal(fo.to_numpy()[:num.to_numpy()[0]], vals_h[flags_h != 0]), "select (reduce-then-scan)"
    compaction(fa, flags, fo, num, n)
    k = num.to_numpy()[0]
    assert k == flags_h.sum() and np.array_equal(np.sort(fo.to_numpy()[:k]), np.sort(vals_h[flags_h != 0]))
    compaction(fa, all_pass, fo, num, n)
    assert num.to_numpy()[0] == n and np.array_equal(np.sort(fo.to_numpy()), np.sort(vals_h)), "compaction, all pass"
    reset_keys()
    sort_keys(sk, tmp, scratch, n)
    assert np.array_equal(sk.to_numpy(), np.sort(keys_h)), "sort"
    reset_kv()
    sort_kv(sk, tmp, va, vt, scratch, n)
    assert np.array_equal(va.to_numpy(), np.argsort(keys_h, kind="stable")), "sort key-value"
    reduce(fa, fsum, scratch, n)
    assert abs(fsum.to_numpy()[0] - vals_h.astype(np.float64).sum()) < 1e-3 * np.abs(vals_h).sum()
    rbk(rk, rv, rko, rvo, num, scratch, n)
    starts = np.flatnonzero(np.concatenate([[True], run_keys_h[1:] != run_keys_h[:-1]]))
    r = num.to_numpy()[0]
    assert r == len(starts) and np.array_equal(rvo.to_numpy()[:r], np.add.reduceat(ones_h, starts)), "rbk"
    qd.reset()
    return t


def numpy_cases(keys_h, vals_h, flags_h, run_keys_h, ones_h):
    """NumPy's counterparts, timed in the same interleaved loop as the arch's ops (a busy moment of
    the shared machine then slows both alike)."""
    starts = np.flatnonzero(np.concatenate([[True], run_keys_h[1:] != run_keys_h[:-1]]))
    out = np.empty_like(keys_h)
    ops = {
        "np.copyto u32": lambda: np.copyto(out, keys_h),
        "np.cumsum u32": lambda: np.cumsum(keys_h, dtype=np.uint32, out=out),
        "np.flatnonzero": lambda: np.flatnonzero(flags_h),
        "a[flags != 0]": lambda: vals_h[flags_h != 0],
        "np.sort u32": lambda: np.sort(keys_h),
        "np.argsort u32 (stable)": lambda: np.argsort(keys_h, kind="stable"),
        "np.sum f32": lambda: np.sum(vals_h),
        "np.add.reduceat i32": lambda: np.add.reduceat(ones_h, starts),
    }
    return {name: (fn, None) for name, fn in ops.items()}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--log2n", type=int, default=22)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--arch", default="cpu,vulkan")
    p.add_argument("--cpu-time", action="store_true", help="process CPU seconds instead of wall time")
    args = p.parse_args()
    global CLOCK
    CLOCK = time.process_time if args.cpu_time else time.perf_counter
    n = 1 << args.log2n
    print(f"n = 2^{args.log2n} = {n}; best of {args.repeat}; ms (ns per element) of "
          f"{'process CPU time' if args.cpu_time else 'wall time'}")
    for arch in args.arch.split(","):
        if not qd.is_arch_available(getattr(qd, arch)):
            print(f"{arch}: not available")
            continue
        t = bench_arch(arch, n, args.repeat, np.random.default_rng(0))
        print(f"{arch}: scan / select lowering {t.pop('lowering')}")
        for name, s in t.items():
            print(f"  {name:28s} {s * 1e3:9.2f} ms ({s / n * 1e9:6.2f} ns)")
        ratios = [
            ("exclusive_scan / copy", t["exclusive_scan_add u32"] / t["copy u32"], "goal <= 1.5"),
            ("exclusive_scan / np.cumsum", t["exclusive_scan_add u32"] / t["np.cumsum u32"], ""),
            ("select / copy (same bytes)", t["select f32"] / t["copy select bytes"], "goal <= 1.5"),
            ("select / np.flatnonzero", t["select f32"] / t["np.flatnonzero"], ""),
            ("compaction kernel / copy (same bytes)", t["compaction kernel f32"] / t["copy select bytes"], "goal <= 1.2"),
            ("  all pass / copy (same bytes)", t["compaction kernel all pass"] / t["copy select bytes"], ""),
            ("compaction kernel / np.flatnonzero", t["compaction kernel f32"] / t["np.flatnonzero"], ""),
            ("select / a[flags != 0]", t["select f32"] / t["a[flags != 0]"], ""),
            ("sort keys / np.sort", t["sort u32 keys"] / t["np.sort u32"], "cpu goal < 1"),
            ("sort keys / copy", t["sort u32 keys"] / t["copy u32"], ""),
            ("sort key-value / np.argsort", t["sort u32 key-value"] / t["np.argsort u32 (stable)"], ""),
            ("reduce_add / np.sum", t["reduce_add f32"] / t["np.sum f32"], ""),
            ("reduce_by_key / np.add.reduceat", t["reduce_by_key_add i32"] / t["np.add.reduceat i32"], ""),
        ]
        if "exclusive_scan_add u32 reduce_then_scan" in t:
            ratios[1:1] = [("  reduce_then_scan scan / copy", t["exclusive_scan_add u32 reduce_then_scan"] / t["copy u32"],
                            "")]
            ratios.insert(4, ("  reduce_then_scan select / copy", t["select f32 reduce_then_scan"] / t["copy select bytes"],
                              ""))
        for name, r, goal in ratios:
            print(f"  {name:34s} {r:7.2f}x  {goal}")


if __name__ == "__main__":
    main()
