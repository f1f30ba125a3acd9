"""Performance rewrites (issue 15): each is applied (read from the printed IR / emitted LLVM IR)
and gives exactly the results of the unrewritten atomics."""
import os
import re

import numpy as np
import pytest

import quadrants as qd
from test_atomics import OP_DTYPES, supported
from test_utils import current_arch, test

REDUCIBLE = [(op, t) for op, t in OP_DTYPES if op != "exchange"]


def _values(op, dtype, n, rng):
    """Operands whose combination is exact in any order (floats: small integers, sums below 2^11
    for f16), with NaNs among float min/max operands."""
    if op == "mul":
        v = rng.choice([1, -1] if dtype.is_signed or dtype.is_real else [1, 3], n).astype(dtype.np)
        v[rng.choice(n, 5, replace=False)] = 2
        return v
    if dtype.is_real:
        v = rng.integers(0, 2 if dtype is qd.f16 else 64, n).astype(dtype.np)
        if op in ("min", "max"):
            v[rng.choice(n, n // 7, replace=False)] = np.nan
        return v
    info = np.iinfo(dtype.np)
    return rng.integers(max(info.min, -2**40), min(info.max, 2**40), n, dtype=dtype.np, endpoint=True)


@pytest.mark.parametrize("op, dtype", REDUCIBLE, ids=[f"{o}-{t.name}" for o, t in REDUCIBLE])
@test()
def test_vectorised_reduction_equals_atomics(op, dtype):
    """`fn(total[None], v[i])` (privatized; on the cpu a vectorised loop with several
    accumulators) leaves exactly what the same atomics leave when their old values are used (not
    rewritten), NaN operands included."""
    if not supported(op, dtype):
        pytest.skip(f"{op} on {dtype} is not available on {current_arch()}")
    n = 3001
    vals = _values(op, dtype, n, np.random.default_rng(3))
    fn = getattr(qd, f"atomic_{op}")
    total = qd.field(dtype, shape=2)
    olds = qd.field(dtype, shape=n)

    @qd.kernel
    def rewritten(v: qd.types.ndarray(dtype=dtype, ndim=1)):
        for i in range(v.shape[0]):
            fn(total[0], v[i])

    @qd.kernel
    def plain(v: qd.types.ndarray(dtype=dtype, ndim=1)):
        for i in range(v.shape[0]):
            olds[i] = fn(total[1], v[i])

    inits = [{"mul": 1, "min": 100, "max": -100 if dtype.is_signed or dtype.is_real else 0}.get(op, 5)]
    if dtype.is_real and op in ("min", "max"):
        inits.append(np.nan)
    for init in inits:
        total.fill(init)
        rewritten(vals)
        plain(vals)
        a, b = total.to_numpy()
        assert a == b or (np.isnan(a) and np.isnan(b)), (init, a, b)
    if current_arch() == qd.cpu:
        art = qd.compile(rewritten, vals)
        loop = art.ir.split("for range")[1].split("each thread, after")[0]
        assert "global atomic" not in loop and " reassoc " in loop
        assert re.search(r"vector\.reduce\.\w+\.v\d+", art.llvm_ir), "the privatized loop is not vectorised"
        if dtype.is_real:
            assert "reassoc" in art.llvm_ir


@test(arch=qd.cpu)
def test_float_max_all_nan_chunks():
    """A thread whose operands are all NaN flushes NaN (the identity), not its -inf start."""
    x = qd.field(qd.f32, shape=2)

    @qd.kernel
    def k(v: qd.types.ndarray(dtype=qd.f32, ndim=1)):
        for i in range(v.shape[0]):
            qd.atomic_max(x[0], v[i])
            qd.atomic_min(x[1], v[i])

    v = np.full(100000, np.nan, np.float32)
    x.fill(np.nan)
    k(v)
    assert np.isnan(x.to_numpy()).all()
    v[-1] = -np.inf
    k(v)
    assert (x.to_numpy() == -np.inf).all()


SCATTER = [("add", qd.i32), ("add", qd.u64), ("sub", qd.i64), ("add", qd.f32), ("add", qd.f64), ("max", qd.i32),
           ("min", qd.f32), ("max", qd.f64), ("xor", qd.u32), ("or", qd.i64), ("and", qd.i32), ("mul", qd.i32),
           ("sub", qd.f32), ("min", qd.i64)]


def _bucketed(ir):
    """The cpu's bucketed scatter (transforms/scatter.cpp): its tasks, with the original loop as
    the fallback, and no atomic left in them."""
    return "with scratch" in ir and "without scratch" in ir and "global atomic" not in ir


@pytest.mark.parametrize("op, dtype", SCATTER, ids=[f"{o}-{t.name}" for o, t in SCATTER])
@test()
def test_partitioned_scatter_equals_atomics(op, dtype):
    """`fn(y[p[i]], v[i])` into a large field, old value unused (the cpu partitions the field over
    its threads and applies plain read-modify-writes) leaves exactly what the same atomics leave
    when their old values are used (not rewritten); repeated and out-of-order indices included, a
    2-D target, conditional atomics, a range that is no multiple of the part count."""
    if not supported(op, dtype):
        pytest.skip(f"{op} on {dtype} is not available on {current_arch()}")
    m, n = 70001, 150003
    rng = np.random.default_rng(5)
    idx = rng.integers(0, m, n).astype(np.int32)
    vals = _values(op, dtype, n, rng)
    fn = getattr(qd, f"atomic_{op}")
    y = qd.field(dtype, shape=(m, 2))
    olds = qd.field(dtype, shape=n)

    @qd.kernel
    def rewritten(p: qd.types.ndarray(dtype=qd.i32, ndim=1), v: qd.types.ndarray(dtype=dtype, ndim=1)):
        for i in range(p.shape[0]):
            j = p[i]
            if v[i] != 7:  # (control flow in the body is replayed by every part)
                fn(y[j, 0], v[i])

    @qd.kernel
    def plain(p: qd.types.ndarray(dtype=qd.i32, ndim=1), v: qd.types.ndarray(dtype=dtype, ndim=1)):
        for i in range(p.shape[0]):
            j = p[i]
            if v[i] != 7:
                olds[i] = fn(y[j, 1], v[i])

    init = rng.integers(1, 3, (m, 2)).astype(dtype.np)
    init[:, 1] = init[:, 0]
    y.from_numpy(init)
    rewritten(idx, vals)
    plain(idx, vals)
    out = y.to_numpy()
    np.testing.assert_array_equal(out[:, 0], out[:, 1])  # NaN equals NaN here
    if current_arch() == qd.cpu:
        assert _bucketed(qd.compile(rewritten, idx, vals).ir)


@pytest.mark.parametrize("dtype", [qd.f32, qd.f64], ids=["f32", "f64"])
@test()
def test_bucketed_scatter_float_sums(dtype):
    """A float scatter-add of arbitrary values: on the cpu (bucketed) each element receives its
    updates in iteration order, so the sums are exactly numpy's sequential np.add.at; elsewhere
    (atomics) within rounding of it."""
    m, n = 1 << 17, 300007
    rng = np.random.default_rng(11)
    idx = rng.integers(0, m, n).astype(np.int32)
    vals = rng.standard_normal(n).astype(dtype.np)
    y = qd.field(dtype, shape=m)

    @qd.kernel
    def scatter(p: qd.types.ndarray(dtype=qd.i32, ndim=1), v: qd.types.ndarray(dtype=dtype, ndim=1)):
        for i in range(p.shape[0]):
            qd.atomic_add(y[p[i]], v[i])

    ref = np.full(m, 0.5, dtype.np)
    y.fill(0.5)
    scatter(idx, vals)
    np.add.at(ref, idx, vals)
    if current_arch() == qd.cpu:
        assert _bucketed(qd.compile(scatter, idx, vals).ir)
        np.testing.assert_array_equal(y.to_numpy(), ref)
    else:
        np.testing.assert_allclose(y.to_numpy(), ref, rtol=1e-4 if dtype is qd.f32 else 1e-12, atol=1e-4)


@pytest.mark.parametrize("dtype", [qd.i32, qd.f32], ids=["i32", "f32"])
@test()
def test_bucketed_scatter_histogram(dtype):
    """A histogram-like scatter into a large field: most updates hit a few elements (one bucket),
    the rest spread out; exactly the counts (f32: small integers, exact in any order)."""
    m, n = 1 << 17, 200001
    rng = np.random.default_rng(12)
    idx = np.where(rng.random(n) < 0.9, rng.integers(0, 40, n), rng.integers(0, m, n)).astype(np.int32)
    y = qd.field(dtype, shape=m)
    olds = qd.field(dtype, shape=n)

    @qd.kernel
    def hist(p: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        for i in range(p.shape[0]):
            qd.atomic_add(y[p[i]], 1)

    @qd.kernel
    def hist_atomic(p: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        for i in range(p.shape[0]):
            olds[i] = qd.atomic_add(y[p[i]], 1)  # the old value used: not rewritten

    hist(idx)
    a = y.to_numpy()
    y.fill(0)
    hist_atomic(idx)
    np.testing.assert_array_equal(a, y.to_numpy())
    np.testing.assert_array_equal(a, np.bincount(idx, minlength=m).astype(dtype.np))
    if current_arch() == qd.cpu:
        assert _bucketed(qd.compile(hist, idx).ir)


@pytest.mark.parametrize("dtype", [qd.i32, qd.i64, qd.f32, qd.f64], ids=["i32", "i64", "f32", "f64"])
@test()
def test_bucketed_scatter_several_atomics(dtype):
    """Several atomics of one op into one 2-D field in one body, one of them conditional, indices
    computed in the body: the same as the atomics with their old values used."""
    rows, n = 50000, 120011
    rng = np.random.default_rng(13)
    idx = rng.integers(0, rows, n).astype(np.int32)
    vals = rng.integers(-50, 50, n).astype(dtype.np)
    y = qd.field(dtype, shape=(rows, 3))
    olds = qd.field(dtype, shape=(n, 3))

    @qd.kernel
    def several(p: qd.types.ndarray(dtype=qd.i32, ndim=1), v: qd.types.ndarray(dtype=dtype, ndim=1)):
        for i in range(p.shape[0]):
            j = p[i]
            qd.atomic_add(y[j, 0], v[i])
            qd.atomic_add(y[(j * 7 + 3) % rows, 2], v[i] * 2)
            if v[i] > 10:
                qd.atomic_add(y[j, 1], 1)

    @qd.kernel
    def several_atomic(p: qd.types.ndarray(dtype=qd.i32, ndim=1), v: qd.types.ndarray(dtype=dtype, ndim=1)):
        for i in range(p.shape[0]):
            j = p[i]
            olds[i, 0] = qd.atomic_add(y[j, 0], v[i])
            olds[i, 2] = qd.atomic_add(y[(j * 7 + 3) % rows, 2], v[i] * 2)
            if v[i] > 10:
                olds[i, 1] = qd.atomic_add(y[j, 1], 1)

    init = rng.integers(-3, 3, (rows, 3)).astype(dtype.np)
    y.from_numpy(init)
    several(idx, vals)
    a = y.to_numpy()
    y.from_numpy(init)
    several_atomic(idx, vals)
    np.testing.assert_array_equal(a, y.to_numpy())
    ref = init.copy()
    np.add.at(ref[:, 0], idx, vals)
    np.add.at(ref[:, 2], (idx * 7 + 3) % rows, vals * 2)
    np.add.at(ref[:, 1], idx[vals > 10], 1)
    np.testing.assert_array_equal(a, ref)
    if current_arch() == qd.cpu:
        assert _bucketed(qd.compile(several, idx, vals).ir)


@test(arch=qd.cpu)
def test_bucketed_scatter_launches():
    """Launches of one bucketed scatter with growing and shrinking ranges (its scratch memory is
    kept and grown), small ranges (the original loop runs: too few updates to bucket), and two
    scatter loops in one kernel."""
    m = 1 << 16
    y = qd.field(qd.i64, shape=m)
    z = qd.field(qd.i64, shape=m + 5)

    @qd.kernel
    def two(p: qd.types.ndarray(dtype=qd.i32, ndim=1), v: qd.types.ndarray(dtype=qd.i64, ndim=1)):
        for i in range(p.shape[0]):
            qd.atomic_add(y[p[i]], v[i])
        for i in range(p.shape[0] // 2):
            qd.atomic_xor(z[m + 4 - p[i]], v[i] * 3)

    rng = np.random.default_rng(14)
    for n in (100000, 3, 0, 250000, 20000, 70000):
        idx = rng.integers(0, m, n).astype(np.int32)
        vals = rng.integers(-2**40, 2**40, n)
        y.fill(0)
        z.fill(1)
        two(idx, vals)
        ry = np.zeros(m, np.int64)
        np.add.at(ry, idx, vals)
        rz = np.ones(m + 5, np.int64)
        np.bitwise_xor.at(rz, m + 4 - idx[:n // 2], vals[:n // 2] * 3)
        np.testing.assert_array_equal(y.to_numpy(), ry)
        np.testing.assert_array_equal(z.to_numpy(), rz)
    ir = qd.compile(two, idx, vals).ir
    assert ir.count("with scratch") == 8 and ir.count("without scratch") == 2, ir


def test_bucketed_scatter_without_scratch(monkeypatch):
    """When the runtime cannot provide the scratch memory (here a 1-byte limit), the original loop
    runs (partitioned as before, or atomics): the same results."""
    monkeypatch.setenv("QD_CPU_MAX_SCRATCH_BYTES", "1")
    try:
        qd.init(arch=qd.cpu)
        m, n = 70001, 150003
        rng = np.random.default_rng(15)
        idx = rng.integers(0, m, n).astype(np.int32)
        vals = rng.integers(-100, 100, n).astype(np.int32)
        y = qd.field(qd.i32, shape=m)

        @qd.kernel
        def scatter(p: qd.types.ndarray(dtype=qd.i32, ndim=1), v: qd.types.ndarray(dtype=qd.i32, ndim=1)):
            for i in range(p.shape[0]):
                if v[i] != 3:
                    qd.atomic_sub(y[p[i]], v[i])

        scatter(idx, vals)
        ref = np.zeros(m, np.int32)
        np.subtract.at(ref, idx[vals != 3], vals[vals != 3])
        np.testing.assert_array_equal(y.to_numpy(), ref)
        assert _bucketed(qd.compile(scatter, idx, vals).ir)
    finally:
        qd.reset()


@test(arch=qd.cpu)
def test_scatter_not_partitioned():
    """Loops with other effects, reads of the target, used old values or small targets keep their
    atomics."""
    big = qd.field(qd.f32, shape=100000)
    small = qd.field(qd.f32, shape=1000)
    other = qd.field(qd.f32, shape=100000)

    @qd.kernel
    def store_too(p: qd.types.ndarray(dtype=qd.i32, ndim=1)):  # not the iteration's own element
        for i in range(p.shape[0]):
            qd.atomic_add(big[p[i]], 1.0)
            other[p[i]] = 1.0

    @qd.kernel
    def read_after_write(p: qd.types.ndarray(dtype=qd.i32, ndim=1)):  # the passes would differ
        for i in range(p.shape[0]):
            other[i] = 2.0
            qd.atomic_add(big[p[i]], other[i])

    @qd.kernel
    def reads(p: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        for i in range(p.shape[0]):
            qd.atomic_add(big[p[i]], big[i])

    @qd.kernel
    def small_target(p: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        for i in range(p.shape[0]):
            qd.atomic_add(small[p[i] % 1000], 1.0)

    @qd.kernel
    def mixed_ops(p: qd.types.ndarray(dtype=qd.i32, ndim=1)):  # bucketed pairs carry one op
        for i in range(p.shape[0]):
            qd.atomic_add(big[p[i]], 1.0)
            qd.atomic_max(big[p[i] + 1], 1.0)

    p = np.zeros(10, np.int32)
    for k in (store_too, reads, small_target, read_after_write):
        assert "global atomic add" in qd.compile(k, p).ir, k.__name__
    for k in (mixed_ops, store_too, read_after_write):
        assert "with scratch" not in qd.compile(k, p).ir, k.__name__


@test(arch=qd.cpu)
def test_bucketed_scatter_with_the_iterations_own_writes():
    """A scatter loop that also writes each iteration's own element of other fields (a reverse
    pass: `w_grad[i] += ...`, `y_grad[i] = 0` after reading it) is bucketed: those writes happen
    once, in the fill pass, and the first pass reads what the loop reads. Exact results (integer
    values); with no scratch memory the original loop runs unpartitioned."""
    m, n = 1 << 17, 200003
    rng = np.random.default_rng(16)
    idx = rng.integers(0, m, n).astype(np.int32)
    g0 = rng.integers(-50, 50, n).astype(np.float32)
    w0 = rng.integers(-8, 8, n).astype(np.float32)
    x = qd.field(qd.f32, shape=m)
    g = qd.field(qd.f32, shape=n)
    wg = qd.field(qd.f32, shape=n)

    @qd.kernel
    def backward_like(p: qd.types.ndarray(dtype=qd.i32, ndim=1), w: qd.types.ndarray(dtype=qd.f32, ndim=1)):
        for i in range(p.shape[0]):
            a = g[i]
            g[i] = 0.0
            wg[i] = wg[i] + a * 2.0
            qd.atomic_add(x[p[i]], a * w[i])

    x.fill(1.0)
    g.from_numpy(g0)
    wg.fill(3.0)
    backward_like(idx, w0)
    ref = np.ones(m, np.float32)
    np.add.at(ref, idx, g0 * w0)
    np.testing.assert_array_equal(x.to_numpy(), ref)
    np.testing.assert_array_equal(wg.to_numpy(), 3.0 + g0 * 2.0)
    assert (g.to_numpy() == 0).all()
    ir = qd.compile(backward_like, idx, w0).ir
    assert ir.count("with scratch") == 4 and ir.count("without scratch") == 1, ir
    assert ir.count("global atomic add") == 1, ir  # the fallback's, unpartitioned


@test(arch=qd.cpu)
def test_long_loops_privatize_larger_fields():
    """A scatter-add into 65536 elements from a loop of known length 2^21 gets a private copy per
    thread (the loop is long enough to pay for it), the same loop over a run-time length keeps its
    atomics; both exact."""
    m, n = 1 << 16, 1 << 21
    rng = np.random.default_rng(17)
    idx = rng.integers(0, m, n).astype(np.int32)
    y = qd.field(qd.i32, shape=m)
    p = qd.field(qd.i32, shape=n)
    p.from_numpy(idx)

    @qd.kernel
    def known():
        for i in p:
            qd.atomic_add(y[p[i]], i % 7)

    @qd.kernel
    def unknown(k: qd.i32):
        for i in range(k):
            qd.atomic_add(y[p[i]], i % 7)

    ref = np.zeros(m, np.int32)
    np.add.at(ref, idx, np.arange(n) % 7)
    known()
    np.testing.assert_array_equal(y.to_numpy(), ref)
    y.fill(0)
    unknown(n)
    np.testing.assert_array_equal(y.to_numpy(), ref)
    threads = os.cpu_count() or 1
    private = "private" in qd.compile(known).ir
    assert private == (n // (8 * threads) >= m), qd.compile(known).ir[:2000]
    assert "private" not in qd.compile(unknown, 5).ir

    zs = [qd.field(qd.f32, shape=m) for _ in range(5)]  # 5 x 256 KiB: the copies take 1 MiB at most

    @qd.kernel
    def five():
        for i in p:
            for z in qd.static(zs):
                qd.atomic_add(z[p[i]], 1.0)

    five()
    want = np.bincount(idx, minlength=m).astype(np.float32)
    assert all((z.to_numpy() == want).all() for z in zs)
    if private:
        names = set(re.findall(r"private copy of (\w+)\[", qd.compile(five).ir))
        assert len(names) == 4, names


@test(arch=qd.vulkan)
def test_vulkan_launches_are_asynchronous_and_ordered():
    """Launches queue up (the first submitted at once while the device is idle, the rest gathered
    until a host read or qd.sync()); each sees the writes of those before it, scalar arguments
    included (a kernel's argument buffer is rewritten only once the launch that read it is done),
    and host writes between launches are ordered too."""
    n = 4096
    x = qd.field(qd.i32, shape=n)

    @qd.kernel
    def bump(k: qd.i32):
        for i in range(n):
            x[i] = x[i] * 3 + k

    ref = np.zeros(n, np.int64)
    for k in range(40):
        bump(k)
        ref = (ref * 3 + k) % 2**32
        if k == 20:
            x[5] = 11  # a host write between launches
            ref[5] = 11
    qd.sync()
    np.testing.assert_array_equal(x.to_numpy().astype(np.int64) % 2**32, ref)
    y = qd.field(qd.f32, shape=n)  # a new field after queued launches, freed while others are queued
    bump(1)
    del y
    assert x[0] == (ref[0] * 3 + 1) % 2**32 - (2**32 if (ref[0] * 3 + 1) % 2**32 >= 2**31 else 0)


@test(arch=qd.vulkan)
def test_vulkan_queued_launches_keep_their_own_arguments():
    """Many launches of kernels with scalar arguments queued at once (more than the argument buffers
    a kernel keeps, so some reuse one after its launch is done), interleaved with a kernel that has
    a result (waited for at once) and another kernel's launches: every launch reads its own
    arguments, in launch order; qd.sync() then leaves nothing running (a host write after it is
    not overwritten by a queued launch)."""
    n = 2048
    x = qd.field(qd.i64, shape=n)
    y = qd.field(qd.f32, shape=n)

    @qd.kernel
    def step(k: qd.i32, s: qd.f32):
        for i in range(n):
            x[i] = x[i] * 5 + k + i
            y[i] = y[i] * 0.5 + s

    @qd.kernel
    def shift(k: qd.i64):
        for i in range(n):
            x[i] = x[i] - k

    @qd.kernel
    def first() -> qd.i64:
        return x[0]

    ref_x = np.zeros(n, np.int64)
    ref_y = np.zeros(n, np.float32)
    i = np.arange(n, dtype=np.int64)  # (numpy's int64 arithmetic wraps as the kernel's does)
    for k in range(60):
        step(k, np.float32(k) * 0.25)
        ref_x = ref_x * 5 + k + i
        ref_y = ref_y * np.float32(0.5) + np.float32(k * 0.25)
        if k % 7 == 3:
            shift(k * k)
            ref_x = ref_x - k * k
        if k % 20 == 10:  # a launch whose result is read at once, between queued ones
            assert first() == ref_x[0]
    qd.sync()
    y[3] = 7.0
    np.testing.assert_array_equal(x.to_numpy(), ref_x)
    ref_y[3] = 7.0
    np.testing.assert_array_equal(y.to_numpy(), ref_y)


def _before_and_in_loop(ir, task):
    """A parallel task's code before each thread's share of the loop, and the loop's body."""
    code = ir.split(f"task {task} (parallel range-for):")[1].split("\n  task ")[0]
    pre = code.split("each thread, before its share of the loop:")[1].split(" = for range(")[0] \
        if "each thread, before" in code else ""
    return pre, code.split(" = for range(")[1].split("each thread, after")[0]


def _loaded(code, field):
    """The fields the code loads from: pointer statements into `field` whose value a global load reads."""
    ptrs = set(re.findall(r"(\$\d+) : \S+ = global ptr (?:field )?" + re.escape(field) + r"\[", code))
    return [p for p in re.findall(r"= global load (\$\d+)", code) if p in ptrs]


@test(arch=qd.vulkan)
def test_invariant_loads_are_read_once_per_thread():
    """On Vulkan a parallel loop's loads of a field element at constant indices, or of a kernel-scope
    variable, from buffers the task does not write, are read before each thread's share of the loop
    (lavapipe runs a load inside control flow lane by lane); results unchanged, a load under an `if`
    and an empty loop included. Loads of elements the task writes, at loop-dependent or argument
    indices, or from ndarrays stay in the loop."""
    n = 1000
    s, c, w, y = (qd.field(qd.f32, shape=sh) for sh in ((), 4, n, n))
    a = qd.ndarray(qd.f32, shape=2)

    @qd.kernel
    def hoisted(m: qd.i32):
        t = 0.0
        for j in range(3):
            t += c[j]
        for i in range(m):
            y[i] = t * w[i] + s[None]
            if w[i] > 2:
                y[i] += c[3]

    @qd.kernel
    def kept(arr: qd.types.ndarray(), k: qd.i32):
        for i in y:
            y[i] = s[None] + c[i % 4] + c[k] + arr[0]
            if i == 0:
                s[None] = 0.5  # written by the task (the value it had)

    s[None], a[0] = 0.5, 0.25
    c.from_numpy(np.array([1, 2, 4, 8], np.float32))
    wv = np.arange(n, dtype=np.float32) % 5
    w.from_numpy(wv)
    ir = qd.compile(hoisted, n).ir
    pre, loop = _before_and_in_loop(ir, 3)
    for field in (s.name, c.name):
        assert len(_loaded(pre, field)) == 1 and not _loaded(loop, field), ir
    assert re.search(r"(\$\d+) : f32 = global ptr temps\[\]\n\s+\$\d+ : f32 = global load \1", pre), ir
    assert "global load" in loop  # w[i]
    y.fill(-1)
    hoisted(n)
    np.testing.assert_array_equal(y.to_numpy(), 7 * wv + 0.5 + np.where(wv > 2, 8, 0))
    y.fill(-1)
    hoisted(0)  # each thread reads them, no iteration runs
    np.testing.assert_array_equal(y.to_numpy(), -1)

    ir = qd.compile(kept, a, 1).ir
    pre, loop = _before_and_in_loop(ir, 1)
    assert "global load" not in pre and len(_loaded(loop, s.name)) == 1 and len(_loaded(loop, c.name)) == 2, ir
    kept(a, 1)
    np.testing.assert_array_equal(y.to_numpy(), np.tile([1, 2, 4, 8], n // 4) + 0.5 + 2 + 0.25)


@test(arch=qd.vulkan)
def test_cpu_vulkan_device_runs_a_few_workgroups_per_core():
    """A CPU Vulkan device (lavapipe) pays per workgroup: a parallel loop gets at most 16 workgroups
    per host core (1024 at most), each invocation running the grid-stride loop's many steps
    (read off the invocation that ran each iteration); other devices one iteration per invocation."""
    import os
    n = 1 << 18
    out = qd.field(qd.i32, shape=n)

    @qd.kernel
    def who():
        qd.loop_config(block_dim=128)
        for i in range(n):
            out[i] = qd.simt.block.global_thread_idx()

    who()
    cpu = qd.vulkan_caps()["device_type"] == "cpu"
    invocations = 128 * min(1024, 16 * os.cpu_count()) if cpu else n
    np.testing.assert_array_equal(out.to_numpy(), np.arange(n) % invocations)
