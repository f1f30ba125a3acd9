"""Contended atomics with every returned old value checked (bounded benchmarks/stress.py), and the
checker itself: tampered histories must be caught."""
import importlib.util
import os

import numpy as np
import pytest

import quadrants as qd
from test_utils import test

_path = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks", "stress.py")
_spec = importlib.util.spec_from_file_location("qd_stress", _path)
stress = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(stress)

TOTAL_OPS = 10**6  # per arch, spread over the cases below (the benchmark runs 10^8 / 10^7 per case)


@test()
def test_contended_atomics_lose_nothing():
    # Every op of the support table, on i32 and f32 where the device allows them (the benchmark
    # covers every dtype); all threads on one address.
    cases, _ = stress.supported_cases()
    ops = {op for op, _, _ in cases}
    cases = [c for c in cases if c[1] in (qd.i32, qd.f32)]
    assert {op for op, _, _ in cases} == ops  # every op takes i32
    n = TOTAL_OPS // len(cases)
    for op, dtype, _ in cases:
        res = stress.run_case(op, dtype, n, seed=1)
        assert (res["lost"], res["problem"]) == (0, ""), (op, dtype, res)
        assert res["ops"] == n and res["addresses"] == 1


def test_support_table_drives_the_cases():
    qd.init(arch=qd.cpu)
    try:
        cases, rejected = stress.supported_cases()
    finally:
        qd.reset()
    names = {(op, dtype.name) for op, dtype, _ in cases}
    assert ("add", "f16") in names and ("cas", "u64") in names
    assert ("cas", "f32") not in names and ("and", "f64") not in names
    assert ("add", "i8") in names and ("cas", "u16") in names  # word CAS loops
    assert len(cases) + len(rejected) == 10 * 11


def _history(op, dtype, per=50, m=2, seed=3):
    """A valid history, built serially on the host: (init, operands, old values, end values)."""
    init, v = stress._operands(op, dtype, per, m, np.random.default_rng(seed))
    old = np.empty_like(v)
    cur = np.full(m, init, v.dtype)
    for r in range(per):
        old[r] = cur
        if op in ("add", "cas"):
            cur = (cur + v[r]).astype(v.dtype)
        elif op == "sub":
            cur = (cur - v[r]).astype(v.dtype)
        elif op == "mul":
            cur = (cur * v[r]).astype(v.dtype)
        elif op == "exchange":
            cur = v[r].copy()
        elif op in ("min", "max"):
            cur = getattr(np, f"{op}imum")(cur, v[r])
        else:
            u = stress._unsigned(dtype)
            cur = stress.BITWISE[op](cur.view(u), v[r].view(u)).view(v.dtype)
    return init, v, old, cur


@pytest.mark.parametrize("op", ["add", "sub", "cas", "mul", "exchange", "min", "max", "and", "or", "xor"])
@pytest.mark.parametrize("dtype", [qd.i32, qd.u64, qd.f32])
def test_checker_accepts_valid_and_catches_tampered_histories(op, dtype):
    if dtype.is_real and op in ("and", "or", "xor", "cas"):
        pytest.skip("not an atomic on floats")
    with np.errstate(over="ignore"):
        init, v, old, final = _history(op, dtype)
    assert stress.check(op, dtype, init, v, old, final) == (0, "")
    # A lost update: operation 7 read the initial value (every write before it was lost).
    bad = old.copy()
    bad[7, 1] = init
    assert stress.check(op, dtype, init, v, bad, final)[1], (op, dtype)
    # No write landed at address 0.
    stale = final.copy()
    stale[0] = init
    lost, problem = stress.check(op, dtype, init, v, old, stale)
    assert lost and problem, (op, dtype)
