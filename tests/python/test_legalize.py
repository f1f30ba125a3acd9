"""One semantics on every backend (issue 8): Python's // and % on floats, rounding, IEEE special
values, and the driver workarounds, checked on every available arch against CPython / numpy."""
import math
import re

import numpy as np
import pytest

import quadrants as qd
from test_utils import current_arch, test

SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.1, -0.1, 1.5, -2.5, 3.0, 7.25, -9.22e18, 46340.95, 1e300, -1e-300,
           5e-324, math.inf, -math.inf, math.nan]


def _py_mod(a, b):
    try:
        return a % b
    except ZeroDivisionError:
        return math.nan


def _py_floordiv(a, b):
    try:
        return a // b
    except ZeroDivisionError:
        return a / b if a != 0 and not math.isnan(a) else math.nan


def _same(got, want):
    if math.isnan(want):
        return math.isnan(got)
    return got == want and math.copysign(1, got) == math.copysign(1, want)


@test()
def test_f64_mod_exact_for_large_quotients():
    """f64 % with quotients from 2^24 to 2^600 (each reduction step's quotient is above 2^24):
    CPython's value bit for bit. lavapipe's f64 Trunc left such quotients unrounded on some hosts
    (AMD EPYC, Mesa 22.3.6), so the steps use floor (docs/backends.md, "lavapipe")."""
    if current_arch() is qd.vulkan and not qd.vulkan_caps().get("shader_float64"):
        pytest.skip("no f64 on this device")
    rng = np.random.default_rng(24)
    n = 4000
    b = (rng.random(n) + 0.5) * 10.0 ** rng.integers(-300, 20, n) * np.where(rng.random(n) < 0.5, -1, 1)
    a = b * (rng.random(n) + 1) * 2.0 ** rng.integers(24, 600, n) * np.where(rng.random(n) < 0.5, -1, 1)
    a, b = a[np.isfinite(a)], b[np.isfinite(a)]
    out = np.zeros_like(a)

    @qd.kernel
    def k(a: qd.types.ndarray(dtype=qd.f64, ndim=1), b: qd.types.ndarray(dtype=qd.f64, ndim=1),
          out: qd.types.ndarray(dtype=qd.f64, ndim=1)):
        for i in range(a.shape[0]):
            out[i] = a[i] % b[i]

    k(a, b, out)
    bad = [f"{x!r} % {y!r}: got {g!r}, Python {x % y!r}" for x, y, g in zip(a.tolist(), b.tolist(), out.tolist())
           if not _same(g, x % y)]
    assert not bad, "\n".join(bad[:10])


@test()
def test_f64_floor_ceil_round_exact_above_2_to_24():
    """f64 floor / ceil / round / // of non-integers from 2^24 to 2^53 and of the edges (-0.0,
    +-inf, NaN, 2^52 +- 0.5): numpy's values bit for bit. lavapipe rounds f64 through a float ->
    int -> float round trip with a threshold right for f32 only on some host CPUs (its Trunc on Zen 4,
    its Floor seen wrong on Zen 3), so SPIR-V computes them from adds (docs/backends.md)."""
    if current_arch() is qd.vulkan and not qd.vulkan_caps().get("shader_float64"):
        pytest.skip("no f64 on this device")
    rng = np.random.default_rng(53)
    mag = 2.0 ** rng.integers(24, 53, 2000) * (1 + rng.random(2000))
    a = np.concatenate([mag * np.where(rng.random(2000) < 0.5, -1, 1) + rng.choice([0.5, 0.25, 0.75], 2000),
                        [0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 0.49999999999999994, 2.0**52 - 0.5, -(2.0**52) + 0.5,
                         2.0**52, 2.0**53 + 2, math.inf, -math.inf, math.nan, 5e-324, -5e-324]])
    out = np.zeros((len(a), 4))

    @qd.kernel
    def k(a: qd.types.ndarray(dtype=qd.f64, ndim=1), o: qd.types.ndarray(dtype=qd.f64, ndim=2)):
        for i in range(a.shape[0]):
            o[i, 0] = qd.floor(a[i])
            o[i, 1] = qd.ceil(a[i])
            o[i, 2] = qd.round(a[i])
            o[i, 3] = a[i] // 1.0

    k(a, out)
    want = np.stack([np.floor(a), np.ceil(a), np.round(a), np.floor_divide(a, 1.0)], 1)
    bad = [f"{x!r}: {name} got {g!r}, numpy {w!r}" for x, row, wrow in zip(a.tolist(), out.tolist(), want.tolist())
           for name, g, w in zip(("floor", "ceil", "round", "//"), row, wrow) if not _same(g, w)]
    assert not bad, "\n".join(bad[:10])


@test(arch=qd.cpu)
def test_spirv_f64_rounding_uses_no_driver_rounding():
    """On SPIR-V f64 floor / ceil / round, % and // are legalized into adds: the module has no
    GLSL.std.450 Floor / Ceil / Trunc / Round / RoundEven; f32 keeps the driver's (exact) Floor."""
    @qd.kernel
    def k(a: qd.types.ndarray(dtype=qd.f64, ndim=1), o: qd.types.ndarray(dtype=qd.f64, ndim=1)):
        for i in range(a.shape[0]):
            o[i] = qd.floor(a[i]) + qd.ceil(a[i]) + qd.round(a[i]) + a[i] % 3.5 + a[i] // 0.1

    @qd.kernel
    def k32(a: qd.types.ndarray(dtype=qd.f32, ndim=1), o: qd.types.ndarray(dtype=qd.f32, ndim=1)):
        for i in range(a.shape[0]):
            o[i] = qd.floor(a[i])

    z = np.zeros(4)
    ext = set(re.findall(r"OpExtInst %\w+ %\w+ (\w+)", qd.compile(k, z, z, arch=qd.vulkan).spirv_asm))
    assert not ext & {"Floor", "Ceil", "Trunc", "Round", "RoundEven"}, ext
    z32 = np.zeros(4, np.float32)
    assert "Floor" in re.findall(r"OpExtInst %\w+ %\w+ (\w+)", qd.compile(k32, z32, z32, arch=qd.vulkan).spirv_asm)


@pytest.mark.parametrize("dtype", [qd.f32, qd.f64], ids=["f32", "f64"])
@test()
def test_float_mod_and_floordiv_follow_python(dtype):
    """a % b takes the divisor's sign and is exact (fmod, not a - b * trunc(a / b)); a // b is
    (a - a % b) / b rounded, so 1.0 // 0.1 == 9.0 and q * b + r == a."""
    if dtype == qd.f64 and current_arch() is qd.vulkan and not qd.vulkan_caps().get("shader_float64"):
        pytest.skip("no f64 on this device")
    np_t = dtype.np.type
    pairs = [(a, b) for a in SPECIAL for b in SPECIAL if b != 0]
    if dtype == qd.f32:  # values as the f32 kernel sees them
        pairs = [(float(np_t(a)), float(np_t(b))) for a, b in pairs]
        pairs = [(a, b) for a, b in pairs if b != 0]
    a = np.array([p[0] for p in pairs], np_t)
    b = np.array([p[1] for p in pairs], np_t)
    mod = np.zeros_like(a)
    fdiv = np.zeros_like(a)

    @qd.kernel
    def k(a: qd.types.ndarray(dtype=dtype, ndim=1), b: qd.types.ndarray(dtype=dtype, ndim=1),
          mod: qd.types.ndarray(dtype=dtype, ndim=1), fdiv: qd.types.ndarray(dtype=dtype, ndim=1)):
        for i in range(a.shape[0]):
            mod[i] = a[i] % b[i]
            fdiv[i] = a[i] // b[i]

    k(a, b, mod, fdiv)
    for i, (x, y) in enumerate(zip(a.tolist(), b.tolist())):
        want_mod, want_div = _py_mod(x, y), _py_floordiv(x, y)
        if dtype == qd.f32:  # Python computes in f64: the exact remainder is representable in f32
            want_mod, want_div = float(np_t(want_mod)), float(np_t(want_div))
            if abs(want_div) >= 2**24:  # the f64 quotient rounded to f32 may differ by the rounding
                continue
        assert _same(float(mod[i]), want_mod), f"{x!r} % {y!r}: got {mod[i]!r}, Python {want_mod!r}"
        assert _same(float(fdiv[i]), want_div), f"{x!r} // {y!r}: got {fdiv[i]!r}, Python {want_div!r}"


@test()
def test_float_mod_large_quotients_are_exact():
    """f32 remainders with quotients up to 2^100 are exact (numpy's fmod-based %)."""
    rng = np.random.default_rng(3)
    a = (rng.standard_normal(2000) * 10.0 ** rng.integers(-5, 30, 2000)).astype(np.float32)
    b = (rng.standard_normal(2000) * 10.0 ** rng.integers(-5, 5, 2000)).astype(np.float32)
    out = np.zeros_like(a)

    @qd.kernel
    def k(a: qd.types.ndarray(dtype=qd.f32, ndim=1), b: qd.types.ndarray(dtype=qd.f32, ndim=1),
          o: qd.types.ndarray(dtype=qd.f32, ndim=1)):
        for i in range(a.shape[0]):
            o[i] = a[i] % b[i]

    k(a, b, out)
    np.testing.assert_array_equal(out, np.mod(a, b))


@test()
def test_round_half_to_even_f64():
    if current_arch() is qd.vulkan and not qd.vulkan_caps().get("shader_float64"):
        pytest.skip("no f64 on this device")
    x = np.array([1.5, 2.5, -2.5, -0.4, 0.5, 16777216.5, 999999999.7, -458483537.49, 1e300, -math.inf],
                 np.float64)
    out = np.zeros_like(x)

    @qd.kernel
    def k(x: qd.types.ndarray(dtype=qd.f64, ndim=1), o: qd.types.ndarray(dtype=qd.f64, ndim=1)):
        for i in range(x.shape[0]):
            o[i] = qd.round(x[i])

    k(x, out)
    np.testing.assert_array_equal(out, np.rint(x))
    assert math.copysign(1, out[3]) == -1  # round(-0.4) is -0.0


@test()
def test_ieee_special_values_and_no_reassociation():
    """inf - inf and inf * 0 are NaN, 1 / (x * -0.0) is -inf, (x - 100) + 100 rounds through x - 100."""
    x = np.array([np.inf, 8.762141, -3.0], np.float32)
    o = np.zeros((3, 5), np.float32)

    @qd.kernel
    def k(x: qd.types.ndarray(dtype=qd.f32, ndim=1), o: qd.types.ndarray(dtype=qd.f32, ndim=2)):
        for i in range(x.shape[0]):
            o[i, 0] = x[i] - x[i]
            o[i, 1] = x[i] * 0.0
            o[i, 2] = 1.0 / (x[i] * -0.0)
            o[i, 3] = (x[i] - 100.0) + 100.0
            o[i, 4] = 0.0 * x[i]

    k(x, o)
    with np.errstate(all="ignore"):
        want = np.stack([x - x, x * np.float32(0), np.float32(1) / (x * np.float32(-0.0)),
                         (x - np.float32(100)) + np.float32(100), np.float32(0) * x], axis=1)
    np.testing.assert_array_equal(o, want)
    assert (np.signbit(o[:, 1]) == np.signbit(want[:, 1])).all()


@test(arch=qd.vulkan)
def test_fast_math_lets_the_driver_reassociate():
    """fast_math=True drops the IEEE decorations (lavapipe then folds (x - 100) + 100 to x)."""
    @qd.kernel
    def k(x: qd.types.ndarray(dtype=qd.f32, ndim=1), o: qd.types.ndarray(dtype=qd.f32, ndim=1)):
        for i in range(x.shape[0]):
            o[i] = (x[i] - 100.0) + 100.0

    x = np.array([8.762141], np.float32)
    asm = qd.compile(k, x, x).spirv_asm
    assert "SignedZeroInfNanPreserve 32" in asm and "NoContraction" in asm
    qd.init(arch=qd.vulkan, fast_math=True)
    asm = qd.compile(k, x, x).spirv_asm
    assert "SignedZeroInfNanPreserve" not in asm and "NoContraction" not in asm


@test(arch=qd.vulkan)
def test_fast_math_keeps_legalized_arithmetic_exact():
    """fast_math=True frees the user's arithmetic, not legalization's: the exact steps of float %
    and the f64 math library keep NoContraction (Stmt::exact) and their results."""
    qd.init(arch=qd.vulkan, fast_math=True)

    @qd.kernel
    def k(x: qd.types.ndarray(dtype=qd.f64, ndim=1), y: qd.types.ndarray(dtype=qd.f64, ndim=1),
          o: qd.types.ndarray(dtype=qd.f64, ndim=2)):
        for i in range(x.shape[0]):
            o[i, 0] = x[i] % y[i]
            o[i, 1] = qd.log(x[i])
            o[i, 2] = x[i] * y[i] + 1.0  # the user's own: free to contract

    x = np.array([1.0, 9.22e18, 3.5, 1e-300, 7.25], np.float64)
    y = np.array([0.1, 46340.95, -2.0, 3.0, 0.3], np.float64)
    o = np.zeros((5, 3), np.float64)
    asm = qd.compile(k, x, y, o).spirv_asm
    assert "SignedZeroInfNanPreserve" not in asm and "NoContraction" in asm
    k(x, y, o)
    assert [float(v) for v in o[:, 0]] == [a % b for a, b in zip(x, y)]
    np.testing.assert_array_max_ulp(o[:, 1], np.log(x), maxulp=2)


@test(arch=qd.cpu)
def test_fast_math_on_the_llvm_targets():
    """fast_math=True puts LLVM's fast-math flags (reassoc, contract, arcp, afn, nsz; not nnan /
    ninf) on the user's float arithmetic for cpu, cuda and amdgpu, and none without it; inf and NaN
    keep their meaning (x != x finds NaN), and a serial sum is still a sum."""
    @qd.kernel
    def k(x: qd.types.ndarray(dtype=qd.f32, ndim=1), o: qd.types.ndarray(dtype=qd.f32, ndim=1)):
        for i in range(x.shape[0]):
            acc = 0.0
            for j in range(x.shape[0]):
                acc += x[j] / (x[i] * qd.sqrt(x[i]))
            o[i] = acc if x[i] == x[i] else -1.0

    x = np.array([1.0, 4.0, np.nan, 2.25], np.float32)
    o = np.zeros_like(x)
    flags = re.compile(r"= fdiv ((?:\w+ )*)<?\d* ?x? ?float")
    for arch in ("cpu", "cuda", "amdgpu"):
        found = flags.findall(qd.compile(k, x, o, arch=arch).llvm_ir)
        assert found and all(f == "" for f in found), (arch, found)
    qd.init(arch=qd.cpu, fast_math=True)
    for arch in ("cpu", "cuda", "amdgpu"):
        found = flags.findall(qd.compile(k, x, o, arch=arch).llvm_ir)
        assert found and all(set(f.split()) == {"reassoc", "nsz", "arcp", "contract", "afn"} for f in found), (arch, found)
    x = np.array([1.0, 4.0, 9.0, 2.25], np.float32)
    k(x, o)
    np.testing.assert_allclose(o, x.sum() / (x * np.sqrt(x)), rtol=1e-6)
    x[2] = np.nan
    k(x, o)
    assert o[2] == -1.0 and np.isnan(o[[0, 1, 3]]).all()


@test()
def test_i64_compare_of_widened_i32():
    """lavapipe miscompiles comparisons of an OpSConvert'ed i32: the SPIR-V widens by hand."""
    a = np.array([-10, 0, 5, 6, 100], np.int32)
    o = np.zeros((5, 4), np.int32)

    @qd.kernel
    def k(a: qd.types.ndarray(dtype=qd.i32, ndim=1), o: qd.types.ndarray(dtype=qd.i32, ndim=2)):
        for i in range(a.shape[0]):
            o[i, 0] = qd.cast(a[i], qd.i64) > 5
            o[i, 1] = a[i] > qd.i64(5)
            o[i, 2] = qd.cast(i, qd.i64) > 1
            o[i, 3] = qd.cast(a[i], qd.i64) * 4000000000 < 0

    k(a, o)
    np.testing.assert_array_equal(o, np.stack([a > 5, a > 5, np.arange(5) > 1, a < 0], axis=1).astype(np.int32))


@test()
def test_empty_kernels():
    @qd.kernel
    def nothing():
        pass

    @qd.kernel
    def reads_only(arr: qd.types.ndarray()):
        pass

    @qd.kernel
    def empty_loop(arr: qd.types.ndarray(dtype=qd.i32, ndim=1)) -> qd.i32:
        for i in range(arr.shape[0]):
            arr[i] = 7
        return 5

    assert nothing() is None
    assert reads_only(np.empty(0, np.int32)) is None
    assert reads_only(np.empty((5, 0), np.int32)) is None
    assert empty_loop(np.empty(0, np.int32)) == 5  # a zero-length parallel loop, then serial code
    assert "task" not in qd.compile(nothing).ir  # no code at all, and still a valid module


@test()
def test_integer_semantics_after_legalization():
    """Python // and % on ints, division by zero (no trap), shifts by >= the width, negative powers."""
    a = np.array([7, -7, 7, -7, -2**31, 5, 0], np.int32)
    b = np.array([2, 2, -2, -2, -1, 0, 3], np.int32)
    o = np.zeros((7, 5), np.int32)

    @qd.kernel
    def k(a: qd.types.ndarray(dtype=qd.i32, ndim=1), b: qd.types.ndarray(dtype=qd.i32, ndim=1),
          o: qd.types.ndarray(dtype=qd.i32, ndim=2)):
        for i in range(a.shape[0]):
            if b[i] != 0 and not (a[i] == -2147483648 and b[i] == -1):
                o[i, 0] = a[i] // b[i]
                o[i, 1] = a[i] % b[i]
            o[i, 2] = a[i] << (b[i] + 31)
            o[i, 3] = a[i] >> (b[i] + 31)
            o[i, 4] = b[i] ** -1

    k(a, b, o)
    for i, (x, y) in enumerate(zip(a.tolist(), b.tolist())):
        if y != 0 and not (x == -2**31 and y == -1):
            assert (o[i, 0], o[i, 1]) == (x // y, x % y)
        s = y + 31
        shl = ((x << s) & 0xFFFFFFFF ^ 0x80000000) - 0x80000000 if 0 <= s < 32 else 0
        assert o[i, 2] == shl
        assert o[i, 3] == (x >> s if 0 <= s < 32 else (-1 if x < 0 else 0))
        assert o[i, 4] == {1: 1, -1: -1}.get(y, 0)


@test(arch=qd.vulkan)
def test_vulkan_loop_limit_is_never_silent():
    """lavapipe stops every loop after 65535 iterations per invocation: the parallel loop's grid is
    sized so that it never gets there; a serial loop that would is a clear error at launch."""
    limit = qd.vulkan_caps()["max_loop_iterations"]
    if not limit:
        pytest.skip("this Vulkan device has no loop limit")
    out = qd.field(qd.i32, shape=2)
    hit = qd.field(qd.i32, shape=())

    @qd.kernel
    def inner(n: qd.i32):
        for j in range(2):
            s = 0
            for i in range(n):
                s += 1
            out[j] = s

    @qd.kernel
    def nested(n: qd.i32):
        for j in range(2):
            s = 0
            for a in range(n):
                for b in range(n):
                    s += 1
            out[j] = s

    @qd.kernel
    def par(n: qd.i32):
        qd.loop_config(block_dim=1)
        for i in range(n):
            if i == n - 1:
                hit[None] = 1

    inner(limit)
    assert (out.to_numpy() == limit).all()
    with pytest.raises(RuntimeError, match=r"(?s)for i in range\(n\).*would run 100000 iterations in one invocation"):
        inner(100000)
    nested(200)
    assert (out.to_numpy() == 40000).all()
    with pytest.raises(RuntimeError, match="would run 90000 iterations"):
        nested(300)
    par(70_000_000)  # block_dim=1: the grid grows so that no invocation takes more than the limit
    assert hit[None] == 1


@pytest.mark.parametrize("arch", ["cuda", "amdgpu"])
def test_gpu_grid_stride_loop_is_overflow_safe(arch):
    """A range ending near 2^31: the grid-stride step must not wrap past INT_MAX (an index that
    wrapped would be negative, below the end again, and rerun the range). The emitted loop stops
    when the distance left, end - i, is not above the stride (an unsigned compare)."""
    qd.init(arch=qd.cpu)
    x = qd.field(qd.i32, shape=16)

    @qd.kernel
    def k():
        for i in range(2**31 - 16, 2**31 - 1):
            x[i - (2**31 - 16)] = 1

    ir = qd.compile(k, arch=getattr(qd, arch)).llvm_ir
    body = ir[ir.index("for.body:"):]
    body = body[:body.index("\n\n")]
    assert "sub i32" in body and "icmp ugt i32" in body, body
    qd.reset()


@test()
def test_f16_atan2():
    """f16 atan2 goes through f32 on the cpu (libm has no half version; it got half arguments)."""
    @qd.kernel
    def k(o: qd.types.ndarray(dtype=qd.f16, ndim=1)):
        for _ in range(1):
            o[0] = qd.atan2(qd.f16(5.960464477539063e-08), qd.f16(-0.75))
            o[1] = qd.atan2(qd.f16(-0.024932861328125), qd.f16(0.0))

    o = np.zeros(2, np.float16)
    k(o)
    np.testing.assert_allclose(o.astype(np.float64), [math.atan2(5.96e-8, -0.75), -math.pi / 2], rtol=2e-3)


@test()
def test_float_floordiv_of_infinity_is_nan():
    """Python: inf // x is NaN for a finite x (its remainder is NaN), as in CPython."""
    a = np.array([np.inf, -np.inf, np.inf], np.float32)
    b = np.array([3.0, -1.0, -2.5], np.float32)
    o = np.zeros_like(a)

    @qd.kernel
    def k(a: qd.types.ndarray(dtype=qd.f32, ndim=1), b: qd.types.ndarray(dtype=qd.f32, ndim=1),
          o: qd.types.ndarray(dtype=qd.f32, ndim=1)):
        for i in range(a.shape[0]):
            o[i] = a[i] // b[i]

    k(a, b, o)
    assert np.isnan(o).all()


_ZERO_OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b, "/": lambda a, b: a / b}


def _zero_operand_kernel(dtype_name):
    """A kernel computing x op z and z op x for op in + - * /, for zeros the driver sees as
    literals (0.0, -0.0) or can fold to one (a local variable, a cast or bit_cast of an integer
    literal, 1.0 - 1.0, floor(0.5), a value computed by a short loop, i & 0, min(u, 0), a shift
    past the width)."""
    zeros = ["0.0", "-0.0", "z", f"qd.cast(0, qd.{dtype_name})", f"qd.{dtype_name}(1.0) - qd.{dtype_name}(1.0)",
             f"qd.floor(qd.{dtype_name}(0.5))", "w", "-w",
             # integer algebra on the kernel's data that the driver folds to 0 (found by the fuzzer)
             f"qd.cast(i & 0, qd.{dtype_name})", f"qd.cast(qd.min(qd.cast(i, qd.u8), qd.u8(0)), qd.{dtype_name})",
             f"qd.cast(qd.cast(i, qd.u16) << 64, qd.{dtype_name})", f"qd.cast(i - i, qd.{dtype_name})"]
    if dtype_name == "f64":
        zeros.append("qd.bit_cast(qd.u64(0), qd.f64)")
    exprs = [(op, z, left) for op in _ZERO_OPS for z in zeros for left in (False, True)]
    body = "".join(f"        o[i, {c}] = {f'({z}) {op} x[i]' if left else f'x[i] {op} ({z})'}\n"
                   for c, (op, z, left) in enumerate(exprs))
    src = (f"def k(x: qd.types.ndarray(dtype=qd.{dtype_name}, ndim=1), o: qd.types.ndarray(dtype=qd.{dtype_name}, ndim=2)):\n"
           f"    for i in range(x.shape[0]):\n        z = qd.{dtype_name}(0.0)\n        w = qd.{dtype_name}(1.0)\n"
           f"        for _j in range(3):\n            w = w * 0.0\n" + body)
    import linecache
    name = f"<zero_operands_{dtype_name}>"
    linecache.cache[name] = (len(src), None, src.splitlines(True), name)
    g = {"qd": qd}
    exec(compile(src, name, "exec"), g)
    return qd.kernel(g["k"]), exprs


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64], ids=["f16", "f32", "f64"])
@test()
def test_float_ops_with_a_zero_operand_follow_ieee(dtype):
    """x + 0.0 is +0.0 for x = -0.0, 0.0 - x is +0.0 for x = 0.0, x * 0.0 is NaN for inf, x / 0.0 is
    +-inf (NaN for 0 and NaN), 0.0 / x is NaN for 0: whether the zero is a literal or a value the
    driver folds (locals, casts of literals, loops, integer algebra on the kernel's data). llvmpipe
    simplifies such operations without IEEE (x / 0.0 lost the store):
    legalization rewrites them there (Target::has_exact_float_zero_operands)."""
    name = np.dtype(dtype).name.replace("float", "f")
    if current_arch() is qd.vulkan and dtype is not np.float32 and not qd.vulkan_caps().get(
            "shader_float64" if dtype is np.float64 else "shader_float16"):
        pytest.skip(f"no {name} on this Vulkan device")
    k, exprs = _zero_operand_kernel(name)
    x = np.array([-0.0, 0.0, 1.5, -1.5, np.inf, -np.inf, np.nan, 1e-45 if dtype is np.float32 else 2.0], dtype)
    o = np.full((len(x), len(exprs)), 7, dtype)
    k(x, o)
    bad = []
    with np.errstate(all="ignore"):
        for c, (op, z, left) in enumerate(exprs):
            zv = dtype(-0.0) if z in ("-0.0", "-w") else dtype(0.0)
            want = np.array([_ZERO_OPS[op](*((zv, v) if left else (v, zv))) for v in x], dtype)
            same = (o[:, c] == want) & (np.signbit(o[:, c]) == np.signbit(want)) | np.isnan(o[:, c]) & np.isnan(want)
            bad += [f"{f'({z}) {op} x' if left else f'x {op} ({z})'} for x={x[i]}: {o[i, c]}, expected {want[i]}"
                    for i in np.flatnonzero(~same)]
    assert not bad, "\n".join(bad)


def test_zero_operand_rewrite_only_where_the_device_needs_it():
    """The zero-operand rewrite is scoped to devices with the quirk (Vulkan DeviceCaps
    folds_float_zero_operands: llvmpipe); elsewhere x / 0.0 stays one OpFDiv."""
    qd.init(arch=qd.cpu)

    @qd.kernel
    def k(x: qd.types.ndarray(dtype=qd.f32, ndim=1)):
        for i in range(x.shape[0]):
            x[i] = x[i] / 0.0

    x = np.zeros(2, np.float32)
    plain = qd.compile(k, x, arch=qd.vulkan, features=[]).spirv_asm
    quirk = qd.compile(k, x, arch=qd.vulkan, features=["folds_float_zero_operands"]).spirv_asm
    import re
    by_zero = re.compile(r"OpFDiv %float %\w+ %float_0\b")
    assert by_zero.search(plain) and not by_zero.search(quirk), quirk
    assert "OpFDiv" not in plain.split("OpFDiv", 1)[1]  # one division, nothing else
    qd.reset()


def test_zero_operand_sums_read_signs_from_bits():
    """A sum into a variable that starts at zero (`s = 0.0; s += x[i]`, what every adjoint and
    privatized accumulator is) takes the zero-operand rewrite on llvmpipe; the signs it needs there
    are read from the bits (an integer compare), not by a division (1 / x < 0) per add."""
    qd.init(arch=qd.cpu)

    @qd.kernel
    def k(x: qd.types.ndarray(dtype=qd.f32, ndim=1), out: qd.types.ndarray(dtype=qd.f32, ndim=1)):
        for i in range(x.shape[0]):
            s = 0.0
            for j in range(3):
                s += x[(i + j) % x.shape[0]]
            out[i] = s

    x = np.zeros(4, np.float32)
    quirk = qd.compile(k, x, x, arch=qd.vulkan, features=["folds_float_zero_operands"]).spirv_asm
    assert "OpSelect" in quirk and "OpFDiv" not in quirk, quirk
    qd.reset()


@test()
def test_int_float_int_round_trip_rounds():
    """An integer converted to a float that cannot hold it rounds: cast(cast(i64, f32), i64) and
    floor(u64) are the rounded values, i32 -> f16 -> i32 too (lavapipe folded these round trips to
    the identity unless the integer width has SignedZeroInfNanPreserve as well)."""
    big = 6872367892842752727

    @qd.kernel
    def k(b: qd.types.ndarray(dtype=qd.i64, ndim=1), i: qd.types.ndarray(dtype=qd.i64, ndim=1),
          u: qd.types.ndarray(dtype=qd.u64, ndim=1), h: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        for _ in range(1):
            i[0] = qd.cast(qd.cast(b[0], qd.f32), qd.i64)
            i[1] = qd.cast(qd.cast(qd.i64(big), qd.f32), qd.i64)
            i[2] = qd.cast(qd.floor(qd.cast(b[0], qd.f32)), qd.i64)
            u[0] = qd.floor(qd.u64(big))
            h[0] = qd.cast(qd.cast(h[1], qd.f16), qd.i32)

    b = np.array([big], np.int64)
    i, u, h = np.zeros(3, np.int64), np.zeros(1, np.uint64), np.array([0, 2049], np.int32)
    k(b, i, u, h)
    rounded = int(np.float32(big))
    assert i.tolist() == [rounded] * 3 and u.tolist() == [rounded] and h.tolist() == [2048, 2049]


def test_signed_zero_inf_nan_preserve_covers_integer_widths():
    """Each entry point gets SignedZeroInfNanPreserve for the integer widths too (Mesa takes a
    conversion's mode from its source width): an i64 -> f32 conversion declares the 64-bit mode."""
    qd.init(arch=qd.cpu)

    @qd.kernel
    def k(b: qd.types.ndarray(dtype=qd.i64, ndim=1), f: qd.types.ndarray(dtype=qd.f32, ndim=1)):
        for i in range(b.shape[0]):
            f[i] = qd.cast(b[i], qd.f32)

    b, f = np.zeros(1, np.int64), np.zeros(1, np.float32)
    feats = [f"signed_zero_inf_nan_preserve_float{w}" for w in (16, 32, 64)]
    asm = qd.compile(k, b, f, arch=qd.vulkan, features=feats).spirv_asm
    assert "SignedZeroInfNanPreserve 32" in asm and "SignedZeroInfNanPreserve 64" in asm, asm
    assert "SignedZeroInfNanPreserve 16" not in asm  # no 16-bit type in the module
    qd.reset()


@test()
def test_abs_of_negative_zero_is_positive_zero():
    """abs(-0.0) is +0.0, for a constant too (lavapipe's optimiser took a constant -0.0 for "not
    negative" and kept its sign: abs of an operand the driver may fold clears the sign bit there)."""
    dtypes = [qd.f32] + ([qd.f16, qd.f64] if current_arch() is not qd.vulkan or (
        qd.vulkan_caps().get("shader_float16") and qd.vulkan_caps().get("shader_float64")) else [])
    outs = {t: np.full(3, 7, {qd.f16: np.float16, qd.f32: np.float32, qd.f64: np.float64}[t]) for t in dtypes}

    for t, o in outs.items():
        @qd.kernel
        def k(o: qd.types.ndarray(ndim=1), x: qd.template()):
            for i in range(1):
                o[0] = qd.abs(qd.cast(-0.0, x))
                o[1] = qd.abs(-o[2])
                o[2] = abs(qd.cast(i, x) * -0.0)

        o[2] = 0.0
        k(o, t)
        assert o.tolist() == [0.0, 0.0, 0.0] and not np.signbit(o).any(), (t, o)


CONVERSION_ENDS = [  # (from, to, values whose integer part fits: each converts to it exactly)
    (qd.f32, qd.i32, [-2147483648.0, 2147483520.0, -0.9, 0.9, -1.5]),
    (qd.f64, qd.i32, [-2147483648.9, 2147483647.9, -7.25]),
    (qd.f32, qd.u8, [-0.9, 255.9, 0.0, 128.5]),
    (qd.f64, qd.u32, [4294967295.5, -0.5, 1e9]),
    (qd.f32, qd.i16, [-32768.9, 32767.9]),
    (qd.f64, qd.i64, [-9.223372036854775808e18, 9.223372036854774784e18]),
    (qd.f64, qd.u64, [1.8446744073709550e19, 0.75]),
]


@pytest.mark.parametrize("src,dst,values", CONVERSION_ENDS)
@test(arch=[qd.cpu, qd.vulkan])
def test_float_to_int_at_the_ends_of_the_range(src, dst, values):
    """In-range conversions (the integer part fits, up to the range's ends) truncate, on every arch
    (Vulkan's conversions take a guarded input, since SPIR-V leaves out-of-range ones undefined)."""
    np_src = np.float32 if src == qd.f32 else np.float64
    np_dst = {qd.i32: np.int32, qd.u8: np.uint8, qd.u32: np.uint32, qd.i16: np.int16, qd.i64: np.int64,
              qd.u64: np.uint64}[dst]

    @qd.kernel
    def conv(x: qd.types.ndarray(dtype=src, ndim=1), out: qd.types.ndarray(dtype=dst, ndim=1)):
        for i in range(x.shape[0]):
            out[i] = qd.cast(x[i], dst)

    x = np.array(values, dtype=np_src)
    out = np.zeros(len(values), dtype=np_dst)
    conv(x, out)
    assert out.tolist() == [int(np.trunc(v)) for v in x.tolist()]


NAN = float("nan")


@test(arch=[qd.cpu, qd.vulkan])
def test_a_branch_on_an_unfit_conversion_is_consistent():
    """A float that does not fit its integer type converts to an unspecified but single value
    (docs/language.md): branching on it runs one side or the other, and a loop of zero trips stays
    empty (lavapipe ran this zero-trip loop's body when the conversion was undefined)."""

    @qd.kernel
    def k(a: qd.types.ndarray(dtype=qd.i32, ndim=1), big: qd.types.ndarray(dtype=qd.i64, ndim=1),
          f: qd.types.ndarray(dtype=qd.f32, ndim=1)):
        for _ in range(1):
            for j in range(qd.i32(0)):
                if qd.f32(-7.1e17) < qd.f32(5.2e30) > f[0]:
                    if qd.i64(13) >= qd.i64(0) <= qd.cast(big[0] - qd.f64(NAN), qd.i64):
                        continue
                    qd.atomic_or(a[0], 1)
            taken = qd.cast(f[1] * qd.f32(NAN), qd.i32) > 0
            a[1] = 1 if taken else 2
            a[2] = 2 if not taken else 1

    a = np.array([8, 0, 0], np.int32)
    k(a, np.array([1249380776488297360], np.int64), np.array([1e10, 1.0], np.float32))
    assert a[0] == 8 and a[1] in (1, 2) and a[1] == a[2]
