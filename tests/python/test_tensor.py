"""The unified tensor API (docs/tensor.md): qd.Backend, qd.tensor / qd.Vector.tensor /
qd.Matrix.tensor, the qd.Tensor wrapper, layout= (stored order, canonical views), the qd.Tensor
annotation, tensors in dataclasses and data-oriented objects, qd.ndrange(axes=)."""
import dataclasses
import itertools
import pickle
from enum import IntEnum

import numpy as np
import pytest

import quadrants as qd
from quadrants._tensor import _with_layout
from tests.test_utils import test

BACKENDS = [qd.Backend.FIELD, qd.Backend.NDARRAY]
ARCHS = [qd.cpu, qd.vulkan]


def test_backend_enum():
    assert issubclass(qd.Backend, IntEnum)
    assert [(b.name, int(b)) for b in qd.Backend] == [("FIELD", 0), ("NDARRAY", 1)]
    with pytest.raises(ValueError):
        qd.Backend(2)


@test(arch=ARCHS)
def test_factory_dispatch_and_defaults():
    a = qd.tensor(qd.f32, shape=(4, 5))
    assert type(a) is qd.Tensor and isinstance(a._unwrap(), qd.Ndarray) and a._backend is qd.Backend.NDARRAY
    b = qd.tensor(qd.i32, shape=3, backend=0)
    assert isinstance(b._unwrap(), qd.Field) and b.shape == (3,) and b.dtype == qd.i32 and b.layout is None
    assert qd.tensor(qd.f32, (2, 2), layout=(0, 1)).layout is None  # the identity is no layout
    v = qd.tensor(qd.types.vector(3, qd.f32), shape=(4,), backend=qd.Backend.FIELD)
    assert type(v) is qd.VectorTensor and v.element_shape == (3,) and v.shape == (4,)
    m = qd.Matrix.tensor(2, 3, qd.f32, shape=(5,))
    assert type(m) is qd.MatrixTensor and m.element_shape == (2, 3) and (m.n, m.m) == (2, 3)
    assert repr(qd.tensor(qd.i32, (2, 3), layout=(1, 0))) == \
        "Tensor(shape=(2, 3), dtype=i32, backend=NDARRAY, layout=(1, 0))"


@test(arch=[qd.cpu])
def test_factory_errors():
    with pytest.raises(ValueError, match="backend="):
        qd.tensor(qd.f32, (3,), backend=42)
    with pytest.raises(ValueError, match="backend="):
        qd.tensor(qd.f32, (3,), backend="field")
    with pytest.raises(TypeError, match="unexpected keyword"):
        qd.tensor(qd.f32, (4, 5), offset=(1, 1))
    with pytest.raises(TypeError, match="layout="):
        qd.tensor(qd.f32, (4, 5), order="ji")
    with pytest.raises(ValueError, match="layout has 3 entries"):
        qd.tensor(qd.f32, (4, 5), layout=(0, 1, 2))
    with pytest.raises(ValueError, match="not a permutation"):
        qd.tensor(qd.f32, (4, 5), layout=(0, 0))
    with pytest.raises(TypeError, match="layout.*not supported.*compound"):
        qd.tensor(qd.types.vector(3, qd.f32), (4,), layout=(0,))
    with pytest.raises(TypeError, match="unexpected keyword"):
        qd.Vector.tensor(3, qd.f32, (4,), layout=(0,))
    with pytest.raises(TypeError, match="Tensor.*requires"):
        qd.Tensor(42)
    with pytest.raises(TypeError, match="Tensor.*requires"):
        qd.Tensor(qd.tensor(qd.i32, (4,)))  # no double wrapping
    with pytest.raises(TypeError, match="qd.wrap"):
        qd.tensor(qd.ndarray(qd.i32, (4,)), (4,))
    a, b = qd.tensor(qd.f32, (4,), backend=qd.Backend.FIELD), qd.tensor(qd.f32, (4,))
    with pytest.raises(TypeError, match="cross-backend"):
        a.copy_from(b)


@pytest.mark.parametrize("backend", BACKENDS, ids=["field", "ndarray"])
@pytest.mark.parametrize("layout", [None, (1, 0)])
@test(arch=ARCHS)
def test_host_surface_is_canonical(backend, layout):
    src = np.arange(12, dtype=np.int32).reshape(3, 4)
    t = qd.tensor(qd.i32, shape=(3, 4), backend=backend, layout=layout)
    assert t.shape == (3, 4) and t.layout == layout
    t.from_numpy(src)
    assert t.to_numpy().tolist() == src.tolist()
    assert t.to_numpy(dtype=np.float64).dtype == np.float64
    assert [t[i, j] for i in range(3) for j in range(4)] == list(range(12))
    t[2, 1] = 99
    assert t.to_numpy()[2, 1] == 99 and t[2, 1] == 99
    u = qd.tensor(qd.i32, shape=(3, 4), backend=backend, layout=layout)
    u.copy_from(t)
    assert u.to_numpy().tolist() == t.to_numpy().tolist()
    u.copy_from(t._unwrap())  # a bare field / ndarray too
    u.fill(7)
    assert (u.to_numpy() == 7).all()
    r = pickle.loads(pickle.dumps(t))
    assert type(r) is qd.Tensor and r.shape == (3, 4) and r.layout == layout and r._backend is backend
    assert r.to_numpy().tolist() == t.to_numpy().tolist()
    d = np.from_dlpack(t)  # the canonical view; on cpu it shares the memory
    assert d.shape == (3, 4) and d.tolist() == t.to_numpy().tolist()


@pytest.mark.parametrize("backend", BACKENDS, ids=["field", "ndarray"])
@test(arch=[qd.cpu])
def test_layout_stores_permuted_bytes(backend):
    """shape (N, B) and shape (B, N) with layout=(1, 0) store identical bytes; the zero-copy view
    is canonical with permuted strides."""
    parent = qd.tensor(qd.i32, shape=(3, 5), backend=backend)
    rotated = qd.tensor(qd.i32, shape=(5, 3), backend=backend, layout=(1, 0))
    for c, b in itertools.product(range(3), range(5)):
        parent[c, b] = rotated[b, c] = c * 100 + b
    view = rotated.to_numpy(copy=False)
    assert view.shape == (5, 3) and view.strides == (4, 20)
    raw = np.lib.stride_tricks.as_strided(view, shape=(15,), strides=(4,))
    assert raw.tolist() == parent.to_numpy().reshape(-1).tolist()
    if backend is qd.Backend.NDARRAY:
        assert rotated._unwrap()._physical_shape == (3, 5) and rotated._unwrap()._qd_layout == (1, 0)


@pytest.mark.parametrize("backend", BACKENDS, ids=["field", "ndarray"])
@pytest.mark.parametrize("layout", list(itertools.permutations(range(3))))
@test(arch=ARCHS)
def test_kernels_index_canonically(backend, layout):
    t = qd.tensor(qd.i32, shape=(2, 3, 4), backend=backend, layout=layout)

    @qd.kernel
    def fill(x: qd.Tensor):
        for i, j, k in qd.ndrange(x.shape[0], x.shape[1], x.shape[2]):
            x[i, j, k] = i * 100 + j * 10 + k

    @qd.kernel
    def bump(x: qd.Tensor):
        for i, j, k in x:
            x[i, j, k] += 1000

    fill(t)
    bump(t)
    want = np.fromfunction(lambda i, j, k: 1000 + i * 100 + j * 10 + k, (2, 3, 4), dtype=np.int32)
    assert t.to_numpy().tolist() == want.tolist()


@test(arch=ARCHS)
def test_one_kernel_both_backends_and_none():
    @qd.kernel
    def fill(x: qd.Tensor, y: qd.Tensor):
        for i in range(4):
            x[i] = i + 1
            if qd.static(y is not None):
                y[i] = x[i] * 2

    f, n = qd.tensor(qd.i32, (4,), backend=qd.Backend.FIELD), qd.tensor(qd.i32, (4,))
    fill(f, n)
    fill(n, None)
    fill(f._unwrap(), None)  # a bare field or ndarray works the same
    assert f.to_numpy().tolist() == n.to_numpy().tolist() == [1, 2, 3, 4]
    fill(qd.tensor(qd.i32, (4,)), n)
    assert n.to_numpy().tolist() == [2, 4, 6, 8]
    assert len(fill._primal.mapper.mapping) == 4


@test(arch=ARCHS)
def test_layout_is_part_of_the_cache_key():
    @qd.kernel
    def k(x: qd.types.ndarray()):
        for i, j in qd.ndrange(2, 3):
            x[i, j] = i * 10 + j

    a, b = qd.tensor(qd.i32, (2, 3)), qd.tensor(qd.i32, (2, 3), layout=(1, 0))
    k(a)
    k(b)
    assert len(k.materialized_kernels) == 2
    assert a.to_numpy().tolist() == b.to_numpy().tolist() == [[0, 1, 2], [10, 11, 12]]
    c = qd.ndarray(qd.i32, (3, 2))  # a bare ndarray at the stored shape, tagged
    _with_layout(c, (1, 0))
    assert c.shape == (2, 3)
    k(c)
    assert c.to_numpy().tolist() == a.to_numpy().tolist()


@pytest.mark.parametrize("backend", BACKENDS, ids=["field", "ndarray"])
@test(arch=ARCHS)
def test_vector_and_matrix_tensors_in_kernels(backend):
    v = qd.Vector.tensor(3, qd.f32, shape=(4,), backend=backend)
    m = qd.Matrix.tensor(2, 2, qd.i32, shape=(3,), backend=backend)

    @qd.kernel
    def fill(x: qd.Tensor, y: qd.Tensor):
        for i in range(4):
            for j in qd.static(range(3)):
                x[i][j] = i * 10.0 + j
        for i in range(3):
            y[i] = qd.Matrix([[i, 1], [2, i * i]])

    fill(v, m)
    assert v.to_numpy()[2].tolist() == [20.0, 21.0, 22.0] and v.to_numpy().shape == (4, 3)
    assert m.to_numpy()[2].tolist() == [[2, 1], [2, 4]]
    r = pickle.loads(pickle.dumps(v))
    assert type(r) is qd.VectorTensor and r.to_numpy().tolist() == v.to_numpy().tolist()


@pytest.mark.parametrize("backend", BACKENDS, ids=["field", "ndarray"])
@test(arch=ARCHS)
def test_gradient_companions(backend):
    t = qd.tensor(qd.f32, (2, 3), backend=backend, layout=(1, 0), needs_grad=True)
    assert t.has_grad() and t.grad is t.grad and t.grad.shape == (2, 3) and t.grad.layout == (1, 0)
    assert qd.tensor(qd.i32, (4,), backend=backend, needs_grad=True).grad is None  # integers: none

    @qd.kernel
    def k(x: qd.Tensor):
        for i, j in qd.ndrange(2, 3):
            x[i, j] = i * 10.0 + j
            x.grad[i, j] = i * 100.0 + j * 10.0

    k(t)
    assert t.to_numpy()[1, 2] == 12.0 and t.grad.to_numpy()[1, 2] == 120.0


@pytest.mark.parametrize("backend", BACKENDS, ids=["field", "ndarray"])
@test(arch=ARCHS)
def test_tensors_in_dataclasses_and_data_oriented(backend):
    @dataclasses.dataclass(frozen=True)
    class State:
        a: qd.Tensor
        b: qd.Tensor

    @qd.data_oriented
    class Holder:
        def __init__(self, vals):
            self.vals = vals

    s = State(qd.tensor(qd.i32, (4,), backend=backend), qd.tensor(qd.i32, (4,)))
    h = Holder(qd.tensor(qd.i32, (4,), backend=backend))

    @qd.func
    def double(x: qd.Tensor, i: qd.i32):
        x[i] = x[i] * 2

    @qd.kernel
    def run(st: State, ho: qd.template()):
        for i in range(4):
            st.a[i] = i
            st.b[i] = st.a[i] + 10
            ho.vals[i] = st.b[i]
            double(ho.vals, i)

    run(s, h)
    assert s.a.to_numpy().tolist() == [0, 1, 2, 3] and s.b.to_numpy().tolist() == [10, 11, 12, 13]
    assert h.vals.to_numpy().tolist() == [20, 22, 24, 26]
    h.vals = qd.tensor(qd.i32, (4,), backend=backend)  # another tensor: the kernel follows it
    run(s, h)
    assert h.vals.to_numpy().tolist() == [20, 22, 24, 26]


@test(arch=ARCHS)
def test_field_order_and_offset():
    x = qd.field(qd.i32, shape=(4, 6), order="ji", offset=(1, 2))

    @qd.kernel
    def write():
        x[1, 2] = 42
        x[4, 7] = 7

    write()
    assert x[1, 2] == 42 and x[4, 7] == 7 and x._qd_layout == (1, 0)
    with pytest.raises(ValueError, match="order="):
        qd.field(qd.i32, shape=(4, 6), order="ik")


@test(arch=ARCHS)
def test_ndrange_axes_order():
    out = qd.field(qd.i32, shape=(6, 2))
    n = qd.field(qd.i32, shape=())

    @qd.kernel
    def record():
        for i, j in qd.ndrange(2, 3, axes=(1, 0)):
            qd.loop_config(serialize=True)
            k = qd.atomic_add(n[None], 1)
            out[k, 0] = i
            out[k, 1] = j

    record()
    # j outermost, i fastest; the variables stay canonical
    assert out.to_numpy().tolist() == [[0, 0], [1, 0], [0, 1], [1, 1], [0, 2], [1, 2]]
    assert list(qd.ndrange(2, 2, axes=(1, 0))) == [(0, 0), (1, 0), (0, 1), (1, 1)]
    with pytest.raises(qd.QuadrantsSyntaxError, match="is not a permutation"):
        qd.ndrange(4, 5, axes=(0, 0))
    with pytest.raises(qd.QuadrantsTypeError, match="entries must be Python ints"):
        qd.ndrange(4, 5, axes=(True, False))


def test_torch_interop():
    torch = pytest.importorskip("torch", reason="torch is not installed (not part of the default set-up)")
    qd.init(arch=qd.cpu)
    t = qd.tensor(qd.f32, (3, 4), layout=(1, 0))
    t.from_numpy(np.arange(12, dtype=np.float32).reshape(3, 4))
    out = t.to_torch()
    assert tuple(out.shape) == (3, 4) and out[2, 1].item() == 9.0
    view = torch.utils.dlpack.from_dlpack(t.to_dlpack())
    assert tuple(view.shape) == (3, 4) and view.stride() == (1, 3)
    t.from_torch(out * 2)
    assert t[2, 1] == 18.0


@test(arch=ARCHS)
def test_buffer_view():
    data = qd.ndarray(qd.f32, shape=(32,))
    data.fill(0)
    a = data[8:24]
    assert isinstance(a, qd.BufferView) and (a.offset, a.size, a.shape) == (8, 16, (16,))
    assert a.get_ndarray() is data and (a[4:12].offset, a[4:12].size) == (12, 8) and data[-8:].offset == 24
    assert (a.subview(4, 8).offset, a.subview(4, 8)[:4].size) == (12, 4)
    with pytest.raises(ValueError, match="step=1"):
        data[::2]
    with pytest.raises(TypeError, match="1D"):
        qd.ndarray(qd.f32, (4, 4))[:2]
    with pytest.raises(TypeError, match="slice"):
        a[0]
    with pytest.raises(ValueError, match="subview out of range"):
        a.subview(8, 16)
    with pytest.raises(ValueError, match="out of range"):
        qd.BufferView(data, 16, 32)

    @qd.func
    def put(v: qd.BufferView[qd.f32], i: qd.i32, x: qd.f32):
        v[i] = x

    @qd.kernel
    def k(v: qd.BufferView[qd.f32], arr: qd.types.ndarray(qd.f32, ndim=1)):
        for i in range(v.size):
            put(v, i, 1.0)
        sub = v[2:4]
        for i in range(sub.size):
            sub[i] = 5.0
        w = qd.BufferView(arr, 28, 4)
        for i in range(w.subview(1, 2).size):
            w.subview(1, 2)[i] = 9.0

    k(a, data)
    want = [0.0] * 8 + [1.0, 1.0, 5.0, 5.0] + [1.0] * 12 + [0.0] * 5 + [9.0, 9.0, 0.0]
    assert data.to_numpy().tolist() == want
    with pytest.raises(qd.QuadrantsRuntimeTypeError):
        k(data, data)  # a plain ndarray is not a view


@test(arch=ARCHS)
def test_needs_grad_on_bare_fields_and_ndarrays():
    f = qd.field(qd.f32, shape=(2, 3), order="ji", needs_grad=True)
    a = qd.ndarray(qd.f32, (3,), needs_grad=True)
    assert f.grad.shape == (2, 3) and f.grad._qd_layout == (1, 0) and a.grad.shape == (3,)
    assert qd.ndarray(qd.f32, (2,)).grad is None
    with pytest.raises(RuntimeError, match="i32 is not supported for field with `needs_grad=True`"):
        qd.field(qd.i32, (2,), needs_grad=True)  # as in Quadrants: gradients are of real fields only

    @qd.kernel
    def k(x: qd.template(), y: qd.types.ndarray()):
        for i, j in x:
            x.grad[i, j] = i * 10.0 + j
        for i in range(3):
            y.grad[i] = i + 0.5

    k(f, a)
    assert f.grad.to_numpy().tolist() == [[0, 1, 2], [10, 11, 12]] and a.grad.to_numpy().tolist() == [0.5, 1.5, 2.5]


@test(arch=[qd.cpu, qd.vulkan], debug=True)
def test_buffer_view_ranges_checked_in_debug_mode():
    """debug=True checks a view's own range: an index outside [0, size) of the view (inside its
    ndarray or not), a subview past the view, a kernel-made view past its ndarray: each a
    QuadrantsAssertionError naming the line; in range, the same kernels run."""
    data = qd.ndarray(qd.f32, shape=(32,))

    @qd.kernel
    def put(v: qd.BufferView[qd.f32], i: qd.i32):
        for _ in range(1):
            v[i] = 1.0

    @qd.kernel
    def sub(v: qd.BufferView[qd.f32], lo: qd.i32, n: qd.i32):
        for _ in range(1):
            w = v.subview(lo, n)
            w[0] = 2.0

    @qd.kernel
    def make(a: qd.types.ndarray(qd.f32, ndim=1), lo: qd.i32, n: qd.i32):
        for _ in range(1):
            w = qd.BufferView(a, lo, n)
            w[0] = 3.0

    for i in (16, -1):
        with pytest.raises(qd.QuadrantsAssertionError, match="BufferView Out Of Range"):
            put(data[:16], i)
    with pytest.raises(qd.QuadrantsAssertionError, match=r"v\[i\] = 1.0[\s\S]*BufferView Out Of Range"):
        put(data[8:24], 16)
    with pytest.raises(qd.QuadrantsAssertionError, match="BufferView subview Out Of Range"):
        sub(data[:16], 12, 8)
    with pytest.raises(qd.QuadrantsAssertionError, match="BufferView construction out of range"):
        make(data, 28, 8)
    put(data[8:24], 15)
    sub(data[:16], 12, 4)
    make(data, 24, 8)
    out = data.to_numpy()  # (what a failed launch wrote is unspecified, as after a bounds error)
    assert (out[23], out[12], out[24]) == (1.0, 2.0, 3.0)
