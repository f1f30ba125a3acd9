"""Data methods of fields and ndarrays: to_numpy(dtype=, keep_dims=, copy=), from_numpy, fill
(0-D too), copy_from, DLPack export and import, to_torch / from_torch (skipped without torch)."""
import numpy as np
import pytest

import quadrants as qd
from tests.test_utils import test


@test(arch=[qd.cpu, qd.vulkan])
def test_fill_and_numpy_round_trip_on_0d_fields():
    s = qd.field(qd.f32, shape=())
    s.fill(2.5)
    assert s[None] == 2.5 and s.to_numpy().shape == () and s.to_numpy()[()] == 2.5
    s.from_numpy(np.array(7.0))
    assert s[None] == 7.0
    v = qd.Vector.field(3, qd.i32, shape=())
    v.fill(4)
    assert v[None].tolist() == [4, 4, 4]
    v.from_numpy(np.array([1, 2, 3]))
    assert v.to_numpy().tolist() == [1, 2, 3]


FILL_CASES = [  # dtype, shape, value, whether the device sets it from one repeated 4-byte word
    (qd.f32, (5, 3), -1.25, True), (qd.i32, 7, -7, True), (qd.u8, 12, 200, True), (qd.i8, 5, -3, False),
    (qd.i16, 6, -2, True), (qd.u16, 3, 9, False), (qd.f64, 4, 0.0, True), (qd.f64, 4, 1.5, False),
    (qd.i64, 9, -1, True), (qd.i64, 9, 3, False), (qd.u1, 8, True, True)]


class _RecordingRuntime:
    """Forwards to the core runtime, recording the 4-byte words of its fill() calls."""

    def __init__(self, core):
        self.core, self.words = core, []

    def fill(self, handle, offset, nbytes, word):
        self.words.append(word)
        self.core.fill(handle, offset, nbytes, word)

    def __getattr__(self, name):
        return getattr(self.core, name)


@pytest.mark.parametrize("dtype,shape,value,on_device", FILL_CASES)
@test(arch=[qd.cpu, qd.vulkan])
def test_fill_sets_every_element_on_the_device_where_one_word_repeats(dtype, shape, value, on_device, monkeypatch):
    from quadrants._lib.runtime import program
    recorder = _RecordingRuntime(program().runtime)
    monkeypatch.setattr(program(), "runtime", recorder)
    for make in (lambda: qd.field(dtype, shape=shape), lambda: qd.ndarray(dtype, shape=shape)):
        before, x, after = qd.field(dtype, shape=3), make(), qd.field(dtype, shape=3)
        npdtype = x.to_numpy().dtype
        x.from_numpy((np.arange(x.to_numpy().size) % 2 == 0).reshape(x.shape).astype(npdtype))
        recorder.words.clear()
        x.fill(value)
        assert x.to_numpy().tobytes() == np.full(x.shape, value, dtype=npdtype).tobytes()
        assert not before.to_numpy().any() and not after.to_numpy().any()  # its neighbours untouched
        want_word = int(np.frombuffer((np.full(4, value, dtype=npdtype).tobytes())[:4], np.uint32)[0])
        assert recorder.words == ([want_word] if on_device else [])


@test(arch=[qd.cpu, qd.vulkan])
def test_to_numpy_dtype_and_keep_dims():
    x = qd.field(qd.i32, shape=(2, 3))
    x.from_numpy(np.arange(6).reshape(2, 3))
    f = x.to_numpy(dtype=np.float64)
    assert f.dtype == np.float64 and f.tolist() == [[0, 1, 2], [3, 4, 5]]
    v = qd.Vector.field(2, qd.f32, shape=4)
    v.fill(1)
    assert v.to_numpy().shape == (4, 2) and v.to_numpy(keep_dims=True).shape == (4, 2, 1)
    col = qd.Matrix.field(3, 1, qd.f32, shape=4)
    assert col.to_numpy().shape == (4, 3) and col.to_numpy(keep_dims=True).shape == (4, 3, 1)
    m = qd.Matrix.field(2, 3, qd.f32, shape=4)
    assert m.to_numpy().shape == m.to_numpy(keep_dims=True).shape == (4, 2, 3)
    col.from_numpy(np.ones((4, 3)))  # element axes of size 1 may be there or not
    col.from_numpy(np.ones((4, 3, 1)))
    v.from_numpy(np.ones((4, 1, 2)))
    for bad in [(4, 3, 2), (3, 3), (4, 1, 1)]:
        with pytest.raises(ValueError, match="does not match"):
            col.from_numpy(np.ones(bad))
    with pytest.raises(ValueError, match="does not match"):
        m.from_numpy(np.ones((4, 3, 2)))
    n = qd.ndarray(qd.u8, (3,))
    n.fill(200)
    assert n.to_numpy(dtype=np.int32).tolist() == [200, 200, 200]


@test(arch=[qd.cpu, qd.vulkan])
def test_copy_from():
    a = qd.Vector.field(2, qd.f32, shape=3)
    a.from_numpy(np.arange(6, dtype=np.float32).reshape(3, 2))
    b = qd.Vector.field(2, qd.f32, shape=3)
    b.copy_from(a)
    assert b.to_numpy().tolist() == [[0, 1], [2, 3], [4, 5]]
    i = qd.ndarray(qd.types.vector(2, qd.i32), (3,))
    i.copy_from(a)  # between a field and an ndarray, converting the dtype
    assert i.to_numpy().tolist() == [[0, 1], [2, 3], [4, 5]]
    with pytest.raises(ValueError, match=r"shape \(4, 2\) does not match \(3, 2\)"):
        b.copy_from(qd.Vector.field(2, qd.f32, shape=4))
    with pytest.raises(TypeError, match="must be a qd.field or qd.ndarray"):
        b.copy_from(np.zeros((3, 2)))


@test(arch=qd.cpu)
def test_zero_copy_views_on_cpu():
    x = qd.field(qd.f32, shape=4)
    view = x.to_numpy(copy=False)
    view[2] = 5.0  # writes the field's memory
    assert x[2] == 5.0
    x[3] = 6.0
    assert view[3] == 6.0 and x.to_numpy(copy=None)[3] == 6.0
    copy = x.to_numpy()
    copy[0] = 1.0
    assert x[0] == 0.0
    with pytest.raises(ValueError, match="cannot convert float32 to float64"):
        x.to_numpy(dtype=np.float64, copy=False)
    assert x.to_numpy(dtype=np.float64, copy=None).dtype == np.float64
    # DLPack: numpy shares the memory; the view keeps the field's memory alive.
    n = qd.ndarray(qd.i64, (2, 2))
    d = np.from_dlpack(n)
    d[1, 1] = 42
    assert n[1, 1] == 42 and x.__dlpack_device__() == (1, 0)
    del n
    assert d[1, 1] == 42


@test(arch=qd.vulkan)
def test_dlpack_export_copies_off_cpu():
    x = qd.field(qd.i32, shape=3)
    x.fill(9)
    assert np.from_dlpack(x).tolist() == [9, 9, 9]
    with pytest.raises(BufferError, match="needs arch=qd.cpu"):
        x.__dlpack__(copy=False)
    with pytest.raises(ValueError, match="needs arch=qd.cpu"):
        x.to_numpy(copy=False)
    assert x.to_numpy(copy=None).tolist() == [9, 9, 9]  # falls back to a copy


class _DLPackOnly:
    """An array that only speaks DLPack (as torch tensors and jax arrays do)."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, **kw):
        return self.a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


@test(arch=[qd.cpu, qd.vulkan])
def test_kernels_take_dlpack_arrays():
    @qd.kernel
    def scale(x: qd.types.ndarray(dtype=qd.f32, ndim=2), s: qd.f32):
        for i, j in qd.ndrange(x.shape[0], x.shape[1]):
            x[i, j] *= s

    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    scale(_DLPackOnly(a), 2.0)  # the kernel writes the array itself
    assert a.tolist() == [[0, 2, 4], [6, 8, 10]]
    n = qd.ndarray(qd.f32, (2, 3))
    scale(_DLPackOnly(n), 1.0)  # a qd.ndarray seen through DLPack
    with pytest.raises(qd.QuadrantsTypeError, match="argument 'x' expects an ndarray, got a qd.field"):
        scale(qd.field(qd.f32, shape=(2, 3)), 1.0)
    with pytest.raises(qd.QuadrantsTypeError, match="argument 'x' expects dtype f32, got i32"):
        scale(_DLPackOnly(np.zeros((2, 3), np.int32)), 1.0)


@test(arch=[qd.cpu, qd.vulkan])
def test_torch_interop():
    torch = pytest.importorskip("torch")
    v = qd.Vector.field(2, qd.f32, shape=3)
    v.from_torch(torch.arange(6, dtype=torch.float32).reshape(3, 2))
    t = v.to_torch()
    assert t.dtype == torch.float32 and t.tolist() == [[0, 1], [2, 3], [4, 5]]
    assert tuple(v.to_torch(keep_dims=True).shape) == (3, 2, 1)
    if qd.cfg.arch is qd.cpu:
        shared = v.to_torch(copy=False)
        shared[0, 0] = 7.0
        assert v[0][0] == 7.0

    @qd.kernel
    def inc(x: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        for i in range(x.shape[0]):
            x[i] += 1

    ti = torch.zeros(4, dtype=torch.int32)
    inc(ti)
    assert ti.tolist() == [1, 1, 1, 1]


@test(arch=[qd.cpu, qd.vulkan])
def test_python_scope_element_access():
    """x[i] in Python reads or writes one element: a Python int / float / bool for scalar elements
    (as the reference returns: `1 << x[0]` must not overflow a numpy int32); ndarrays keep numpy's
    indexing for negative indices, slices and index arrays; integers must be one per dimension."""
    f = qd.field(qd.i32, 4)
    z = qd.field(qd.f32, ())
    b = qd.field(qd.u1, 2)
    f[1] = 40
    z[None] = 0.5
    b[1] = 1
    assert type(f[1]) is int and f[1] == 40 and 1 << f[1] == 2 ** 40
    assert type(z[None]) is float and z[None] == 0.5
    assert type(b[1]) is bool and b[1] is True and b[0] is False
    a = qd.ndarray(qd.i64, (4, 3))
    a.from_numpy(np.arange(12).reshape(4, 3))
    assert type(a[2, 1]) is int and a[2, 1] == 7 and a[np.int64(3), np.int32(0)] == 9
    assert a[-1, -1] == 11 and a[1, :].tolist() == [3, 4, 5] and a[np.array([0, 2]), 0].tolist() == [0, 6]
    for key in (1, (1, 2, 0)):  # as in Quadrants: not a row, not numpy's error
        with pytest.raises(qd.QuadrantsIndexError, match=f"2d ndarray indexed with {len(np.atleast_1d(key))}d indices"):
            a[key]
    a[0, 1] = 2 ** 40
    a[-1, 0] = -5
    a[np.array([1]), 2] = 77
    assert a.to_numpy().tolist() == [[0, 2 ** 40, 2], [3, 4, 77], [6, 7, 8], [-5, 10, 11]]
    with pytest.raises(IndexError, match="out of range"):
        a[4, 0]
    with pytest.raises(IndexError, match="out of range"):
        f[4]
    with pytest.raises(TypeError, match="an index must be an integer"):
        f[1.5]
