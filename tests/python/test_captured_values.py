"""Python-scope values captured by kernels and funcs (a qd.Vector / qd.Matrix / struct made outside
any kernel): a local initialised from one is a kernel variable, so assigning it again in a serial
loop, a nested loop or a branch updates it (it kept its first value: a silent wrong result)."""
import numpy as np

import quadrants as qd
from test_utils import test

CP = qd.Vector([0.0, 0.32, 3.7])
ONE = qd.Vector([1.0, 0.0, 0.0])
M = qd.Matrix([[1.0, 2.0], [3.0, 4.0]])


@test(arch=[qd.cpu, qd.vulkan])
def test_captured_vector_reassigned_in_loops_and_branches():
    out = qd.field(qd.f32, 6)

    @qd.kernel
    def k(flag: qd.i32):
        for _ in range(1):
            p = CP
            for j in range(3):
                p = p + ONE
            out[0] = p[0]
            q = CP
            if flag == 0:
                q = q + ONE
            out[1] = q[0]
            r = CP
            for j in range(2):
                for m in range(3):
                    if m != 1:
                        r = r * 2.0
            out[2] = r[2]
            out[3] = CP[1]  # the capture itself is unchanged
            w = CP
            while w[0] < 5.0:
                w += ONE
            out[4] = w[0]
            out[5] = w[2]

    k(0)
    np.testing.assert_array_equal(out.to_numpy(), np.float32([3.0, 1.0, np.float32(3.7) * 16, 0.32, 5.0, 3.7]))
    k(1)
    assert out[1] == 0.0


@test(arch=[qd.cpu, qd.vulkan])
def test_captured_matrix_and_struct_reassigned():
    Particle = qd.types.struct(x=qd.types.vector(2, qd.f32), m=qd.f32)
    start = Particle(x=qd.Vector([1.0, 2.0]), m=0.5)
    out = qd.field(qd.f32, 4)

    @qd.func
    def moved(x):
        return x + qd.Vector([1.0, 1.0])

    @qd.kernel
    def k():
        for _ in range(1):
            a = M
            for j in range(2):
                a = a @ M
            out[0] = a[0, 0]
            b = start
            for j in range(3):
                b.x = moved(b.x)
                b.m = b.m * 2.0
            out[1] = b.x[0]
            out[2] = b.x[1]
            out[3] = b.m

    k()
    m = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    np.testing.assert_array_equal(out.to_numpy(), np.float32([(m @ m @ m)[0, 0], 4.0, 5.0, 4.0]))


ST8 = qd.types.struct(m=qd.u8, v=qd.types.vector(2, qd.i8), f=qd.f32)
B1 = ST8(m=250, v=[120, -3], f=1.5)
B2 = ST8(m=7, v=[1, 2], f=2.5)
W8 = qd.Vector([100, 50], dt=qd.i8)
W16 = qd.types.vector(2, qd.i16)(30000, -2)
UNTYPED = qd.Vector([100, 50])


@test(arch=[qd.cpu, qd.vulkan])
def test_captured_typed_values_keep_their_dtypes():
    """A struct's declared member types, qd.Vector(..., dt=), qd.types.vector(n, t)(...) and x[i] of a
    field keep their dtype in kernels (they wrap where the dtype wraps); an untyped vector's elements
    are literals (a local of them takes default_ip)."""
    out = qd.field(qd.i64, 10)
    x = qd.Vector.field(2, qd.i16, shape=2)
    x[1] = [30000, 2]
    x1 = x[1]

    @qd.kernel
    def k():
        c = B1
        c.m += 10       # u8: 260 wraps to 4
        c.v += 10       # i8: 130 wraps to -126
        y = W8
        y += 100        # i8: 200 -> -56, 150 -> -106
        z = W16
        z += 10000      # i16: 40000 -> -25536
        e = x1
        e += 10000      # i16, from a field element
        u = UNTYPED
        u += 200        # i32: 300
        out[0], out[1], out[2] = c.m, c.v[0], c.v[1]
        out[3], out[4], out[5], out[6] = y[0], y[1], z[0], e[0]
        out[7], out[8] = u[0], qd.cast(c.f * 2, qd.i64)
        out[9] = qd.min(W8 * 2, 0)[0]  # W8 used directly: i8, 200 wraps to -56 (a literal 100 * 2 = 200)

    k()
    assert out.to_numpy().tolist() == [4, -126, 7, -56, -106, -25536, -25536, 300, 3, -56]


@test(arch=[qd.cpu])
def test_a_captured_typed_matrix_passed_directly_keeps_its_dtype():
    """qd.min(G, m) with G = qd.Matrix(..., dt=qd.u64): u64 against i16 compares as u64 (a literal
    would have taken i16's side: the fuzzer's case, shrunk)."""
    g = qd.Matrix([[3, 5], [3049605616151847629, 1]], dt=qd.u64)
    out = qd.field(qd.u64, 1)

    @qd.kernel
    def k():
        a = qd.cast(-32767, qd.i16)
        out[0] = qd.min(g, qd.Matrix([[a, a], [a, a]]))[1, 0]

    k()
    assert int(out[0]) == 3049605616151847629


@test(arch=[qd.cpu, qd.vulkan])
def test_a_captured_struct_assigned_to_an_existing_struct_local():
    out = qd.field(qd.f32, 6)

    @qd.kernel
    def k(flag: qd.i32):
        b = B1
        for i in range(3):
            if i == flag:
                b = B2      # an existing struct local: its members take B2's values
        out[0], out[1], out[2], out[3] = b.m, b.v[0], b.v[1], b.f

    k(1)
    assert out.to_numpy()[:4].tolist() == [7, 1, 2, 2.5]
    k(5)
    assert out.to_numpy()[:4].tolist() == [250, 120, -3, 1.5]


@test(arch=[qd.cpu, qd.vulkan])
def test_atomic_on_a_func_parameter_updates_its_copy():
    """A @qd.func's parameters are copies it may assign: qd.atomic_add(a, 5) returns a's old value and
    updates the copy, leaving the caller's variable alone, as a += 5 does."""
    out = qd.field(qd.i32, 4)

    @qd.func
    def f(a):
        old = qd.atomic_add(a, 5)
        return old * 100 + a

    @qd.kernel
    def k():
        out[0] = f(3)
        x = 4
        out[1] = f(x)
        out[2] = x

    k()
    assert out.to_numpy()[:3].tolist() == [308, 409, 4]


@test(arch=[qd.cpu, qd.vulkan])
def test_typed_python_scalars_keep_their_dtype_in_arithmetic():
    """A captured numpy scalar (qd.f32(...) / qd.i16(...) give them) is a value of its dtype in a
    kernel, not a literal taking the other operand's type: x * c with c = np.float64(0.1) is computed
    in f64 (then stored as f32), and a local set from qd.i16(-3) is an i16."""
    c = np.float64(0.1)
    small = qd.i16(-3)
    x = qd.field(qd.f32, shape=4)
    y = qd.field(qd.f32, shape=4)
    w = qd.field(qd.i32, shape=4)

    @qd.kernel
    def k():
        for i in x:
            y[i] = x[i] * c
            v = small
            v = v * 20000  # i16 arithmetic wraps (as a literal's default i32 would not)
            w[i] = v

    xs = np.array([1.1, 2.7, 3.3, 7.9], np.float32)
    x.from_numpy(xs)
    k()
    np.testing.assert_array_equal(y.to_numpy(), (xs.astype(np.float64) * 0.1).astype(np.float32))
    assert w.to_numpy().tolist() == [int(np.int16(np.int32(-60000) & 0xFFFF).astype(np.int16))] * 4
