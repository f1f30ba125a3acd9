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
