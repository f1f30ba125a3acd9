"""Python-scope behaviour of issue 25's second round: pickling ndarrays, unpacked vector members of
@qd.dataclass, and the check that every field declared without a shape is placed before a kernel runs."""
import pickle

import numpy as np
import pytest

import quadrants as qd
from test_utils import test


# --- pickle -----------------------------------------------------------------------------------------------------
@test(arch=qd.cpu)
def test_pickle_ndarrays_keep_dtype_shape_and_contents():
    a = qd.ndarray(qd.i16, (2, 3))
    a[1, 2] = -7
    b = pickle.loads(pickle.dumps(a))
    assert b.dtype is qd.i16 and b.shape == (2, 3) and b.element_shape == ()
    assert b.to_numpy().tolist() == [[0, 0, 0], [0, 0, -7]]
    b[0, 0] = 5  # a copy, not the same memory
    assert a[0, 0] == 0

    m = qd.Matrix.ndarray(2, 2, qd.f64, shape=(3,))
    m[2] = [[1.5, 2.5], [3.5, 4.5]]
    m2 = pickle.loads(pickle.dumps(m))
    assert m2.element_shape == (2, 2) and m2.dtype is qd.f64
    assert m2.to_numpy()[2].tolist() == [[1.5, 2.5], [3.5, 4.5]]


@test(arch=qd.cpu)
def test_pickle_keeps_layout_and_grad_and_dtypes_by_identity():
    assert pickle.loads(pickle.dumps(qd.u1)) is qd.u1 and pickle.loads(pickle.dumps(qd.f16)) is qd.f16
    t = qd.tensor(qd.f32, (2, 3), layout=(1, 0), needs_grad=True)
    a = t._unwrap()
    a[1, 2] = 4.0
    a.grad[0, 1] = 2.0
    b = pickle.loads(pickle.dumps(a))
    assert b.shape == (2, 3) and b._qd_layout == (1, 0)
    assert b.to_numpy().tolist() == [[0, 0, 0], [0, 0, 4.0]]
    assert b.grad.to_numpy().tolist() == [[0, 2.0, 0], [0, 0, 0]]


# --- unpacked vector members --------------------------------------------------------------------------------------
@test(arch=qd.cpu)
def test_unpacked_vector_members():
    @qd.dataclass
    class Cell:
        w: qd.f32
        r: qd.types.vector(3, qd.i32, unpacked=True)

    assert list(Cell.members) == ["w", "_r0", "_r1", "_r2"]
    assert Cell._unpacked_groups["r"] == (3, qd.i32, ("_r0", "_r1", "_r2"))
    cells = Cell.field(shape=2)
    out = qd.field(qd.i32, 3)

    @qd.kernel
    def k():
        c = Cell()
        for i in qd.static(range(3)):
            c.r[i] = i * 10 + 1
            cells[1].r[i] = c.r[i] + 100
        out[0] = c.r[0] + c.r[2]
        out[1] = cells[1].r[1]
        out[2] = c._r1

    k()
    assert out.to_numpy().tolist() == [22, 111, 11]
    assert cells._r2.to_numpy().tolist() == [0, 121]


@test(arch=qd.cpu)
def test_unpacked_vector_errors():
    T = qd.types.vector(2, qd.f32, unpacked=True)
    for make in (lambda: T(1, 2), lambda: T.field(shape=3), lambda: T.ndarray(shape=3)):
        with pytest.raises(qd.QuadrantsSyntaxError, match=r"unpacked=True.*@qd\.dataclass"):
            make()
    with pytest.raises(qd.QuadrantsSyntaxError, match=r"member '_r1' collides with a member of the unpacked vector 'r'"):
        qd.types.struct(r=T, _r1=qd.f32)
    with pytest.raises(qd.QuadrantsSyntaxError, match=r"member '_r0' collides"):
        qd.types.struct(_r0=qd.i32, r=T)
    S = qd.types.struct(r=T)
    out = qd.field(qd.f32, 1)

    @qd.kernel
    def runtime_index(n: qd.i32):
        s = S()
        out[0] = s.r[n]

    with pytest.raises(qd.QuadrantsSyntaxError, match=r"python-int index") as e:
        runtime_index(0)
    assert "out[0] = s.r[n]" in str(e.value)

    @qd.kernel
    def past_the_end():
        s = S()
        out[0] = s.r[2]

    with pytest.raises(qd.QuadrantsIndexError, match=r"index 2 is out of bounds for the unpacked vector 'r' of 2"):
        past_the_end()


# --- fields declared without a shape -----------------------------------------------------------------------------
@test(arch=qd.cpu)
def test_unplaced_fields_stop_kernels():
    a = qd.field(qd.f32, needs_grad=True, needs_dual=True, name="a")

    @qd.kernel
    def k():
        pass

    with pytest.raises(RuntimeError, match=r"These field\(s\) are not placed:\n=+\nfield 'a' declared at .*"
                                           r"test_python_scope_extras.py:\d+"):
        k()
    qd.root.dense(qd.i, 2).place(a)
    with pytest.raises(RuntimeError, match=r"requrie `needs_grad=True`, however their grad field\(s\) are not placed"):
        k()
    qd.root.dense(qd.i, 2).place(a.grad)
    with pytest.raises(RuntimeError, match=r"requrie `needs_dual=True`, however their dual field\(s\)"):
        k()
    qd.root.dense(qd.i, 2).place(a.dual)
    k()
    assert a.grad.shape == a.dual.shape == (2,)


@test(arch=qd.cpu)
def test_matrix_components_placed_one_by_one():
    v = qd.Vector.field(2, qd.i32)
    qd.root.dense(qd.i, 3).place(v.get_scalar_field(0))
    qd.root.dense(qd.i, 3).place(v.get_scalar_field(1))
    assert v.shape == (3,)
    m = qd.Matrix.field(1, 2, qd.i32)
    qd.root.dense(qd.i, 3).place(m.get_scalar_field(0, 0))
    qd.root.dense(qd.i, 4).place(m.get_scalar_field(0, 1))

    @qd.kernel
    def k():
        v[2] = [5, 6]

    with pytest.raises(RuntimeError, match=r"Members of the following field have different shapes \[\(3,\), \(4,\)\]"):
        k()


@test(arch=qd.cpu)
def test_struct_and_vector_fields_have_companions():
    s = qd.Struct.field({"p": qd.types.vector(2, qd.f32), "n": qd.i32}, shape=3, needs_grad=True, needs_dual=True)
    assert s.p.grad.shape == (3,) and s.p.dual.element_shape == (2,) and s.n.grad is None
    v = qd.Vector.field(3, qd.f32, shape=4, needs_grad=True)
    assert v.grad.shape == (4,) and v.grad.element_shape == (3,)
