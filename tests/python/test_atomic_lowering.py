"""Which lowering each atomic gets on the CPU (checked in the emitted LLVM IR), volatile_load,
demotion, and docs/atomics.md kept in step with the core's support table."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import quadrants as qd
from quadrants import _core
from test_utils import test

DTYPES = [qd.i32, qd.u32, qd.i64, qd.u64, qd.f16, qd.f32, qd.f64]
OPS = ["add", "sub", "mul", "min", "max", "and", "or", "xor", "exchange", "cas"]
CASES = [(op, t) for op in OPS for t in DTYPES if not (op in ("and", "or", "xor", "cas") and t.is_real)]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The atomicrmw operation LLVM gets for a native op.
RMW = {"add": ("add", "fadd"), "sub": ("sub", "fadd"), "min": ("min", None), "max": ("max", None),
       "and": ("and", None), "or": ("or", None), "xor": ("xor", None), "exchange": ("xchg", "xchg")}


def _rmw_name(op, t):
    name = RMW[op][1 if t.is_real else 0]
    if op in ("min", "max") and not t.is_signed:
        name = "u" + name
    return name


# A CAS loop in optimised LLVM IR: a cmpxchg whose success flag decides a branch (the retry).
CAS_RETRY = re.compile(r"%(\S+) = extractvalue \{ i\d+, i1 \} %\S+, 1\n\s+br i1 %\1,")


def _kernel_ir(op, t):
    x = qd.field(t, shape=4)
    out = qd.field(t, shape=64)
    fn = getattr(qd, f"atomic_{op}")

    @qd.kernel
    def k(v: t):
        for i in range(64):  # x[i % 4]: shared by iterations, so the atomic stays atomic
            if qd.static(op == "cas"):
                out[i] = fn(x[i % 4], v, v)
            else:
                out[i] = fn(x[i % 4], v)

    return qd.compile(k, 1, arch=qd.cpu).llvm_ir


@pytest.mark.parametrize("op, dtype", CASES, ids=[f"{o}-{t.name}" for o, t in CASES])
@test(arch=qd.cpu)
def test_cpu_lowering_matches_support_table(op, dtype):
    kind, _ = _core.atomic_lowering("cpu", op, dtype.core, False, [])
    ir = _kernel_ir(op, dtype)
    if op == "cas":
        assert kind == "native"
        assert re.search(r"cmpxchg ptr .* monotonic monotonic", ir) and not CAS_RETRY.search(ir)
    elif kind == "native":
        assert re.search(rf"atomicrmw {_rmw_name(op, dtype)} ptr .* monotonic", ir), ir
        assert "cmpxchg" not in ir
    else:
        assert kind == "cas"
        assert CAS_RETRY.search(ir) and re.search(r"cmpxchg ptr .* monotonic monotonic", ir)
        assert "atomicrmw" not in ir


def test_cpu_column_is_the_spec():
    """The CPU column of the spec: int ops and f32/f64 add/sub/exchange native; mul, f16, float min/max CAS."""
    for op, t in CASES:
        kind, _ = _core.atomic_lowering("cpu", op, t.core, False, [])
        native = (op != "mul" and not t.is_real) or (t in (qd.f32, qd.f64) and op in ("add", "sub", "exchange"))
        assert kind == ("native" if native else "cas"), (op, t)


@test(arch=qd.cpu)
def test_volatile_load_ir_and_errors():
    x = qd.field(qd.i32, shape=4)

    @qd.kernel
    def k() -> qd.i32:
        return qd.volatile_load(x[1])

    art = qd.compile(k, arch=qd.cpu)
    assert "global load volatile" in art.ir
    assert re.search(r"load volatile i32, ptr", art.llvm_ir)
    x[1] = 42
    assert k() == 42

    @qd.kernel
    def local_target():
        a = 1
        qd.volatile_load(a)

    @qd.kernel
    def local_array():
        v = qd.Vector([1, 2])
        qd.volatile_load(v)

    @qd.kernel
    def const_target():
        qd.volatile_load(3)

    @qd.kernel
    def whole_field():
        qd.volatile_load(x)

    for kern in (local_target, local_array):
        with pytest.raises(qd.QuadrantsTypeError, match="local variable or local array cannot be observed"):
            kern()
    with pytest.raises(qd.QuadrantsSyntaxError, match="needs a global lvalue .* got a constant"):
        const_target()
    with pytest.raises(qd.QuadrantsSyntaxError, match="cannot take a Field directly"):
        whole_field()


@test(arch=qd.cpu, cpu_max_num_threads=2)
def test_volatile_load_spin_wait_terminates():
    """Iteration 0 spins on a flag that iteration 1, on another thread, publishes with an atomic."""
    flag = qd.field(qd.i32, shape=())
    data = qd.field(qd.i32, shape=())
    seen = qd.field(qd.i32, shape=())

    @qd.kernel
    def k():
        qd.loop_config(block_dim=1)  # one iteration per chunk: the two iterations run on two threads
        for i in range(2):
            if i == 0:
                while qd.volatile_load(flag[None]) == 0:
                    pass
                seen[None] = qd.volatile_load(data[None])
            else:
                qd.atomic_exchange(data[None], 7)
                qd.atomic_exchange(flag[None], 1)

    ir = qd.compile(k, arch=qd.cpu).llvm_ir
    assert ir.count("load volatile") >= 2  # the loop re-reads memory on every iteration
    k()
    assert seen[None] == 7


@test(arch=qd.cpu)
def test_unique_address_atomics_demoted():
    x = qd.field(qd.i32, shape=1000)
    olds = qd.field(qd.i32, shape=1000)
    shared = qd.field(qd.i32, shape=())

    @qd.kernel
    def unique():
        for i in range(1000):
            olds[i] = qd.atomic_add(x[i], i)   # only iteration i touches x[i]: demoted

    @qd.kernel
    def not_unique():
        for i in range(999):
            qd.atomic_add(x[i], 1)
            qd.atomic_add(x[i + 1], 1)         # x[i + 1] is also x[j] of another iteration: stays atomic
            qd.atomic_add(shared[None], 1)

    ir = qd.compile(unique, arch=qd.cpu).ir
    assert "atomic" not in ir
    x.fill(5)
    unique()
    np.testing.assert_array_equal(olds.to_numpy(), np.full(1000, 5))
    np.testing.assert_array_equal(x.to_numpy(), 5 + np.arange(1000))
    ir = qd.compile(not_unique, arch=qd.cpu).ir  # x: a private copy per thread; shared: a per-thread sum
    assert "private copy of" in ir and ir.count("global atomic add") == 2
    x.fill(0)
    not_unique()
    assert x[0] == 1 and x[999] == 1 and (x.to_numpy()[1:999] == 2).all() and shared[None] == 999


@test(arch=qd.cpu)
def test_atomic_ops_declared_once():
    """The Python wrappers come from the core's table: names, arity and docstrings."""
    rows = _core.atomic_ops()
    assert [r["name"] for r in rows] == OPS + ["inc", "dec"]
    for r in rows:
        fn = getattr(qd, f"atomic_{r['name']}")
        assert r["effect"] in fn.__doc__ and "returns the old value" in fn.__doc__


def test_docs_atomics_in_step_with_support_table():
    result = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "gen_atomics_doc.py"), "--check"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
