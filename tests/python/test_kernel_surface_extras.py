"""Kernel-language surface of issue 25's second round: comprehensions over vectors and matrices,
dict comprehensions and ** in dicts, static assignment, grouped static loops, and the
qd.lang.impl helpers Python code called from a kernel uses."""
import pytest

import quadrants as qd
from quadrants.lang import impl
from test_utils import test


@test(arch=qd.cpu)
def test_comprehensions_over_vectors_matrices_and_dicts():
    @qd.kernel
    def k(n: qd.template()) -> qd.i32:
        m = qd.Matrix([[1, 2, 3], [4, 5, 6]])
        firsts = [row[0] for row in m]                  # a matrix's rows
        flat = [e * 10 for row in m for e in row]       # then a vector's entries
        squares = {i: i * i for i in range(n) if i % 2}
        more = {0: 100, **squares}
        return firsts[1] + flat[5] + more[3] + more[0] + len(more)

    assert k(5) == 4 + 60 + 9 + 100 + 3

    @qd.kernel
    def missing_key() -> qd.i32:
        d = {i: i for i in range(3)}
        return d[7]

    with pytest.raises(qd.QuadrantsCompilationError):
        missing_key()


@test(arch=qd.cpu)
def test_static_assignment():
    @qd.kernel
    def k() -> qd.i32:
        n = qd.static(3)
        a, b = qd.static(4, 5)
        total = 0
        for i in qd.static(range(n)):
            total += i
        return total * 100 + a * 10 + b

    assert k() == 345

    @qd.kernel
    def recreate():
        a = 1
        a = qd.static(2)  # noqa: F841

    with pytest.raises(qd.QuadrantsSyntaxError, match="Recreating variables is not allowed: 'a'"):
        recreate()

    @qd.kernel
    def element():
        a = qd.static([1, 2])
        a[0] = qd.static(3)

    with pytest.raises(qd.QuadrantsSyntaxError, match="Static assign cannot be used on elements in arrays") as e:
        element()
    assert "a[0] = qd.static(3)" in str(e.value)


@test(arch=qd.cpu)
def test_grouped_static_points_are_vectors():
    @qd.kernel
    def k() -> qd.f32:
        total = 0.0
        for I in qd.static(qd.grouped(qd.ndrange((1, 3), 2))):
            v = I.cast(float) * 0.5
            total += v[0] * 10 + v[1]
        return total

    assert k() == pytest.approx((0.5 + 1.0) * 10 * 2 + 0.5 * 2)


@test(arch=qd.cpu, default_fp=qd.f64)
def test_impl_helpers_from_python_code():
    @qd.func
    def twice(v):
        return v * 2

    def helper(scale):  # plain Python a kernel calls (with compile-time values) while it compiles
        builder = impl.get_runtime().compiling_callable.ast_builder()
        return impl.subscript(builder, twice(qd.Matrix([[1, 2], [3, scale]])), 1, 1)

    out = qd.field(qd.f64, 2)

    @qd.kernel
    def k(x: qd.i32):
        out[0] = helper(10)
        out[1] = impl.qd_float(x) / 4

    assert impl.get_runtime().compiling_callable is None
    k(3)
    assert out.to_numpy().tolist() == [20.0, 0.75]
    assert impl.qd_float(3) == 3.0 and impl.qd_int(2.7) == 2
    c = qd.field(qd.i32, 2)
    a, b = qd.Vector([1, 2]), qd.Vector([1, 3])

    @qd.kernel
    def compare():
        for i in qd.static(range(2)):
            c[i] = a[i] == b[i]  # compile-time numpy bools are stored as 1 / 0

    compare()
    assert c.to_numpy().tolist() == [1, 0]


@test(arch=qd.cpu)
def test_polar_decompose_of_other_sizes():
    m = qd.Matrix.field(1, 1, qd.f32, shape=())

    @qd.kernel
    def k():
        qd.polar_decompose(m, qd.f32)

    with pytest.raises(qd.QuadrantsTypeError, match="Polar decomposition only supports 2×2 and 3×3 matrices."):
        k()


@test(arch=qd.cpu)
def test_syntax_errors_of_quadrants():
    a = qd.field(qd.i32, shape=())
    b = qd.field(qd.i32, shape=(2, 2))

    @qd.kernel
    def identity():
        x = a is b  # noqa: F841

    @qd.kernel
    def membership():
        x = a in b  # noqa: F841

    @qd.kernel
    def static_membership(t: qd.template()) -> qd.i32:
        return 1 if qd.static(t is None or 3 in (1, 3)) else 0

    @qd.kernel
    def shadowing_loop():
        i = 0
        for i in range(3):  # noqa: B007
            a[None] += i

    @qd.kernel
    def nested_static():
        for i in qd.static(qd.static(range(2))):
            a[None] += i

    @qd.kernel
    def unrolled_field():
        for I in qd.static(qd.grouped(b)):
            a[None] += I[0]

    gen = (n for n in (2, 3))

    @qd.kernel
    def starred_generator():
        for I in qd.grouped(qd.ndrange(*gen)):
            a[None] += I[0]

    with pytest.raises(qd.QuadrantsSyntaxError, match=r'Operator "is" in Quadrants scope is not supported: it is only supported inside `qd.static`'):
        identity()
    with pytest.raises(qd.QuadrantsSyntaxError, match=r'"In" is only supported inside `qd.static`\. '):
        membership()
    assert static_membership(None) == 1
    with pytest.raises(qd.QuadrantsSyntaxError, match="the loop variable 'i' is already a variable of the kernel"):
        shadowing_loop()
    with pytest.raises(qd.QuadrantsSyntaxError, match=r"qd.static\(qd.static\(...\)\)"):
        nested_static()
    with pytest.raises(qd.QuadrantsSyntaxError, match="a loop over a field's elements cannot be unrolled"):
        unrolled_field()
    with pytest.raises(ValueError, match=r"a generator can be read only once") as e:
        starred_generator()
    assert isinstance(e.value, qd.QuadrantsSyntaxError) and "qd.ndrange(*gen)" in str(e.value)


@test(arch=qd.cpu)
def test_pure_kernels_and_cache_observations(tmp_path, monkeypatch):
    monkeypatch.delenv("QD_OFFLINE_CACHE_FILE_PATH", raising=False)
    qd.init(arch=qd.cpu, offline_cache=True, offline_cache_file_path=str(tmp_path))
    a = qd.ndarray(qd.i32, (4,))
    f = qd.field(qd.i32, 4)

    @qd.pure
    @qd.kernel
    def fill(x: qd.types.ndarray()):
        for i in range(4):
            x[i] = i * 5

    @qd.kernel(fastcache=True)
    def touches_a_field():
        for i in range(4):
            f[i] = i

    assert fill.fastcache and touches_a_field.fastcache
    fill(a)
    obs = fill._primal.src_ll_cache_observations
    assert a.to_numpy().tolist() == [0, 5, 10, 15]
    assert (obs.cache_key_generated, obs.cache_loaded, obs.cache_stored) == (True, False, True)
    touches_a_field()
    assert touches_a_field._primal.src_ll_cache_observations.cache_key_generated is False
    qd.init(arch=qd.cpu, offline_cache=True, offline_cache_file_path=str(tmp_path))
    b = qd.ndarray(qd.i32, (4,))
    fill(b)
    obs = fill._primal.src_ll_cache_observations
    assert (obs.cache_key_generated, obs.cache_validated, obs.cache_loaded) == (True, True, True)
    assert b.to_numpy().tolist() == [0, 5, 10, 15]


@test(arch=qd.cpu)
def test_typed_dataclass_refuses_data_oriented_members():
    import dataclasses

    @qd.data_oriented
    class Inner:
        def __init__(self, x):
            self.x = x

    @dataclasses.dataclass
    class Outer:
        inner: Inner

    @qd.kernel
    def run(s: Outer):
        s.inner.x[0] = 1

    with pytest.raises(qd.QuadrantsTypeError, match=r"member 'inner' is a @qd.data_oriented class.*qd.template\(\)"):
        run(Outer(Inner(qd.ndarray(qd.i32, (1,)))))


@test(arch=qd.cpu)
def test_matrix_returns_are_python_scope_matrices():
    @qd.kernel
    def k(a: qd.types.matrix(2, 2, qd.i32)) -> qd.types.matrix(2, 2, qd.i32):
        return a * 3

    r = k(qd.Matrix([[1, 2], [3, 4]], qd.i32))
    assert r.to_numpy().tolist() == [[3, 6], [9, 12]] and r.qd_dtype() is qd.i32 and r.n == 2

    @qd.kernel
    def v() -> qd.math.vec3:
        return qd.math.vec3(3.0, 4.0, 0.0)

    assert v().norm() == 5.0 and v().xy.tolist() == [3.0, 4.0]
