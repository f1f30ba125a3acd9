"""Constant folding (csrc/transforms/fold.cpp, issue 26): pure math on constants is computed at
compile time, with the value the unfolded code computes at run time. Each table below runs a
kernel computing op(c1, c2) on constants (folded) against the same kernel reading c1, c2 from
arrays (computed at run time) and compares the bits; the folded kernel's IR must hold no operation
any more. On the cpu every value agrees bit for bit. On Vulkan the arithmetic, comparisons, casts
and bit operations do too (a NaN is compared as a NaN: drivers give NaNs their own bits), while
sin ... pow come from the driver at run time and from the C library when folded: they agree within
the driver's error (docs/performance.md). These tables go through the front end with a few values
per type; tests/cpp/test_fold.cpp runs every type and operation over more edge values."""
import math
import re

import numpy as np
import pytest

import quadrants as qd
from test_utils import current_arch, test

INF, NAN = math.inf, math.nan


# ---- the operations, one statement each ---------------------------------------------------------

@qd.func
def add(x, y):
    return x + y


@qd.func
def sub(x, y):
    return x - y


@qd.func
def mul(x, y):
    return x * y


@qd.func
def truediv(x, y):
    return x / y


@qd.func
def floordiv(x, y):
    return x // y


@qd.func
def mod(x, y):
    return x % y


@qd.func
def pow_(x, y):
    return x ** y


@qd.func
def min_(x, y):
    return qd.min(x, y)


@qd.func
def max_(x, y):
    return qd.max(x, y)


@qd.func
def atan2(x, y):
    return qd.atan2(x, y)


@qd.func
def eq(x, y):
    return x == y


@qd.func
def ne(x, y):
    return x != y


@qd.func
def lt(x, y):
    return x < y


@qd.func
def le(x, y):
    return x <= y


@qd.func
def gt(x, y):
    return x > y


@qd.func
def ge(x, y):
    return x >= y


@qd.func
def bit_and(x, y):
    return x & y


@qd.func
def bit_or(x, y):
    return x | y


@qd.func
def bit_xor(x, y):
    return x ^ y


@qd.func
def shl(x, y):
    return x << y


@qd.func
def shr(x, y):
    return x >> y


@qd.func
def neg(x, y):
    return -x


@qd.func
def abs_(x, y):
    return abs(x)


@qd.func
def bit_not(x, y):
    return ~x


@qd.func
def sqrt(x, y):
    return qd.sqrt(x)


@qd.func
def sin(x, y):
    return qd.sin(x)


@qd.func
def cos(x, y):
    return qd.cos(x)


@qd.func
def tan(x, y):
    return qd.tan(x)


@qd.func
def exp(x, y):
    return qd.exp(x)


@qd.func
def log(x, y):
    return qd.log(x)


@qd.func
def tanh(x, y):
    return qd.tanh(x)


@qd.func
def asin(x, y):
    return qd.asin(x)


@qd.func
def acos(x, y):
    return qd.acos(x)


@qd.func
def atan(x, y):
    return qd.atan(x)


@qd.func
def floor(x, y):
    return qd.floor(x)


@qd.func
def ceil(x, y):
    return qd.ceil(x)


@qd.func
def round_(x, y):
    return qd.round(x)


@qd.func
def popcnt(x, y):
    return qd.math.popcnt(x)


@qd.func
def clz(x, y):
    return qd.math.clz(x)


@qd.func
def select(x, y):
    return qd.select(x, x, y)


FLOAT_BINARY = [add, sub, mul, truediv, floordiv, mod, pow_, min_, max_, atan2, eq, ne, lt, le, gt, ge]
FLOAT_UNARY = [neg, abs_, sqrt, sin, cos, tan, exp, log, tanh, asin, acos, atan, floor, ceil, round_]
INT_BINARY = [add, sub, mul, floordiv, mod, pow_, min_, max_, bit_and, bit_or, bit_xor, shl, shr, eq, ne, lt, le, gt,
              ge, select]
INT_UNARY = [neg, abs_, bit_not, popcnt, clz]
# Computed by the driver at run time, by the C library when folded.
LIBRARY = {"sin", "cos", "tan", "exp", "log", "tanh", "asin", "acos", "atan", "atan2", "pow_"}

FLOATS = [0.0, -0.0, 1.0, -2.5, 0.1, 1e30, -INF, NAN]


def _ints(dtype):
    """0, 1, 3, -1, the width (shifts by it give 0 or the sign), one less, MIN and MAX."""
    info = np.iinfo(_NP[dtype])
    vals = [0, 1, 3, info.bits - 1, info.bits, info.max, info.min] + ([-1] if info.min < 0 else [info.max - 1])
    return sorted(set(vals))


_NP = {qd.i8: np.int8, qd.i16: np.int16, qd.i32: np.int32, qd.i64: np.int64, qd.u8: np.uint8, qd.u16: np.uint16,
       qd.u32: np.uint32, qd.u64: np.uint64, qd.f32: np.float32, qd.f64: np.float64}
_BITS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _pairs(values, unary):
    if unary:
        return [(a, values[0]) for a in values]
    return [(a, c) for a in values for c in values]


def _run_table(ops, dtype, pairs, out_dtype=None):
    """[op][j]: op(c1_j, c2_j) folded (constants) and at run time (arrays): the two results, and the
    folded kernels' IR. The folded kernels unroll at most ~150 statements each: LLVM's time on one
    long run of constant stores grows faster than its length."""
    out_dtype = out_dtype or dtype
    n = len(pairs)
    per_kernel = max(1, 150 // n)
    got, want, irs = [], [], []
    np_t = _NP[dtype]
    with np.errstate(all="ignore"):
        a = np.array([np_t(v) for v, _ in pairs], dtype=np_t)
        c = np.array([np_t(v) for _, v in pairs], dtype=np_t)
    for first in range(0, len(ops), per_kernel):
        g, w, ir = _run_ops(ops[first:first + per_kernel], dtype, pairs, out_dtype, a, c)
        got.append(g)
        want.append(w)
        irs.append(ir)
    return np.concatenate(got), np.concatenate(want), "\n".join(irs), a, c


def _run_ops(ops, dtype, pairs, out_dtype, a, c):
    A = [x for x, _ in pairs]
    C = [y for _, y in pairs]
    n = len(pairs)

    @qd.kernel
    def folded(out: qd.types.ndarray(out_dtype, 2)):
        for k in qd.static(range(len(ops))):
            for j in qd.static(range(n)):
                out[k, j] = ops[k](qd.cast(A[j], dtype), qd.cast(C[j], dtype))

    @qd.kernel
    def run_time(a: qd.types.ndarray(dtype, 1), c: qd.types.ndarray(dtype, 1), out: qd.types.ndarray(out_dtype, 2)):
        for j in range(n):
            for k in qd.static(range(len(ops))):
                out[k, j] = ops[k](a[j], c[j])

    want = np.zeros((len(ops), n), _NP[out_dtype])
    got = np.zeros_like(want)
    folded(got)
    run_time(a, c, want)
    (entry,) = [e for bucket in folded.cache.values() for e in bucket]
    return got, want, entry.compiled.artifacts["ir"]


def _left_ops(ir):
    """The operations (not constants, pointers or stores) left in printed IR."""
    return [m.group(1) for m in re.finditer(r"= (\w+) \$", ir) if m.group(1) not in ("global",)]


def _ordinary(op, a, c):
    """Arguments where the driver's sin ... pow are defined and accurate (Vulkan's precision
    table): finite and moderate, a positive base for pow, not two zeros for atan2. Elsewhere a
    driver gives what it likes (lavapipe: pow(NaN, 1) is 0, atan2(0, 0) is 3pi/4, and the core's
    f64 math library reduces huge arguments of sin inexactly); folding gives C's value there."""
    if not (np.isfinite(a) and np.isfinite(c) and abs(a) <= 100 and abs(c) <= 100):
        return False
    if op == "pow_":
        return a > 0
    if op == "atan2":
        return a != 0 or c != 0
    return True


def _check(ops, dtype, pairs, out_dtype=None):
    got, want, ir, a, c = _run_table(ops, dtype, pairs, out_dtype)
    assert not _left_ops(ir), f"not folded: {sorted(set(_left_ops(ir)))}"
    out_t = _NP[out_dtype or dtype]
    is_float = np.issubdtype(out_t, np.floating)
    bits = _BITS[np.dtype(out_t).itemsize]
    # Vulkan's precision for sin ... (lavapipe's f32 asin / acos are ~3500 ulp off); the core's f64
    # math library (3-4 ulp).
    tolerance = 1e-3 if out_t == np.float32 else 1e-13
    bad = []
    for k, op in enumerate(ops):
        for j in range(len(pairs)):
            g, w = got[k, j], want[k, j]
            if g.view(bits) == w.view(bits):
                continue
            if current_arch() is not qd.cpu and is_float:
                if np.isnan(g) and np.isnan(w):
                    continue  # the driver's NaN bits
                if op.__name__ in LIBRARY:
                    if not _ordinary(op.__name__, a[j], c[j]) or np.isclose(g, w, rtol=tolerance, atol=tolerance):
                        continue
            bad.append(f"{op.__name__}({a[j]!r}, {c[j]!r}): folded {g!r} ({g.view(bits):#x}), "
                       f"run time {w!r} ({w.view(bits):#x})")
    assert not bad, f"{len(bad)} differ:\n" + "\n".join(bad[:40])


def _f64_ok():
    return current_arch() is not qd.vulkan or qd.vulkan_caps().get("shader_float64")


# ---- the tables ---------------------------------------------------------------------------------

def _float_pairs(ops):
    pairs = _pairs(FLOATS, False)
    if min_ in ops or max_ in ops:  # +-0.0 and two NaNs: the run time picks (test_left_alone)
        pairs = [(a, c) for a, c in pairs
                 if not (a == 0 and c == 0 and math.copysign(1, a) != math.copysign(1, c))
                 and not (math.isnan(a) and math.isnan(c))]
    return pairs


@test(arch=[qd.cpu, qd.vulkan])
@pytest.mark.parametrize("dtype", [qd.f32, qd.f64], ids=["f32", "f64"])
def test_float_binary_ops_fold_to_the_run_time_value(dtype):
    if dtype is qd.f64 and not _f64_ok():
        pytest.skip("no f64 on this device")
    arith = [op for op in FLOAT_BINARY if op not in (min_, max_)]
    _check(arith, dtype, _float_pairs(arith))
    _check([min_, max_], dtype, _float_pairs([min_]))


@test(arch=[qd.cpu, qd.vulkan])
@pytest.mark.parametrize("dtype", [qd.f32, qd.f64], ids=["f32", "f64"])
def test_float_unary_ops_fold_to_the_run_time_value(dtype):
    if dtype is qd.f64 and not _f64_ok():
        pytest.skip("no f64 on this device")
    values = FLOATS + [INF, -1.0, 0.5, -0.75, 2.5, -3.5, 7.25, 88.0, 16777217.0, -3e38]
    _check(FLOAT_UNARY, dtype, _pairs(values, True))


@test(arch=[qd.cpu, qd.vulkan])
@pytest.mark.parametrize("dtype", [qd.i8, qd.u32, qd.i64], ids=["i8", "u32", "i64"])
def test_int_ops_fold_to_the_run_time_value(dtype):
    """Wrap-around, Python's // and % (INT_MIN // -1, division by zero as legalization defines
    it), ** with negative exponents, shifts by the width and more. Every integer type, with more
    values, in tests/cpp/test_fold.cpp."""
    values = _ints(dtype)
    _check(INT_BINARY, dtype, _pairs(values, False))
    _check(INT_UNARY, dtype, _pairs(values, True))


# ---- the kernel of issue 26 ---------------------------------------------------------------------

@qd.kernel
def scale_shift(x: qd.types.ndarray(qd.f32, 1), y: qd.types.ndarray(qd.f32, 1)):
    for i in range(x.shape[0]):
        y[i] = x[i] * qd.tanh(1.2) + qd.exp(1.2)


@qd.kernel
def scale_shift_f64(x: qd.types.ndarray(qd.f64, 1), y: qd.types.ndarray(qd.f64, 1)):
    for i in range(x.shape[0]):
        y[i] = x[i] * qd.tanh(qd.f64(1.2)) + qd.exp(qd.f64(1.2))


@qd.kernel
def scale_shift_run_time(x: qd.types.ndarray(qd.f32, 1), c: qd.types.ndarray(qd.f32, 1),
                         y: qd.types.ndarray(qd.f32, 1)):
    for i in range(x.shape[0]):
        y[i] = x[i] * qd.tanh(c[0]) + qd.exp(c[0])


def _no_math(text, names):
    return [n for n in names if n in text]


@test(arch=qd.cpu)
def test_no_tanh_or_exp_left_in_any_backend_code():
    """The printed IR, the LLVM IR, the SPIR-V and the PTX hold no tanh / exp call or expansion."""
    x = np.zeros(8, np.float32)
    a = qd.compile(scale_shift, x, x)
    assert not _no_math(a.ir, ["tanh", "exp"]), a.ir
    assert not _no_math(a.llvm_ir, ["tanhf", "expf", "llvm.exp"]), a.llvm_ir
    spirv = qd.compile(scale_shift, x, x, arch="vulkan").spirv_asm
    assert not _no_math(spirv, ["Tanh", " Exp "]), spirv
    # f64 on CUDA: no math library expansion (dozens of statements per call before)
    x64 = np.zeros(8)
    cuda = qd.compile(scale_shift_f64, x64, x64, arch="cuda")
    assert not _no_math(cuda.ir, ["tanh", "exp"]) and cuda.ir.count("\n") < 40, cuda.ir
    spirv64 = qd.compile(scale_shift_f64, x64, x64, arch="vulkan")
    assert spirv64.ir.count("\n") < 40, spirv64.ir


@test(arch=qd.cpu, constant_folding=False)
def test_constant_folding_false_keeps_the_math():
    x = np.zeros(8, np.float32)
    assert "tanh" in qd.compile(scale_shift, x, x).ir
    assert "tanh" in qd.compile(scale_shift, x, x, arch="vulkan").ir


@test(arch=[qd.cpu, qd.vulkan])
def test_folded_kernel_equals_the_run_time_one():
    x = np.linspace(-3, 3, 1000, dtype=np.float32)
    y, want = np.zeros_like(x), np.zeros_like(x)
    scale_shift(x, y)
    scale_shift_run_time(x, np.array([1.2], np.float32), want)
    if current_arch() is qd.cpu:
        assert (y.view(np.uint32) == want.view(np.uint32)).all()
    else:  # the driver's tanh / exp at run time
        np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)


@qd.kernel
def left_alone(out: qd.types.ndarray(qd.f32, 1)):
    out[0] = qd.cast(qd.cast(3e9, qd.f32), qd.i32)  # out of range: x86 gives INT_MIN, PTX saturates
    out[1] = qd.min(qd.f32(0.0), qd.f32(-0.0))  # either zero may come back
    out[2] = qd.max(qd.f32(NAN), qd.f32(NAN))


@test(arch=qd.cpu)
def test_what_the_run_time_decides_is_left_alone():
    ir = qd.compile(left_alone, np.zeros(3, np.float32)).ir
    assert "cast" in ir and "min" in ir and "max" in ir, ir


def test_benchmark_runs_and_agrees():
    """benchmarks/constant_folding.py at a small size: both modes compute the same y (it checks)."""
    import importlib.util
    import os
    import sys

    benchmarks = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks")
    spec = importlib.util.spec_from_file_location("constant_folding_bench", os.path.join(benchmarks, "constant_folding.py"))
    bench = importlib.util.module_from_spec(spec)
    sys.path.insert(0, benchmarks)  # its `from timing import best_of`
    try:
        spec.loader.exec_module(bench)
    finally:
        sys.path.remove(benchmarks)
    try:
        times = bench.main(["--arch", "cpu", "--log2n", "12", "--repeat", "1"])
    finally:
        qd.reset()
    assert set(times) == {"folded_ms", "unfolded_ms", "numpy_ms"}
