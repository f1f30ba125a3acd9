"""Kernel language: types, arithmetic, control flow, funcs, static, vectors."""
import math

import numpy as np
import pytest

import quadrants as qd
from test_utils import approx, test


@test()
def test_arithmetic_and_promotion():
    out = qd.field(qd.f32, shape=8)
    iout = qd.field(qd.i32, shape=8)

    @qd.kernel
    def k(a: qd.i32, b: qd.f32):
        out[0] = a + b          # i32 + f32 -> f32
        out[1] = a / 2          # true division -> default_fp
        iout[0] = a // 2
        iout[1] = -7 // 2        # Python floor division on constants
        iout[2] = a % 3
        iout[3] = (a - 10) % 3   # Python modulo: sign of the divisor
        iout[4] = (a - 10) // 3
        iout[5] = a ** 3
        iout[6] = (a << 2) | 1
        iout[7] = ~a ^ 5
        out[2] = b ** 2.0
        out[3] = qd.sqrt(b)

    k(7, 2.25)
    assert out[0] == approx(9.25) and out[1] == approx(3.5)
    assert list(iout.to_numpy()) == [3, -4, 1, 0, -1, 343, 29, ~7 ^ 5]
    assert out[2] == approx(5.0625) and out[3] == approx(1.5)


@test()
def test_annotated_locals_and_unsigned_wrap():
    out = qd.field(qd.u32, shape=3)

    @qd.kernel
    def k():
        x: qd.u16 = 1000
        y: qd.u8 = 250
        x -= y
        out[0] = x
        z: qd.u8 = 250
        z += 10                 # wraps in u8
        out[1] = z
        w: qd.u16 = 5
        w -= 6                  # wraps in u16
        out[2] = w

    k()
    assert list(out.to_numpy()) == [750, 4, 65535]


@test()
def test_control_flow():
    out = qd.field(qd.i32, shape=4)

    @qd.kernel
    def k(n: qd.i32):
        s = 0
        i = 0
        while i < n:
            i += 1
            if i % 2 == 0:
                continue
            if i > 7:
                break
            s += i
        out[0] = s
        t = 0
        for j in range(n):
            if j == 3:
                t += 100
            elif j < 3:
                t += 1
            else:
                t += 10
        out[1] = t
        out[2] = 1 if n > 5 else 2
        acc = 0
        for a, b in qd.ndrange(3, (1, 3)):
            acc += a * 10 + b
        out[3] = acc

    k(10)
    assert list(out.to_numpy()) == [1 + 3 + 5 + 7, 3 + 100 + 60, 1, 3 * (1 + 2) + 2 * 10 * (0 + 1 + 2)]


@test()
def test_func_and_static():
    out = qd.field(qd.f32, shape=4)

    @qd.func
    def square(x):
        return x * x

    @qd.func
    def add_into(i, v: qd.template()):
        out[i] += v

    @qd.kernel
    def k(flag: qd.template()):
        out[0] = square(3.0)
        for i in qd.static(range(3)):
            add_into(1, i + 1)
        if qd.static(flag):
            out[2] = 1.0
        else:
            out[2] = -1.0

    k(True)
    assert list(out.to_numpy()[:3]) == [9.0, 6.0, 1.0]
    k(False)
    assert out[2] == -1.0


@test()
def test_vectors_and_matrices():
    v = qd.Vector.field(3, qd.f32, shape=4)
    m = qd.Matrix.field(2, 2, qd.f32, shape=())
    out = qd.field(qd.f32, shape=4)

    @qd.kernel
    def k():
        a = qd.Vector([1.0, 2.0, 3.0])
        b = qd.math.vec3(2.0)
        for i in range(4):
            v[i] = a * i + b
        out[0] = a.dot(b)
        out[1] = a.norm_sqr()
        c = a.cross(qd.Vector([0.0, 1.0, 0.0]))
        out[2] = c[0] * 100 + c[2]
        mat = qd.Matrix([[1.0, 2.0], [3.0, 4.0]])
        m[None] = mat @ mat
        out[3] = a.x + a.z

    k()
    np.testing.assert_allclose(v.to_numpy(), [[1 * i + 2, 2 * i + 2, 3 * i + 2] for i in range(4)])
    assert list(out.to_numpy()) == [12.0, 14.0, -300.0 + 1.0, 4.0]
    np.testing.assert_allclose(m.to_numpy(), [[7, 10], [15, 22]])


@test()
def test_math_functions():
    out = qd.field(qd.f64, shape=8)

    @qd.kernel
    def k(x: qd.f64):
        out[0] = qd.sin(x)
        out[1] = qd.cos(x)
        out[2] = qd.exp(x)
        out[3] = qd.log(x)
        out[4] = qd.tanh(x)
        out[5] = qd.atan2(x, 2.0)
        out[6] = qd.max(x, 3.0, 1.0)
        out[7] = abs(-x) + qd.floor(x)

    k(0.5)
    ref = [math.sin(.5), math.cos(.5), math.exp(.5), math.log(.5), math.tanh(.5), math.atan2(.5, 2), 3.0, 0.5]
    np.testing.assert_allclose(out.to_numpy(), ref, rtol=1e-12)


@test()
def test_return_value_and_casts():
    @qd.kernel
    def k(a: qd.f32) -> qd.i32:
        return qd.cast(a, qd.i32) + int(2.7)

    @qd.kernel
    def f(a: qd.i64) -> qd.f64:
        return a * 0.5

    assert k(3.9) == 5
    assert f(2**40) == 2.0**39


@test()
def test_struct_for_over_field_and_ndarray():
    x = qd.field(qd.i32, shape=(3, 4))

    @qd.kernel
    def fill():
        for i, j in x:
            x[i, j] = i * 10 + j

    @qd.kernel
    def grouped(a: qd.types.ndarray(dtype=qd.i32, ndim=2)):
        for I in a:
            a[I] = I[0] + I[1]

    fill()
    np.testing.assert_array_equal(x.to_numpy(), [[i * 10 + j for j in range(4)] for i in range(3)])
    a = np.zeros((2, 5), np.int32)
    grouped(a)
    np.testing.assert_array_equal(a, [[i + j for j in range(5)] for i in range(2)])


@test()
def test_code_outside_loops_runs_once():
    c = qd.field(qd.i32, shape=())
    out = qd.field(qd.i32, shape=100)

    @qd.kernel
    def k():
        c[None] += 1
        base = c[None] * 1000
        for i in range(100):
            out[i] = base + i
        c[None] += 1

    k()
    assert c[None] == 2
    np.testing.assert_array_equal(out.to_numpy(), 1000 + np.arange(100))


@test()
def test_funcs_returning_tuples_and_vectors():
    v = qd.Vector.field(2, qd.f32, shape=3)
    out = qd.field(qd.f32, shape=4)

    @qd.func
    def pair(a):
        return a, a * 2

    @qd.func
    def vec(a):
        return qd.Vector([a, -a])

    @qd.kernel
    def k():
        for i in v:
            v[i] = vec(qd.cast(i, qd.f32))
        a, b = pair(3.0)
        out[0] = a + b
        w = v[2]
        out[1] = w.y
        out[2] = qd.min(w)
        out[3] = v[1].sum() + v[2].max()

    k()
    np.testing.assert_array_equal(v.to_numpy(), [[0, 0], [1, -1], [2, -2]])
    assert list(out.to_numpy()) == [9.0, -2.0, -2.0, 2.0]


@test(arch=qd.cpu)
def test_python_errors_in_kernel_code_are_located():
    @qd.func
    def f(a, b):
        return a + b

    @qd.kernel
    def k():
        f(1)

    with pytest.raises(qd.QuadrantsSyntaxError, match="Missing argument 'b' in the call of @qd.func 'f'") as e:
        k()
    assert "f(1)" in str(e.value)


@test()
def test_integer_division_by_zero_does_not_crash():
    out = qd.field(qd.i32, shape=3)

    @qd.kernel
    def k(a: qd.i32, b: qd.i32):
        out[0] = a // b
        out[1] = a % b
        out[2] = 7 // 2

    k(-2**31, 0)    # would trap on x86
    k(-2**31, -1)   # so would INT_MIN // -1
    assert out[2] == 3
    k(7, -2)
    assert list(out.to_numpy()) == [-4, -1, 3]


@test()
def test_tuple_assignment_reads_every_value_first():
    x = qd.field(qd.i32, shape=2)

    @qd.kernel
    def k() -> qd.i32:
        a = 1
        b = 2
        a, b = b, a
        x[0], x[1] = 5, 6
        x[0], x[1] = x[1], x[0]
        return a * 10 + b

    assert k() == 21
    assert list(x.to_numpy()) == [6, 5]


@test()
def test_ndrange_with_empty_axes_runs_no_iteration():
    c = qd.field(qd.i32, shape=())

    @qd.kernel
    def k(a: qd.i32, b: qd.i32):
        for i, j in qd.ndrange((a, b), (a, b)):  # both axes empty: not (b - a) ** 2 iterations
            c[None] += 1
        for i, j in qd.ndrange((5, 0), 3):
            c[None] += 100

    k(5, 0)
    assert c[None] == 0
    k(0, 2)
    assert c[None] == 4


@test()
def test_matrix_indices_follow_python_rules():
    out = qd.field(qd.i32, shape=4)

    @qd.kernel
    def k():
        m = qd.Matrix([[1, 2, 3], [4, 5, 6]])
        v = qd.Vector([7, 8, 9])
        out[0] = m[1, -1]
        out[1] = m[-1, 0]
        out[2] = v[-1]
        out[3] = m[-1, :].sum()

    k()
    assert list(out.to_numpy()) == [6, 4, 9, 15]

    @qd.kernel
    def bad() -> qd.i32:
        m = qd.Matrix([[1, 2], [3, 4]])
        return m[0, 2]  # not m[1, 0]

    with pytest.raises(qd.QuadrantsSyntaxError, match="out of range"):
        bad()


@test()
def test_struct_for_over_a_0d_field_runs_once():
    c = qd.field(qd.i32, shape=())
    v = qd.Vector.field(2, qd.f32, shape=())

    @qd.kernel
    def k():
        for I in c:
            c[I] += 5
        for I in qd.grouped(v):
            v[I] += qd.Vector([1.0, 2.0])

    c[None] = 1
    k()
    assert c[None] == 6
    np.testing.assert_allclose(v.to_numpy(), [1.0, 2.0])


@test()
def test_integer_literal_too_wide_for_the_other_operand_widens():
    out = qd.field(qd.i64, shape=4)

    @qd.kernel
    def k(a: qd.i32, b: qd.u8):
        out[0] = a + 2**40       # not a + (2**40 wrapped to i32)
        out[1] = 2**40 + 1       # a lone literal that does not fit default_ip is i64
        out[2] = b + 300         # 300 does not fit u8
        out[3] = b + 1           # fits: stays u8 and wraps

    k(1, 255)
    assert list(out.to_numpy()) == [2**40 + 1, 2**40 + 1, 555, 0]


@test()
def test_calling_a_dtype_casts_in_kernels():
    out = qd.field(qd.f32, shape=3)

    @qd.kernel
    def k(a: qd.i32, b: qd.f32):
        out[0] = qd.f32(a) / 2
        out[1] = qd.i32(b) + qd.u8(a + 254)
        out[2] = qd.f16(1.5)

    k(3, 2.75)
    assert list(out.to_numpy()) == [1.5, 2.0 + 1.0, 1.5]


@test()
def test_casts_to_f16_from_every_type_round_like_numpy():
    """f64 -> f16 has no x86 instruction: the JIT supplies the conversion, correctly rounded."""
    rng = np.random.default_rng(5)
    src = np.concatenate([rng.standard_normal(300) * 10.0 ** rng.integers(-9, 6, 300),
                          [0.0, -0.0, 65504.0, 65520.0, 1e6, -1e6, 2.0**-24, 2.0**-25, 3 * 2.0**-26, 5.96e-8,
                           np.inf, -np.inf, 1 + 2.0**-11, 1 + 3 * 2.0**-12]])
    out = qd.field(qd.f16, shape=src.size)
    for dtype in (qd.f64, qd.f32, qd.i32, qd.i64):
        vals = src.astype(dtype.np) if dtype.is_real else np.clip(np.nan_to_num(src), -1e9, 1e9).astype(dtype.np)

        @qd.kernel
        def k(a: qd.types.ndarray(dtype=dtype, ndim=1)):
            for i in range(a.shape[0]):
                out[i] = qd.cast(a[i], qd.f16)

        k(vals)
        with np.errstate(over="ignore"):  # numpy warns where it rounds to inf, as we do
            np.testing.assert_array_equal(out.to_numpy(), vals.astype(np.float16))


@test()
def test_field_of_vector_dtype_and_static_membership():
    v = qd.field(qd.types.vector(3, qd.f32), shape=2)
    assert v.element_shape == (3,)

    @qd.kernel
    def k(op: qd.template()):
        for i in range(2):
            if qd.static(op in ("a", "b")):
                v[i] = qd.Vector([1.0, 2.0, 3.0])
            if qd.static(op not in ("a", "b")):
                v[i] = qd.Vector([0.0, 0.0, 0.0])

    k("a")
    np.testing.assert_array_equal(v.to_numpy(), [[1, 2, 3]] * 2)
    k("c")
    np.testing.assert_array_equal(v.to_numpy(), [[0, 0, 0]] * 2)


@test()
def test_integer_power_with_negative_exponent():
    """base ** -n is 1 / base ** n in integer division: 1 for base 1, +-1 for base -1, else 0."""
    out = qd.field(qd.i32, shape=6)

    @qd.kernel
    def k(a: qd.i32, b: qd.i32, c: qd.i32, e: qd.i32):
        out[0] = a ** e        # 1 ** -3
        out[1] = b ** e        # (-1) ** -3
        out[2] = b ** (e + 1)  # (-1) ** -2
        out[3] = c ** e        # 2 ** -3
        out[4] = c ** (e + 5)  # 2 ** 2
        out[5] = b ** 0

    k(1, -1, 2, -3)
    assert list(out.to_numpy()) == [1, -1, 1, 0, 4, 1]


@test()
def test_shifts_by_the_bit_width_or_more():
    """Out-of-range shift amounts are defined: 0, or the sign for an arithmetic right shift."""
    out = qd.field(qd.i64, shape=8)

    @qd.kernel
    def k(a: qd.i32, u: qd.u8, n: qd.i32, m: qd.i32):
        out[0] = a << n          # 1 << 32
        out[1] = a >> n
        out[2] = -a >> n         # arithmetic: the sign
        out[3] = u << m          # u8 << 8
        out[4] = u >> m
        out[5] = a << -1
        out[6] = a << (n - 29)   # in range: 1 << 3
        out[7] = -a >> (n - 31)  # -1 >> 1

    k(1, 200, 32, 8)
    assert list(out.to_numpy()) == [0, 0, -1, 0, 0, 0, 8, -1]


@test()
def test_and_or_not_take_the_truth_of_any_value():
    # Found by the differential fuzzer: `and`/`or` converted their operands to i32 first, so a
    # fraction, a NaN or an i64 with only high bits set counted as false.
    out = qd.field(qd.i32, shape=8)

    @qd.kernel
    def k(h: qd.f32, big: qd.i64, nan: qd.f64):
        out[0] = 1 if (h and 1) else 0
        out[1] = 1 if (0 or h) else 0
        out[2] = 1 if (big and big) else 0
        out[3] = 1 if (nan and 1) else 0
        out[4] = 1 if ((h - h) or 0) else 0
        out[5] = not big
        out[6] = 1 if (h and big) else 0
        out[7] = 1 if (qd.f32(-0.0) or h * 0) else 0

    k(0.5, 2 ** 40, float("nan"))
    assert list(out.to_numpy()) == [1, 1, 1, 1, 0, 0, 1, 0]


@test(debug=True)
def test_and_or_give_the_deciding_operand_as_python_does():
    """`a and b` is a if a is false, else b; `a or b` is a if a is true, else b (1 and 2 is 2);
    with operands of two types the result is the truth (0 or 1); the right operand is only
    evaluated when the left does not decide."""
    x = qd.field(qd.i32, shape=4)
    f = qd.field(qd.f32, shape=4)

    @qd.kernel
    def k(a: qd.i32, b: qd.i32, p: qd.f32, q: qd.f32, n: qd.i32):
        x[0] = a and b
        x[1] = a or b
        x[2] = a and b and 9
        x[3] = 1 if (n < 4 and x[n] >= 0) else 5  # x[n] read only when n < 4 (bounds checked: debug)
        f[0] = p and q
        f[1] = p or q
        f[2] = p and 2.5
        f[3] = (a < b) or q  # a comparison (i32 0/1) and an f32: the truth

    for a, b, p, q in [(1, 2, 0.5, 1.5), (0, 3, 0.0, -2.0), (4, 0, 2.0, 0.0)]:
        k(a, b, p, q, 7)
        assert list(x.to_numpy()) == [a and b, a or b, a and b and 9, 5]
        assert list(f.to_numpy()) == [np.float32(p and q), np.float32(p or q), np.float32(p and 2.5),
                                      1.0 if (a < b or q) else 0.0]


@test()
def test_empty_kernel_and_code_after_a_jump():
    # Both produced SPIR-V that failed validation (found by the front-end fuzzer).
    @qd.kernel
    def empty():
        pass

    empty()

    @qd.kernel
    def jumps(out: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        for i in range(out.shape[0]):
            s = 0
            for j in range(10):
                if j % 2 == 0:
                    continue
                    s += 1000  # unreachable
                if qd.static(True):
                    s += j + i
                    if j > 6:
                        break
                        s += 100  # unreachable
                    continue
                s += 1000  # unreachable: the static branch ends with continue
            out[i] = s

    out = np.zeros(4, np.int32)
    jumps(out)
    assert out.tolist() == [16 + 4 * i for i in range(4)]
    assert qd.compile(empty, arch=qd.metal).msl == ""


@test(arch=[qd.cpu, qd.vulkan])
def test_list_or_tuple_assigned_to_vector_and_matrix_elements():
    """x[i] = [a, b], v[i] = a, b, m[i] = [[..], [..]] (or its entries in row order) and c[None] = [..]
    store element by element; a sequence of the wrong length is a type error naming the line."""
    x = qd.Vector.field(2, qd.f32, shape=4)
    m = qd.Matrix.field(2, 2, qd.i32, shape=2)
    c = qd.Vector.field(3, qd.f32, shape=())

    @qd.kernel
    def k():
        for i in range(4):
            x[i] = [i, i * 2.5]
        m[0] = [[1, 2], [3, 4]]
        m[1] = 5, 6, 7, 8
        c[None] = (1.0, -2.0, 3.5)

    k()
    np.testing.assert_array_equal(x.to_numpy(), [[i, i * 2.5] for i in range(4)])
    np.testing.assert_array_equal(m.to_numpy(), [[[1, 2], [3, 4]], [[5, 6], [7, 8]]])
    np.testing.assert_array_equal(c.to_numpy(), [1.0, -2.0, 3.5])

    @qd.kernel
    def bad():
        x[0] = [1.0, 2.0, 3.0]

    with pytest.raises(qd.QuadrantsTypeError, match=r"x\[0\] = \[1.0, 2.0, 3.0\][\s\S]*sequence of 3 items"):
        bad()


@test(arch=[qd.cpu, qd.vulkan])
def test_list_comprehensions_unroll_at_compile_time():
    """[f(k) for k in range(3) if ...] in a kernel: a Python list of kernel values, unrolled when the
    kernel compiles (nested, with compile-time conditions, over qd.static / tuples); a run-time
    iterable or condition is an error naming the line."""
    x = qd.Vector.field(3, qd.f32, shape=4)
    m = qd.Matrix.field(2, 3, qd.i32, shape=())

    @qd.func
    def twice(k):
        return k * 2.0

    @qd.kernel
    def k():
        for i in range(4):
            x[i] = qd.Vector([twice(j) + i for j in range(3)])
        m[None] = qd.Matrix([[r * 10 + c for c in qd.static(range(3))] for r in (0, 1, 2) if r != 1])

    k()
    np.testing.assert_array_equal(x.to_numpy(), [[i, i + 2, i + 4] for i in range(4)])
    np.testing.assert_array_equal(m.to_numpy(), [[0, 1, 2], [20, 21, 22]])

    @qd.kernel
    def bad(n: qd.i32):
        x[0] = qd.Vector([j for j in range(n)])

    with pytest.raises(qd.QuadrantsSyntaxError, match=r"range\(n\)[\s\S]*compile-time int bounds"):
        bad(3)


@test(arch=[qd.cpu, qd.vulkan])
def test_vector_and_matrix_slices():
    """v[a:b:c], m[i, :], m[:, j] (j a run-time index too), m[:2, 1:] read the selected entries;
    m[:, j] = v writes them; run-time slice bounds are an error."""
    o = qd.field(qd.f32, shape=8)

    @qd.kernel
    def k(j: qd.i32):
        v = qd.Vector([1.0, 2.0, 3.0, 4.0])
        m = qd.Matrix([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
        a, b, c, d, e = v[:2], v[1::2], m[0, :], m[:, 1], m[:, 1:]
        o[0] = a[1]
        o[1] = b[1]
        o[2] = c[2]
        o[3] = d[1]
        o[4] = e[1, 1]
        o[5] = v[-1:][0]
        m[:, j] = qd.Vector([9.0, 8.0])
        o[6] = m[1, 2]
        o[7] = m[:, j][0]

    k(2)
    np.testing.assert_array_equal(o.to_numpy(), [2, 4, 3, 5, 6, 4, 8, 9])

    @qd.kernel
    def bad(n: qd.i32) -> qd.f32:
        v = qd.Vector([1.0, 2.0, 3.0])
        return v[n:][0]

    with pytest.raises(qd.QuadrantsSyntaxError, match="variables in slice"):
        bad(1)


@test()
def test_break_and_continue_in_unrolled_loops_under_compile_time_conditions():
    """In a qd.static loop, `continue` / `break` under compile-time conditions skip the rest of the
    copy / the remaining copies; under a run-time condition they are an error naming the line."""
    x = qd.field(qd.i32, 5)

    @qd.kernel
    def k():
        for i in qd.static(range(5)):
            if qd.static(i == 1):
                continue
            x[i] = 1
            if qd.static(i == 3):
                break

    k()
    assert list(x.to_numpy()) == [1, 0, 1, 1, 0]

    @qd.kernel
    def bad(n: qd.i32):
        for i in qd.static(range(5)):
            if i == n:
                break

    with pytest.raises(qd.QuadrantsSyntaxError, match="run-time condition"):
        bad(2)


@test(arch=[qd.cpu, qd.vulkan])
def test_func_parameters_by_value_and_templates_by_reference():
    """A func's parameter is a copy the body may assign to, element by element too (a[0] = 100,
    p.m = ...), leaving the caller's value; a qd.template() parameter is the caller's own
    variable (x = 1 sets it)."""
    out = qd.field(qd.f32, shape=6)
    vec3 = qd.types.vector(3, qd.f32)
    P = qd.types.struct(x=vec3, m=qd.f32)

    @qd.func
    def set_first(a: vec3) -> qd.f32:
        a[0] = 100.0
        return a[0] + a[1]

    @qd.func
    def heavier(p: P) -> qd.f32:
        p.m = p.m * 2.0
        p.x[2] = -1.0
        return p.m + p.x[2]

    @qd.func
    def set_template(t: qd.template()):
        t = 7.0

    @qd.kernel
    def k():
        v = qd.Vector([3.0, 4.0, 5.0])
        out[0] = set_first(v)
        out[1] = v[0]
        p = P(x=vec3(1.0, 2.0, 3.0), m=1.5)
        out[2] = heavier(p)
        out[3] = p.m + p.x[2]
        t = 0.0
        set_template(t)
        out[4] = t

    k()
    assert list(out.to_numpy()[:5]) == [104.0, 3.0, 2.0, 4.5, 7.0]


@test()
def test_real_func_checks_its_annotations_and_runs_inlined():
    x = qd.field(qd.i32, shape=())

    @qd.real_func
    def add(a: qd.f32, b: qd.f32) -> qd.f32:
        x[None] += 1
        return a + b

    @qd.kernel
    def run() -> qd.i32:
        assert add(1, 2) == 3  # evaluated without debug too: add's side effect happens
        return add(1, 2)

    assert run() == 3 and x[None] == 2
    with pytest.raises(qd.QuadrantsSyntaxError, match="'a' must be type annotated"):
        @qd.real_func
        def untyped(a, b: qd.i32) -> qd.i32:
            return a + b
    with pytest.raises(qd.QuadrantsCompilationError, match="return value must be annotated"):
        @qd.real_func
        def unannotated(a: qd.i32):
            return a


@test(arch=[qd.cpu, qd.vulkan], random_seed=3)
def test_randn_pow_and_cast_to_python_types():
    """qd.randn(): standard normal (Box-Muller on qd.random, so every arch draws the same numbers);
    pow(x, y) on kernel values is x ** y; v.cast(int) / v.cast(float) take default_ip / default_fp."""
    n = 1 << 16
    z = qd.field(qd.f32, shape=n)
    o = qd.field(qd.f32, shape=3)
    vi = qd.Vector.field(3, qd.i32, shape=())

    @qd.kernel
    def k(x: qd.f32):
        for i in range(n):
            z[i] = qd.randn()
        o[0] = pow(x, 2)
        o[1] = pow(2, x)
        v = qd.Vector([1.5, 2.7, -3.2])
        vi[None] = v.cast(int)
        o[2] = v.cast(float)[1]

    k(3.0)
    d = z.to_numpy().astype(np.float64)
    assert np.isfinite(d).all() and abs(d.mean()) < 0.02 and abs(d.std() - 1) < 0.02
    assert abs((np.abs(d) < 1).mean() - 0.6827) < 0.01  # the normal's one-sigma mass
    assert list(o.to_numpy()) == [9.0, 8.0, np.float32(2.7)] and list(vi.to_numpy()) == [1, 2, -3]


@pytest.mark.parametrize("debug", [True, False], ids=["debug", "nodebug"])
@test(arch=[qd.cpu, qd.vulkan])
def test_debug_reports_integer_overflow_of_the_kernels_operators(capfd, debug):
    """debug=True: an integer + - * << of the kernel whose exact result does not fit prints
    "<Op> overflow detected" with the kernel line, and keeps the wrapped value; results that fit, the
    library's own wrapping arithmetic (qd.random's hash) and debug=False print nothing."""
    qd.init(arch=qd.cfg.arch, debug=debug)
    out = qd.field(qd.i64, shape=8)

    @qd.kernel
    def k(a: qd.i32, b: qd.i8, u: qd.u32, big: qd.i64):
        out[0] = a + a
        out[1] = b * b
        out[2] = u - (u + 1)
        out[3] = big << 2
        out[4] = qd.cast(qd.random(qd.u32), qd.i64) * 0
        out[5] = a - 1
        out[6] = b * 2

    capfd.readouterr()
    k(2 ** 30, 12, 7, 2 ** 62)
    qd.sync()
    text = capfd.readouterr().out
    assert list(out.to_numpy()[:7]) == [-2 ** 31, 12 * 12 - 256, 2 ** 32 - 1, 0, 0, 2 ** 30 - 1, 24]
    found = {line for line in ("Addition", "Multiplication", "Subtraction", "Shift left") if f"{line} overflow" in text}
    if debug:
        assert found == {"Addition", "Multiplication", "Subtraction", "Shift left"}, text
        assert "out[0] = a + a" in text and "out[3] = big << 2" in text and text.count("overflow detected") == 4
    else:
        assert not found, text
    k(5, 3, 7, 1)
    qd.sync()
    assert "overflow" not in capfd.readouterr().out.replace("Subtraction overflow", "")


@test(arch=[qd.cpu, qd.vulkan])
def test_untyped_struct_values_and_struct_field_elements():
    """qd.Struct({...}) / qd.Struct(a=...) assigned to a struct target stores its members by name;
    qd.Struct.field({...}) makes a struct field (placeable with qd.root); in Python scope x[i].b = v
    writes the field; dict displays, vector.fill(v), v == [..] and all() / any() in kernels."""
    n = 8
    line = qd.types.struct(d=qd.types.vector(3, qd.f32), length=qd.f32)
    x = qd.Struct.field({"a": qd.i32, "b": qd.f32, "line": line}, shape=(n,))
    y = qd.Struct.field({"a": qd.f32, "b": qd.i32})
    qd.root.dense(qd.i, n // 4).dense(qd.i, 4).place(y)
    ok = qd.field(qd.i32, shape=n)

    @qd.kernel
    def k():
        for i in x:
            x[i] = qd.Struct({"a": 2 * i, "b": 1.5 * i, "line": {"d": qd.Vector([i, 0.0, 1.0]), "length": 0.5}})
            y[i] = qd.Struct(a=x[i].b, b=x[i].a + 1)
            x[i].line.d.fill(i + 0.25)
            ok[i] = 1 if all(x[i].line.d == [i + 0.25, i + 0.25, i + 0.25]) and not any(x[i].line.d == [9, 9, 9]) else 0

    k()
    for i in range(n):
        assert x[i].a == 2 * i and x[i].b == 1.5 * i and x[i].line.length == 0.5 and ok[i] == 1
        assert y[i].a == 1.5 * i and y[i].b == 2 * i + 1
        np.testing.assert_array_equal(x[i].line.d, [i + 0.25] * 3)
    y[3].b = 40  # Python scope: through the element to the field
    x[2].line.length = 7.0
    assert y.b.to_numpy()[3] == 40 and x.line.length.to_numpy()[2] == 7.0 and y[3].b == 40


@test(arch=[qd.cpu, qd.vulkan])
def test_assignment_expressions():
    out = qd.field(qd.i32, shape=3)

    @qd.kernel
    def k(n: qd.i32):
        s = 0
        i = 0
        j = 0  # variables are block-scoped: j is the kernel's, assigned by each test of the loop
        while (j := i * 2) < n:
            s += j
            i += 1
        out[0] = s
        out[1] = (t := n + 1) * t
        out[2] = j

    k(7)
    assert list(out.to_numpy()) == [0 + 2 + 4 + 6, 64, 8]


@test(arch=[qd.cpu, qd.vulkan])
def test_integer_power_with_a_negative_exponent():
    """x ** -n on integers is 1 / x ** n truncated (0 unless |x| is 1); debug=True makes it an
    error naming the line."""
    @qd.kernel
    def p(x: qd.i32, y: qd.i32) -> qd.i32:
        return x ** y

    assert [p(10, -1), p(1, -3), p(-1, -3), p(2, 10)] == [0, 1, -1, 1024]
    qd.init(arch=qd.cfg.arch, debug=True)

    @qd.kernel
    def q(x: qd.i32, y: qd.i32) -> qd.i32:
        return x ** y

    assert q(2, 10) == 1024
    with pytest.raises(qd.QuadrantsRuntimeError, match="negative exponent"):
        q(10, -1)


@test(arch=[qd.cpu, qd.vulkan])
def test_operator_functions_elementwise_select_and_logical_shift():
    """operator.add / sub / matmul ... called in a kernel (e.g. passed in from Python) are the
    operators; qd.lang.ops.add and friends too; qd.select works element-wise on vectors (a scalar
    condition or operand broadcasts); qd.bit_shr shifts in zeros whatever the sign."""
    import operator

    v = qd.Vector.field(2, qd.i32, shape=4)
    m = qd.Matrix.field(2, 2, qd.i32, shape=())
    s = qd.field(qd.i32, shape=2)
    A = qd.Matrix([[1, 2], [3, 4]])

    @qd.kernel
    def k(x: qd.i32):
        a = qd.Vector([x, 2 * x])
        v[0] = operator.add(a, qd.Vector([1, 1]))
        v[1] = qd.lang.ops.mul(a, 3)
        v[2] = qd.select(a > 5, a, qd.Vector([-1, -2]))
        v[3] = qd.select(x > 100, a, 0)
        m[None] = operator.matmul(A, A)
        s[0] = qd.bit_shr(-x, 1)
        s[1] = operator.sub(x, 1) if operator.lt(x, 10) else 0

    k(4)
    np.testing.assert_array_equal(v.to_numpy(), [[5, 9], [12, 24], [-1, 8], [0, 0]])
    np.testing.assert_array_equal(m.to_numpy(), [[7, 10], [15, 22]])
    assert list(s.to_numpy()) == [(2 ** 32 - 4) >> 1, 3]


def _pow_by_squaring(x, n):
    """numpy float32 emulation of float ** integer: binary exponentiation, 1 / r for n < 0."""
    k, r, b = abs(n), None, x
    while k:
        if k & 1:
            r = b if r is None else np.float32(r * b)
        k >>= 1
        if k:
            b = np.float32(b * b)
    r = np.float32(1) if r is None else r
    return np.float32(1) / r if n < 0 else r


@test(arch=[qd.cpu, qd.vulkan])
def test_float_to_an_integer_power_is_repeated_squaring():
    """x ** n with n an integer (a run-time i32 or a literal): repeated squaring, the same bits on
    every backend (lavapipe's pow(x, float(n)) was 1e-6 off), 1 / x ** -n for negative n."""
    xs = np.float32([-6.66, -2, -1.5, -1, -0.5, 0.5, 1, 1.5, 2, 6.66, 1e-3, 3e4])
    ns = np.arange(-10, 11, dtype=np.int32)
    out = np.zeros((len(xs), len(ns)), np.float32)
    lit = np.zeros((len(xs), 2), np.float32)

    @qd.kernel
    def k(x: qd.types.ndarray(dtype=qd.f32, ndim=1), n: qd.types.ndarray(dtype=qd.i32, ndim=1),
          out: qd.types.ndarray(dtype=qd.f32, ndim=2), lit: qd.types.ndarray(dtype=qd.f32, ndim=2)):
        for i, j in qd.ndrange(x.shape[0], n.shape[0]):
            out[i, j] = x[i] ** n[j]
            if j == 0:
                lit[i, 0] = x[i] ** 5
                lit[i, 1] = x[i] ** -3

    k(xs, ns, out, lit)
    want = np.array([[_pow_by_squaring(x, int(n)) for n in ns] for x in xs], np.float32)
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(lit, np.array([[_pow_by_squaring(x, 5), _pow_by_squaring(x, -3)] for x in xs]))
    exact = np.power(xs.astype(np.float64)[:, None], ns[None, :].astype(np.float64)).astype(np.float32)
    normal = (np.abs(exact) > 1e-37) & (np.abs(exact) < 1e37)  # x ** -n overflows x ** n first: 0
    np.testing.assert_allclose(out[normal], exact[normal], rtol=2e-6)  # a few ulps of the rounded power


@qd.kernel
def _first_of(x: qd.types.ndarray(ndim=1)) -> float:  # defined before any qd.init of the test
    return x[0]


@test(arch=[qd.cpu, qd.vulkan], default_fp=qd.f64)
def test_python_type_return_annotations_follow_the_current_init():
    """`-> float` takes the default_fp of the qd.init in force when the kernel runs, not of when it
    was defined (it stayed f32: an f64 program got f32-rounded results)."""
    if qd.cfg.arch is qd.vulkan and not qd.vulkan_caps().get("shader_float64"):
        pytest.skip("no f64 on this device")
    assert _first_of(np.array([0.1])) == 0.1
    qd.init(arch=qd.cfg.arch)
    assert _first_of(np.array([0.1], np.float32)) == float(np.float32(0.1))


@test(arch=[qd.cpu, qd.vulkan])
def test_an_out_of_range_float_to_int_conversion_is_one_value():
    """qd.cast(-7.25, qd.u8) is unspecified (docs/language.md), but it is one value: comparing it with
    itself, selecting it, or branching on it is consistent (on LLVM it was poison, which a select or
    an `or` could turn into either branch: the fuzzer's case)."""
    out = qd.field(qd.i32, 4)

    @qd.kernel
    def k(flag: qd.i32):
        c = qd.cast(qd.f64(-7.25), qd.u8)
        s = qd.select(flag > 0, c, c)
        out[0] = 1 if s == c else 2
        r = 0
        if flag > 5 or c == c:
            r = 7
        out[1] = r
        out[2] = qd.cast(c, qd.i32) - qd.cast(s, qd.i32)
        big = qd.cast(qd.f32(3e9), qd.i32)
        out[3] = 1 if big == big else 2

    for flag in (0, 1):
        k(flag)
        assert out.to_numpy().tolist() == [1, 7, 0, 1]


@test(arch=[qd.cpu, qd.vulkan])
def test_atomic_on_a_member_of_a_struct_parameter():
    """qd.atomic_max(p.m[0], x) on a struct passed to a @qd.func: the parameter is the func's own
    copy (found by the fuzzer, seed 3): the func sees the update, the caller's variable does not."""
    st = qd.types.struct(m=qd.types.vector(2, qd.u16), a=qd.f32)
    g = st(m=qd.Vector([27969, 5], dt=qd.u16), a=1.0)
    out = qd.field(qd.u16, shape=3)

    @qd.func
    def f(p):
        old = qd.atomic_max(p.m[0], qd.u16(30000))
        return p, old

    @qd.kernel
    def k():
        v = g
        r, old = f(v)
        out[0], out[1], out[2] = r.m[0], v.m[0], old

    k()
    assert out.to_numpy().tolist() == [30000, 27969, 27969]
