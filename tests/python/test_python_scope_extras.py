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
    s = qd.Struct.field({"p": qd.types.vector(2, qd.f32), "m": qd.f64}, shape=3, needs_grad=True, needs_dual=True)
    assert s.p.grad.shape == (3,) and s.p.dual.element_shape == (2,) and s.m.grad.dtype is qd.f64
    v = qd.Vector.field(3, qd.f32, shape=4, needs_grad=True)
    assert v.grad.shape == (4,) and v.grad.element_shape == (3,)
    for make in (lambda: qd.field(qd.i32, 2, needs_grad=True), lambda: qd.Vector.field(2, int, 2, needs_dual=True),
                 lambda: qd.Struct.field({"p": qd.f32, "n": qd.u8}, shape=2, needs_grad=True)):
        with pytest.raises(qd.QuadrantsRuntimeError, match=r"is not supported for field with `needs_grad=True` or "
                                                           r"`needs_dual=True`\."):
            make()


@test(arch=qd.cpu)
def test_field_python_scope_errors():
    x = qd.field(qd.i32, shape=(2, 2), name="x")
    assert x._name == "x" and x.snode._name == "x" and x.snode.shape == (2, 2)
    with pytest.raises(qd._lib.core.QuadrantsRuntimeError, match="Every dimension of a Quadrants field should be "
                                                                 r"positive, got shape \(3, 0\)"):
        qd.field(qd.f32, shape=(3, 0))
    with pytest.raises(AssertionError, match="x has 2 dimension.* Slicing is not supported on qd.field"):
        x[0] = 1
    with pytest.raises(IndexError):
        x[0]
    with pytest.raises(TypeError, match=r"illegal element of type: slice\. Please be aware that slicing a qd.field"):
        x[0, :]
    with pytest.raises(NotImplementedError, match="Struct for is only available in Quadrants scope"):
        list(x)
    with pytest.raises(ValueError, match=r"shape \(1,\) does not match \(\)"):
        qd.field(qd.f32, shape=()).from_numpy(np.zeros(1, np.float32))


# --- print formatting --------------------------------------------------------------------------------------------
@test(arch=qd.cpu)
def test_print_formats_as_printf(capfd):
    @qd.kernel
    def k(x: qd.f32, n: qd.i32, u: qd.u16, d: qd.f64):
        print(x, n, u, d, 7, 0.5)
        print("{1:.3f}|{0:5d}|{2:x}|{w:.1}|{w:.2e}".format(n, x, u, w=x))
        print(f"{n:.4}|{x:.1}|{qd.Vector([x, 2 * x]):g}|{n:>4}|{3.0:.2f}|{2.0:.1}|{u:#o}")
        m = qd.Matrix([[1.5, 2.0], [3.0, 4.25]])
        print("{} {:.2f}".format(m, m[1, 1]), qd.cast(n > 2, bool))

    capfd.readouterr()
    k(2.5, 42, 42, 1 / 3)
    assert capfd.readouterr().out.splitlines() == [
        "2.500000 42 42 0.333333333333 7 0.5",
        "2.500|   42|2a|2.5|2.50e+00",
        "0042|2.5|[2.5, 5]|  42|3.00|2.0|052",
        "[[1.500000, 2.000000], [3.000000, 4.250000]] 4.25 1",
    ]


@test(arch=qd.cpu)
def test_print_format_errors():
    x = qd.field(qd.f32, 1)

    @qd.kernel
    def signed_as_unsigned(n: qd.i32):
        print("{:u}".format(n))

    @qd.kernel
    def real_as_int():
        print(f"{x[0]:.2d}")

    @qd.kernel
    def too_many(n: qd.i32):
        print("{0} {1}".format(n, n, n))

    @qd.kernel
    def unused_keyword(n: qd.i32):
        print("{}".format(n, w=n))

    @qd.kernel
    def missing_keyword(n: qd.i32):
        print("{w}".format(n))

    @qd.kernel
    def char_conversion(n: qd.i32):
        print("{:c}".format(n))

    with pytest.raises(qd.QuadrantsTypeError, match=r"'u' doesn't match 'i32'\.") as e:
        signed_as_unsigned(1)
    assert 'print("{:u}".format(n))' in str(e.value)
    with pytest.raises(qd.QuadrantsTypeError, match=r"'\.2d' doesn't match 'f32'\."):
        real_as_int()
    with pytest.raises(qd.QuadrantsSyntaxError, match=r"Expected 2 positional argument\(s\), but received 3 instead\."):
        too_many(1)
    with pytest.raises(qd.QuadrantsSyntaxError, match=r"Keyword 'w' not used\."):
        unused_keyword(1)
    with pytest.raises(qd.QuadrantsSyntaxError, match=r"Expected 0 positional argument\(s\), but received 1"):
        missing_keyword(1)
    with pytest.raises(qd.QuadrantsTypeError, match=r"conversion 'c' is not supported\."):
        char_conversion(1)


@test(arch=qd.cpu)
def test_ndarray_shapes_and_element_sizes():
    v = qd.Vector.ndarray(3, qd.f32, shape=(2,))
    m = qd.Matrix.ndarray(2, 4, qd.i32, shape=5)
    s = qd.ndarray(qd.f32, (3, 3))
    assert (v.n, v.m, m.n, m.m, s.n, s.m) == (3, 1, 2, 4, None, None)
    for shape in (0, (2, 0), 1.5, (1, 0.5), 2 ** 31, (2, 2 ** 30)):
        with pytest.raises(qd.QuadrantsRuntimeError, match=r"is not a valid shape for ndarray") as e:
            qd.ndarray(qd.i32, shape)
        assert isinstance(e.value, (TypeError, ValueError))
    with pytest.raises(qd.QuadrantsRuntimeError, match=r"\(4, 0\) is not a valid shape for ndarray"):
        qd.math.vec3.ndarray(shape=(4, 0))
    assert qd.ndarray(qd.i32, np.int32(4)).shape == (4,)
