"""Performance rewrites (issue 15): each is applied (read from the printed IR / emitted LLVM IR)
and gives exactly the results of the unrewritten atomics."""
import re

import numpy as np
import pytest

import quadrants as qd
from test_atomics import OP_DTYPES, supported
from test_utils import current_arch, test

REDUCIBLE = [(op, t) for op, t in OP_DTYPES if op != "exchange"]


def _values(op, dtype, n, rng):
    """Operands whose combination is exact in any order (floats: small integers, sums below 2^11
    for f16), with NaNs among float min/max operands."""
    if op == "mul":
        v = rng.choice([1, -1] if dtype.is_signed or dtype.is_real else [1, 3], n).astype(dtype.np)
        v[rng.choice(n, 5, replace=False)] = 2
        return v
    if dtype.is_real:
        v = rng.integers(0, 2 if dtype is qd.f16 else 64, n).astype(dtype.np)
        if op in ("min", "max"):
            v[rng.choice(n, n // 7, replace=False)] = np.nan
        return v
    info = np.iinfo(dtype.np)
    return rng.integers(max(info.min, -2**40), min(info.max, 2**40), n, dtype=dtype.np, endpoint=True)


@pytest.mark.parametrize("op, dtype", REDUCIBLE, ids=[f"{o}-{t.name}" for o, t in REDUCIBLE])
@test()
def test_vectorised_reduction_equals_atomics(op, dtype):
    """`fn(total[None], v[i])` (privatized; on the cpu a vectorised loop with several
    accumulators) leaves exactly what the same atomics leave when their old values are used (not
    rewritten), NaN operands included."""
    if not supported(op, dtype):
        pytest.skip(f"{op} on {dtype} is not available on {current_arch()}")
    n = 3001
    vals = _values(op, dtype, n, np.random.default_rng(3))
    fn = getattr(qd, f"atomic_{op}")
    total = qd.field(dtype, shape=2)
    olds = qd.field(dtype, shape=n)

    @qd.kernel
    def rewritten(v: qd.types.ndarray(dtype=dtype, ndim=1)):
        for i in range(v.shape[0]):
            fn(total[0], v[i])

    @qd.kernel
    def plain(v: qd.types.ndarray(dtype=dtype, ndim=1)):
        for i in range(v.shape[0]):
            olds[i] = fn(total[1], v[i])

    inits = [{"mul": 1, "min": 100, "max": -100 if dtype.is_signed or dtype.is_real else 0}.get(op, 5)]
    if dtype.is_real and op in ("min", "max"):
        inits.append(np.nan)
    for init in inits:
        total.fill(init)
        rewritten(vals)
        plain(vals)
        a, b = total.to_numpy()
        assert a == b or (np.isnan(a) and np.isnan(b)), (init, a, b)
    if current_arch() == qd.cpu:
        art = qd.compile(rewritten, vals)
        loop = art.ir.split("for range")[1].split("each thread, after")[0]
        assert "global atomic" not in loop and " reassoc " in loop
        assert re.search(r"vector\.reduce\.\w+\.v\d+", art.llvm_ir), "the privatized loop is not vectorised"
        if dtype.is_real:
            assert "reassoc" in art.llvm_ir


@test(arch=qd.cpu)
def test_float_max_all_nan_chunks():
    """A thread whose operands are all NaN flushes NaN (the identity), not its -inf start."""
    x = qd.field(qd.f32, shape=2)

    @qd.kernel
    def k(v: qd.types.ndarray(dtype=qd.f32, ndim=1)):
        for i in range(v.shape[0]):
            qd.atomic_max(x[0], v[i])
            qd.atomic_min(x[1], v[i])

    v = np.full(100000, np.nan, np.float32)
    x.fill(np.nan)
    k(v)
    assert np.isnan(x.to_numpy()).all()
    v[-1] = -np.inf
    k(v)
    assert (x.to_numpy() == -np.inf).all()


SCATTER = [("add", qd.i32), ("add", qd.u64), ("sub", qd.i64), ("add", qd.f32), ("add", qd.f64), ("max", qd.i32),
           ("min", qd.f32), ("xor", qd.u32), ("or", qd.i64), ("mul", qd.i32)]


@pytest.mark.parametrize("op, dtype", SCATTER, ids=[f"{o}-{t.name}" for o, t in SCATTER])
@test()
def test_partitioned_scatter_equals_atomics(op, dtype):
    """`fn(y[p[i]], v[i])` into a large field, old value unused (the cpu partitions the field over
    its threads and applies plain read-modify-writes) leaves exactly what the same atomics leave
    when their old values are used (not rewritten); repeated and out-of-order indices included."""
    if not supported(op, dtype):
        pytest.skip(f"{op} on {dtype} is not available on {current_arch()}")
    m, n = 70001, 150000
    rng = np.random.default_rng(5)
    idx = rng.integers(0, m, n).astype(np.int32)
    vals = _values(op, dtype, n, rng)
    fn = getattr(qd, f"atomic_{op}")
    y = qd.field(dtype, shape=(m, 2))
    olds = qd.field(dtype, shape=n)

    @qd.kernel
    def rewritten(p: qd.types.ndarray(dtype=qd.i32, ndim=1), v: qd.types.ndarray(dtype=dtype, ndim=1)):
        for i in range(p.shape[0]):
            j = p[i]
            if v[i] != 7:  # (control flow in the body is replayed by every part)
                fn(y[j, 0], v[i])

    @qd.kernel
    def plain(p: qd.types.ndarray(dtype=qd.i32, ndim=1), v: qd.types.ndarray(dtype=dtype, ndim=1)):
        for i in range(p.shape[0]):
            j = p[i]
            if v[i] != 7:
                olds[i] = fn(y[j, 1], v[i])

    init = rng.integers(1, 3, (m, 2)).astype(dtype.np)
    init[:, 1] = init[:, 0]
    y.from_numpy(init)
    rewritten(idx, vals)
    plain(idx, vals)
    out = y.to_numpy()
    np.testing.assert_array_equal(out[:, 0], out[:, 1])  # NaN equals NaN here
    if current_arch() == qd.cpu:
        ir = qd.compile(rewritten, idx, vals).ir
        import os
        if 2 <= os.cpu_count() <= 8:
            assert "serial:" in ir and "global atomic" not in ir, ir


@test(arch=qd.cpu)
def test_scatter_not_partitioned():
    """Loops with other effects, reads of the target, used old values or small targets keep their
    atomics."""
    big = qd.field(qd.f32, shape=100000)
    small = qd.field(qd.f32, shape=1000)
    other = qd.field(qd.f32, shape=100000)

    @qd.kernel
    def store_too(p: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        for i in range(p.shape[0]):
            qd.atomic_add(big[p[i]], 1.0)
            other[i] = 1.0

    @qd.kernel
    def reads(p: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        for i in range(p.shape[0]):
            qd.atomic_add(big[p[i]], big[i])

    @qd.kernel
    def small_target(p: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        for i in range(p.shape[0]):
            qd.atomic_add(small[p[i] % 1000], 1.0)

    p = np.zeros(10, np.int32)
    for k in (store_too, reads, small_target):
        assert "global atomic add" in qd.compile(k, p).ir, k.__name__


@test(arch=qd.vulkan)
def test_vulkan_launches_are_asynchronous_and_ordered():
    """Launches queue up until a host read or qd.sync(); each sees the writes of those before it,
    scalar arguments included (a kernel's argument buffer is rewritten only once its previous
    launch is done), and host writes between launches are ordered too."""
    n = 4096
    x = qd.field(qd.i32, shape=n)

    @qd.kernel
    def bump(k: qd.i32):
        for i in range(n):
            x[i] = x[i] * 3 + k

    ref = np.zeros(n, np.int64)
    for k in range(40):
        bump(k)
        ref = (ref * 3 + k) % 2**32
        if k == 20:
            x[5] = 11  # a host write between launches
            ref[5] = 11
    qd.sync()
    np.testing.assert_array_equal(x.to_numpy().astype(np.int64) % 2**32, ref)
    y = qd.field(qd.f32, shape=n)  # a new field after queued launches, freed while others are queued
    bump(1)
    del y
    assert x[0] == (ref[0] * 3 + 1) % 2**32 - (2**32 if (ref[0] * 3 + 1) % 2**32 >= 2**31 else 0)
