#!/usr/bin/env python3
"""Contended atomics at scale; every returned old value is checked as a valid history.

    python3 benchmarks/stress.py [--arch cpu|vulkan|cuda|amdgpu|metal] [--ops N] [--op add,cas] [--dtype i32]

Runs every (op, dtype) that the atomic support table (csrc/atomics/support_table.cpp, read through
the core) allows in global memory on the arch's device: --ops operations per case (default 10^8 on
cpu, 10^7 elsewhere), in rounds of at most 2^24, all threads on one address (more addresses only
where the dtype cannot count that far exactly: f16 / f32 and 8 / 16-bit integer counters and
tokens, f16 and narrow integer products; neighbouring addresses of a narrow dtype share a 32-bit
word, so their word CAS loops contend too). Each
operation stores the old value the atomic returned, and the host checks:

  add, sub   counters: the old values are a permutation of 0, 1, .., n-1 steps, the end value n steps
  cas        a CAS loop incrementing by 1: the same permutation (exactly one success per step)
  exchange   a chain of distinct tokens: the old values plus the end value are every token once
  mul        the old values are the products x0 * c^k, k < n (each exactly once), the end value x0 * c^n
  min, max   the end value is the true extreme; old and new values chain (see _chain_broken)
  and/or/xor the end value is the fold of every operand; old and new values chain

and prints the operations per second (kernel time only) and "0 lost", or what went wrong. Exit
status 1 if any case failed. tests/python/test_stress.py runs a bounded version.
"""
import argparse
import math
import sys
import time

import numpy as np

import quadrants as qd
from quadrants import _core
from quadrants._lib import runtime
from quadrants import types as T

ROUND = 1 << 24  # operations per kernel launch at most (memory for the old values)
BITWISE = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}


def supported_cases():
    """The (op, dtype) pairs the support table allows in global memory on the current device, and the
    rejected ones with the reason: ([(op, dtype, lowering)], [(op, dtype, reason)])."""
    prog = runtime.program()
    features = list(prog.runtime.features)
    ok, rejected = [], []
    for row in _core.atomic_ops():
        if row["name"] in ("inc", "dec"):  # wrapping counters: their contended old values are checked in
            continue                       # tests/python/test_memory_order.py, not by this chain model
        for dtype in T.ALL:
            kind, reason = _core.atomic_lowering(prog.config.arch.name, row["name"], dtype.core, False, features)
            if kind == "rejected":
                rejected.append((row["name"], dtype, reason))
            else:
                ok.append((row["name"], dtype, kind))
    return ok, rejected


# --- what each op does, and how far a dtype can go exactly -------------------------------------------
def _unsigned(dtype):
    return np.dtype(f"uint{dtype.bits}")


def _bits(a):
    """Values compared by their bits (floats too: the chain must hand on exact values)."""
    return a.view(np.dtype(f"uint{a.dtype.itemsize * 8}"))


def _mul_factor(dtype):
    # Integers: 3 is odd, so 3^k mod 2^w is distinct for k < 2^(w-2). Floats: 1 + 1 ulp at 1.0, so
    # every product rounds up by at least one ulp: a strictly increasing sequence until overflow.
    return 3 if not dtype.is_real else 1 + float(np.finfo(dtype.np).eps)


def _per_address_limit(op, dtype):
    """How many operations one address can take with every old value exact and distinct."""
    if not dtype.is_real:  # 8 / 16-bit integers wrap soon: counts and tokens stay below 2^bits
        if dtype.bits >= 32:
            return math.inf
        if op in ("add", "sub", "cas", "exchange"):
            return 2 ** dtype.bits - 1
        return 2 ** (dtype.bits - 2) if op == "mul" else math.inf  # 3^k mod 2^w: distinct for k < 2^(w-2)
    if op in ("add", "sub", "cas", "exchange"):  # consecutive integers (counts, tokens)
        return 2 ** (np.finfo(dtype.np).nmant + 1)
    if op == "mul":
        if dtype.bits > 16:
            return math.inf if dtype.bits == 64 else 2**28  # f32: ~127 * 2^22 steps to overflow
        x, c, k = dtype.np.type(1), dtype.np.type(_mul_factor(dtype)), 0
        with np.errstate(over="ignore"):
            while np.isfinite(x * c):
                x, k = x * c, k + 1
        return k
    return math.inf


def _operands(op, dtype, per, m, rng):
    """(initial value, operands of shape (per, m)): row r holds operation r of each address."""
    t = dtype.np
    shape = (per, m)
    if op in ("add", "sub", "cas"):
        return t.type(0), np.ones(shape, t)
    if op == "mul":
        return t.type(1), np.full(shape, _mul_factor(dtype), t)
    if op == "exchange":  # the tokens 1..per at each address; the initial value is token 0
        return t.type(0), np.repeat(np.arange(1, per + 1, dtype=np.int64), m).reshape(shape).astype(t)
    if op in ("min", "max"):
        if dtype.is_real:
            v = rng.uniform(-1000, 1000, shape).astype(t)
            v[v == 0] = 1  # 0.0 and -0.0 compare equal: keep the extreme unique in its bits
            init = np.finfo(t).max if op == "min" else np.finfo(t).min
        else:
            info = np.iinfo(t)
            v = rng.integers(info.min, info.max, shape, dtype=t, endpoint=True)
            init = info.max if op == "min" else info.min
        return t.type(init), v
    u = _unsigned(dtype)
    bit = np.ones(shape, u) << rng.integers(0, dtype.bits, shape).astype(u)
    if op == "and":  # each operand clears one bit of an all-ones start
        return np.array(~u.type(0)).view(t)[()], (~bit).view(t)
    if op == "or":  # each sets one bit
        return t.type(0), bit.view(t)
    if op == "xor":
        return t.type(0), rng.integers(0, np.iinfo(u).max, shape, dtype=u, endpoint=True).view(t)
    raise ValueError(f"no stress pattern for atomic_{op}")


def _chain_broken(init, old, new, final):
    """A linearizable history of read-modify-writes on one address is a chain: every value stored
    (new) is the value the next operation read (old), the first read sees init and the last store
    is the end value. So, per address, the multiset {init} + new equals the multiset old + {final}.
    Returns the number of addresses where it does not hold."""
    m = old.shape[1]
    a = np.sort(_bits(np.vstack([old, final[None, :]])), axis=0)
    b = np.sort(_bits(np.vstack([np.full((1, m), init, old.dtype), new])), axis=0)
    return int(np.count_nonzero((a != b).any(axis=0)))


def _not_permutation(k, n):
    """k: int64 of shape (n, m). The number of columns that are not a permutation of 0..n-1."""
    m = k.shape[1]
    out = (k < 0) | (k >= n)
    if out.any():
        return int(np.count_nonzero(out.any(axis=0)))
    counts = np.bincount((k * m + np.arange(m)).ravel(), minlength=n * m).reshape(n, m)
    return int(np.count_nonzero((counts != 1).any(axis=0)))


def _steps(x, init, sign, dtype):
    """How many unit steps (+1 for sign 1, -1 for sign -1) lead from init to x, as int64 (integers
    wrap modulo 2^bits, as the atomics do)."""
    if dtype.is_real:
        return ((x.astype(np.float64) - float(init)) * sign).astype(np.int64)
    u = _unsigned(dtype)
    xu, iu = x.view(u).astype(np.uint64), np.uint64(np.array(init).view(u))
    d = (xu - iu) if sign > 0 else (iu - xu)
    return (d & np.uint64((1 << dtype.bits) - 1)).astype(np.int64)


def check(op, dtype, init, v, old, final):
    """Checks one round: operands v and returned old values of shape (per, m), end values final (m).
    Returns (lost, problem): lost = updates (or tokens) missing, problem = what is wrong, "" if none."""
    per, m = old.shape
    if op in ("add", "sub", "cas"):
        sign = -1 if op == "sub" else 1
        lost = int((per - _steps(final, init, sign, dtype)).sum())
        bad = _not_permutation(_steps(old, init, sign, dtype), per)
        problem = [f"the end values miss {lost} updates"] if lost else []
        if bad:
            problem.append(f"old values are not a permutation of 0..{per - 1} steps at {bad} of {m} addresses")
        return lost, "; ".join(problem)
    if op == "exchange":  # tokens 0..per: each must come back once, as an old value or the end value
        tokens = np.vstack([old, final[None, :]])
        if not dtype.is_real:  # narrow signed tokens past 2^(bits-1) wrap negative: their unsigned bits
            tokens = tokens.view(_unsigned(dtype))
        lost = _not_permutation(tokens.astype(np.int64), per + 1)
        return lost, (f"a token lost or duplicated at {lost} of {m} addresses" if lost else "")
    if op == "mul":
        if dtype.is_real:  # strictly increasing: sorted, each value is the previous one times c
            c = dtype.np.type(_mul_factor(dtype))
            s = np.sort(old, axis=0)
            bad = (s[0] != init) | (s[1:] != s[:-1] * c).any(axis=0) | (final != s[-1] * c)
        else:
            u = _unsigned(dtype)
            powers = np.concatenate([[np.uint64(1)], np.cumprod(np.full(per, 3, np.uint64))])  # 3^k mod 2^64
            want = (powers * np.uint64(np.array(init).view(u))).astype(u)
            bad = ((np.sort(old.view(u), axis=0) != np.sort(want[:per])[:, None]).any(axis=0)
                   | (final.view(u) != want[per]))
        bad = int(np.count_nonzero(bad))
        return bad, (f"the products are not x0 * c^k, k < {per}, at {bad} of {m} addresses" if bad else "")
    if op in ("min", "max"):
        f = np.minimum if op == "min" else np.maximum
        new, want = f(old, v), f(f.reduce(v, axis=0), init)
    else:
        u = _unsigned(dtype)
        f = BITWISE[op]
        new = f(old.view(u), v.view(u)).view(old.dtype)
        want = f(f.reduce(v.view(u), axis=0), np.array(init).view(u)).view(dtype.np)
    wrong_end = int(np.count_nonzero(_bits(final) != _bits(want)))
    broken = _chain_broken(init, old, new, final)
    problem = []
    if wrong_end:
        problem.append(f"the end value is not the {'extreme' if op in ('min', 'max') else 'fold'} "
                       f"at {wrong_end} of {m} addresses")
    if broken:
        problem.append(f"old and new values do not chain at {broken} of {m} addresses")
    return wrong_end, "; ".join(problem)


# --- the kernels --------------------------------------------------------------------------------------
def make_kernel(op, dtype, m):
    fn = getattr(qd, f"atomic_{op}")
    nd = qd.types.ndarray(dtype=dtype, ndim=1)

    @qd.kernel
    def stress(target: nd, v: nd, old: nd):
        for i in range(v.shape[0]):
            a = i % m
            if qd.static(op == "cas"):  # increment with a CAS loop; keep the old value that won
                cur = target[a]
                while True:
                    seen = qd.atomic_cas(target[a], cur, cur + v[i])
                    if seen == cur:
                        break
                    cur = seen
                old[i] = cur
            else:
                old[i] = fn(target[a], v[i])

    return stress


def run_case(op, dtype, n, seed=0, round_size=ROUND):
    """Runs about n contended atomic_<op> on dtype and checks them. Returns a dict: ops (the count
    run), addresses, seconds (kernel time), lost, problem."""
    limit = _per_address_limit(op, dtype)
    r = min(n, round_size)
    m = math.ceil(r / limit) if limit < r else 1
    per = r // m
    r = per * m
    rounds = max(1, round(n / r))
    kernel = make_kernel(op, dtype, m)
    rng = np.random.default_rng(seed)
    target, vals, old = qd.ndarray(dtype, m), qd.ndarray(dtype, r), qd.ndarray(dtype, r)
    seconds, lost, problems = 0.0, 0, []
    for k in range(rounds):
        init, v = _operands(op, dtype, per, m, rng)
        vals.from_numpy(v.reshape(-1))
        if k == 0:  # compile outside the timing
            target.fill(init)
            kernel(target, vals, old)
        target.fill(init)
        qd.sync()
        t = time.perf_counter()
        kernel(target, vals, old)
        qd.sync()
        seconds += time.perf_counter() - t
        lost_now, problem = check(op, dtype, init, v, old.to_numpy().reshape(per, m), target.to_numpy())
        lost += lost_now
        if problem:
            problems.append(f"round {k}: {problem}")
    return {"ops": rounds * r, "addresses": m, "seconds": seconds, "lost": lost, "problem": "; ".join(problems)}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--arch", default="cpu")
    p.add_argument("--ops", type=float, default=None, help="operations per case (default 1e8 on cpu, 1e7 else)")
    p.add_argument("--op", default="", help="comma-separated ops to run (default all)")
    p.add_argument("--dtype", default="", help="comma-separated dtypes to run (default all)")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    qd.init(arch=getattr(qd, a.arch))
    n = int(a.ops or (1e8 if a.arch == "cpu" else 1e7))
    ops = set(filter(None, a.op.split(",")))
    dtypes = set(filter(None, a.dtype.split(",")))
    cases, rejected = supported_cases()
    cases = [c for c in cases if (not ops or c[0] in ops) and (not dtypes or c[1].name in dtypes)]
    print(f"arch={a.arch}: the support table allows {len(cases)} (op, dtype) cases here "
          f"({len(rejected)} rejected); {n:,} operations per case asked")
    print(f"| {'op':>8} | {'dtype':>5} | {'lowering':>8} | {'ops':>11} | {'addresses':>9} | {'Mops/s':>8} | result")
    print(f"|{'-' * 10}|{'-' * 7}|{'-' * 10}|{'-' * 13}|{'-' * 11}|{'-' * 10}|-------")
    failed = 0
    start = time.perf_counter()
    for op, dtype, kind in cases:
        res = run_case(op, dtype, n, seed=a.seed)
        ok = res["lost"] == 0 and not res["problem"]
        failed += not ok
        result = "0 lost" if ok else f"FAILED: {res['lost']} lost; {res['problem']}"
        rate = res["ops"] / res["seconds"] / 1e6
        print(f"| {op:>8} | {dtype.name:>5} | {kind:>8} | {res['ops']:>11,} | {res['addresses']:>9} | "
              f"{rate:>8.1f} | {result}", flush=True)
    print(f"{len(cases) - failed} of {len(cases)} cases passed ({time.perf_counter() - start:.0f}s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
