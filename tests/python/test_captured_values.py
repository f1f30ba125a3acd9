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
