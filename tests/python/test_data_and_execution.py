"""Fields, ndarrays, the kernel cache, parallel execution and inspection."""
import numpy as np
import pytest

import quadrants as qd
from test_utils import test


@test()
def test_fields_python_scope():
    a, b = qd.field(qd.f32), qd.field(qd.i32)
    qd.root.dense(qd.i, 5).place(a, b)
    c = qd.field(qd.i64)
    qd.root.place(c)
    m = qd.field(qd.u8)
    qd.root.dense(qd.ij, (2, 3)).place(m)
    assert a.shape == (5,) and c.shape == () and m.shape == (2, 3)
    assert a.dtype is qd.f32
    a[2] = 1.5
    b.fill(7)
    c[None] = 2**40
    m.from_numpy(np.arange(6, dtype=np.uint8).reshape(2, 3))
    assert a[2] == 1.5 and list(b.to_numpy()) == [7] * 5 and c[None] == 2**40 and m[1, 2] == 5
    v = qd.Vector.field(3, qd.f32, shape=2)
    v[1] = [1, 2, 3]
    np.testing.assert_array_equal(v.to_numpy(), [[0, 0, 0], [1, 2, 3]])


@test(arch=[qd.cpu, qd.vulkan])
def test_dense_axes_in_axis_order_whatever_the_nesting():
    """A field's indices follow the axis letters, not the order of the dense() calls:
    dense(qd.k, n).dense(qd.i, m) gives x[i, k] with i < m, k < n, and a struct-for binds i and k to
    those axes (bound in nesting order, the sum was 128250 instead of 205200). One size for
    several axes applies to each; an axis used twice multiplies its sizes."""
    n, m = 100, 19
    x = qd.field(qd.i32)
    qd.root.dense(qd.k, n).dense(qd.i, m).place(x)
    sq = qd.field(qd.i32)
    qd.root.dense(qd.ij, 4).place(sq)
    twice = qd.field(qd.i32)
    qd.root.dense(qd.j, 2).dense(qd.i, 3).dense(qd.j, 5).place(twice)
    assert x.shape == (m, n) and sq.shape == (4, 4) and twice.shape == (3, 10)
    total = qd.field(qd.i32, shape=())

    @qd.kernel
    def k():
        for i, kk in x:
            x[i, kk] = i * 1000 + kk
            qd.atomic_add(total[None], i + kk * 2)
        for i, j in twice:
            twice[i, j] = i * 100 + j

    k()
    assert total[None] == sum(i + kk * 2 for kk in range(n) for i in range(m)) == 205200
    np.testing.assert_array_equal(x.to_numpy(), np.arange(m)[:, None] * 1000 + np.arange(n)[None, :])
    np.testing.assert_array_equal(twice.to_numpy(), np.arange(3)[:, None] * 100 + np.arange(10)[None, :])


@test()
def test_ndarrays():
    x = qd.ndarray(qd.f32, shape=(3, 2))
    x.from_numpy(np.arange(6, dtype=np.float32).reshape(3, 2))
    vn = qd.Vector.ndarray(2, qd.i32, shape=4)

    @qd.kernel
    def k(a: qd.types.ndarray(), v: qd.types.ndarray()):
        for i, j in qd.ndrange(a.shape[0], a.shape[1]):
            a[i, j] *= 2
        for i in range(v.shape[0]):
            v[i] = qd.Vector([i, -i])

    k(x, vn)
    np.testing.assert_array_equal(x.to_numpy(), np.arange(6).reshape(3, 2) * 2)
    np.testing.assert_array_equal(vn.to_numpy(), [[i, -i] for i in range(4)])
    arr = np.ones((2, 2), np.float32)
    k(arr, vn)  # numpy arrays are written in place
    np.testing.assert_array_equal(arr, 2 * np.ones((2, 2)))


@test()
def test_sum_of_ten_million_floats():
    total = qd.field(qd.f32, shape=())

    @qd.kernel
    def reduce(x: qd.types.ndarray(dtype=qd.f32, ndim=1)):
        for i in range(x.shape[0]):
            total[None] += x[i]

    rng = np.random.default_rng(0)
    x = rng.random(10**7, dtype=np.float32)
    reduce(x)
    # Atomic f32 accumulation in any order: within f32 summation error of the exact sum.
    assert total[None] == pytest.approx(float(x.astype(np.float64).sum()), rel=1e-3)


@test()
def test_cache_compiles_once():
    x = qd.field(qd.i32, shape=8)

    @qd.kernel
    def k(a: qd.i32, arr: qd.types.ndarray(), t: qd.template()):
        for i in range(8):
            x[i] = a + t + arr[i]

    k(1, np.zeros(8, np.int32), 5)
    assert k.num_compilations == 1
    k(2, np.ones(8, np.int32), 5)       # same specialisation: nothing compiles
    assert k.num_compilations == 1
    assert list(x.to_numpy()) == [8] * 8
    k(2, np.ones(8, np.int32), 6)       # a new template value specialises again
    assert k.num_compilations == 2
    k(2, np.ones(8, np.int64), 6)       # so does a new ndarray dtype
    assert k.num_compilations == 3
    assert list(x.to_numpy()) == [9] * 8


@test(arch=qd.cpu, cpu_max_num_threads=1)
def test_serial_thread_pool_still_correct():
    counter = qd.field(qd.i32, shape=())

    @qd.kernel
    def k():
        for i in range(10000):
            counter[None] += 1

    k()
    assert counter[None] == 10000


@test()
def test_loop_config_serialize_runs_in_order():
    a = qd.field(qd.i32, shape=1000)

    @qd.kernel
    def prefix():
        qd.loop_config(serialize=True)
        for i in range(1, 1000):
            a[i] = a[i - 1] + 1

    @qd.kernel
    def blocked():
        qd.loop_config(block_dim=16)
        for i in range(1000):
            a[i] += 1

    prefix()
    np.testing.assert_array_equal(a.to_numpy(), np.arange(1000))
    blocked()
    np.testing.assert_array_equal(a.to_numpy(), np.arange(1000) + 1)


@test(arch=qd.cpu, print_ir=True)
def test_print_ir_and_compile_artifacts(capsys):
    x = qd.field(qd.f32, shape=4)

    @qd.kernel
    def k(v: qd.f32):
        for i in range(4):
            qd.atomic_add(x[i // 2], v)

    k(1.0)
    out = capsys.readouterr().out
    assert "global atomic add" in out and "parallel range-for" in out
    art = qd.compile(k, 1.0, arch=qd.cpu)
    assert "global atomic add" in art.ir
    assert "atomicrmw fadd ptr" in art.llvm_ir
    with pytest.raises(AttributeError, match="no 'ptx' artefact"):
        art.ptx
    assert k.num_compilations == 1  # qd.compile does not touch the kernel's cache


@test(arch=qd.cpu)
def test_init_options_and_reset():
    qd.init(arch=qd.cpu, default_fp=qd.f64, default_ip=qd.i64)
    out = qd.field(qd.f64, shape=2)

    @qd.kernel
    def k():
        a = 1.0 / 3.0
        b = 2**40
        out[0] = a
        out[1] = b

    k()
    assert out[0] == 1.0 / 3.0 and out[1] == 2.0**40
    qd.reset()
    with pytest.raises(RuntimeError, match="earlier qd.init"):
        out.to_numpy()
    with pytest.raises(KeyError, match="unknown option.*'no_such_option'"):
        qd.init(arch=qd.cpu, no_such_option=1)


@test(arch=qd.cpu)
def test_kernels_called_from_python_threads():
    import threading
    counter = qd.field(qd.i32, shape=())

    @qd.kernel
    def bump(n: qd.i32):
        for i in range(n):
            counter[None] += 1

    def worker():
        for _ in range(20):
            bump(1000)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert counter[None] == 4 * 20 * 1000


@test()
def test_kernel_default_arguments():
    @qd.kernel
    def k(a: qd.i32, b: qd.i32 = 5, c: qd.f32 = 0.5) -> qd.f32:
        return a * 10 + b + c

    assert k(1) == 15.5
    assert k(a=2) == 25.5
    assert k(1, c=1.0) == 16.0
    assert k(1, 2, 3.0) == 15.0


@test(arch=qd.cpu)
def test_scalar_argument_of_a_wrong_type_names_the_argument():
    @qd.kernel
    def k(a: qd.i32, b: qd.f32) -> qd.f32:
        return a + b

    for bad in ("x", None, np.array([1, 2])):
        with pytest.raises(qd.QuadrantsTypeError, match="argument 'a' expects a number"):
            k(bad, 1.0)
    with pytest.raises(qd.QuadrantsTypeError, match="argument 'b' expects a number"):
        k(1, "y")


@test()
def test_numpy_argument_for_a_vector_ndarray():
    @qd.kernel
    def k(a: qd.types.ndarray(dtype=qd.types.vector(3, qd.f32), ndim=1)):
        for i in a:
            a[i] = a[i] * 2.0 + qd.Vector([0.0, 1.0, 2.0])

    @qd.kernel
    def m(a: qd.types.ndarray(dtype=qd.types.matrix(2, 2, qd.i32))):
        for i in a:
            a[i] = a[i].transpose()

    x = np.ones((4, 3), np.float32)
    k(x)  # the trailing axis holds the vector
    np.testing.assert_allclose(x, [[2.0, 3.0, 4.0]] * 4)
    y = np.arange(8, dtype=np.int32).reshape(2, 2, 2)
    m(y)
    np.testing.assert_array_equal(y, np.arange(8).reshape(2, 2, 2).transpose(0, 2, 1))
    with pytest.raises(qd.QuadrantsTypeError, match=r"elements of shape \(3,\)"):
        k(np.ones((4, 2), np.float32))
    with pytest.raises(qd.QuadrantsTypeError, match=r"elements of shape \(3,\)"):
        k(qd.Vector.ndarray(2, qd.f32, 4))


@test(arch=qd.cpu)
def test_large_ndarrays_are_zero_and_freed():
    """Buffers of 1 MiB and more are mapped from the OS (their fresh pages are zero, nothing is
    written at allocation): each new one reads as zeros even where the previous one was written,
    and dropping one unmaps it."""
    @qd.kernel
    def fill(a: qd.types.ndarray(dtype=qd.f32, ndim=2), v: qd.f32):
        for i, j in a:
            a[i, j] = v

    for k in range(60):
        a = qd.ndarray(qd.f32, (4096, 4096))
        if k % 20 == 0:
            assert not a.to_numpy().any()
            fill(a, 1.5 + k)
            assert (a.to_numpy() == 1.5 + k).all()
        del a
    small = qd.ndarray(qd.i32, (7,))
    assert (small.to_numpy() == 0).all()
