"""The everyday language surface (issue 11): qd.math types and functions, matrix methods, swizzles,
run-time indexing of local vectors, @qd.func annotations, short-circuit and/or, structs, data-oriented
classes, static_assert and qd.random. Each test runs on every available arch (cpu and vulkan here)."""
import math

import numpy as np
import pytest

import quadrants as qd
from test_utils import test

vec2, vec3, vec4, mat2, mat3, mat4 = (qd.math.vec2, qd.math.vec3, qd.math.vec4, qd.math.mat2, qd.math.mat3,
                                      qd.math.mat4)


def close(a, b, tol=1e-5):
    return np.allclose(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64), rtol=tol, atol=tol)


@test()
def test_math_types_as_dtypes_annotations_and_constructors():
    x = vec3.field(shape=4)
    y = qd.field(qd.math.ivec2, shape=2)
    u = qd.Vector.field(3, qd.u32, shape=1)
    m = qd.field(mat2, shape=3)
    nd = qd.ndarray(vec2, 5)
    assert x.to_numpy().shape == (4, 3) and x.dtype is qd.f32 and y.dtype is qd.i32 and m.to_numpy().shape == (3, 2, 2)
    assert qd.math.uvec3(7).dtype == np.uint32 and nd.to_numpy().shape == (5, 2)

    @qd.kernel
    def k(v: vec3, a: mat2, n: qd.types.ndarray(dtype=vec2, ndim=1)) -> vec3:
        for i in x:
            x[i] = vec3(i) + v            # one value for every component
        y[0] = qd.math.ivec2(7.9, -2.5)   # converted to ints (truncated)
        y[1] = qd.math.ivec2(y[0].yx)
        u[0] = qd.math.uvec3(1, 2, 3)
        m[0] = a
        m[1] = mat2([[1, 2], [3, 4]])
        m[2] = mat2(5, 6, 7, 8)
        for i in n:
            n[i] = vec2(i, 2 * i)
        return vec3(vec2(1, 2), 3.5)       # a vector and a scalar concatenated

    r = k(np.array([1, 2, 3]), [[9, 8], [7, 6]], nd)
    assert r.tolist() == [1.0, 2.0, 3.5] and r.dtype == np.float32
    assert x.to_numpy().tolist() == [[1 + i, 2 + i, 3 + i] for i in range(4)]
    assert y.to_numpy().tolist() == [[7, -2], [-2, 7]] and u.to_numpy().tolist() == [[1, 2, 3]]
    assert m.to_numpy().tolist() == [[[9, 8], [7, 6]], [[1, 2], [3, 4]], [[5, 6], [7, 8]]]
    assert nd.to_numpy().tolist() == [[i, 2 * i] for i in range(5)]
    # Python scope: numpy arrays with the vector methods
    p = vec3(1, 2, 2)
    assert p.n == 3 and p.norm() == 3.0 and p.to_numpy().tolist() == [1, 2, 2] and p.dtype == np.float32
    assert close(mat2([[1, 2], [3, 4]]).inverse(), np.linalg.inv([[1, 2], [3, 4]]))
    assert mat3(1).shape == (3, 3) and qd.Matrix.identity(qd.f32, 2).tolist() == [[1, 0], [0, 1]]
    with pytest.raises(TypeError):
        vec3(1, 2)


@test()
def test_math_scalar_and_vector_functions():
    out = qd.field(qd.f32, shape=40)
    vo = qd.field(vec3, shape=8)
    M = qd.math

    @qd.kernel
    def k(x: qd.f32):
        a = vec3(1.0, 2.0, 2.0)
        b = vec3(0.0, 1.0, 0.0)
        out[0] = M.dot(a, b)
        out[1] = M.length(a)
        out[2] = M.distance(a, b)
        out[3] = M.clamp(x, 0.0, 1.0)
        out[4] = M.mix(2.0, 4.0, 0.25)
        out[5] = M.step(0.5, x)
        out[6] = M.smoothstep(0.0, 4.0, 1.0)
        out[7] = M.fract(-1.25)
        out[8] = M.sign(-x)
        out[9] = M.sign(0.0)
        out[10] = M.log2(8.0)
        out[11] = M.exp2(x)
        out[12] = M.mod(-1.0, 3.0)
        out[13] = M.degrees(M.pi)
        out[14] = M.radians(180.0)
        out[15] = M.isnan(x) + 2 * M.isnan(M.nan) + 4 * M.isinf(M.inf) + 8 * M.isinf(x)
        out[16] = M.isinf(qd.f64(-M.inf)) + 2 * M.isnan(qd.f64(M.nan)) + 4 * M.isnan(3)
        vo[0] = M.normalize(a)
        vo[1] = M.cross(a, b)
        vo[2] = M.reflect(vec3(1.0, -1.0, 0.0), b)
        vo[3] = M.refract(vec3(0.0, -1.0, 0.0), b, 1.0 / 1.5)
        vo[4] = M.refract(M.normalize(vec3(1.0, -0.1, 0.0)), b, 1.5)  # total internal reflection: zero
        vo[5] = M.clamp(vec3(-1.0, 0.5, 9.0), 0.0, 1.0)
        vo[6] = M.mix(vec3(0.0), vec3(2.0, 4.0, 6.0), vec3(0.5, 0.25, 1.0))
        vo[7] = M.step(vec3(0.5), vec3(0.2, 0.5, 0.9))
        z = vec2(3.0, 4.0)
        w = vec2(1.0, -2.0)
        out[17] = M.cmul(z, w)[0]
        out[18] = M.cmul(z, w)[1]
        out[19] = M.cdiv(z, w)[1]
        out[20] = M.csqrt(vec2(-4.0, 0.0))[1]
        out[21] = M.cexp(vec2(0.0, M.pi))[0]
        out[22] = M.clog(z)[0]
        out[23] = M.cpow(w, 2.0)[0]
        out[24] = M.cinv(w)[1]
        out[25] = M.cconj(w)[1]
        out[26] = M.vdir(M.pi / 2)[1]
        out[27] = M.atan2(1.0, 1.0) + 0 * M.tanh(x)

    k(1.5)
    o = out.to_numpy()
    expect = {0: 2, 1: 3, 2: math.sqrt(1 + 1 + 4), 3: 1, 4: 2.5, 5: 1, 6: 0.15625, 7: 0.75, 8: -1, 9: 0, 10: 3,
              11: 2 ** 1.5, 12: 2, 13: 180, 14: math.pi, 15: 6, 16: 3}
    for i, v in expect.items():
        assert close(o[i], v), (i, o[i], v)
    z, w = complex(3, 4), complex(1, -2)
    assert close(o[17:27], [(z * w).real, (z * w).imag, (z / w).imag, 2.0, -1.0, math.log(5), (w * w).real,
                            (1 / w).imag, 2.0, 1.0], 1e-4)
    assert close(o[27], math.pi / 4)
    v = vo.to_numpy()
    assert close(v[0], np.array([1, 2, 2]) / 3) and v[1].tolist() == [-2, 0, 1] and v[2].tolist() == [1, 1, 0]
    assert close(v[3], [0, -1, 0]) and v[4].tolist() == [0, 0, 0]
    assert v[5].tolist() == [0, 0.5, 1] and v[6].tolist() == [1, 1, 6] and v[7].tolist() == [0, 1, 1]
    # the functions also run in Python scope, on numbers and numpy arrays
    assert M.clamp(5, 0, 1) == 1 and close(M.normalize(vec3(0, 3, 4)), [0, 0.6, 0.8]) and M.isnan(M.nan)


@test()
def test_matrix_methods_and_transforms():
    out = qd.field(qd.f32, shape=12)
    mo = qd.field(mat3, shape=4)
    m4 = qd.field(mat4, shape=3)
    A = np.array([[2.0, 1.0, 0.5], [1.0, 3.0, -1.0], [0.0, 1.0, 4.0]], np.float32)
    B = np.array([[1, 2, 0, 1], [0, 1, 3, 0], [2, 0, 1, 1], [1, 1, 0, 2]], np.float32)

    @qd.kernel
    def k(a: mat3, b: mat4):
        out[0] = a.determinant()
        out[1] = qd.math.determinant(b)
        out[2] = a.trace()
        out[3] = mat2([[1, 2], [3, 4]]).inverse()[1, 0]
        out[4] = vec3(1.0, 2.0, 3.0).norm_sqr()
        out[5] = vec3(1.0, 0.0, 1.0).any() + 2 * vec3(1.0, 0.0, 1.0).all()
        mo[0] = a.inverse()
        mo[1] = vec3(1.0, 2.0, 3.0).outer_product(vec3(1.0, 0.0, -1.0))
        mo[2] = qd.Matrix.identity(qd.f32, 3) + qd.Matrix.zero(qd.f32, 3, 3) + qd.Matrix.diag(3, 2.0)
        mo[3] = a.transpose() @ a
        m4[0] = qd.math.inverse(b)
        m4[1] = qd.math.translate(1.0, 2.0, 3.0) @ qd.math.scale(2.0, 2.0, 2.0)
        m4[2] = qd.math.rotation3d(0.3, 0.2, 0.1)
        r = qd.math.rotation2d(qd.math.pi / 2) @ vec2(1.0, 0.0)
        out[6] = r.x
        out[7] = r.y
        out[8] = qd.math.eye(3).trace()
        out[9] = qd.Matrix.unit(3, 1, qd.f32).y
        out[10] = qd.math.rot_by_axis(vec3(0.0, 0.0, 2.0), qd.math.pi / 2)[0, 1]

    k(A, B)
    o = out.to_numpy()
    assert close(o[0], np.linalg.det(A)) and close(o[1], np.linalg.det(B), 1e-4) and close(o[2], np.trace(A))
    assert close(o[3], 1.5) and o[4] == 14 and o[5] == 1
    assert close(o[6:11], [0, 1, 3, 1, 1])
    mats = mo.to_numpy()
    assert close(mats[0], np.linalg.inv(A)) and mats[1].tolist() == np.outer([1, 2, 3], [1, 0, -1]).tolist()
    assert mats[2].tolist() == (3 * np.eye(3)).tolist() and close(mats[3], A.T @ A)
    m = m4.to_numpy()
    assert close(m[0], np.linalg.inv(B), 1e-4)
    assert m[1].tolist() == [[2, 0, 0, 1], [0, 2, 0, 2], [0, 0, 2, 3], [0, 0, 0, 1]]
    assert close(m[2] @ m[2].T, np.eye(4)) and close(np.linalg.det(m[2]), 1.0)


@test()
def test_swizzles_read_and_write():
    out = qd.field(qd.f32, shape=8)
    v4 = qd.field(vec4, shape=2)

    @qd.kernel
    def k():
        v = vec4(1.0, 2.0, 3.0, 4.0)
        s = v.wzyx + v.rgba
        out[0] = s.x
        out[1] = v.xy.dot(v.zw)
        v.xz = vec2(10.0, 30.0)
        v.w = 40.0
        v4[0] = v
        v4[1].yx = vec2(5.0, 6.0)   # a swizzle of a field element is an lvalue too
        out[2] = v.stpq.q

    k()
    assert out.to_numpy()[:3].tolist() == [5, 11, 40]
    assert v4.to_numpy().tolist() == [[10, 2, 30, 40], [6, 5, 0, 0]]


@test(debug=True)
def test_runtime_indexing_of_local_vectors_and_matrices():
    out = qd.field(qd.i32, shape=8)
    fv = qd.field(qd.math.ivec3, shape=2)

    @qd.kernel
    def k(j: qd.i32):
        v = qd.math.ivec3(10, 20, 30)
        m = qd.Matrix([[1, 2], [3, 4]])
        acc = 0
        for i in range(3):
            v[i] += i            # read and write at a run-time index
            acc += v[i]
        out[0] = acc
        out[1] = m[j, 1 - j]
        row = m[j, :]            # a row at a run-time index
        out[2] = row[0] * 10 + row[1]
        v[j] = 7
        out[3] = v.x * 100 + v.y * 10 + v.z
        for i in range(2):
            fv[i][j] = i + 1     # a field element's component
            qd.atomic_add(fv[i][2 - j], 5)

    k(1)
    assert out.to_numpy()[:4].tolist() == [63, 3, 34, 10 * 100 + 7 * 10 + 32]
    assert fv.to_numpy().tolist() == [[0, 6, 0], [0, 7, 0]]


@test()
def test_func_annotations_cast_arguments_and_return():
    out = qd.field(qd.f32, shape=6)

    @qd.func
    def trunc(a: qd.i32):
        return a

    @qd.func
    def as_vec(v: vec2) -> vec2:
        return v * 1.5

    @qd.func
    def half(x: qd.f32) -> qd.i32:
        return x / 2

    @qd.kernel
    def k(x: qd.f32):
        out[0] = trunc(3.7)
        out[1] = trunc(x)
        out[2] = as_vec(qd.math.ivec2(1, 3)).y   # ints converted to f32 before the body
        out[3] = half(7)
        out[4] = trunc(-2.5)

    k(-9.9)
    assert out.to_numpy()[:5].tolist() == [3, -9, 4.5, 3, -2]

    @qd.kernel
    def bad():
        out[0] = trunc(vec2(1.0, 2.0))

    with pytest.raises(qd.QuadrantsTypeError, match="annotated"):
        bad()


@test(debug=True)
def test_and_or_short_circuit():
    data = qd.field(qd.i32, shape=3)
    calls = qd.field(qd.i32, shape=1)
    out = qd.field(qd.i32, shape=4)

    @qd.func
    def touch(v):
        calls[0] += 1
        return v

    @qd.kernel
    def k(n: qd.i32):
        c = 0
        for i in range(5):
            if i < n and data[i] > 0:     # data[3] would be out of bounds under debug=True
                c += 1
            if i >= n or data[i] == 0:
                c += 10
        out[0] = c
        out[1] = 0 and touch(1)           # compile-time: not evaluated at all
        out[2] = (n > 100) and touch(1)   # run time: touch is not called
        out[3] = (n > 0) or touch(1)

    data.from_numpy(np.array([1, 0, 2], np.int32))
    k(3)
    assert out.to_numpy().tolist() == [32, 0, 0, 1] and calls[0] == 0

    @qd.kernel
    def bad(n: qd.i32):
        if n < 3 & (data[n] > 0):   # `&` evaluates both sides: the index check fires
            out[0] = 1

    with pytest.raises(qd.QuadrantsOutOfBoundsError):
        bad(3)


@test()
def test_conditional_expression_on_vectors():
    out = qd.field(vec2, shape=2)

    @qd.kernel
    def k(c: qd.i32):
        out[0] = vec2(1.0, 2.0) if c > 0 else vec2(3.0, 4.0)
        out[1] = vec2(1.0, 2.0) if c < 0 else 0.5

    k(1)
    assert out.to_numpy().tolist() == [[1, 2], [0.5, 0.5]]


@test()
def test_struct_fields_dataclass_and_methods():
    @qd.dataclass
    class Particle:
        x: vec2
        v: vec2
        m: qd.f32

        @qd.func
        def energy(self):
            return 0.5 * self.m * self.v.dot(self.v)

        @qd.func
        def advance(self, dt):
            self.x += self.v * dt

    Pair = qd.types.struct(a=Particle, tag=qd.i32)
    ps = Particle.field(shape=4)
    pairs = Pair.field(shape=2)
    out = qd.field(qd.f32, shape=4)

    @qd.func
    def make(i) -> Particle:
        return Particle(x=vec2(i, 0.0), v=vec2(1.0, 2.0), m=2.0)

    @qd.func
    def heavier(p: Particle, dm: qd.f32) -> Particle:
        q = p
        q.m += dm
        return q

    @qd.kernel
    def k(dt: qd.f32):
        for i in ps:
            ps[i] = make(i)
        for i in ps:
            p = ps[i]
            p.advance(dt)
            ps[i] = heavier(p, 1.0)
            ps[i].v.y = -1.0
        out[0] = ps[2].energy()
        pairs[1].a = Particle(vec2(5.0, 6.0))
        pairs[1].tag = 9
        out[1] = pairs[1].a.x.y + pairs[1].a.m

    k(0.5)
    assert ps.x.to_numpy().tolist() == [[0.5, 1], [1.5, 1], [2.5, 1], [3.5, 1]]
    assert ps.m.to_numpy().tolist() == [3] * 4 and ps.v.to_numpy()[:, 1].tolist() == [-1] * 4
    assert out.to_numpy()[:2].tolist() == [0.5 * 3 * 2, 6]
    assert pairs.a.x.to_numpy()[1].tolist() == [5, 6] and pairs.tag.to_numpy().tolist() == [0, 9]
    assert ps[1].x.tolist() == [1.5, 1] and ps[1].m == 3 and set(ps.to_numpy()) == {"x", "v", "m"}
    ps[0] = {"m": 7.0}
    assert ps.m[0] == 7
    assert Particle(m=1).m == 1 and Particle(m=1).x.tolist() == [0, 0]


@test()
def test_data_oriented_class():
    @qd.data_oriented
    class Grid:
        def __init__(self, n):
            self.n = n
            self.val = qd.field(qd.f32, shape=n)

        @qd.func
        def weight(self, i):
            return i * 2.0 + self.n

        @qd.kernel
        def fill(self, s: qd.f32):
            for i in self.val:
                self.val[i] = self.weight(i) * s

        @qd.kernel
        def total(self) -> qd.f32:
            t = 0.0
            for i in self.val:
                t += self.val[i]
            return t

    g, h = Grid(4), Grid(2)
    g.fill(1.0)
    h.fill(2.0)
    assert g.val.to_numpy().tolist() == [4, 6, 8, 10] and h.val.to_numpy().tolist() == [4, 8]
    assert g.total() == 28 and h.total() == 12


@test()
def test_static_assert():
    out = qd.field(qd.i32, shape=1)

    @qd.kernel
    def k(x: qd.template()):
        qd.static_assert(x > 0, "x must be positive")
        out[0] = x

    k(3)
    assert out[0] == 3
    with pytest.raises(qd.QuadrantsAssertionError, match="x must be positive") as e:
        k(-1)
    assert "test_language_surface.py" in str(e.value)

    @qd.kernel
    def runtime_cond(y: qd.i32):
        qd.static_assert(y > 0)

    with pytest.raises(qd.QuadrantsTypeError, match="compile-time"):
        runtime_cond(1)


def _random_draws():
    a = np.zeros(4096, np.float32)
    b = np.zeros(4096, np.int32)
    d = np.zeros(4096, np.float64)
    s = np.zeros(1, np.float32)

    @qd.kernel
    def k(a: qd.types.ndarray(dtype=qd.f32, ndim=1), b: qd.types.ndarray(dtype=qd.i32, ndim=1),
          d: qd.types.ndarray(dtype=qd.f64, ndim=1), s: qd.types.ndarray(dtype=qd.f32, ndim=1)):
        s[0] = qd.random()   # kernel scope: its own stream
        for i in range(a.shape[0]):
            a[i] = qd.random()
            b[i] = qd.random(qd.i32)
            x = 0.0
            for _ in range(3):
                x += qd.random(qd.f64)
            d[i] = x

    k(a, b, d, s)
    first = a.copy()
    k(a, b, d, s)   # the next launch draws new numbers
    return first, a, b, d, s


_REFERENCE = {}


@test(random_seed=7)
def test_random_is_uniform_and_identical_on_every_arch():
    draws = _random_draws()
    first, a, b, d, s = draws
    assert 0 <= first.min() and first.max() < 1 and abs(first.mean() - 0.5) < 0.02
    assert np.histogram(first, bins=10, range=(0, 1))[0].min() > 300
    assert (first != a).mean() > 0.99 and np.unique(b).size > 4000 and (b < 0).any()
    assert 0 <= d.min() and d.max() < 3 and abs(d.mean() - 1.5) < 0.05 and 0 <= s[0] < 1
    # The reference is the cpu's draws, made in this process: the cpu case may have run in another
    # xdist worker.
    if "cpu" not in _REFERENCE:
        if qd.cfg.arch is qd.cpu:
            _REFERENCE["cpu"] = draws
        else:
            qd.init(arch=qd.cpu, random_seed=7)
            try:
                _REFERENCE["cpu"] = _random_draws()
            finally:
                qd.reset()
    for x, y in zip(_REFERENCE["cpu"], draws):
        assert np.array_equal(x, y)


def test_random_seed_changes_the_numbers():
    outs = []
    for seed in (0, 0, 1):
        qd.init(arch=qd.cpu, random_seed=seed)
        try:
            outs.append(_random_draws()[0])
        finally:
            qd.reset()
    assert np.array_equal(outs[0], outs[1]) and not np.array_equal(outs[0], outs[2])


@test(debug=True)
def test_assert_under_debug_raises_naming_the_line():
    x = qd.field(qd.i32, shape=8)

    @qd.func
    def check(v):
        assert v < 5, "v must be below 5"

    @qd.kernel
    def k(n: qd.i32):
        for i in range(n):
            x[i] = i
            check(i)
        assert n > 0

    k(3)
    with pytest.raises(qd.QuadrantsAssertionError, match="v must be below 5") as e:
        k(7)
    assert "test_language_surface.py" in str(e.value) and 'assert v < 5, "v must be below 5"' in str(e.value)
    with pytest.raises(qd.QuadrantsAssertionError, match="assertion failed") as e:
        k(0)
    assert "assert n > 0" in str(e.value)
    k(2)  # the failure was reported once; the next launch starts clean
    assert x.to_numpy()[:5].tolist() == [0, 1, 2, 3, 4]


@test()
def test_assert_is_compiled_out_without_debug():
    @qd.kernel
    def k(n: qd.i32) -> qd.i32:
        assert n > 0, "never checked"
        return n

    assert k(-1) == -1
    assert "__qd_assert" not in qd.compile(k, 1).ir


@test()
def test_print_in_kernels(capsys):
    @qd.func
    def show(i, v):
        print(f"i={i} v={v} sq={i * i:>3} half={i / 4:.3f}", v.x)

    @qd.kernel
    def k(n: qd.i32, f: qd.f32):
        print("start", n, f, 3, qd.math.pi > 3, sep=", ")
        for i in range(n):
            show(i, qd.math.vec2(i, 0.1))
        print("end", qd.i64(-5) << 40, qd.u8(250), qd.f64(1.0) / 3, qd.Matrix([[1, 2], [3, 4]]), end="!\n")

    k(4, 2.5)
    lines = capsys.readouterr().out.splitlines()
    # run-time values print as printf prints them (%d, %f, f64 %.12f); compile-time ones as Python does
    assert lines[0] == "start, 4, 2.500000, 3, True"
    assert sorted(lines[1:5]) == [f"i={i} v=[{i}.000000, 0.100000] sq={i * i:>3} half={i / 4:.3f} {i}.000000"
                                  for i in range(4)]   # threads print in any order
    assert lines[5] == f"end {-5 << 40} 250 0.333333333333 [[1, 2], [3, 4]]!" and len(lines) == 6
    k(0, 1.0)
    assert capsys.readouterr().out == "start, 0, 1.000000, 3, True\nend -5497558138880 250 0.333333333333 [[1, 2], [3, 4]]!\n"


@test()
def test_struct_kernel_arguments_returns_and_early_return():
    Body = qd.types.struct(p=vec2, m=qd.f32, id=qd.i32)
    Pair = qd.types.struct(a=Body, w=qd.f64)

    @qd.func
    def pick(b: Body, flip) -> Body:
        if flip > 0:
            return Body(p=b.p.yx, m=b.m, id=-b.id)
        return b

    @qd.kernel
    def k(b: Body, s: Pair, flip: qd.i32) -> Pair:
        r = s
        r.a.p += b.p * b.m
        r.a.id = b.id + s.a.id
        r.w = s.w * 2
        r.a = pick(r.a, flip)
        return r

    r = k({"p": [1, 2], "m": 2.0, "id": 5}, Pair(a=Body(p=[10, 20], m=1, id=7), w=0.25), 0)
    assert r.a.p.tolist() == [12, 24] and r.a.m == 1 and r.a.id == 12 and r.w == 0.5
    r = k({"p": [1, 2], "m": 2.0, "id": 5}, Pair(a=Body(p=[10, 20], m=1, id=7), w=0.25), 1)
    assert r.a.p.tolist() == [24, 12] and r.a.id == -12
    with pytest.raises(qd.QuadrantsRuntimeTypeError, match="lacks member 'm'"):
        k({"p": [1, 2], "id": 5}, r, 0)


@test(debug=True)
def test_runtime_vector_index_checked_under_debug():
    out = qd.field(qd.i32, shape=1)

    @qd.kernel
    def k(j: qd.i32):
        v = qd.math.ivec3(1, 2, 3)
        out[0] = v[j]

    k(2)
    assert out[0] == 3
    with pytest.raises(qd.QuadrantsOutOfBoundsError, match="run-time index out of range") as e:
        k(3)
    assert "out[0] = v[j]" in str(e.value)
    with pytest.raises(qd.QuadrantsOutOfBoundsError):
        k(-1)


@test()
def test_annotated_vector_and_struct_locals():
    P = qd.types.struct(x=vec2, n=qd.i32)
    out = qd.field(qd.f32, shape=5)

    @qd.kernel
    def k():
        v: vec3 = qd.math.ivec3(1, 2, 3)   # converted to f32
        w: vec2 = 0.5                      # every component
        z: mat2 = 0
        p: P = P(n=4)
        q: P
        v /= 2
        out[0] = v.z
        out[1] = w.y
        out[2] = z[1, 1]
        out[3] = p.n + p.x.x
        out[4] = q.n

    k()
    assert out.to_numpy().tolist() == [1.5, 0.5, 0, 4, 0]


@test()
def test_bit_counting():
    vals32 = np.array([0, 1, 2, 3, 0x80000000, 0xFFFFFFFF, 0x00F0F000, 12345678, 0x7FFFFFFF, 16], np.uint32)
    vals64 = np.array([0, 1, 1 << 40, (1 << 64) - 1, 1 << 32, 12345678901234], np.uint64)

    @qd.kernel
    def k(a: qd.types.ndarray(dtype=qd.u32, ndim=1), b: qd.types.ndarray(dtype=qd.u64, ndim=1),
          o: qd.types.ndarray(dtype=qd.i32, ndim=2), p: qd.types.ndarray(dtype=qd.i32, ndim=2)):
        for i in range(a.shape[0]):
            o[i, 0] = qd.math.popcnt(a[i])
            o[i, 1] = qd.math.clz(a[i])
            o[i, 2] = qd.math.ffs(a[i])
            o[i, 3] = qd.math.clz(qd.cast(a[i], qd.u8))      # in the type's own width
            o[i, 4] = qd.math.popcnt(qd.cast(a[i], qd.i32))  # negative: its two's complement bits
        for i in range(b.shape[0]):
            p[i, 0] = qd.math.popcnt(b[i])
            p[i, 1] = qd.math.clz(b[i])
            p[i, 2] = qd.math.ffs(b[i])

    o, p = np.zeros((10, 5), np.int32), np.zeros((6, 3), np.int32)
    k(vals32, vals64, o, p)

    def ref(v, bits):
        v = int(v)
        return [bin(v).count("1"), bits - v.bit_length(), (v & -v).bit_length()]

    assert o[:, :3].tolist() == [ref(v, 32) for v in vals32]
    assert o[:, 3].tolist() == [ref(int(v) & 0xFF, 8)[1] for v in vals32] and o[:, 4].tolist() == o[:, 0].tolist()
    assert p.tolist() == [ref(v, 64) for v in vals64]
    assert qd.math.popcnt(np.uint32(7)) == 3 and qd.math.clz(np.int64(1)) == 63


def _fns_reference(mask, base, offset):
    if offset == 0:
        return base if base < 32 and (mask >> base) & 1 else 0xFFFFFFFF
    order = range(base, 32) if offset > 0 else range(min(base, 31), -1, -1)
    hits = [p for p in order if (mask >> p) & 1]
    return hits[abs(offset) - 1] if len(hits) >= abs(offset) else 0xFFFFFFFF


@test()
def test_fns_finds_the_nth_set_bit():
    cases = [(0b1011_0110, b, o) for b in (0, 1, 3, 7, 31, 40) for o in (-3, -1, 0, 1, 2, 4)]
    cases += [(0xFFFFFFFF, 5, 27), (0xFFFFFFFF, 5, 28), (0x80000001, 31, -2), (0, 0, 1)]
    m, b, o = (np.array(c, dt) for c, dt in zip(zip(*cases), (np.uint32, np.uint32, np.int32)))
    out = np.zeros(len(cases), np.uint32)

    @qd.kernel
    def k(m: qd.types.ndarray(dtype=qd.u32, ndim=1), b: qd.types.ndarray(dtype=qd.u32, ndim=1),
          o: qd.types.ndarray(dtype=qd.i32, ndim=1), out: qd.types.ndarray(dtype=qd.u32, ndim=1)):
        for i in range(m.shape[0]):
            out[i] = qd.math.fns(m[i], b[i], o[i])

    k(m, b, o, out)
    assert out.tolist() == [_fns_reference(*c) for c in cases]


@test(arch=qd.cpu)
def test_matrix_index_count_trace_and_transpose_errors():
    """A matrix takes two indices in kernels (a row is m[i, :]), a vector one; trace() needs a square
    matrix (in both scopes); transpose() of a vector points to outer_product: each a compile error."""
    @qd.kernel
    def row():
        m = qd.Matrix([[1, 2, 3], [4, 5, 6]])
        print(m[0])

    @qd.kernel
    def two():
        v = qd.Vector([1, 2, 3, 4])
        print(v[0, 0])

    @qd.kernel
    def trace():
        print(qd.Matrix([[0.1, 3.0], [5.0, 7.0], [1.0, 2.0]]).trace())

    @qd.kernel
    def transpose():
        x = qd.Vector([1, 2])
        print(x @ x.transpose())

    for kernel, match in ((row, r"Expected 2 indices, got 1 \(a row is m\[i, :\]\)"), (two, r"Expected 1 indices, got 2"),
                          (trace, r"expected a square matrix, got shape \(3, 2\)"),
                          (transpose, r"`transpose\(\)` cannot apply to a vector.*`a.outer_product\(b\)`")):
        with pytest.raises(qd.QuadrantsCompilationError, match=match):
            kernel()
    with pytest.raises(qd.QuadrantsCompilationError, match=r"expected a square matrix, got shape \(3, 2\)"):
        qd.Matrix([[0.1, 3.0], [5.0, 7.0], [1.0, 2.0]]).trace()
    assert qd.Matrix([[0.5, 3.0], [5.0, 7.0]]).trace() == 7.5


def test_python_scope_matrix_iterates_compares_and_has_entries():
    """list(m) is its rows as lists, list(v) its components as numbers; `u == v` is element-wise and
    true when every component is; .entries is the numpy array of the value's dtype."""
    data = [[2, 3, 4], [5, 6, 7]]
    m = qd.Matrix(data)
    assert list(m) == data and len(m) == 2 and list(qd.Vector([1.5, 2])) == [1.5, 2.0]
    assert qd.Vector([1, 2]) == qd.Vector([1, 2]) and not (qd.Vector([1, 2]) == qd.Vector([1, 3]))
    assert (qd.Vector([1, 2]) == qd.Vector([1, 3])).tolist() == [True, False]
    assert qd.types.vector(3, dtype=qd.f32)([0, 1, 2]).entries.dtype == np.float32
    assert qd.types.matrix(2, 2, dtype=qd.i32)([[0, 1], [2, 3]]).entries.dtype == np.int32


@test(arch=[qd.cpu, qd.vulkan])
def test_a_ref_parameter_is_the_callers_variable():
    """qd.ref(dtype): the func's stores (=, +=, atomics) change the caller's variable or element; a
    value that is not a variable, or of another dtype, is a compile error."""
    out = qd.field(qd.f32, 4)

    @qd.real_func
    def set7(a: qd.ref(qd.f32)):
        a = 7

    @qd.func
    def twice(a: qd.ref(qd.f32)):
        a += a
        qd.atomic_add(a, 1.0)

    @qd.kernel
    def k():
        a = 5.0
        set7(a)
        out[0] = a
        b = 5.0
        twice(b)
        out[1] = b
        twice(out[2])

    out[2] = 1.5
    k()
    assert out.to_numpy()[:3].tolist() == [7.0, 11.0, 4.0]

    @qd.kernel
    def bad():
        twice(3.0)

    with pytest.raises(qd.QuadrantsTypeError, match=r"annotated ref\(f32\): it must be a variable"):
        bad()

    @qd.kernel
    def bad_dtype():
        i = 3
        twice(i)

    with pytest.raises(qd.QuadrantsTypeError, match=r"annotated ref\(f32\) but is i32"):
        bad_dtype()


@test(arch=qd.cpu)
def test_ndrange_arguments_are_checked():
    """qd.ndrange takes integers and (begin, end) pairs, and a loop over an N-D one N variables (one
    vector: qd.grouped); numpy integers are compile-time bounds for qd.static(qd.ndrange(...))."""
    @qd.kernel
    def triple():
        for i in qd.ndrange((1, 2, 3)):
            pass

    @qd.kernel
    def floats():
        for i in qd.ndrange((1.1, 10.5)):
            pass

    @qd.kernel
    def one_variable():
        for i in qd.ndrange(4, 4):
            pass

    for kernel, exc, match in ((triple, qd.QuadrantsSyntaxError, r"should be a scalar or a tuple/list like \(begin, end\)"),
                               (floats, qd.QuadrantsTypeError, r"should be an integer scalar or a tuple/list of \(int, int\)"),
                               (one_variable, qd.QuadrantsSyntaxError, r"number of the loop variables not equal")):
        with pytest.raises(exc, match=match):
            kernel()
    out = qd.field(qd.i32, 1)
    a, b = np.int64(2), np.int32(5)

    @qd.kernel
    def static_numpy():
        for i in qd.static(qd.ndrange((a, b))):
            out[0] += i[0]  # one index tuple per point

    static_numpy()
    assert out[0] == 2 + 3 + 4


@test(arch=[qd.cpu, qd.vulkan])
def test_a_loop_iterable_chosen_at_compile_time():
    """for i in range(n) if qd.static(c) else qd.static(range(m)): the branch qd.static picks (a run-time
    range or an unrolled one)."""
    out = qd.field(qd.i32, 2)

    @qd.kernel
    def k(n: qd.i32, c: qd.template()):
        for i in range(n) if qd.static(c) else qd.static(range(3)):
            out[0] += i
        out[1] = 1

    k(5, True)
    assert out[0] == 10
    out[0] = 0
    k(5, False)
    assert out[0] == 3


@test(arch=[qd.cpu, qd.vulkan])
def test_zero_and_one_of_a_value():
    """qd.zero(x) / qd.one(x): x's dtype and shape, every component 0 / 1 (in both scopes)."""
    out = qd.field(qd.f64, 4)
    u = qd.field(qd.u8, ())

    @qd.kernel
    def k():
        z = qd.zero(u[None])
        z -= 1                      # u8: wraps to 255
        out[0] = z
        m = qd.one(qd.Matrix([[1.5, 2.0], [3.0, 4.0]]))
        out[1] = m.sum()
        out[2] = qd.zero(2.5) + qd.one(7)

    k()
    assert out.to_numpy()[:3].tolist() == [255, 4.0, 1.0]
    assert qd.one(qd.Vector([2, 3])).tolist() == [1, 1] and qd.zero(2.5) == 0.0
