"""Automatic differentiation (docs/autodiff.md, csrc/transforms/autodiff.cpp): every differentiable
op's reverse-mode adjoint and forward-mode tangent against central finite differences in f64,
control flow (if, inner loops with carried state), the Python-scope API (Tape, FwdMode,
grad_replaced / grad_for, no_grad, stop_grad, clear_all_gradients), the errors, and which atomic
rewrite the adjoint accumulation gets."""
import math
import re

import numpy as np
import pytest

import quadrants as qd
from tests.python.test_deterministic import f32_sum
from tests.test_utils import test

ARCHS = [qd.cpu, qd.vulkan]

# (name, kernel function of x and w (w a second, positive operand), numpy reference, x values).
UNARY = [
    ("neg", lambda x: -x, lambda x: -x),
    ("abs", lambda x: qd.abs(x), np.abs),
    ("sqrt", lambda x: qd.sqrt(x * x + 0.5), lambda x: np.sqrt(x * x + 0.5)),
    ("sin", lambda x: qd.sin(x), np.sin),
    ("cos", lambda x: qd.cos(x), np.cos),
    ("tan", lambda x: qd.tan(x), np.tan),
    ("exp", lambda x: qd.exp(x), np.exp),
    ("log", lambda x: qd.log(x * x + 0.5), lambda x: np.log(x * x + 0.5)),
    ("tanh", lambda x: qd.tanh(x), np.tanh),
    ("asin", lambda x: qd.asin(x * 0.5), lambda x: np.arcsin(x * 0.5)),
    ("acos", lambda x: qd.acos(x * 0.5), lambda x: np.arccos(x * 0.5)),
    ("atan", lambda x: qd.atan(x), np.arctan),
    ("rsqrt", lambda x: qd.rsqrt(x * x + 0.5), lambda x: 1 / np.sqrt(x * x + 0.5)),
    ("floor", lambda x: qd.floor(x) * x, lambda x: np.floor(x) * x),
    ("poly", lambda x: 0.4 * x * x - 3 * x, lambda x: 0.4 * x * x - 3 * x),
    ("pow_int", lambda x: x ** 3, lambda x: x ** 3),
    ("cast_f32", lambda x: qd.cast(qd.cast(x, qd.f32) * 2, qd.f64), lambda x: x * 2),
]
BINARY = [
    ("add", lambda x, w: x + w, lambda x, w: x + w),
    ("sub", lambda x, w: x - w, lambda x, w: x - w),
    ("mul", lambda x, w: x * w, lambda x, w: x * w),
    ("div", lambda x, w: x / w, lambda x, w: x / w),
    ("pow", lambda x, w: w ** x, lambda x, w: w ** x),
    ("pow_base", lambda x, w: w ** (x * 0.5 + 2), lambda x, w: w ** (x * 0.5 + 2)),
    ("min", lambda x, w: qd.min(x, w), np.minimum),
    ("max", lambda x, w: qd.max(x, w), np.maximum),
    ("atan2", lambda x, w: qd.atan2(x, w), np.arctan2),
    ("mod", lambda x, w: x % w, lambda x, w: x % w),
    ("select", lambda x, w: qd.select(x > 0, x * w, w - x), lambda x, w: np.where(x > 0, x * w, w - x)),
]
X = np.array([-0.9, -0.35, 0.2, 0.55, 0.8])
W = np.array([1.3, 0.7, 2.1, 0.45, 1.7])  # never a tie with X (min / max, select's sign)


def _check(arch, kernel_of, ref, binary):
    """y = f(x, w): x.grad and w.grad from kernel.grad, y.dual from FwdMode along x, all against
    central differences of the numpy reference."""
    dt = qd.f32 if arch == qd.vulkan else qd.f64  # lavapipe: no f64 math functions
    n = len(X)
    x = qd.field(dt, shape=n, needs_grad=True, needs_dual=True)
    w = qd.field(dt, shape=n, needs_grad=True, needs_dual=True)
    y = qd.field(dt, shape=n, needs_grad=True, needs_dual=True)

    @qd.kernel
    def f():
        for i in x:
            y[i] = kernel_of(x[i], w[i]) if qd.static(binary) else kernel_of(x[i])

    npt = np.float32 if dt == qd.f32 else np.float64
    x.from_numpy(X.astype(npt))
    w.from_numpy(W.astype(npt))
    f()
    g = (lambda a, b: ref(a, b)) if binary else (lambda a, b: ref(a))
    eps = 1e-6
    dx = (g(X + eps, W) - g(X - eps, W)) / (2 * eps)
    dw = (g(X, W + eps) - g(X, W - eps)) / (2 * eps)
    tol = dict(rtol=1e-3, atol=1e-4) if dt == qd.f32 else dict(rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(y.to_numpy(), g(X, W), **tol)
    y.grad.fill(1)
    f.grad()
    np.testing.assert_allclose(x.grad.to_numpy(), dx, **tol)
    if binary:
        np.testing.assert_allclose(w.grad.to_numpy(), dw, **tol)
    else:
        assert not w.grad.to_numpy().any()  # w is not read
    with qd.ad.FwdMode(loss=y, param=x, seed=[1.0] * n):
        f()
    np.testing.assert_allclose(y.dual.to_numpy(), dx, **tol)


@pytest.mark.parametrize("name,kf,ref", UNARY, ids=[u[0] for u in UNARY])
@test(arch=ARCHS)
def test_gradient_of_unary_op(name, kf, ref, req_arch):
    _check(req_arch, kf, ref, False)


@pytest.mark.parametrize("name,kf,ref", BINARY, ids=[b[0] for b in BINARY])
@test(arch=ARCHS)
def test_gradient_of_binary_op(name, kf, ref, req_arch):
    _check(req_arch, kf, ref, True)


@test(arch=ARCHS)
def test_gradient_through_if_and_inner_loop_with_carried_state():
    """An inner loop whose iterations depend on the state carried from the earlier ones (v = sin(v)
    * x + ...): its reverse rebuilds each iteration's state; `if` on the data picks the branch."""
    n, m = 6, 5
    x = qd.field(qd.f32, shape=n, needs_grad=True)
    loss = qd.field(qd.f32, shape=(), needs_grad=True)

    @qd.kernel
    def f(k: qd.i32):
        for i in x:
            v = x[i]
            for j in range(k):
                v = qd.sin(v) * x[i] + 0.1 * j
            if v > 0:
                loss[None] += v * v
            else:
                loss[None] += -v

    def ref(xs):
        tot = 0.0
        for xi in xs:
            v = xi
            for j in range(m):
                v = math.sin(v) * xi + 0.1 * j
            tot += v * v if v > 0 else -v
        return tot

    xs = np.array([0.3, -0.8, 1.1, 0.05, -1.4, 0.7])
    x.from_numpy(xs.astype(np.float32))
    with qd.ad.Tape(loss=loss):
        f(m)
    eps = 1e-5
    num = [(ref(xs + eps * e) - ref(xs - eps * e)) / (2 * eps) for e in np.eye(n)]
    np.testing.assert_allclose(loss[None], ref(xs), rtol=1e-4)
    np.testing.assert_allclose(x.grad.to_numpy(), num, rtol=2e-3, atol=1e-4)


@test(arch=ARCHS)
def test_tape_runs_adjoints_in_reverse_order():
    n = 8
    x = qd.field(qd.f32, shape=n, needs_grad=True)
    y = qd.field(qd.f32, shape=n, needs_grad=True)
    loss = qd.field(qd.f32, shape=(), needs_grad=True)

    @qd.kernel
    def square():
        for i in x:
            y[i] = x[i] * x[i]

    @qd.kernel
    def total():
        for i in y:
            loss[None] += 3 * y[i]

    x.from_numpy(np.arange(n, dtype=np.float32))
    x.grad.fill(5)  # cleared by the tape
    with qd.ad.Tape(loss=loss):
        square()
        total()
    assert loss[None] == 3 * sum(i * i for i in range(n))
    np.testing.assert_array_equal(x.grad.to_numpy(), 6 * np.arange(n))
    np.testing.assert_array_equal(y.grad.to_numpy(), 0)  # y's stores handed their gradient to x


@test(arch=ARCHS)
def test_ndarray_gradients_and_kernel_grad_arguments():
    @qd.kernel
    def f(a: qd.types.ndarray(), b: qd.types.ndarray(), s: qd.f32):
        for i in a:
            b[i] = a[i] * a[i] * s

    a = qd.ndarray(qd.f32, 4, needs_grad=True)
    b = qd.ndarray(qd.f32, 4, needs_grad=True)
    a.from_numpy(np.array([1, 2, 3, 4], np.float32))
    f(a, b, 2.0)
    b.grad.fill(1)
    f.grad(a, b, 2.0)
    np.testing.assert_array_equal(a.grad.to_numpy(), [4, 8, 12, 16])
    with pytest.raises(qd.QuadrantsRuntimeError, match="i32 is not supported"):
        qd.ndarray(qd.i32, 3, needs_grad=True)


@test(arch=[qd.cpu])
def test_custom_gradient_no_grad_and_stop_grad():
    x = qd.field(qd.f32, shape=4, needs_grad=True)
    total = qd.field(qd.f32, shape=(), needs_grad=True)

    @qd.kernel
    def acc(mul: qd.f32):
        for i in x:
            total[None] += x[i] * mul

    @qd.ad.grad_replaced
    def forward(mul):
        acc(mul)
        acc(mul)

    @qd.ad.grad_for(forward)
    def backward(mul):
        acc.grad(mul)  # deliberately one of the two

    with qd.ad.Tape(loss=total):
        forward(4.0)
    np.testing.assert_array_equal(x.grad.to_numpy(), 4)

    with pytest.raises(RuntimeError, match="grad_replaced"):
        qd.ad.grad_for(acc)(lambda mul: None)

    @qd.ad.no_grad
    def frozen(mul):
        acc(mul)

    with qd.ad.Tape(loss=total):
        frozen(4.0)
    np.testing.assert_array_equal(x.grad.to_numpy(), 0)

    @qd.kernel
    def stopped():
        for i in x:
            qd.stop_grad(x)
            total[None] += x[i] * x[i]

    x.fill(3)
    with qd.ad.Tape(loss=total):
        stopped()
    np.testing.assert_array_equal(x.grad.to_numpy(), 0)


@test(arch=[qd.cpu])
def test_lazy_grad_companions_and_clear():
    x = qd.field(qd.f32)
    k = qd.field(qd.i32)
    qd.root.dense(qd.i, 3).place(x, k)
    assert x.grad.shape is None and k.grad is None  # made unplaced; integer fields have none
    qd.root.lazy_grad()
    assert x.grad.shape == (3,) and x.dual.shape is None
    x.grad.fill(2)
    qd.ad.clear_all_gradients()
    assert not x.grad.to_numpy().any()
    from quadrants.types.enums import SNodeGradType
    assert x.grad.snode.ptr.get_snode_grad_type() == SNodeGradType.ADJOINT
    assert x.snode.ptr.get_snode_grad_type() == SNodeGradType.PRIMAL


@test(arch=[qd.cpu])
def test_errors_name_the_line():
    x = qd.field(qd.f32, shape=4, needs_grad=True)
    y = qd.field(qd.f32, shape=(), needs_grad=True)

    @qd.kernel
    def maxed():
        for i in x:
            qd.atomic_max(y[None], x[i])

    maxed()
    with pytest.raises(qd.QuadrantsTypeError, match=r"(?s)atomic_max\(y\[None\].*atomic_max on a float is not differentiable"):
        maxed.grad()

    @qd.kernel
    def randomised():
        for i in x:
            y[None] += x[i] * qd.random()

    with pytest.raises(RuntimeError, match="RandStmt not supported"):
        randomised.grad()

    @qd.kernel
    def reads_grad():
        for i in x:
            y[None] += x.grad[i]

    with pytest.raises(RuntimeError, match="differentiate through a grad tensor"):
        reads_grad.grad()


def _ir(kernel):
    return next(iter(kernel.cache.values()))[0].compiled.artifacts["ir"]


@test(arch=[qd.cpu])
def test_adjoint_accumulation_takes_the_atomic_rewrites():
    """The reverse kernel's adjoint atomics: unique per iteration (x[i]) become plain adds; the
    same address in every iteration (s[None]) is accumulated per thread and flushed once; a gather's
    scatter into a small field goes to a private copy per thread."""
    n = 1024
    x = qd.field(qd.f32, shape=n, needs_grad=True)
    w = qd.field(qd.f32, shape=n, needs_grad=True)
    y = qd.field(qd.f32, shape=n, needs_grad=True)
    s = qd.field(qd.f32, shape=(), needs_grad=True)
    p = qd.field(qd.i32, shape=n)

    @qd.kernel
    def f():
        for i in y:
            y[i] = x[p[i]] * w[i] + s[None]

    p.from_numpy((np.arange(n) * 7 % n).astype(np.int32))
    x.from_numpy(np.arange(n, dtype=np.float32))
    w.fill(2)
    y.grad.fill(1)
    f.grad()
    ir = _ir(f.grad)
    loop = ir[ir.index("task 1"):]
    assert "global atomic add" not in loop.split("each thread, after its share of the loop")[0]
    assert "private copy of " + x.grad.name in ir  # the gather's scatter-add
    assert s.grad[None] == n  # privatised, flushed by one atomic per thread
    np.testing.assert_array_equal(x.grad.to_numpy(), 2)  # p is a permutation
    np.testing.assert_array_equal(w.grad.to_numpy(), x.to_numpy()[p.to_numpy()])



@test(arch=qd.vulkan)
def test_reverse_kernels_read_seeds_and_broadcast_values_once_per_thread():
    """On Vulkan the reverse kernel's reads of `loss.grad[None]` (the seed of `loss[None] += ...`)
    and of a broadcast scalar's value (`s[None]` replayed) are read once per thread, before its share
    of the loop (transforms/hoist.cpp); the gradients are exact (small integers)."""
    n = 1000
    w = qd.field(qd.f32, shape=n, needs_grad=True)
    y = qd.field(qd.f32, shape=n, needs_grad=True)
    s = qd.field(qd.f32, shape=(), needs_grad=True)
    loss = qd.field(qd.f32, shape=(), needs_grad=True)

    @qd.kernel
    def loss_sq():
        for i in w:
            loss[None] += w[i] * w[i]

    @qd.kernel
    def broadcast():
        for i in y:
            y[i] = s[None] * w[i]

    wv = (np.arange(n) % 7 - 3).astype(np.float32)
    w.from_numpy(wv)
    s[None] = 3.0
    loss.grad[None] = 2.0
    loss_sq.grad()
    np.testing.assert_array_equal(w.grad.to_numpy(), 4 * wv)
    w.grad.fill(0)
    y.grad.fill(1)
    broadcast.grad()
    np.testing.assert_array_equal(w.grad.to_numpy(), 3)
    assert s.grad[None] == wv.sum()
    np.testing.assert_array_equal(y.grad.to_numpy(), 0)  # the overwritten value's adjoint, consumed
    for kernel, field in ((loss_sq, loss.grad.name), (broadcast, s.name)):
        ir = _ir(kernel.grad)
        pre, loop = ir.split("each thread, before its share of the loop:")[1].split(" = for range(")
        load = r"(\$\d+) : f32 = global ptr field " + re.escape(field) + r"\[\]\n\s+\$\d+ : f32 = global load \1"
        assert re.search(load, pre) and not re.search(load, loop), ir

def _gather_with_scatter_adjoint(n):
    x = qd.field(qd.f32, shape=n, needs_grad=True)
    y = qd.field(qd.f32, shape=n, needs_grad=True)
    p = qd.field(qd.i32, shape=n)

    @qd.kernel
    def gather():
        for i in range(n):
            y[i] = x[p[i]] * 2.0

    return x, y, p, gather


@pytest.mark.parametrize("pattern", ["blocks of 16", "blocks of 3", "distinct", "random"])
@test(arch=qd.vulkan)
def test_scattered_adjoints_are_aggregated_per_subgroup(pattern):
    """A gather's adjoint `x.grad[p[i]] += 2 * y.grad[i]` on a GPU: the lanes sharing the first
    active lane's target combine their adds (one subgroup reduce, one atomic), the others keep
    theirs. Forced on lavapipe (whose cap cheap_scattered_atomics turns it off): every target's sum
    exact (small integers), whichever lanes share targets, with the grid-stride loop's ragged tail."""
    qd.init(arch=qd.vulkan, vulkan_disable_caps=["cheap_scattered_atomics"])
    n = 5003
    x, y, p, gather = _gather_with_scatter_adjoint(n)
    rng = np.random.default_rng(3)
    idx = {"blocks of 16": np.arange(n) // 16, "blocks of 3": np.arange(n) // 3, "distinct": (np.arange(n) * 7) % n,
           "random": rng.integers(0, 40, n)}[pattern].astype(np.int32)
    p.from_numpy(idx)
    yg = rng.integers(-8, 9, n).astype(np.float32)
    y.grad.from_numpy(yg)
    gather.grad()
    want = np.zeros(n)
    np.add.at(want, idx, 2.0 * yg)
    np.testing.assert_array_equal(x.grad.to_numpy(), want)
    ir = _ir(gather.grad)
    assert "subgroup.broadcast_first" in ir and "subgroup.reduce add" in ir and "subgroup.elect" in ir


@test(arch=qd.cpu)
def test_scattered_adjoint_aggregation_only_where_it_pays():
    """Emitted for CUDA (ptxas) and AMDGPU in the reverse kernel only; not on lavapipe (its cap
    cheap_scattered_atomics: atomics run lane by lane there), not in forward kernels, not on the cpu."""
    from test_gpu_codegen import ptxas
    x, y, p, gather = _gather_with_scatter_adjoint(4096)
    for sm in ("sm_75", "sm_90"):
        art = qd.compile(gather.grad, arch="cuda", features=[sm])
        assert "subgroup.broadcast_first" in art.ir and "shfl.sync.idx.b32" in art.ptx
        ptxas(art.ptx, sm)
    art = qd.compile(gather.grad, arch="amdgpu")
    assert "subgroup.broadcast_first" in art.ir and "v_readfirstlane_b32" in art.amdgcn
    gpu = ["subgroup_basic", "subgroup_vote", "subgroup_arithmetic", "subgroup_ballot"]
    assert "subgroup.broadcast_first" in qd.compile(gather.grad, arch="vulkan", features=gpu).ir
    assert "subgroup" not in qd.compile(gather.grad, arch="vulkan", features=gpu + ["cheap_scattered_atomics"]).ir
    assert "subgroup" not in qd.compile(gather, arch="cuda").ir
    assert "subgroup" not in qd.compile(gather.grad, arch="cpu").ir


@test(arch=ARCHS, debug=True)
def test_tape_validation_reports_read_then_write():
    """Tape(validation=True) under debug: writing an element that the tape's kernels read before (in
    the same launch or an earlier one) is a QuadrantsAssertionError naming the field; writes before
    reads pass."""
    x = qd.field(qd.f32, shape=4, needs_grad=True)
    b = qd.field(qd.f32, shape=(), needs_grad=True)
    loss = qd.field(qd.f32, shape=(), needs_grad=True)

    @qd.kernel
    def bad():
        loss[None] = x[1] * b[None]
        b[None] += 100

    @qd.kernel
    def good():
        b[None] = 3
        loss[None] = x[1] * b[None]

    @qd.kernel
    def reads_x():
        loss[None] = x[1] * 2

    @qd.kernel
    def writes_x():
        x[1] = 5

    x.fill(2)
    with pytest.raises(qd.QuadrantsAssertionError, match=f"field {b.name} is written after being read in the tape"):
        with qd.ad.Tape(loss=loss, validation=True):
            bad()
    assert bad.autodiff_mode == qd.types.enums.AutodiffMode.NONE  # restored
    with qd.ad.Tape(loss=loss, validation=True) as t:
        good()
    assert [f for f, _ in t.calls] == [good]
    assert x.grad[1] == 3 and x.snode.ptr.has_adjoint_checkbit()
    with pytest.raises(qd.QuadrantsAssertionError, match=f"field {x.name} is written after being read in the tape"):
        with qd.ad.Tape(loss=loss, validation=True):
            reads_x()
            writes_x()  # a later launch overwrites what reads_x's adjoint will read


@pytest.mark.parametrize("stack", [0, 16])
@test(arch=ARCHS)
def test_dynamic_loop_state_from_the_adstack_or_by_replay(stack, req_arch):
    """A 40-iteration loop whose carried state feeds a non-linear op: the reverse reads each
    iteration's state back from the per-thread adstack (ad_stack_size: 16 covers only the first 16
    iterations, the others are rebuilt by replay; 0: the default, 1024); the gradient is the same."""
    qd.init(arch=req_arch, ad_stack_size=stack)
    n, m = 8, 40
    x = qd.field(qd.f32, shape=n, needs_grad=True)
    loss = qd.field(qd.f32, shape=(), needs_grad=True)

    @qd.kernel
    def f(k: qd.i32):
        for i in x:
            v = x[i]
            for j in range(k):
                v = qd.sin(v) * 0.9 + x[i] * 0.1
            loss[None] += v

    xs = np.linspace(-1, 1, n)
    x.from_numpy(xs.astype(np.float32))
    with qd.ad.Tape(loss=loss):
        f(m)

    def ref(xi):
        v = xi
        for _ in range(m):
            v = np.sin(v) * 0.9 + xi * 0.1
        return v

    eps = 1e-5
    np.testing.assert_allclose(x.grad.to_numpy(), (ref(xs + eps) - ref(xs - eps)) / (2 * eps), rtol=1e-3, atol=1e-5)
    assert "adstack" in _ir(f.grad)


@pytest.mark.parametrize("threads", [1, 2])
@test(arch=ARCHS)
def test_deterministic_backward_gives_the_exact_sum(threads, req_arch):
    """Under qd.init(deterministic=True) the adjoint's scatter-add into x.grad (a gather's backward)
    is the exact sum of the contributions rounded once: the same bits for any thread count, on
    every backend, and test_deterministic's exact reference."""
    qd.init(arch=req_arch, deterministic=True, cpu_max_num_threads=threads)
    n, m = 1 << 12, 32
    x = qd.field(qd.f32, shape=m, needs_grad=True)
    w = qd.field(qd.f32, shape=n, needs_grad=True)
    y = qd.field(qd.f32, shape=n, needs_grad=True)
    p = qd.field(qd.i32, shape=n)

    @qd.kernel
    def f():
        for i in y:
            y[i] = x[p[i]] * w[i]

    rng = np.random.default_rng(1)
    P, W = rng.integers(0, m, n).astype(np.int32), rng.standard_normal(n).astype(np.float32)
    G = rng.standard_normal(n).astype(np.float32)
    p.from_numpy(P)
    w.from_numpy(W)
    x.from_numpy(rng.standard_normal(m).astype(np.float32))
    f()
    y.grad.from_numpy(G)
    f.grad()
    contrib = (G * W).astype(np.float32)
    exact = np.array([f32_sum(contrib[P == k]) for k in range(m)], np.float32)
    np.testing.assert_array_equal(x.grad.to_numpy().view(np.int32), exact.view(np.int32))
