"""Field layouts as programs see them: qd.get_addr (element addresses in memory order), order= and
offset= errors, SNode.place(..., offset=), the layout property, the place node of a field made with
shape= (x._snode), _get_dynamic_index_stride, get_runtime().materialize(); and the Python-scope
matrix surface: isinstance(v, qd.Matrix), numpy scalars with vectors, ndarray argument errors."""
import numpy as np
import pytest

import quadrants as qd
from tests.test_utils import test

ARCHS = [qd.cpu, qd.vulkan]


@test(arch=ARCHS)
def test_get_addr_memory_order():
    X, Y, Z = 4, 3, 2
    a = qd.field(qd.i32, shape=(X, Y, Z))
    b = qd.field(qd.i32, shape=(X, Y, Z), order="kij")
    v = qd.Vector.field(3, qd.f64, shape=(X, Y), order="ji")

    @qd.kernel
    def addr3(f: qd.template(), i: qd.i32, j: qd.i32, k: qd.i32) -> qd.u64:
        return qd.get_addr(f, [i, j, k])

    @qd.kernel
    def addr2(f: qd.template(), i: qd.i32, j: qd.i32) -> qd.u64:
        return qd.get_addr(f, qd.Vector([i, j]))

    for i in range(X):
        for j in range(Y):
            for k in range(Z):
                assert addr3(a, i, j, k) - addr3(a, 0, 0, 0) == (i * Y * Z + j * Z + k) * 4
                assert addr3(b, i, j, k) - addr3(b, 0, 0, 0) == (k * X * Y + i * Y + j) * 4
                assert addr3(a, i, j, k) == qd.get_addr(a, [i, j, k])  # Python scope: the same address
            assert addr2(v, i, j) - addr2(v, 0, 0) == (j * X + i) * 3 * 8  # whole elements of 3 f64
    with pytest.raises(qd.QuadrantsTypeError, match="2 axes, got 1"):
        qd.get_addr(v, [0])


@test(arch=ARCHS)
def test_get_addr_offset_field():
    x = qd.field(qd.i32, shape=8, offset=-4)

    @qd.kernel
    def addr(i: qd.i32) -> qd.u64:
        return qd.get_addr(x, i)

    assert addr(-4) == qd.get_addr(x, -4) and addr(3) - addr(-4) == 7 * 4


def test_order_errors():
    qd.init(arch=qd.cpu)
    cases = [(dict(shape=3, order="ij"), "dimensionality of shape and order must be the same"),
             (dict(shape=None, order="i"), "shape cannot be None when order is set"),
             (dict(shape=(3, 4, 3), order="iji"), "axes in order must be different"),
             (dict(shape=(3, 4, 3), order="ijl"), "Invalid axis 'l'")]
    for kwargs, message in cases:
        for make in (lambda **kw: qd.field(qd.f32, **kw), lambda **kw: qd.Vector.field(2, qd.f32, **kw)):
            with pytest.raises(qd.QuadrantsCompilationError, match=message) as info:
                make(**kwargs)
            assert isinstance(info.value, ValueError)


def test_offset_errors():
    qd.init(arch=qd.cpu)
    with pytest.raises(qd.QuadrantsCompilationError, match="dimensionality of shape and offset must be the same"):
        qd.Matrix.field(2, 2, qd.i32, shape=(4, 4, 4), offset=(1, 2))
    with pytest.raises(ValueError, match="shape cannot be None when offset is set"):
        qd.field(qd.f32, shape=None, offset=(3,))
    with pytest.raises(qd.QuadrantsCompilationError, match="dimensionality"):
        qd.root.dense(qd.ij, 4).place(qd.field(qd.i32), offset=(1, 2, 3))


@test(arch=ARCHS)
def test_place_with_offset():
    a = qd.field(qd.i32)
    b = qd.field(qd.f32)
    qd.root.dense(qd.ij, (3, 2)).place(a, b, offset=(-1, 10))
    assert a.offset == b.offset == (-1, 10) and a.shape == (3, 2)

    @qd.kernel
    def fill():
        for i, j in a:
            a[i, j] = i * 100 + j

    fill()
    assert a[-1, 10] == -90 and a[1, 11] == 111
    assert a.to_numpy().tolist() == [[i * 100 + j for j in (10, 11)] for i in (-1, 0, 1)]


@test(arch=ARCHS)
def test_layout_and_place_node_of_shaped_field():
    f = qd.field(qd.f32, shape=(5, 7), order="ji", needs_grad=True)
    g = qd.field(qd.f32, shape=(5, 7))
    assert f.layout == f.grad.layout == (1, 0) and g.layout is None
    assert qd.ndarray(qd.f32, shape=(2, 3)).layout is None
    for x in (f, f.grad, g):  # one dense node under qd.root
        dense = x._snode.parent()
        assert x._snode is x.snode and dense.parent() is qd.root and qd.root.parent() is None
        assert dense.shape == (5, 7)
    assert [a for a, _ in f._snode.parent().sizes] == [1, 0]  # memory order: j outermost
    assert qd.field(qd.f32)._snode is None  # not placed yet


@test(arch=ARCHS)
def test_dynamic_index_stride_and_materialize():
    whole = qd.Vector.field(3, qd.f64, shape=4)
    assert whole._get_dynamic_index_stride() == 8
    assert qd.field(qd.i32, shape=4)._get_dynamic_index_stride() is None
    v = qd.Vector.field(2, qd.i32)
    qd.root.dense(qd.i, 8).place(v.get_scalar_field(0))
    with pytest.raises(RuntimeError, match="not placed"):
        qd.lang.impl.get_runtime().materialize()
    qd.root.dense(qd.i, 8).place(v.get_scalar_field(1))
    qd.lang.impl.get_runtime().materialize()
    assert v.shape == (8,) and v._get_dynamic_index_stride() is None


def test_python_scope_matrices_are_matrices():
    qd.init(arch=qd.cpu)
    vec = qd.Vector([1, 2])
    mat = qd.Matrix([[1, 2], [3, 4]])
    for value in (vec, mat, np.cos(0) + vec, vec + np.float64(1), np.float32(2) * mat, vec / np.cos(0)):
        assert isinstance(value, qd.Matrix)
    assert (np.cos(0) + vec).tolist() == [2.0, 3.0]
    assert not isinstance(np.zeros(2), qd.Matrix) and not isinstance(mat, qd.Vector)



def test_numpy_argument_errors_are_value_errors():
    qd.init(arch=qd.cpu)

    @qd.kernel
    def mat(arr: qd.types.ndarray(dtype=qd.math.mat3, ndim=2)):
        pass

    @qd.kernel
    def ints(arr: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        pass

    cases = [(mat, np.zeros((2, 2, 2, 3), np.float32), r"required element_shape=\(3, 3\), array with element "
                                                       r"shape of \(2, 3\)"),
             (mat, np.zeros((2, 2, 3), np.float32), "required array has ndim=2 element_dim=2, array with 3 dimensions"),
             (ints, np.zeros((2, 2), np.int32), "required array has ndim=1, array with 2 dimensions"),
             (ints, np.zeros(2, np.int64), "required array has dtype=i32, array with dtype=i64")]
    for kernel, arr, message in cases:
        with pytest.raises(ValueError, match=message) as info:
            kernel(arr)
        assert isinstance(info.value, qd.QuadrantsTypeError)


def test_loop_config_name(capfd):
    qd.init(arch=qd.cpu)
    a = qd.field(qd.i32, shape=8)

    @qd.kernel
    def named():
        qd.loop_config(name="top")
        for i in range(8):
            a[i] = i
        for _ in qd.static(range(2)):
            qd.loop_config(name="unrolled", block_dim=4)
            for i in range(8):
                a[i] += 1

    @qd.kernel
    def nested():
        for _ in range(2):
            qd.loop_config(name="inner")
            for i in range(8):
                a[i] += 1

    capfd.readouterr()
    named()
    assert a.to_numpy().tolist() == [i + 2 for i in range(8)]
    assert "nested inside another for-loop" not in capfd.readouterr().err
    nested()
    err = capfd.readouterr().err
    assert a.to_numpy().tolist() == [i + 4 for i in range(8)]
    assert "qd.loop_config(name='inner') in kernel 'nested'" in err and "nested inside another for-loop" in err

    @qd.kernel
    def bad():
        qd.loop_config(name=3)
        for i in range(8):
            a[i] = 0

    with pytest.raises(qd.QuadrantsSyntaxError, match="non-empty string"):
        bad()


def test_numpy_array_for_a_matrix_dtype_keeps_its_dtype():
    qd.init(arch=qd.cpu)

    @qd.kernel
    def fill(a: qd.types.ndarray(dtype=qd.math.mat2, ndim=1)):
        for i in range(a.shape[0]):
            for j, k in qd.ndrange(2, 2):
                a[i][j, k] = i * 10 + j * 2 + k + 0.5

    ints, reals = np.zeros((3, 2, 2), np.int32), np.zeros((3, 2, 2), np.float32)
    fill(ints)
    fill(reals)
    assert ints[2].tolist() == [[20, 21], [22, 23]] and reals[2].tolist() == [[20.5, 21.5], [22.5, 23.5]]
    with pytest.raises(qd.QuadrantsTypeError, match="expects dtype f32"):  # a qd.ndarray is checked
        fill(qd.Matrix.ndarray(2, 2, qd.i32, shape=3))
