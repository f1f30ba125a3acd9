"""The SPIR-V backends: lowering of every (op, dtype) read from the SPIR-V disassembly (no device
needed), MSL for Metal, and the Vulkan runtime on a real device (lavapipe here): masked
capabilities, device selection, grids, slots."""
import math
import re

import numpy as np
import pytest

import quadrants as qd
from quadrants import _core
from test_utils import test

INTS = [qd.i32, qd.u32, qd.i64, qd.u64]
FLOATS = [qd.f16, qd.f32, qd.f64]
OPS = ["add", "sub", "mul", "min", "max", "and", "or", "xor", "exchange", "cas"]
CASES = [(op, t) for op in OPS for t in INTS + FLOATS if not (op in ("and", "or", "xor", "cas") and t.is_real)]
CASE_IDS = [f"{o}-{t.name}" for o, t in CASES]

# Vulkan capability sets: none at all, lavapipe's, the docs' desktop GPU, and everything.
FEATURE_SETS = {
    "none": [],
    "lavapipe": ["float32_atomic_add_buffer", "float32_atomic_minmax_buffer", "int64_atomics_buffer"],
    "desktop": list(_core.default_features("vulkan")),
    "all": ["float16_atomic_add_buffer", "float32_atomic_add_buffer", "float64_atomic_add_buffer",
            "int64_atomics_buffer"],
}
# The single SPIR-V instruction of each native op.
NATIVE_INT = {"add": "OpAtomicIAdd", "sub": "OpAtomicISub", "and": "OpAtomicAnd", "or": "OpAtomicOr",
              "xor": "OpAtomicXor", "exchange": "OpAtomicExchange", "cas": "OpAtomicCompareExchange"}
RMW_OPCODES = ["OpAtomicIAdd", "OpAtomicISub", "OpAtomicSMin", "OpAtomicUMin", "OpAtomicSMax", "OpAtomicUMax",
               "OpAtomicAnd", "OpAtomicOr", "OpAtomicXor", "OpAtomicExchange", "OpAtomicFAddEXT",
               "OpAtomicFMinEXT", "OpAtomicFMaxEXT"]
# Metal: the MSL function SPIRV-Cross writes for each native op.
MSL_NATIVE = {"add": "atomic_fetch_add_explicit", "sub": "atomic_fetch_sub_explicit",
              "min": "atomic_fetch_min_explicit", "max": "atomic_fetch_max_explicit",
              "and": "atomic_fetch_and_explicit", "or": "atomic_fetch_or_explicit",
              "xor": "atomic_fetch_xor_explicit", "exchange": "atomic_exchange_explicit",
              "cas": "atomic_compare_exchange_weak_explicit"}


def _native_opcode(op, t):
    if t.is_real:
        if op in ("min", "max"):  # with the device's float min/max capability (lavapipe's)
            return f"OpAtomicF{op.capitalize()}EXT"
        return "OpAtomicExchange" if op == "exchange" else "OpAtomicFAddEXT"
    if op in ("min", "max"):
        return f"OpAtomic{'S' if t.is_signed else 'U'}{op.capitalize()}"
    return NATIVE_INT[op]


def _one_atomic_kernel(op, t):
    """A kernel with one atomic and no loop of its own: a loop in its code is the CAS loop."""
    x = qd.field(t, shape=4)
    out = qd.field(t, shape=1)
    fn = getattr(qd, f"atomic_{op}")

    @qd.kernel
    def k(v: t):
        if qd.static(op == "cas"):
            out[0] = fn(x[1], v, v)
        else:
            out[0] = fn(x[1], v)

    return k


def _atomic_lines(asm):
    return [line for line in asm.splitlines() if re.search(r"\bOpAtomic", line)]


def _assert_device_scope(asm):
    """Every atomic's Scope operand is Device (the spec's scope table)."""
    for line in _atomic_lines(asm):
        tokens = line.split()
        i = next(i for i, tok in enumerate(tokens) if tok.startswith("OpAtomic"))
        assert tokens[i + 3] == "%uint_1", line  # result type, pointer, then Scope = Device (1)


@pytest.mark.parametrize("features", list(FEATURE_SETS), ids=list(FEATURE_SETS))
@pytest.mark.parametrize("op, dtype", CASES, ids=CASE_IDS)
@test(arch=qd.cpu)
def test_vulkan_spirv_lowering_follows_support_table(op, dtype, features):
    feats = FEATURE_SETS[features]
    kind, reason = _core.atomic_lowering("vulkan", op, dtype.core, False, feats)
    k = _one_atomic_kernel(op, dtype)
    if kind == "rejected":
        with pytest.raises(qd.QuadrantsTypeError, match=re.escape(reason.split(": ")[-1][:40])):
            qd.compile(k, 1, arch=qd.vulkan, features=feats)
        return
    asm = qd.compile(k, 1, arch=qd.vulkan, features=feats).spirv_asm
    _assert_device_scope(asm)
    if kind == "native":
        native = _native_opcode(op, dtype)
        assert native in asm and "OpLoopMerge" not in asm, asm
        others = [o for o in RMW_OPCODES + ["OpAtomicCompareExchange"] if o != native and o in asm]
        assert not others, others
        if dtype.is_real and op == "exchange":  # through the integer of the same width
            width = {qd.f32: "uint", qd.f64: "ulong"}[dtype]
            assert re.search(rf"OpAtomicExchange %{width} ", asm), asm
    else:
        assert "OpAtomicCompareExchange" in asm and "OpLoopMerge" in asm, asm
        assert not [o for o in RMW_OPCODES if o in asm], asm
        if dtype.is_real and op in ("min", "max"):  # minNum / maxNum payload
            assert f"N{op.capitalize()}" in asm, asm


def test_vulkan_and_metal_columns_are_the_spec():
    """The SPIR-V column of the spec and footnotes [1]-[3], 3, with and without capabilities."""
    for features in FEATURE_SETS.values():
        f = set(features)
        for op, t in CASES:
            kind, _ = _core.atomic_lowering("vulkan", op, t.core, False, features)
            int64 = "int64_atomics_buffer" in f
            if t in (qd.i32, qd.u32):
                want = "cas" if op == "mul" else "native"
            elif t in (qd.i64, qd.u64):
                want = ("cas" if op == "mul" else "native") if int64 else "rejected"
            elif t is qd.f16:  # no 16-bit atomics: a CAS loop on the 32-bit word holding the element
                want = "native" if op in ("add", "sub") and "float16_atomic_add_buffer" in f else "word_cas"
            elif op in ("add", "sub") and f"{t.name}_atomic_add_buffer".replace("f", "float", 1) in f:
                want = "native"
            elif op in ("min", "max") and f"{t.name}_atomic_minmax_buffer".replace("f", "float", 1) in f:
                want = "native"  # VK_EXT_shader_atomic_float2, which keeps minNum / maxNum (lavapipe)
            elif t is qd.f64 and not int64:
                want = "rejected"
            else:
                want = "native" if op == "exchange" else "rejected" if op == "cas" else "cas"
            assert kind == want, (features, op, t)
    for op, t in CASES:
        kind, reason = _core.atomic_lowering("metal", op, t.core, False, [])
        if t in (qd.i64, qd.u64):
            assert kind == "rejected" and "not portable to Metal" in reason
        elif t in (qd.f16, qd.f64) or op == "cas" and t.is_real:
            assert kind == "rejected"
        elif t.is_real:
            assert kind == ("native" if op == "exchange" else "cas"), (op, t)
        else:
            assert kind == ("cas" if op == "mul" else "native"), (op, t)


@pytest.mark.parametrize("op, dtype", CASES, ids=CASE_IDS)
@test(arch=qd.cpu)
def test_metal_msl_atomics(op, dtype):
    kind, reason = _core.atomic_lowering("metal", op, dtype.core, False, [])
    k = _one_atomic_kernel(op, dtype)
    if kind == "rejected":
        with pytest.raises(qd.QuadrantsTypeError) as e:
            qd.compile(k, 1, arch=qd.metal)
        assert reason in str(e.value)
        if dtype in (qd.i64, qd.u64):
            assert "not portable to Metal" in str(e.value) and "use i32/u32" in str(e.value)
        return
    art = qd.compile(k, 1, arch=qd.metal)
    assert "OpAtomicFAddEXT" not in art.spirv_asm  # Debian's SPIRV-Cross writes invalid MSL for it
    _assert_device_scope(art.spirv_asm)
    msl = art.msl
    assert "kernel void" in msl
    if kind == "native":
        assert MSL_NATIVE[op] in msl, msl
        if dtype.is_real:  # exchange through the bits
            assert "(device atomic_uint*)" in msl and "as_type<uint>" in msl, msl
    else:
        assert "atomic_compare_exchange_weak_explicit" in msl and "for (;;)" in msl, msl
        assert not [f for o, f in MSL_NATIVE.items() if o not in ("cas", "exchange") and f in msl], msl


@test(arch=qd.cpu)
def test_metal_rejects_f64_and_keeps_bindings():
    x = qd.field(qd.f64, shape=4)
    y = qd.field(qd.f32, shape=4)

    @qd.kernel
    def k64():
        x[0] = 1.0

    @qd.kernel
    def k32(a: qd.f32) -> qd.f32:
        y[1] = a
        return y[0]

    with pytest.raises(qd.QuadrantsTypeError, match="Metal has no 64-bit floats"):
        qd.compile(k64, arch=qd.metal)
    msl = qd.compile(k32, 1.0, arch=qd.metal).msl
    # Binding i of the SPIR-V is [[buffer(i)]]: field, result, then the argument slots.
    assert re.search(r"device \w+& field\d+ \[\[buffer\(0\)\]\]", msl), msl
    assert re.search(r"device \w+& result \[\[buffer\(1\)\]\]", msl), msl
    assert re.search(r"device \w+& args \[\[buffer\(2\)\]\]", msl), msl


def test_metal_init_says_it_needs_macos():
    if qd.is_arch_available(qd.metal):
        pytest.skip("a Metal runtime is available")
    with pytest.raises(RuntimeError, match="metal needs macOS"):
        qd.init(arch=qd.metal, enable_fallback=False)
    qd.reset()


@test(arch=qd.cpu)
def test_qd_compile_spirv_artifacts():
    x = qd.field(qd.i32, shape=8)

    @qd.kernel
    def k() -> qd.i32:
        for i in range(8):
            x[i] = i
        return qd.volatile_load(x[3])

    for arch in (qd.vulkan, qd.metal):
        art = qd.compile(k, arch=arch)
        assert isinstance(art.spirv, bytes) and art.spirv[:4] == b"\x03\x02\x23\x07"  # the magic, little-endian
        assert "OpEntryPoint GLCompute" in art.spirv_asm and "LocalSize 128 1 1" in art.spirv_asm
        # volatile_load: OpLoad with the Volatile memory access.
        assert re.search(r"OpLoad %int %\w+ Volatile", art.spirv_asm), art.spirv_asm
        assert ("msl" in dir(art)) == (arch is qd.metal)


# ---- on a Vulkan device ----

def _vulkan_or_skip(**options):
    if not qd.is_arch_available(qd.vulkan):
        pytest.skip("vulkan is not available on this machine")
    qd.init(arch=qd.vulkan, **options)


def _float_add_kernel(dtype, n, bins):
    """n atomic adds of 0.5 over `bins` cells; returns (kernel, target, olds)."""
    target = qd.field(dtype, shape=bins)
    olds = qd.field(dtype, shape=n)

    @qd.kernel
    def k():
        for i in range(n):
            olds[i] = qd.atomic_add(target[i % bins], 0.5)

    return k, target, olds


@pytest.mark.parametrize("dtype", [qd.f32, qd.f64], ids=lambda t: t.name)
@pytest.mark.parametrize("masked", [False, True], ids=["native-if-device-has-it", "masked"])
def test_vulkan_float_add_native_and_cas_paths_run(dtype, masked):
    cap = f"float{dtype.bits}_atomic_add_buffer"
    _vulkan_or_skip(vulkan_disable_caps=[cap] if masked else [])
    try:
        if masked:
            assert qd.vulkan_caps()[cap] is False
        native = cap in qd._lib.runtime.program().runtime.features
        n, bins = 20000, 7
        k, target, olds = _float_add_kernel(dtype, n, bins)
        asm = qd.compile(k).spirv_asm
        assert ("OpAtomicFAddEXT" in asm) == native
        assert ("OpAtomicCompareExchange" in asm) == (not native)
        k()
        counts = np.bincount(np.arange(n) % bins, minlength=bins)
        np.testing.assert_array_equal(target.to_numpy(), counts * 0.5)
        # Every old value of a cell is a distinct step of the sum: no update was lost or doubled.
        o = olds.to_numpy()
        for b in range(bins):
            np.testing.assert_array_equal(np.sort(o[b::bins]), np.arange(counts[b]) * 0.5)
    finally:
        qd.reset()


def test_vulkan_caps_features_and_errors():
    _vulkan_or_skip()
    try:
        caps = qd.vulkan_caps()
        assert caps["device_name"] and caps["subgroup_size"] > 0 and caps["max_workgroup_count_x"] > 0
        features = set(qd._lib.runtime.program().runtime.features)
        assert features == {name for name, v in caps.items() if v is True} | \
            {f"max_shared_memory_bytes={caps['max_shared_memory_bytes']}",  # the shared-memory limit kernels are checked against
             f"subgroup_size={caps['subgroup_size']}"}  # the layout of batched compactions
    finally:
        qd.reset()
    with pytest.raises(RuntimeError, match="not a boolean device cap"):
        qd.init(arch=qd.vulkan, vulkan_disable_caps=["no_such_cap"])
    with pytest.raises(RuntimeError, match="matches no device"):
        qd.init(arch=qd.vulkan, device="no-such-gpu-anywhere")
    qd.init(arch=qd.cpu)
    with pytest.raises(RuntimeError, match="needs qd.init"):
        qd.vulkan_caps()
    qd.reset()


def test_vulkan_device_selection_and_missing_types():
    _vulkan_or_skip()
    name = qd.vulkan_caps()["device_name"]
    qd.init(arch=qd.vulkan, device=name.split()[0], vulkan_disable_caps=["shader_float64"])
    try:
        assert qd.vulkan_caps()["device_name"] == name and not qd.vulkan_caps()["shader_float64"]
        x = qd.field(qd.f64, shape=2)

        @qd.kernel
        def k():
            x[0] = 1.0

        with pytest.raises(qd.QuadrantsTypeError, match="shader_float64"):
            k()
    finally:
        qd.reset()


@test(arch=qd.vulkan)
def test_vulkan_block_dim_and_grid_stride():
    n = 100000
    x = qd.field(qd.i32, shape=n)
    m = qd.field(qd.i32, shape=())
    caps = qd.vulkan_caps()

    def make(block_dim):
        @qd.kernel
        def k():
            qd.loop_config(block_dim=block_dim)
            for i in range(n):
                x[i] = 3 * i

        return k

    for bd in (None, 1, 7, 256):
        k = make(bd) if bd else make(0)
        assert f"LocalSize {bd or 128} 1 1" in qd.compile(k).spirv_asm
        x.fill(-1)
        k()  # with block_dim 1 the grid (capped) is far smaller than n: the loop strides
        np.testing.assert_array_equal(x.to_numpy(), 3 * np.arange(n))

    too_big = make(caps["max_workgroup_invocations"] * 2)
    with pytest.raises(qd.QuadrantsTypeError, match="exceeds the largest workgroup"):
        too_big()

    @qd.kernel
    def from_memory():  # bounds read from memory: a device-filling grid covers them
        for i in range(m[None]):
            x[i] = -i

    m[None] = n - 5
    from_memory()
    got = x.to_numpy()
    np.testing.assert_array_equal(got[:n - 5], -np.arange(n - 5))
    np.testing.assert_array_equal(got[n - 5:], 3 * np.arange(n - 5, n))


@test()
def test_grid_stride_loop_ending_near_int32_max():
    """The last grid-stride steps of a range ending near 2**31 must not wrap past INT_MAX to a
    negative index (which is below the end again and would rerun the range)."""
    c = qd.field(qd.i32, shape=())

    @qd.kernel
    def k(b: qd.i32, n: qd.i32):
        for i in range(b, n):
            if i >= n - 10:
                qd.atomic_add(c[None], 1)

    for b in (0, 2**31 - 300):
        c[None] = 0
        k(b, 2**31 - 1000 if b == 0 else 2**31 - 1)
        assert c[None] == 10


@test()
def test_float_pow_and_mod_special_cases_follow_c_and_python():
    """GLSL leaves pow(0, y <= 0) undefined and lavapipe gives NaN for pow(1, inf); Vulkan's FRem
    is NaN for an infinite divisor. Results must be C's pow and Python's %."""
    inf, nan = math.inf, math.nan
    pows = [(0.0, -1.0), (-0.0, -1.0), (0.0, -2.0), (0.0, -0.5), (0.0, -inf), (-0.0, 3.0), (1.0, inf),
            (1.0, nan), (-1.0, inf), (-1.0, -inf), (-inf, 0.5), (-inf, 3.0), (-8.0, 3.0), (-2.0, 0.5)]
    mods = [(7.0, inf), (-7.0, inf), (7.0, -inf), (-7.0, -inf), (inf, inf), (7.5, -2.0)]

    def c_pow(x, y):  # C's pow, where math.pow raises
        if x == 0 and y < 0:
            return math.copysign(inf, x) if y % 2 == 1 else inf
        return nan if x < 0 and math.isfinite(x) and math.isfinite(y) and y != int(y) else math.pow(x, y)
    for t in (qd.f16, qd.f32, qd.f64):
        n = len(pows) + len(mods)
        a = qd.field(t, shape=n)
        b = qd.field(t, shape=n)
        r = qd.field(t, shape=n)

        @qd.kernel
        def k():
            for i in range(n):
                if i < len(pows):
                    r[i] = a[i] ** b[i]
                else:
                    r[i] = a[i] % b[i]

        a.from_numpy(np.array([x for x, _ in pows + mods], dtype=t.np))
        b.from_numpy(np.array([y for _, y in pows + mods], dtype=t.np))
        k()
        got = r.to_numpy()
        want = [c_pow(x, y) for x, y in pows] + [x % y if not math.isinf(x) else nan for x, y in mods]
        for i, w in enumerate(want):
            g = float(got[i])
            assert (math.isnan(g) and math.isnan(w)) or (g == w and math.copysign(1, g) == math.copysign(1, w)), \
                (t, (pows + mods)[i], g, w)


@test(arch=qd.vulkan)
def test_vulkan_slots_of_every_dtype():
    """Arguments in, kernel-scope variables across tasks, and return values out, per dtype."""
    dtypes = [qd.i8, qd.u8, qd.i16, qd.u16, qd.i32, qd.u32, qd.i64, qd.u64, qd.f16, qd.f32, qd.f64]
    for t in dtypes:
        x = qd.field(t, shape=4)

        @qd.kernel
        def k(a: t, b: qd.i32) -> (t, qd.i32):
            s = a  # a temps slot: set here, read by the parallel loop and after it
            for i in range(4):
                x[i] = s + i
            s = x[3]
            return s, b

        for a in ([-7, 100] if t.is_signed else [7, 100]):
            got, b = k(a, -5)
            want = t.np.type(a) + t.np.type(3)
            assert got == want and type(got) is type(want.item()) and b == -5, (t, a, got)
            np.testing.assert_array_equal(x.to_numpy(), np.array([a + i for i in range(4)], dtype=t.np))


@test()
def test_atomics_on_a_kernel_scope_variable_in_a_parallel_loop():
    """qd.atomic_* on a kernel-scope variable inside the parallel loop stays atomic (every
    iteration shares the variable)."""
    out = qd.field(qd.i32, shape=2)
    outf = qd.field(qd.f32, shape=())

    @qd.kernel
    def k(n: qd.i32):
        t = 0
        f = 0.0
        for j in range(n):
            qd.atomic_add(t, 1)
            qd.atomic_add(f, 0.5)
            qd.atomic_max(out[1], j)
        out[0] = t
        outf[None] = f

    k(100000)
    assert list(out.to_numpy()) == [100000, 99999] and outf[None] == 50000.0


@test()
def test_f64_math_within_a_few_ulp():
    """f64 transcendentals (on SPIR-V our own: GLSL.std.450 has none) against numpy, specials included."""
    rng = np.random.default_rng(1)
    n = 3000
    x = np.concatenate([rng.uniform(-20, 20, n), rng.uniform(-1, 1, n), 10.0 ** rng.uniform(-300, 300, n),
                        -(10.0 ** rng.uniform(-300, 300, n)),
                        [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-310, 709.7, 710.0, -745.0, 1.0, -1.0, 0.5, -2.0]])
    y = np.concatenate([rng.uniform(-5, 5, x.size - 4), [0.0, 3.0, -np.inf, 0.5]])
    names = ["sin", "cos", "tan", "exp", "log", "tanh", "atan", "asin", "acos", "atan2", "pow"]
    out = qd.field(qd.f64, shape=(len(names), x.size))

    @qd.kernel
    def k(a: qd.types.ndarray(dtype=qd.f64, ndim=1), b: qd.types.ndarray(dtype=qd.f64, ndim=1)):
        for i in range(a.shape[0]):
            v = a[i]
            out[0, i] = qd.sin(v)
            out[1, i] = qd.cos(v)
            out[2, i] = qd.tan(v)
            out[3, i] = qd.exp(v)
            out[4, i] = qd.log(v)
            out[5, i] = qd.tanh(v)
            out[6, i] = qd.atan(v)
            out[7, i] = qd.asin(v)
            out[8, i] = qd.acos(v)
            out[9, i] = qd.atan2(v, b[i])
            out[10, i] = qd.pow(v, b[i])

    k(x, y)
    got = out.to_numpy()
    with np.errstate(all="ignore"):
        refs = [np.sin(x), np.cos(x), np.tan(x), np.exp(x), np.log(x), np.tanh(x), np.arctan(x), np.arcsin(x),
                np.arccos(x), np.arctan2(x, y), np.power(x, y)]
    for name, g, r in zip(names, got, refs):
        keep = np.abs(x) < 1e6 if name in ("sin", "cos", "tan") else np.ones(x.size, bool)  # reduction limit
        g, r = g[keep], r[keep]
        same = (g == r) | (np.isnan(g) & np.isnan(r))
        assert np.all(same | np.isfinite(r)), (name, x[keep][~same & ~np.isfinite(r)])
        with np.errstate(invalid="ignore"):
            close = np.abs(g - r) <= 4 * np.spacing(np.abs(r))
        assert np.all(same | close), (name, x[keep][~(same | close)][:5], g[~(same | close)][:5])


F32_MATH = ["sin", "cos", "tan", "exp", "log", "tanh", "atan", "asin", "acos", "atan2", "pow"]


def _f32_math_kernel(out):
    @qd.kernel
    def k(a: qd.types.ndarray(dtype=qd.f32, ndim=1), b: qd.types.ndarray(dtype=qd.f32, ndim=1)):
        for i in range(a.shape[0]):
            v = a[i]
            out[0, i] = qd.sin(v)
            out[1, i] = qd.cos(v)
            out[2, i] = qd.tan(v)
            out[3, i] = qd.exp(v)
            out[4, i] = qd.log(qd.abs(v))
            out[5, i] = qd.tanh(v)
            out[6, i] = qd.atan(v)
            out[7, i] = qd.asin(v / 8)
            out[8, i] = qd.acos(v / 8)
            out[9, i] = qd.atan2(v, b[i])
            out[10, i] = qd.pow(qd.abs(v), b[i])

    return k


@test()
def test_f32_math_close_to_the_c_library():
    """f32 transcendentals over [-8, 8] against numpy in f64: the C library's on the cpu, the
    driver's GLSL.std.450 on Vulkan but, where the driver's are thousands of ulp off (lavapipe: cap
    inexact_float_math), asin acos atan atan2 tanh log from the core's f64 library, rounded once."""
    rng = np.random.default_rng(2)
    n = 4000
    x = np.concatenate([rng.uniform(-8, 8, n), rng.uniform(-0.01, 0.01, n)]).astype(np.float32)
    y = rng.uniform(-3, 3, x.size).astype(np.float32)
    out = qd.field(qd.f32, shape=(len(F32_MATH), x.size))
    _f32_math_kernel(out)(x, y)
    got = out.to_numpy().astype(np.float64)
    d, e = x.astype(np.float64), y.astype(np.float64)
    with np.errstate(all="ignore"):
        refs = [np.sin(d), np.cos(d), np.tan(d), np.exp(d), np.log(np.abs(d)), np.tanh(d), np.arctan(d),
                np.arcsin((x / np.float32(8)).astype(np.float64)), np.arccos((x / np.float32(8)).astype(np.float64)),
                np.arctan2(d, e), np.power(np.abs(d), e)]
    # The driver's sin cos tan exp pow: Vulkan allows them more (lavapipe: up to 9 ulp; pow, which
    # Vulkan defines as exp2(y * log2(x)), 27 ulp where |y log2 x| is large).
    rebuilt = {"log", "tanh", "atan", "asin", "acos", "atan2"}
    for name, g, r in zip(F32_MATH, got, refs):
        ulps = np.abs(g - r) / np.spacing(np.abs(r).astype(np.float32)).astype(np.float64)
        limit = 2 if qd.lang.impl.current_cfg().arch == qd.cpu or name in rebuilt else 32 if name == "pow" else 16
        assert ulps.max() <= limit, (name, ulps.max(), x[np.argmax(ulps)])


@test(arch=qd.cpu)
def test_f32_math_rebuilt_only_where_the_driver_is_inexact():
    """SPIR-V: f32 asin acos atan atan2 tanh log are GLSL.std.450 instructions, unless the device
    has inexact_float_math (and f64): then f64 arithmetic; sin cos tan exp pow stay the driver's."""
    out = qd.field(qd.f32, shape=(len(F32_MATH), 4))
    k = _f32_math_kernel(out)
    a = np.ones(4, np.float32)
    plain = qd.compile(k, a, a, arch=qd.vulkan, features=["shader_float64"]).spirv_asm
    rebuilt = qd.compile(k, a, a, arch=qd.vulkan, features=["shader_float64", "inexact_float_math"]).spirv_asm
    glsl = lambda asm: set(re.findall(r"OpExtInst %float %\w+ (\w+)", asm))
    assert {"Asin", "Acos", "Atan", "Atan2", "Tanh", "Log", "Sin", "Exp", "Pow"} <= glsl(plain)
    assert glsl(rebuilt) & {"Asin", "Acos", "Atan", "Atan2", "Tanh", "Log"} == set()
    assert {"Sin", "Cos", "Tan", "Exp", "Pow"} <= glsl(rebuilt) and "OpTypeFloat 64" in rebuilt

@test(arch=qd.cpu)
def test_volatile_spin_wait_rereads_memory_in_spirv_and_msl():
    flag = qd.field(qd.i32, shape=())
    seen = qd.field(qd.i32, shape=())

    @qd.kernel
    def k():
        for i in range(2):
            if i == 0:
                while qd.volatile_load(flag[None]) == 0:
                    pass
                seen[None] = 1
            else:
                qd.atomic_exchange(flag[None], 1)

    asm = qd.compile(k, arch=qd.vulkan).spirv_asm
    spin = asm[asm.rindex("OpLoopMerge"):]  # the innermost loop is the last one
    assert re.search(r"OpLoad %int %\w+ Volatile", spin[:spin.index("OpBranchConditional")]), asm
    msl = qd.compile(k, arch=qd.metal).msl
    inner = msl[msl.rindex("for (;;)"):]  # SPIRV-Cross re-reads the flag on every iteration
    assert re.search(r"field\d+\._m0\[0\] == 0", inner[:inner.index("break")]), msl


def _kernel_with_ndarrays(n):
    import linecache
    params = ", ".join(f"a{i}: qd.types.ndarray(dtype=qd.i32, ndim=1)" for i in range(n))
    src = f"def many_arrays({params}):\n    for _ in range(1):\n" + "".join(f"        a{i}[0] = {i} + 1\n" for i in range(n))
    name = f"<many_arrays_{n}>"
    linecache.cache[name] = (len(src), None, src.splitlines(True), name)
    g = {"qd": qd}
    exec(compile(src, name, "exec"), g)
    return qd.kernel(g["many_arrays"])


@test(arch=qd.vulkan)
def test_vulkan_storage_buffer_limit_is_a_clear_error():
    """A kernel binding more storage buffers than the device allows per shader (one per ndarray,
    plus the argument buffer) is refused with a RuntimeError naming the kernel (lavapipe crashed
    at launch with 33 ndarrays); one at the limit runs."""
    limit = qd.vulkan_caps()["max_storage_buffers_per_stage"]
    assert limit > 0
    fits = [np.zeros(2, np.int32) for _ in range(limit - 1)]
    _kernel_with_ndarrays(limit - 1)(*fits)
    assert [a[0] for a in fits] == list(range(1, limit))
    over = [np.zeros(2, np.int32) for _ in range(limit)]
    with pytest.raises(RuntimeError, match=rf"kernel 'many_arrays' binds {limit + 1} storage buffers \({limit} "
                                           rf"ndarrays and fields, 1 for arguments.*allows {limit} per shader"):
        _kernel_with_ndarrays(limit)(*over)


@test(arch=qd.vulkan)
def test_vulkan_tasks_get_a_module_each():
    """Each task's pipeline is made from a module with only its entry point (a driver translates
    the whole module per pipeline: n tasks from one module cost n^2). Many tasks compile, run and
    give the right values."""
    src = "def many_tasks(a: qd.types.ndarray(dtype=qd.i32, ndim=1)):\n" + "".join(
        f"    for i in range(a.shape[0]):\n        a[i] = a[i] * 3 + {t}\n" for t in range(12))
    import linecache
    linecache.cache["<many_tasks>"] = (len(src), None, src.splitlines(True), "<many_tasks>")
    g = {"qd": qd}
    exec(compile(src, "<many_tasks>", "exec"), g)
    a = np.arange(4, dtype=np.int32)
    want = a.copy()
    for t in range(12):
        want = want * 3 + t
    qd.kernel(g["many_tasks"])(a)
    np.testing.assert_array_equal(a, want)
