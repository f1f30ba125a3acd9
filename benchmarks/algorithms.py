#!/usr/bin/env python3
"""qd.algorithms against NumPy and against a copy of the same bytes (the memory-speed yardstick),
on each arch in one run (docs/algorithms.md, "Speed").

    python3 benchmarks/algorithms.py [--log2n 22] [--repeat 5] [--arch cpu,vulkan] [--cpu-time]
                                     [--no-reference] [--venvs /tmp/qd-peers] [--no-install]

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

On every arch but the cpu (the reference runs its algorithms on GPUs only), the same kernels then
run in the reference's release (quadrants==1.3.3, in its own process and venv: the machinery of
benchmarks/peers.py), and "ours / reference" ratios follow; an op whose result the reference gets
wrong is reported and left out of the ratios.
"""
import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import peer_python, run_worker  # noqa: E402

import quadrants as qd  # noqa: E402
import quadrants.algorithms as A  # noqa: E402


def nd(dtype):
    return qd.types.ndarray(dtype, ndim=1)


CLOCK = time.perf_counter  # --cpu-time: time.process_time
CPU_TIME_ENV = "QD_BENCH_CPU_TIME"  # set for the reference's worker: time.process_time
REFERENCE = "reference 1.3.3"
# the ops both builds have, compared ours / reference
SHARED_OPS = ["copy u32", "exclusive_scan_add u32", "select f32", "compaction kernel f32", "sort u32 keys",
              "sort u32 key-value", "reduce_add f32", "reduce_by_key_add i32"]


def interleaved(cases, repeat, failed=None):
    """Best time of each case, the cases run in turn `repeat` times (the machine may be shared: a
    busy moment then slows all of them alike); each is warmed up (and compiled) first. With a dict
    `failed`, a case whose warm-up raises is left out, its error recorded there."""
    best = {}
    for name, (fn, reset) in list(cases.items()):
        try:
            if reset is not None:
                reset()
            fn()
            qd.sync()
        except Exception as e:
            if failed is None:
                raise
            failed[name] = f"{type(e).__name__}: {str(e).strip().splitlines()[-1] if str(e).strip() else ''}"
            del cases[name]
            continue
        best[name] = float("inf")
    for _ in range(repeat):
        for name, (fn, reset) in cases.items():
            if reset is not None:
                reset()
            qd.sync()
            t0 = CLOCK()
            fn()
            qd.sync()
            best[name] = min(best[name], CLOCK() - t0)
    return best


def bench_arch(arch, n, repeat, rng, ours=True):
    """{op: best seconds}, the list of ops whose result differs from NumPy's and {op: error} of those
    that did not run. `ours` False: the reference's release is the `quadrants` imported (no
    scan_lowering, no forced lowerings, no NumPy; an op that raises is recorded, not fatal)."""
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

    lowering = A.scan_lowering() if ours else "reduce_then_scan"
    if lowering != "reduce_then_scan":
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

    # sort's count as a 0-d ndarray: the reference's sort takes no other form
    sort_n = qd.ndarray(i32, ())
    sort_n.from_numpy(np.array(n, np.int32))

    @qd.kernel
    def sort_keys(k: nd(u32), t: nd(u32), s: nd(u32), m: qd.types.ndarray(i32, ndim=0)):
        A.sort(k, t, k, t, s, m, u32, False, 32, D)

    @qd.kernel
    def sort_kv(k: nd(u32), t: nd(u32), v: nd(u32), tv: nd(u32), s: nd(u32), m: qd.types.ndarray(i32, ndim=0)):
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
        "sort u32 keys": (lambda: sort_keys(sk, tmp, scratch, sort_n), reset_keys),
        "sort u32 key-value": (lambda: sort_kv(sk, tmp, va, vt, scratch, sort_n), reset_kv),
        "reduce_add f32": (lambda: reduce(fa, fsum, scratch, n), None),
        "reduce_by_key_add i32": (lambda: rbk(rk, rv, rko, rvo, num, scratch, n), None),
    }
    if lowering != "reduce_then_scan":
        cases["exclusive_scan_add u32 reduce_then_scan"] = (lambda: scan_rts(a, b, scratch, n), None)
        cases["select f32 reduce_then_scan"] = (lambda: select_rts(fa, flags, fo, num, scratch, n), None)
    if ours:
        cases.update(numpy_cases(keys_h, vals_h, flags_h, run_keys_h, ones_h))
    failed = None if ours else {}
    t = interleaved(cases, repeat, failed)
    # the results of the last runs, against NumPy's
    want_scan = np.concatenate([np.zeros(1, np.uint32), np.cumsum(keys_h, dtype=np.uint32)[:-1]])
    want_select = vals_h[flags_h != 0]
    starts = np.flatnonzero(np.concatenate([[True], run_keys_h[1:] != run_keys_h[:-1]]))

    def scan_ok(fn):
        fn(a, b, scratch, n)
        return np.array_equal(b.to_numpy(), want_scan)

    def select_ok(fn):
        fn(fa, flags, fo, num, scratch, n)
        return np.array_equal(fo.to_numpy()[:num.to_numpy()[0]], want_select)

    def compaction_ok(f, want):
        compaction(fa, f, fo, num, n)
        k = num.to_numpy()[0]
        return k == len(want) and np.array_equal(np.sort(fo.to_numpy()[:k]), np.sort(want))

    def sort_ok():
        reset_keys()
        sort_keys(sk, tmp, scratch, sort_n)
        return np.array_equal(sk.to_numpy(), np.sort(keys_h))

    def sort_kv_ok():
        reset_kv()
        sort_kv(sk, tmp, va, vt, scratch, sort_n)
        return np.array_equal(va.to_numpy(), np.argsort(keys_h, kind="stable"))

    def reduce_ok():
        reduce(fa, fsum, scratch, n)
        return abs(fsum.to_numpy()[0] - vals_h.astype(np.float64).sum()) < 1e-3 * np.abs(vals_h).sum()

    def rbk_ok():
        rbk(rk, rv, rko, rvo, num, scratch, n)
        r = num.to_numpy()[0]
        return r == len(starts) and np.array_equal(rvo.to_numpy()[:r], np.add.reduceat(ones_h, starts))

    checks = {
        "exclusive_scan_add u32": lambda: scan_ok(scan),
        "select f32": lambda: select_ok(select),
        "compaction kernel f32": lambda: compaction_ok(flags, want_select),
        "compaction kernel all pass": lambda: compaction_ok(all_pass, vals_h),
        "sort u32 keys": sort_ok,
        "sort u32 key-value": sort_kv_ok,
        "reduce_add f32": reduce_ok,
        "reduce_by_key_add i32": rbk_ok,
    }
    if lowering != "reduce_then_scan":
        checks["exclusive_scan_add u32 reduce_then_scan"] = lambda: scan_ok(scan_rts)
        checks["select f32 reduce_then_scan"] = lambda: select_ok(select_rts)
    wrong = [name for name, ok in checks.items() if name in t and not ok()]
    t["lowering"] = lowering
    qd.reset()
    return t, wrong, failed or {}


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


def reference_times(arch, log2n, repeat, args):
    """The reference release's times (and wrong ops) on `arch`, from its own process; or None and why."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if args.cpu_time:
        env[CPU_TIME_ENV] = "1"
    python, env, why = peer_python(REFERENCE, args.venvs, not args.no_install, env)
    if python is None:
        return None, why
    return run_worker(python, REFERENCE, arch, log2n, repeat, env, args.timeout, os.path.abspath(__file__))


def print_arch(arch, n, t, wrong, ref, why):
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
    if wrong:
        raise SystemExit(f"{arch}: wrong results (against NumPy): {', '.join(wrong)}")
    if ref is None:
        if why:
            print(f"  {REFERENCE}: left out: {why}")
        return
    ref_t, ref_wrong, ref_failed = ref["times"], ref["wrong"], ref["failed"]
    print(f"  {REFERENCE} (its own process), ours / reference; goal: each below 1")
    for name in SHARED_OPS:
        if name in ref_failed:
            print(f"    {name:30s} left out: it fails there: {ref_failed[name]}")
        elif name in ref_wrong:
            print(f"    {name:30s} left out: the reference's result differs from NumPy's")
        else:
            print(f"    {name:30s} {ref_t[name] * 1e3:9.2f} ms  {t[name] / ref_t[name]:6.2f}x")


def worker(args):
    global CLOCK
    CLOCK = time.process_time if os.environ.get(CPU_TIME_ENV) == "1" else time.perf_counter
    t, wrong, failed = bench_arch(args.arch, 1 << args.log2n, args.repeat, np.random.default_rng(0), ours=False)
    print("RESULT " + json.dumps({"times": t, "wrong": wrong, "failed": failed}))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--log2n", type=int, default=22)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--arch", default="cpu,vulkan")
    p.add_argument("--cpu-time", action="store_true", help="process CPU seconds instead of wall time")
    p.add_argument("--no-reference", action="store_true", help="leave the reference's release out")
    p.add_argument("--venvs", default="/tmp/qd-peers")
    p.add_argument("--no-install", action="store_true", help="use an existing venv for the reference only")
    p.add_argument("--timeout", type=float, default=1800, help="seconds for the reference's worker")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return worker(args)
    global CLOCK
    CLOCK = time.process_time if args.cpu_time else time.perf_counter
    n = 1 << args.log2n
    print(f"n = 2^{args.log2n} = {n}; best of {args.repeat}; ms (ns per element) of "
          f"{'process CPU time' if args.cpu_time else 'wall time'}")
    for arch in args.arch.split(","):
        if not qd.is_arch_available(getattr(qd, arch)):
            print(f"{arch}: not available")
            continue
        t, wrong, _ = bench_arch(arch, n, args.repeat, np.random.default_rng(0))
        ref, why = None, None
        if arch != "cpu" and not args.no_reference:
            ref, why = reference_times(arch, args.log2n, args.repeat, args)
        print_arch(arch, n, t, wrong, ref, why)


if __name__ == "__main__":
    main()
