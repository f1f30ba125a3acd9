"""qd.algorithms: reduce, exclusive scan, select, sort, reduce_by_key and the deprecated host entry
points, checked exactly against numpy (ints bit-exact, float min / max exact, float sums within the
reordering bound of docs/algorithms.md) on every arch, for counts from 0 through several tiles past
each capacity boundary (256, 256**2), random and adversarial inputs.

Each kernel is compiled once per (dtype, depth) and run for every count: the count is a device value.
"""
import contextlib
import math

import numpy as np
import pytest

import quadrants as qd
import quadrants.algorithms as A

from tests import test_utils

DTYPES = [qd.i32, qd.u32, qd.f32, qd.i64, qd.u64, qd.f64]
# 0, 1, a few small counts, both sides of each capacity boundary and of tile boundaries (1024 on
# GPUs, 4096 on the cpu), and several tiles past 256**2
SIZES = [0, 1, 2, 255, 256, 257, 1023, 1024, 1025, 4096, 4097, 65536, 65537, 65536 + 3 * 4096 + 7]
SMALL_SIZES = [0, 1, 257, 4097, 65536 + 3 * 4096 + 7]  # for the adversarial inputs
CAP = max(SIZES)
D = 3  # covers every size above (256**3); boundaries at the smallest depths are tested separately


def nd(dtype):
    return qd.types.ndarray(dtype, ndim=1)


def slot_dtype(dtype):
    return qd.u32 if dtype.bits == 32 else qd.u64


def np_of(dtype):
    return dtype.np.type


def info(dtype):
    return np.finfo(np_of(dtype)) if dtype.is_real else np.iinfo(np_of(dtype))


def identity(op, dtype):
    if op == "add":
        return 0
    if dtype.is_real:
        return math.inf if op == "min" else -math.inf
    return info(dtype).max if op == "min" else info(dtype).min


def unit_roundoff(dtype):
    return 2.0 ** -24 if dtype == qd.f32 else 2.0 ** -53


def sum_tolerance(abs_prefix, n):
    """docs/algorithms.md: a float sum of n terms is combined along a path of at most
    D * tile_size additions (tile 4096 on the cpu, 1024 on GPUs; the look-back's path, a tile plus
    one addition per earlier tile, is shorter for these sizes): |got - exact| <= L * u * sum|x|."""
    return min(n, D * 4096) * abs_prefix


def inputs(rng, dtype, n, kind):
    """Test data of `kind`: random, equal, sorted, reversed, extremes (ints: the range's ends, so
    sums wrap; floats: +-inf and huge values only for min / max)."""
    npt = np_of(dtype)
    if kind == "equal":
        return np.full(n, 3 if not dtype.is_real else 0.5, dtype=npt)
    if dtype.is_real:
        a = rng.standard_normal(n).astype(npt) * 100
    else:
        lo, hi = (-1000, 1000) if dtype.is_signed else (0, 2000)
        a = rng.integers(lo, hi, size=n).astype(npt)
    if kind == "sorted":
        a = np.sort(a)
    elif kind == "reversed":
        a = np.sort(a)[::-1].copy()
    elif kind == "extremes":
        if dtype.is_real:
            a[::7] = np.inf
            a[3::11] = -np.inf
            a[5::13] = info(dtype).max
        else:
            a[::5] = info(dtype).max
            a[2::7] = info(dtype).min
    return a


# --- reduce ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@test_utils.test(arch=[qd.cpu, qd.vulkan, qd.cuda, qd.amdgpu, qd.metal])
def test_reduce(dtype):
    @qd.kernel
    def run(a: nd(dtype), o_add: nd(dtype), o_min: nd(dtype), o_max: nd(dtype), scratch: nd(slot_dtype(dtype)),
            n: qd.i32):
        A.reduce_add(a, o_add, scratch, n, dtype, D)
        A.reduce_min(a, o_min, scratch, n, dtype, D)
        A.reduce_max(a, o_max, scratch, n, dtype, D)

    a = qd.ndarray(dtype, (CAP,))
    outs = [qd.ndarray(dtype, (1,)) for _ in range(3)]
    scratch = qd.ndarray(slot_dtype(dtype), (A.reduce_scratch_slots(CAP, D),))
    rng = np.random.default_rng(1)
    for kind in ["random", "equal", "extremes"]:
        host = inputs(rng, dtype, CAP, kind)
        a.from_numpy(host)
        for n in SIZES if kind == "random" else SMALL_SIZES:
            run(a, *outs, scratch, n)
            got_add, got_min, got_max = (o.to_numpy()[0] for o in outs)
            x = host[:n]
            want_min = x.min() if n else identity("min", dtype)
            want_max = x.max() if n else identity("max", dtype)
            assert got_min == want_min or (dtype.is_real and np.isnan(got_min) and np.isnan(want_min)), (kind, n)
            assert got_max == want_max, (kind, n)
            if kind == "extremes" and dtype.is_real:
                continue  # inf - inf: the sum is not a number to compare
            if dtype.is_real:
                exact = math.fsum(x.astype(np.float64))
                tol = sum_tolerance(float(np.abs(x.astype(np.float64)).sum()), n) * unit_roundoff(dtype)
                assert abs(float(got_add) - exact) <= tol, (kind, n, got_add, exact)
            else:
                u = f"u{dtype.bits // 8}"
                want = np.sum(x.view(u).astype(np.uint64), dtype=np.uint64).astype(u)
                assert np.array([got_add]).view(u)[0] == want, (kind, n)


# --- exclusive scan -------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@test_utils.test(arch=[qd.cpu, qd.vulkan, qd.cuda, qd.amdgpu, qd.metal])
def test_exclusive_scan(dtype):
    @qd.kernel
    def run(a: nd(dtype), o_add: nd(dtype), o_min: nd(dtype), o_max: nd(dtype), scratch: nd(slot_dtype(dtype)),
            n: qd.i32):
        A.exclusive_scan_add(a, o_add, scratch, n, dtype, D)
        A.exclusive_scan_min(a, o_min, scratch, n, dtype, D)
        A.exclusive_scan_max(a, o_max, scratch, n, dtype, D)

    a = qd.ndarray(dtype, (CAP,))
    outs = [qd.ndarray(dtype, (CAP,)) for _ in range(3)]
    scratch = qd.ndarray(slot_dtype(dtype), (A.exclusive_scan_scratch_slots(CAP, D),))
    rng = np.random.default_rng(2)
    sentinel = np.full(CAP, 7, dtype=np_of(dtype))
    for kind in ["random", "sorted", "extremes"]:
        host = inputs(rng, dtype, CAP, kind)
        a.from_numpy(host)
        for n in SIZES if kind == "random" else SMALL_SIZES:
            for o in outs:
                o.from_numpy(sentinel)
            run(a, *outs, scratch, n)
            got_add, got_min, got_max = (o.to_numpy() for o in outs)
            x = host[:n]
            for op, got, acc in (("min", got_min, np.minimum.accumulate), ("max", got_max, np.maximum.accumulate)):
                want = np.empty(n, dtype=np_of(dtype))
                if n:
                    want[0] = identity(op, dtype)
                    want[1:] = acc(x)[:-1]
                np.testing.assert_array_equal(got[:n], want, err_msg=f"{op} {kind} n={n}")
            assert (got_min[n:] == 7).all() and (got_add[n:] == 7).all(), "wrote past n"
            if kind == "extremes" and dtype.is_real:
                continue
            if dtype.is_real:
                x64 = x.astype(np.float64)
                exact = np.concatenate([[0.0], np.cumsum(x64)[:-1]])[:n]
                tol = np.array([sum_tolerance(s, n) for s in np.concatenate([[0.0], np.cumsum(np.abs(x64))[:-1]])[:n]])
                err = np.abs(got_add[:n].astype(np.float64) - exact)
                assert (err <= tol * unit_roundoff(dtype) + 1e-300).all(), f"add {kind} n={n}: {err.max()}"
            else:  # modulo 2**bits: the unsigned views' sums wrap alike
                u = f"u{dtype.bits // 8}"
                sums = np.cumsum(x.view(u).astype(np.uint64), dtype=np.uint64)
                want = np.concatenate([np.zeros(1, np.uint64), sums[:-1]])[:n]
                want = want.astype(u)
                np.testing.assert_array_equal(got_add[:n].view(u), want, err_msg=f"add {kind} n={n}")


@test_utils.test(arch=[qd.cpu, qd.vulkan, qd.cuda, qd.amdgpu, qd.metal])
def test_capacity_boundaries():
    """Each depth at the edge of its capacity 256 ** D (and the smallest depth for each count):
    scan, reduce, select and sort of u32."""
    u32 = qd.u32

    def kernel(depth):
        @qd.kernel
        def run(a: nd(u32), o: nd(u32), r: nd(u32), flags: nd(qd.i32), sel: nd(u32), num: nd(qd.i32),
                keys: nd(u32), tmp: nd(u32), scratch: nd(u32), n: qd.i32):
            A.exclusive_scan_add(a, o, scratch, n, u32, depth)
            A.reduce_max(a, r, scratch, n, u32, depth)
            A.select(a, flags, sel, num, scratch, n, depth)
            A.sort(keys, tmp, keys, tmp, scratch, n, u32, False, 32, depth)
        return run

    cap = 256 ** 2 + 3 * 4096 + 7
    rng = np.random.default_rng(3)
    host = rng.integers(0, 2 ** 32, cap, dtype=np.uint32)
    fl = (rng.random(cap) < 0.5).astype(np.int32)
    a, o, sel, keys, tmp = (qd.ndarray(u32, (cap,)) for _ in range(5))
    r, num, flags = qd.ndarray(u32, (1,)), qd.ndarray(qd.i32, (1,)), qd.ndarray(qd.i32, (cap,))
    a.from_numpy(host)
    flags.from_numpy(fl)
    for depth, sizes in ((1, [0, 1, 255, 256]), (2, [257, 4097, 65535, 65536]), (3, [65537, cap])):
        run = kernel(depth)
        slots = max(A.sort_scratch_slots(sizes[-1], depth), A.select_scratch_slots(sizes[-1]),
                    A.exclusive_scan_scratch_slots(sizes[-1], depth))
        scratch = qd.ndarray(u32, (slots,))
        for n in sizes:
            keys.from_numpy(host)
            run(a, o, r, flags, sel, num, keys, tmp, scratch, n)
            x = host[:n]
            want = np.concatenate([[0], np.cumsum(x, dtype=np.uint32)[:-1]]).astype(np.uint32)[:n]
            np.testing.assert_array_equal(o.to_numpy()[:n], want, err_msg=f"scan D={depth} n={n}")
            assert r.to_numpy()[0] == (x.max() if n else 0), (depth, n)
            k = num.to_numpy()[0]
            np.testing.assert_array_equal(sel.to_numpy()[:k], x[fl[:n] == 1], err_msg=f"select D={depth} n={n}")
            np.testing.assert_array_equal(keys.to_numpy()[:n], np.sort(x), err_msg=f"sort D={depth} n={n}")
            np.testing.assert_array_equal(keys.to_numpy()[n:], host[n:], err_msg="sort wrote past n")


# --- lowering: single-pass decoupled look-back or reduce-then-scan ------------------------------------
LOWERINGS = ["decoupled_lookback", "reduce_then_scan"]


def _expected_lowering(dtype=qd.u32):
    """What the target's facts give (docs/algorithms.md): look-back on the cpu; on Vulkan only where
    the driver does not run ordered atomics as barriers; where it does (llvmpipe) the relaxed
    look-back for 32-bit dtypes, reduce-then-scan for 64-bit ones."""
    if qd._lib.runtime.program().config.arch is qd.cpu:
        return "decoupled_lookback"
    if not qd.vulkan_caps().get("ordered_atomics_act_as_barriers"):
        return "decoupled_lookback"
    return "relaxed_lookback" if dtype.bits == 32 else "reduce_then_scan"


def _scan_select_kernel(dtype):
    @qd.kernel
    def run(a: nd(dtype), o: nd(dtype), flags: nd(qd.i32), sel: nd(dtype), num: nd(qd.i32),
            scratch: nd(slot_dtype(dtype)), s32: nd(qd.u32), n: qd.i32):
        A.exclusive_scan_add(a, o, scratch, n, dtype, D)
        A.select(a, flags, sel, num, s32, n, D)
    return run


def _check_scan_select(run, dtype, sizes, rng):
    cap = max(sizes)
    host = inputs(rng, dtype, cap, "random")
    fl = (rng.random(cap) < 0.5).astype(np.int32)
    a, o, sel = (qd.ndarray(dtype, (cap,)) for _ in range(3))
    flags, num = qd.ndarray(qd.i32, (cap,)), qd.ndarray(qd.i32, (1,))
    scratch = qd.ndarray(slot_dtype(dtype), (A.exclusive_scan_scratch_slots(cap, D),))
    s32 = qd.ndarray(qd.u32, (A.select_scratch_slots(cap),))
    a.from_numpy(host)
    flags.from_numpy(fl)
    u = f"u{dtype.bits // 8}"
    for n in sizes:
        o.from_numpy(np.full(cap, 7, dtype=np_of(dtype)))
        num.from_numpy(np.full(1, -1, np.int32))
        run(a, o, flags, sel, num, scratch, s32, n)
        x = host[:n]
        sums = np.cumsum(x.view(u).astype(np.uint64), dtype=np.uint64)
        want = np.concatenate([np.zeros(1, np.uint64), sums[:-1]])[:n].astype(u)
        got = o.to_numpy()
        np.testing.assert_array_equal(got[:n].view(u), want, err_msg=f"scan n={n}")
        assert (got[n:] == 7).all(), f"scan n={n}: wrote past n"
        k = num.to_numpy()[0]
        assert k == int((fl[:n] != 0).sum()), f"select n={n}: num_out {k}"
        np.testing.assert_array_equal(sel.to_numpy()[:k], x[fl[:n] != 0], err_msg=f"select n={n}")


@test_utils.test(arch=[qd.cpu, qd.vulkan])
def test_scan_lowering_is_the_targets():
    """scan_lowering() reports the target's choice, and the kernel's printed IR shows it: the
    look-back publishes with Release atomic stores and reads with Acquire atomic loads; the
    reduce-then-scan staircase has neither."""
    arch = qd._lib.runtime.program().config.arch
    want = _expected_lowering(qd.i32)
    for dt in (qd.i32, qd.u64, None):
        assert A.scan_lowering(dt) == _expected_lowering(dt or qd.u32)
    assert A.scan_lowering(arch=arch) == _expected_lowering()
    a, o, sel = (qd.ndarray(qd.i32, (8,)) for _ in range(3))
    f, num, s32 = qd.ndarray(qd.i32, (8,)), qd.ndarray(qd.i32, (1,)), qd.ndarray(qd.u32, (8,))
    ir = qd.compile(_scan_select_kernel(qd.i32), a, o, f, sel, num, s32, s32, 8).ir
    ordered = "load atomic Acquire@Device" in ir and "store atomic Release@Device" in ir
    assert ordered == (want == "decoupled_lookback")
    # the relaxed look-back's state accesses are atomics without an order (printed without one)
    assert ("load atomic" in ir) == (want != "reduce_then_scan")
    for lowering in LOWERINGS:
        with A._lookback.forced(lowering):
            assert A.scan_lowering() == lowering
            ir = qd.compile(_scan_select_kernel(qd.i32), a, o, f, sel, num, s32, s32, 8).ir
        assert ("load atomic Acquire@Device" in ir) == (lowering == "decoupled_lookback")
    with pytest.raises(ValueError, match="lowering"):
        with A._lookback.forced("serial"):
            pass


@test_utils.test(arch=qd.cpu)
def test_scan_lowering_from_target_facts():
    """The choice is the core's Target::can_wait_on_other_workgroups: cpu, cuda, amdgpu yes; Vulkan
    with the Vulkan memory model at device scope, unless ordered atomics act as barriers; Metal no.
    qd.compile for an arch without its device uses that arch's compile features."""
    core = qd._core
    vk = list(core.compile_features("vulkan"))
    assert core.can_wait_on_other_workgroups("cpu", [])
    assert core.can_wait_on_other_workgroups("cuda", ["sm_75"])
    assert core.can_wait_on_other_workgroups("amdgpu", [])
    assert core.can_wait_on_other_workgroups("vulkan", vk)
    assert not core.can_wait_on_other_workgroups("vulkan", vk + ["ordered_atomics_act_as_barriers"])
    assert not core.can_wait_on_other_workgroups("vulkan", [c for c in vk if c != "vulkan_memory_model_device_scope"])
    assert not core.can_wait_on_other_workgroups("metal", [])
    assert A.scan_lowering(qd.u32, arch="cuda") == "decoupled_lookback"
    assert A.scan_lowering(qd.u32, arch=qd.metal) == "reduce_then_scan"
    assert A.scan_lowering(qd.f64, arch="vulkan") == "decoupled_lookback"
    a, o, sel = (qd.ndarray(qd.u32, (8,)) for _ in range(3))
    f, num, s32 = qd.ndarray(qd.i32, (8,)), qd.ndarray(qd.i32, (1,)), qd.ndarray(qd.u32, (8,))
    k = _scan_select_kernel(qd.u32)
    assert "ld.acquire.gpu" in qd.compile(k, a, o, f, sel, num, s32, s32, 8, arch="cuda").ptx
    spv = qd.compile(k, a, o, f, sel, num, s32, s32, 8, arch="vulkan").spirv_asm
    assert "OpAtomicLoad" in spv and "OpAtomicStore" in spv
    assert "OpAtomicLoad" not in qd.compile(k, a, o, f, sel, num, s32, s32, 8, arch="metal").spirv_asm


@pytest.mark.parametrize("lowering", LOWERINGS)
@pytest.mark.parametrize("dtype", [qd.i32, qd.u64])
@test_utils.test(arch=qd.cpu)
def test_scan_and_select_both_lowerings_cpu(lowering, dtype):
    """Both lowerings on the cpu, exact: n from 0 through many 4096-element tiles past the capacity
    boundaries (1024 look-back tiles at 2^22)."""
    with A._lookback.forced(lowering):
        run = _scan_select_kernel(dtype)
        _check_scan_select(run, dtype, SIZES + [4 * 4096 + 1, 2 ** 22 + 5], np.random.default_rng(11))


@test_utils.test(arch=qd.cpu)
def test_cpu_span_statements_chosen():
    """cpu: the in-tile scan of 32 / 64-bit integers and select's per-tile compaction of 32 / 64-bit
    elements are span statements (vector loops, printed in the IR); a float scan keeps its serial
    chains; with bounds checks (which check one index per pointer) neither is used."""
    def ir_of(dtype):
        a, o, sel = (qd.ndarray(dtype, (8,)) for _ in range(3))
        f, num, s32 = qd.ndarray(qd.i32, (8,)), qd.ndarray(qd.i32, (1,)), qd.ndarray(qd.u32, (8,))
        return qd.compile(_scan_select_kernel(dtype), a, o, f, sel, num, qd.ndarray(slot_dtype(dtype), (8,)), s32, 8).ir

    for dtype in (qd.i32, qd.u32, qd.i64, qd.u64):
        ir = ir_of(dtype)
        assert "span exclusive_scan add" in ir and "span compress" in ir, dtype
    for lowering in LOWERINGS:  # select's scatter in both lowerings
        with A._lookback.forced(lowering):
            assert "span compress" in ir_of(qd.f32)
    ir = ir_of(qd.f32)
    assert "span exclusive_scan" not in ir
    qd.init(arch=qd.cpu, debug=True)
    assert "span" not in ir_of(qd.i32)


@pytest.mark.parametrize("flag_dtype", [qd.u8, qd.i32, qd.i64])
@pytest.mark.parametrize("dtype", [qd.f32, qd.i64])
@test_utils.test(arch=qd.cpu)
def test_cpu_span_edges(flag_dtype, dtype):
    """The span loops' edges, exact: counts around the vector widths (8 lanes of 32 bits, 4 of 64)
    and the tile (4096), flags of 1, 4 and 8 bytes with any nonzero value selecting, dense and
    sparse selections (a tile's last outputs use the masked store), and u32 scan min / max (the
    identity shifted into the vectors' lanes)."""
    sizes = [1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 4095, 4096, 4097, 4103, 3 * 4096 + 9]
    cap = max(sizes)

    @qd.kernel
    def run(a: nd(dtype), flags: nd(flag_dtype), out: nd(dtype), num: nd(qd.i32), s32: nd(qd.u32),
            u: nd(qd.u32), mn: nd(qd.u32), mx: nd(qd.u32), n: qd.i32):
        A.select(a, flags, out, num, s32, n, D)
        A.exclusive_scan_min(u, mn, s32, n, qd.u32, D)
        A.exclusive_scan_max(u, mx, s32, n, qd.u32, D)

    rng = np.random.default_rng(21)
    host = inputs(rng, dtype, cap, "random")
    uh = rng.integers(0, 2 ** 32, cap, dtype=np.uint64).astype(np.uint32)
    a, out = qd.ndarray(dtype, (cap,)), qd.ndarray(dtype, (cap,))
    flags, num = qd.ndarray(flag_dtype, (cap,)), qd.ndarray(qd.i32, (1,))
    u, mn, mx = (qd.ndarray(qd.u32, (cap,)) for _ in range(3))
    s32 = qd.ndarray(qd.u32, (max(A.select_scratch_slots(cap), A.exclusive_scan_scratch_slots(cap, D)),))
    a.from_numpy(host)
    u.from_numpy(uh)
    for p in (0.9, 0.5, 0.02):
        fl = (rng.random(cap) < p) * rng.integers(1, 100, cap)
        flags.from_numpy(fl.astype(np_of(flag_dtype)))
        for n in sizes:
            out.from_numpy(np.full(cap, 5, dtype=np_of(dtype)))
            run(a, flags, out, num, s32, u, mn, mx, n)
            want = host[:n][fl[:n] != 0]
            k = num.to_numpy()[0]
            assert k == len(want), (p, n)
            got = out.to_numpy()
            np.testing.assert_array_equal(got[:k], want, err_msg=f"p={p} n={n}")
            assert (got[k:] == 5).all(), f"p={p} n={n}: wrote past num_out"
        for got, acc, first in ((mn, np.minimum.accumulate, 2 ** 32 - 1), (mx, np.maximum.accumulate, 0)):
            np.testing.assert_array_equal(got.to_numpy()[:n], np.concatenate([[first], acc(uh[:n])[:-1]]).astype(np.uint32))


@pytest.mark.parametrize("dtype", [qd.i32, qd.u64])
@test_utils.test(arch=qd.vulkan)
def test_scan_and_select_recorded_lowering_vulkan(dtype):
    """The lowering Vulkan records (on lavapipe: the relaxed look-back for i32, reduce-then-scan for
    u64 and for select), exact, many tiles."""
    assert A.scan_lowering(dtype) == _expected_lowering(dtype)
    _check_scan_select(_scan_select_kernel(dtype), dtype, SIZES + [2 ** 20 + 5], np.random.default_rng(12))


@pytest.mark.parametrize("fallback_only", [False, True])
@test_utils.test(arch=qd.vulkan)
def test_relaxed_lookback_vulkan(fallback_only):
    """The relaxed look-back (forced), exact for add / min / max of u32, i32 and f32, n across its
    128-element tiles. fallback_only: every tile reduces its predecessors from their input instead
    of reading their published aggregates (the path a tile takes when a predecessor has not
    published yet, which scheduling decides)."""
    rng = np.random.default_rng(21)
    sizes = [0, 1, 7, 127, 128, 129, 1000, 4097] + ([] if fallback_only else [70001])
    cap = max(sizes)
    for dtype in (qd.u32, qd.i32, qd.f32):
        host = (rng.integers(-100, 100, cap) if dtype is not qd.u32 else rng.integers(0, 2 ** 32, cap)).astype(np_of(dtype))
        x, y = qd.ndarray(dtype, (cap,)), qd.ndarray(dtype, (cap,))
        scratch = qd.ndarray(qd.u32, (A.exclusive_scan_scratch_slots(cap, D),))
        x.from_numpy(host)
        for op, acc, first in (("add", None, 0), ("min", np.minimum.accumulate, None), ("max", np.maximum.accumulate, None)):
            scan = getattr(A, f"exclusive_scan_{op}")
            with A._lookback.forced("relaxed_lookback"), contextlib.ExitStack() as stack:
                if fallback_only:
                    stack.enter_context(A._lookback.fallback_only())

                @qd.kernel
                def run(a: nd(dtype), o: nd(dtype), s: nd(qd.u32), n: qd.i32):
                    scan(a, o, s, n, dtype, D)

                assert "load atomic" in qd.compile(run, x, y, scratch, 8).ir
                for n in sizes:
                    y.from_numpy(np.full(cap, 7, np_of(dtype)))
                    run(x, y, scratch, n)
                    h = host[:n]
                    if op == "add":
                        inc = np.cumsum(h, dtype=np_of(dtype))
                    else:
                        inc = acc(h)
                    ident = scan_identity(op, dtype)
                    want = np.concatenate([np.array([ident], np_of(dtype)), inc[:-1]])[:n]
                    got = y.to_numpy()
                    np.testing.assert_array_equal(got[:n], want, err_msg=f"{op} {dtype} n={n}")
                    assert (got[n:] == 7).all(), f"{op} {dtype} n={n}: wrote past n"


def scan_identity(op, dtype):
    """The scan's first output: add 0, min the largest value (+inf), max the smallest (-inf)."""
    if op == "add":
        return 0
    if dtype is qd.f32:
        return np.inf if op == "min" else -np.inf
    info = np.iinfo(np_of(dtype))
    return info.max if op == "min" else info.min


# --- select ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [qd.i32, qd.f64, qd.u64])
@test_utils.test(arch=[qd.cpu, qd.vulkan, qd.cuda, qd.amdgpu, qd.metal])
def test_select(dtype):
    @qd.kernel
    def run(a: nd(dtype), flags: nd(qd.i32), out: nd(dtype), num: nd(qd.i32), scratch: nd(qd.u32), n: qd.i32):
        A.select(a, flags, out, num, scratch, n, D)

    rng = np.random.default_rng(4)
    host = inputs(rng, dtype, CAP, "random")
    a, out = qd.ndarray(dtype, (CAP,)), qd.ndarray(dtype, (CAP,))
    flags, num = qd.ndarray(qd.i32, (CAP,)), qd.ndarray(qd.i32, (1,))
    scratch = qd.ndarray(qd.u32, (A.select_scratch_slots(CAP),))
    a.from_numpy(host)
    patterns = {
        "random": (rng.random(CAP) < 0.3).astype(np.int32),
        "none": np.zeros(CAP, np.int32),
        "all": np.ones(CAP, np.int32),
        "alternating": (np.arange(CAP) % 2).astype(np.int32),
        "nonzero": rng.integers(-3, 4, CAP).astype(np.int32),  # any nonzero flag selects
        "last": (np.arange(CAP) == CAP - 1).astype(np.int32),
    }
    sentinel = np.full(CAP, 5, dtype=np_of(dtype))
    for name, fl in patterns.items():
        flags.from_numpy(fl)
        for n in SIZES if name == "random" else SMALL_SIZES:
            out.from_numpy(sentinel)
            run(a, flags, out, num, scratch, n)
            want = host[:n][fl[:n] != 0]
            k = num.to_numpy()[0]
            assert k == len(want), (name, n)
            got = out.to_numpy()
            np.testing.assert_array_equal(got[:k], want, err_msg=f"{name} n={n}")
            assert (got[k:] == 5).all(), f"{name} n={n}: the tail past num_out was written"


@test_utils.test(arch=[qd.cpu, qd.vulkan, qd.cuda, qd.amdgpu, qd.metal])
def test_select_vectors_and_fields():
    """select copies elements of any type (here 3-vectors of a field) and takes fields and 1-element
    fields for the count."""
    N = 5000
    src = qd.Vector.field(3, qd.f32, shape=N)
    dst = qd.Vector.field(3, qd.f32, shape=N)
    flags = qd.field(qd.i32, shape=N)
    num = qd.field(qd.i32, shape=())
    count = qd.field(qd.i32, shape=1)
    scratch = qd.field(qd.u32, shape=A.select_scratch_slots(N))
    rng = np.random.default_rng(5)
    h = rng.standard_normal((N, 3)).astype(np.float32)
    fl = (rng.random(N) < 0.5).astype(np.int32)
    src.from_numpy(h)
    flags.from_numpy(fl)
    count.from_numpy(np.array([N], np.int32))

    @qd.kernel
    def run():
        A.select(src, flags, dst, num, scratch, count[0], 2)

    run()
    k = num[None]
    assert k == fl.sum()
    np.testing.assert_array_equal(dst.to_numpy()[:k], h[fl == 1])


# --- sort -----------------------------------------------------------------------------------------
def sort_inputs(rng, dtype, n):
    """Random keys over the whole range (floats: normals with NaN, +-0.0, +-inf sprinkled in)."""
    npt = np_of(dtype)
    if dtype.is_real:
        a = (rng.standard_normal(n) * 1e3).astype(npt)
        if n >= 16:
            a[rng.integers(0, n, n // 10 + 1)] = np.nan
            a[rng.integers(0, n, n // 10 + 1)] = -0.0
            a[rng.integers(0, n, n // 10 + 1)] = 0.0
            a[rng.integers(0, n, 4)] = np.inf
            a[rng.integers(0, n, 4)] = -np.inf
            a[rng.integers(0, n, 4)] = -np.nan
        return a
    i = info(dtype)
    return rng.integers(int(i.min), int(i.max), size=n, dtype=npt, endpoint=True)


@pytest.mark.parametrize("dtype", DTYPES)
@test_utils.test(arch=[qd.cpu, qd.vulkan, qd.cuda, qd.amdgpu, qd.metal])
def test_sort_key_value(dtype):
    """Keys and the u32 payload match numpy's stable argsort exactly (bits included: -0.0 and +0.0
    keep their input order, every NaN sorts last in input order, as np.argsort(kind="stable"))."""
    @qd.kernel
    def run(keys: nd(dtype), tmp: nd(dtype), vals: nd(qd.u32), tmp_vals: nd(qd.u32), scratch: nd(qd.u32),
            n: qd.types.ndarray(qd.i32, ndim=0)):
        A.sort(keys, tmp, vals, tmp_vals, scratch, n, dtype, True, dtype.bits, D)

    keys, tmp = qd.ndarray(dtype, (CAP,)), qd.ndarray(dtype, (CAP,))
    vals, tmp_vals = qd.ndarray(qd.u32, (CAP,)), qd.ndarray(qd.u32, (CAP,))
    scratch = qd.ndarray(qd.u32, (A.sort_scratch_slots(CAP, D),))
    n_dev = qd.ndarray(qd.i32, ())
    rng = np.random.default_rng(6)
    rand = sort_inputs(rng, dtype, CAP)
    cases = {"random": rand, "equal": np.full(CAP, rand[0]), "sorted": np.sort(rand),
             "reversed": np.sort(rand)[::-1].copy(), "few": rand[rng.integers(0, 3, CAP)]}
    for name, host in cases.items():
        host = host.astype(np_of(dtype))
        for n in SIZES if name == "random" else SMALL_SIZES:
            keys.from_numpy(host)
            vals.from_numpy(np.arange(CAP, dtype=np.uint32))
            n_dev.fill(n)
            run(keys, tmp, vals, tmp_vals, scratch, n_dev)
            order = np.argsort(host[:n], kind="stable")
            got_k, got_v = keys.to_numpy(), vals.to_numpy()
            want = np.concatenate([host[:n][order], host[n:]])
            np.testing.assert_array_equal(got_k.view(f"u{dtype.bits // 8}"), want.view(f"u{dtype.bits // 8}"),
                                          err_msg=f"{name} n={n}: keys (bits)")
            np.testing.assert_array_equal(got_v[:n], order.astype(np.uint32), err_msg=f"{name} n={n}: values")


@test_utils.test(arch=[qd.cpu, qd.vulkan, qd.cuda, qd.amdgpu, qd.metal])
def test_sort_end_bit_keys_only_and_values():
    """Keys-only (has_values=False), end_bit below the key width (16: two passes; 24: three, with the
    copy back), and values of other dtypes than the keys'."""
    N = 20000
    rng = np.random.default_rng(7)

    @qd.kernel
    def keys_only(keys: nd(qd.u32), tmp: nd(qd.u32), scratch: nd(qd.u32), n: qd.i32, end_bit: qd.template()):
        A.sort(keys, tmp, keys, tmp, scratch, n, qd.u32, False, end_bit, 2)

    keys, tmp = qd.ndarray(qd.u32, (N,)), qd.ndarray(qd.u32, (N,))
    scratch = qd.ndarray(qd.u32, (A.sort_scratch_slots(N, 2),))
    for end_bit, bound in ((16, 2 ** 16), (24, 2 ** 24), (8, 256), (32, 2 ** 32)):
        host = rng.integers(0, bound, N, dtype=np.uint32)
        keys.from_numpy(host)
        keys_only(keys, tmp, scratch, N, end_bit)
        np.testing.assert_array_equal(keys.to_numpy(), np.sort(host), err_msg=f"end_bit={end_bit}")
    # end_bit sorts by the low bits only, stably
    host = rng.integers(0, 2 ** 32, N, dtype=np.uint32)
    keys.from_numpy(host)
    keys_only(keys, tmp, scratch, N, 16)
    np.testing.assert_array_equal(keys.to_numpy(), host[np.argsort(host & 0xFFFF, kind="stable")])

    for kd, vd in ((qd.i32, qd.f64), (qd.f64, qd.i32), (qd.u64, qd.u64)):
        @qd.kernel
        def kv(keys: nd(kd), tmp: nd(kd), vals: nd(vd), tmp_vals: nd(vd), scratch: nd(qd.u32), n: qd.i32):
            A.sort(keys, tmp, vals, tmp_vals, scratch, n, kd, True, kd.bits, 2)

        hk = sort_inputs(rng, kd, N)
        hv = sort_inputs(rng, vd, N)
        k_arr, t_arr = qd.ndarray(kd, (N,)), qd.ndarray(kd, (N,))
        v_arr, tv_arr = qd.ndarray(vd, (N,)), qd.ndarray(vd, (N,))
        k_arr.from_numpy(hk)
        v_arr.from_numpy(hv)
        kv(k_arr, t_arr, v_arr, tv_arr, scratch, N)
        order = np.argsort(hk, kind="stable")
        np.testing.assert_array_equal(v_arr.to_numpy().view(f"u{vd.bits // 8}"),
                                      hv[order].view(f"u{vd.bits // 8}"), err_msg=f"{kd} keys, {vd} values")


@test_utils.test(arch=qd.cpu)
def test_cpu_sort_scatter_streams_whole_lines():
    """cpu: the pass by the most significant digit writes each digit's run through a line buffer,
    whole lines in streaming (non-temporal) stores and the ends of runs element by element (the
    task then ends in a fence). Its results exactly numpy's where runs are shorter than a line, end
    mid-line, share lines with the runs of other tiles (n of several tiles) and other digits, with
    16 (u32) or 8 (u64) elements per line for keys and for values."""
    def kernel(kd, vd, end_bit):
        @qd.kernel
        def kv(keys: nd(kd), tmp: nd(kd), vals: nd(vd), tmp_vals: nd(vd), scratch: nd(qd.u32), n: qd.i32):
            A.sort(keys, tmp, vals, tmp_vals, scratch, n, kd, True, end_bit, 3)
        return kv

    N = 3 * 65536 + 17  # cpu tiles: at least 65536 keys each
    k32, v64 = qd.ndarray(qd.u32, (N,)), qd.ndarray(qd.u64, (N,))
    art = qd.compile(kernel(qd.u32, qd.u64, 32), k32, k32, v64, v64, qd.ndarray(qd.u32, (1,)), 0)
    assert "global store nontemporal" in art.ir
    assert "!nontemporal" in art.llvm_ir and "fence seq_cst" in art.llvm_ir
    rng = np.random.default_rng(11)
    for kd, vd, end_bit in ((qd.u32, qd.u64, 32), (qd.u64, qd.u32, 64), (qd.i32, qd.f32, 8)):
        run = kernel(kd, vd, end_bit)
        keys, tmp = qd.ndarray(kd, (N,)), qd.ndarray(kd, (N,))
        vals, tmp_vals = qd.ndarray(vd, (N,)), qd.ndarray(vd, (N,))
        scratch = qd.ndarray(qd.u32, (A.sort_scratch_slots(N, 3),))
        U = np.dtype(f"u{kd.bits // 8}")
        top = end_bit - 8  # the shift of the digit the first pass sorts by
        rand = sort_inputs(rng, kd, N)
        small = rng.integers(0, 3, N).astype(U) << U.type(top)  # that digit 0, 1 or 2: long runs in every tile
        three = ((rand.view(U) & ~U.type(0xFF << top)) | small).view(np_of(kd))
        cases = {"random": rand, "three top digits": three, "sorted": np.sort(rand), "equal": np.full(N, rand[0])}
        for name, host in cases.items():
            hv = sort_inputs(rng, vd, N)
            for n in (0, 1, 15, 16, 17, 1000, 65536 + 5, N):
                keys.from_numpy(host)
                vals.from_numpy(hv)
                run(keys, tmp, vals, tmp_vals, scratch, n)
                order = np.argsort(host[:n] if end_bit == kd.bits else host[:n].view(U) & U.type(0xFF), kind="stable")
                what = f"{kd} keys, {vd} values, end_bit {end_bit}, {name}, n={n}"
                np.testing.assert_array_equal(keys.to_numpy()[:n].view(U), host[:n][order].view(U), err_msg=what)
                np.testing.assert_array_equal(vals.to_numpy()[:n].view(f"u{vd.bits // 8}"),
                                              hv[:n][order].view(f"u{vd.bits // 8}"), err_msg=what)
                np.testing.assert_array_equal(keys.to_numpy()[n:], host[n:], err_msg=what + ": past n")


# --- reduce_by_key --------------------------------------------------------------------------------
def runs_of(keys, values):
    if len(keys) == 0:
        return keys, values
    head = np.ones(len(keys), bool)
    head[1:] = keys[1:] != keys[:-1]  # NaN != NaN: a run of its own; -0.0 == +0.0
    starts = np.flatnonzero(head)
    wide = values.astype(np.float64) if values.dtype.kind == "f" else values
    return keys[starts], np.add.reduceat(wide, starts)


@pytest.mark.parametrize("kd,vd", [(qd.i32, qd.i32), (qd.f32, qd.f32), (qd.u64, qd.f64), (qd.i64, qd.u32)])
@test_utils.test(arch=[qd.cpu, qd.vulkan, qd.cuda, qd.amdgpu, qd.metal])
def test_reduce_by_key_add(kd, vd):
    @qd.kernel
    def run(ki: nd(kd), vi: nd(vd), ko: nd(kd), vo: nd(vd), num: nd(qd.i32), scratch: nd(qd.u32), n: qd.i32):
        A.reduce_by_key_add(ki, vi, ko, vo, num, scratch, n, vd, D)

    rng = np.random.default_rng(8)
    ki, ko = qd.ndarray(kd, (CAP,)), qd.ndarray(kd, (CAP,))
    vi, vo = qd.ndarray(vd, (CAP,)), qd.ndarray(vd, (CAP,))
    num = qd.ndarray(qd.i32, (1,))
    scratch = qd.ndarray(qd.u32, (A.reduce_by_key_scratch_slots(CAP),))
    alphabet = sort_inputs(rng, kd, 64)[:6] if kd.is_real else np.arange(6)
    key_cases = {
        "runs": np.repeat(rng.choice(alphabet, CAP), rng.integers(1, 9, CAP))[:CAP],
        "equal": np.zeros(CAP),
        "unique": np.arange(CAP),
        "long runs": np.arange(CAP) // 5000,  # runs spanning several tiles
    }
    if kd.is_real:
        key_cases["nan and zeros"] = np.array([np.nan, -0.0, 0.0, 1.0])[rng.integers(0, 4, CAP)]
    for name, hk in key_cases.items():
        hk = hk.astype(np_of(kd))
        hv = (rng.integers(-100, 100, CAP) if vd.is_signed or vd.is_real else rng.integers(0, 100, CAP))
        hv = hv.astype(np_of(vd))
        ki.from_numpy(hk)
        vi.from_numpy(hv)
        for n in SIZES if name == "runs" else SMALL_SIZES:
            run(ki, vi, ko, vo, num, scratch, n)
            want_k, want_v = runs_of(hk[:n], hv[:n])
            r = num.to_numpy()[0]
            assert r == len(want_k), (name, n)
            np.testing.assert_array_equal(ko.to_numpy()[:r].view(f"u{kd.bits // 8}"),
                                          want_k.view(f"u{kd.bits // 8}"), err_msg=f"{name} n={n}: keys")
            got_v = vo.to_numpy()[:r]
            if vd.is_real:  # small integers: every partial sum is exact
                np.testing.assert_array_equal(got_v, want_v.astype(np_of(vd)), err_msg=f"{name} n={n}")
            else:
                np.testing.assert_array_equal(got_v, want_v.astype(np_of(vd)), err_msg=f"{name} n={n}")


@pytest.mark.parametrize("kd,vd", [(qd.i32, qd.i32), (qd.f32, qd.f32), (qd.u64, qd.f64), (qd.i64, qd.u32)])
@test_utils.test(arch=[qd.cpu, qd.vulkan, qd.cuda, qd.amdgpu, qd.metal])
def test_reduce_by_key_min_max(kd, vd):
    """reduce_by_key_{min,max}: exact, runs inside tiles and spanning several (the leading segment
    combined with an atomic min / max), n from 0 through several tiles past 256**2."""
    @qd.kernel
    def run(ki: nd(kd), vi: nd(vd), ko: nd(kd), vmin: nd(vd), vmax: nd(vd), num: nd(qd.i32), num2: nd(qd.i32),
            scratch: nd(qd.u32), n: qd.i32):
        A.reduce_by_key_min(ki, vi, ko, vmin, num, scratch, n, vd, D)
        A.reduce_by_key_max(ki, vi, ko, vmax, num2, scratch, n, vd, D)

    rng = np.random.default_rng(9)
    ki, ko = qd.ndarray(kd, (CAP,)), qd.ndarray(kd, (CAP,))
    vi, vmin, vmax = (qd.ndarray(vd, (CAP,)) for _ in range(3))
    num, num2 = qd.ndarray(qd.i32, (1,)), qd.ndarray(qd.i32, (1,))
    scratch = qd.ndarray(qd.u32, (A.reduce_by_key_scratch_slots(CAP),))
    key_cases = {
        "runs": np.repeat(rng.integers(0, 6, CAP), rng.integers(1, 9, CAP))[:CAP],
        "equal": np.zeros(CAP),
        "long runs": np.arange(CAP) // 5000,
    }
    for name, hk in key_cases.items():
        hk = hk.astype(np_of(kd))
        if vd.is_real:
            hv = (rng.standard_normal(CAP) * 100).astype(np_of(vd))
        else:
            lo, hi = (info(vd).min, info(vd).max) if vd.is_signed else (0, info(vd).max)
            hv = rng.integers(lo, hi, CAP, dtype=np_of(vd), endpoint=True)
        ki.from_numpy(hk)
        vi.from_numpy(hv)
        for n in SIZES if name == "runs" else SMALL_SIZES:
            run(ki, vi, ko, vmin, vmax, num, num2, scratch, n)
            r = num.to_numpy()[0]
            assert r == num2.to_numpy()[0]
            if n == 0:
                assert r == 0
                continue
            head = np.ones(n, bool)
            head[1:] = hk[1:n] != hk[:n - 1]
            starts = np.flatnonzero(head)
            assert r == len(starts), (name, n)
            np.testing.assert_array_equal(ko.to_numpy()[:r], hk[:n][starts], err_msg=f"{name} n={n}: keys")
            np.testing.assert_array_equal(vmin.to_numpy()[:r], np.minimum.reduceat(hv[:n], starts),
                                          err_msg=f"min {name} n={n}")
            np.testing.assert_array_equal(vmax.to_numpy()[:r], np.maximum.reduceat(hv[:n], starts),
                                          err_msg=f"max {name} n={n}")


# --- composition ----------------------------------------------------------------------------------
@test_utils.test(arch=[qd.cpu, qd.vulkan, qd.cuda, qd.amdgpu, qd.metal])
def test_pipeline_in_one_kernel():
    """User loops and several ops in one kernel, each op's count produced on the device by the one
    before: flag, select, sort the selected, reduce them, run-length them."""
    N = 50000
    rng = np.random.default_rng(9)
    host = rng.integers(0, 1000, N).astype(np.int32)

    @qd.kernel
    def pipeline(x: nd(qd.i32), flags: nd(qd.i32), sel: nd(qd.i32), tmp: nd(qd.i32), num: nd(qd.i32),
                 total: nd(qd.i32), rk: nd(qd.i32), rv: nd(qd.i32), ones: nd(qd.i32), runs: nd(qd.i32),
                 scratch: nd(qd.u32), n: qd.i32):
        for i in range(n):
            flags[i] = 1 if x[i] % 3 == 0 else 0
            ones[i] = 1
        A.select(x, flags, sel, num, scratch, n, 2)
        A.sort(sel, tmp, sel, tmp, scratch, num, qd.i32, False, 32, 2)
        A.reduce_add(sel, total, scratch, num[0], qd.i32, 2)
        A.reduce_by_key_add(sel, ones, rk, rv, runs, scratch, num[0], qd.i32, 2)

    arrs = [qd.ndarray(qd.i32, (N,)) for _ in range(5)]
    x, flags, sel, tmp, ones = arrs
    num, total, runs = (qd.ndarray(qd.i32, (1,)) for _ in range(3))
    rk, rv = qd.ndarray(qd.i32, (N,)), qd.ndarray(qd.i32, (N,))
    scratch = qd.ndarray(qd.u32, (max(A.sort_scratch_slots(N, 2), A.select_scratch_slots(N)),))
    x.from_numpy(host)
    pipeline(x, flags, sel, tmp, num, total, rk, rv, ones, runs, scratch, N)
    chosen = np.sort(host[host % 3 == 0])
    k = num.to_numpy()[0]
    assert k == len(chosen)
    np.testing.assert_array_equal(sel.to_numpy()[:k], chosen)
    assert total.to_numpy()[0] == chosen.sum()
    u, c = np.unique(chosen, return_counts=True)
    r = runs.to_numpy()[0]
    np.testing.assert_array_equal(rk.to_numpy()[:r], u)
    np.testing.assert_array_equal(rv.to_numpy()[:r], c)


# --- rules and errors -----------------------------------------------------------------------------
@test_utils.test(arch=qd.cpu)
def test_top_level_rule():
    """A call under run-time control flow (if / for / while, or a func called there) is a compile
    error naming the call's line; qd.static control flow is top level."""
    a = qd.field(qd.i32, shape=16)
    out = qd.field(qd.i32, shape=1)
    scratch = qd.field(qd.u32, shape=A.reduce_scratch_slots(16, 1))
    c = qd.field(qd.i32, shape=1)

    @qd.kernel
    def in_if():
        if c[0] > 0:
            A.reduce_add(a, out, scratch, c[0], qd.i32, 1)  # line: in_if

    @qd.kernel
    def in_loop():
        for i in range(2):
            A.reduce_add(a, out, scratch, c[0], qd.i32, 1)  # line: in_loop

    @qd.kernel
    def in_while():
        while c[0] > 100:
            A.reduce_add(a, out, scratch, c[0], qd.i32, 1)  # line: in_while

    @qd.func
    def helper():
        A.reduce_add(a, out, scratch, c[0], qd.i32, 1)  # line: helper

    @qd.kernel
    def through_func():
        if c[0] > 0:
            helper()

    for k, mark in ((in_if, "in_if"), (in_loop, "in_loop"), (in_while, "in_while"), (through_func, "helper")):
        with pytest.raises(qd.QuadrantsSyntaxError, match="requires_top_level") as e:
            k()
        assert f"# line: {mark}" in str(e.value), str(e.value)

    @qd.kernel
    def static_ok(flag: qd.template()):
        for d in qd.static(range(1)):
            if qd.static(flag):
                helper()

    a.from_numpy(np.arange(16, dtype=np.int32))
    c.from_numpy(np.array([16], np.int32))
    static_ok(True)
    assert out[0] == 120

    with pytest.raises(RuntimeError, match="kernel"):
        A.reduce_add(a, out, scratch, 16, qd.i32, 1)  # from Python scope


@test_utils.test(arch=qd.cpu)
def test_user_requires_top_level_func():
    """@qd.func(requires_top_level=True) for the user's own funcs: its top-level loops are parallel."""
    x = qd.field(qd.i32, shape=1000)
    y = qd.field(qd.i32, shape=1000)

    @qd.func(requires_top_level=True)
    def two_phases(n):
        for i in range(n):
            x[i] = i
        for i in range(n):  # a second task: sees every write of the first
            y[i] = x[i] + x[n - 1 - i]

    @qd.kernel
    def k(n: qd.i32):
        two_phases(n)

    k(1000)
    assert (y.to_numpy() == 999).all()

    @qd.kernel
    def bad(n: qd.i32):
        for j in range(1):
            two_phases(n)

    with pytest.raises(qd.QuadrantsSyntaxError, match="top level"):
        bad(10)


@test_utils.test(arch=qd.cpu)
def test_unsupported_dtypes_and_arguments():
    for dt in (qd.i16, qd.f16, qd.u8):
        a = qd.field(dt, shape=8)
        out = qd.field(dt, shape=8)
        s = qd.field(qd.u32, shape=8)

        @qd.kernel
        def red():
            A.reduce_add(a, out, s, 8, dt, 1)

        @qd.kernel
        def scan():
            A.exclusive_scan_max(a, out, s, 8, dt, 1)

        @qd.kernel
        def srt():
            A.sort(a, out, a, out, s, 8, dt, False, 16, 1)

        for k in (red, scan, srt):
            with pytest.raises(NotImplementedError, match=str(dt)):
                k()

    a = qd.field(qd.i32, shape=8)
    s = qd.field(qd.u32, shape=8)

    @qd.kernel
    def in_place():
        A.exclusive_scan_add(a, a, s, 8, qd.i32, 1)

    with pytest.raises(ValueError, match="distinct"):
        in_place()

    @qd.kernel
    def too_deep(d: qd.template()):
        A.reduce_add(a, a, s, 8, qd.i32, d)

    for d in (0, 5):
        with pytest.raises(ValueError, match="log256_max_n"):
            too_deep(d)

    @qd.kernel
    def bad_end_bit(e: qd.template()):
        A.sort(a, s, a, s, s, 8, qd.i32, False, e, 1)

    with pytest.raises(Exception, match="tmp_keys|end_bit|holds"):
        bad_end_bit(12)


@test_utils.test(arch=qd.cpu)
def test_scratch_slots():
    """At least 1, monotone in N, ValueError above depth 4, and the same in a kernel on a device count."""
    for f in (A.reduce_scratch_slots, A.exclusive_scan_scratch_slots, A.sort_scratch_slots):
        prev = 0
        for n in [0, 1, 2, 256, 257, 65536, 65537, 10 ** 6]:
            v = f(n)
            assert v >= 1 and v >= prev
            prev = v
            for d in (1, 2, 3, 4):
                assert f(n, d) >= 1
            for d in (0, 5, 8):
                with pytest.raises(ValueError, match="log256_max_n"):
                    f(n, d)
    for f in (A.select_scratch_slots, A.reduce_by_key_scratch_slots):
        assert f(0) >= 1 and f(10 ** 6) >= f(1000) >= 1

    res = qd.field(qd.i32, shape=5)

    @qd.kernel
    def on_device(n: qd.i32):
        res[0] = A.reduce_scratch_slots(n, 3)
        res[1] = A.exclusive_scan_scratch_slots(n, 3)
        res[2] = A.sort_scratch_slots(n, 3)
        res[3] = A.select_scratch_slots(n)
        res[4] = A.reduce_by_key_scratch_slots(n)

    for n in (0, 1, 300, 70000, 10 ** 6):
        on_device(n)
        assert list(res.to_numpy()) == [A.reduce_scratch_slots(n, 3), A.exclusive_scan_scratch_slots(n, 3),
                                        A.sort_scratch_slots(n, 3), A.select_scratch_slots(n),
                                        A.reduce_by_key_scratch_slots(n)], n


@test_utils.test(arch=[qd.cpu, qd.vulkan, qd.cuda, qd.amdgpu, qd.metal])
def test_deprecated_entry_points():
    rng = np.random.default_rng(10)
    for make in (qd.field, qd.ndarray):
        for dt in (qd.i32, qd.f32):
            N = 3000
            keys, vals = make(dt, N), make(qd.i32, N)
            h = (rng.standard_normal(N) * 100).astype(np_of(dt))
            keys.from_numpy(h)
            vals.from_numpy(np.arange(N, dtype=np.int32))
            with pytest.warns(DeprecationWarning, match="sort"):
                A.parallel_sort(keys, vals)
            np.testing.assert_array_equal(keys.to_numpy(), np.sort(h))
            np.testing.assert_array_equal(vals.to_numpy(), np.argsort(h, kind="stable"))
        small = make(qd.i16, 100)  # not a radix dtype: sorted on the host
        hs = rng.integers(-1000, 1000, 100).astype(np.int16)
        small.from_numpy(hs)
        with pytest.warns(DeprecationWarning):
            A.parallel_sort(small)
        np.testing.assert_array_equal(small.to_numpy(), np.sort(hs))

        with pytest.warns(DeprecationWarning, match="exclusive_scan_add"):
            ex = A.PrefixSumExecutor(5000)
        arr = make(qd.i32, 5000)
        x = rng.integers(-50, 100, 5000).astype(np.int32)
        arr.from_numpy(x)
        ex.run(arr)
        np.testing.assert_array_equal(arr.to_numpy(), np.cumsum(x))
        with pytest.raises(RuntimeError, match="Only qd.i32"):
            ex.run(make(qd.f32, 5000))


@test_utils.test(arch=[qd.vulkan, qd.cuda, qd.amdgpu, qd.metal])
def test_sort_shared_mask_match(monkeypatch):
    """The GPU scatter's other way of finding the lanes with the same digit (shared masks, Metal's:
    its ballots are 64-bit), forced here on the arch at hand."""
    monkeypatch.setenv("QD_ALGORITHMS_SHARED_MATCH", "1")
    N = 9000

    @qd.kernel
    def run(keys: nd(qd.f32), tmp: nd(qd.f32), vals: nd(qd.u32), tmp_vals: nd(qd.u32), scratch: nd(qd.u32),
            n: qd.i32):
        A.sort(keys, tmp, vals, tmp_vals, scratch, n, qd.f32, True, 32, 2)

    rng = np.random.default_rng(11)
    host = sort_inputs(rng, qd.f32, N)
    keys, tmp = qd.ndarray(qd.f32, (N,)), qd.ndarray(qd.f32, (N,))
    vals, tmp_vals = qd.ndarray(qd.u32, (N,)), qd.ndarray(qd.u32, (N,))
    keys.from_numpy(host)
    vals.from_numpy(np.arange(N, dtype=np.uint32))
    run(keys, tmp, vals, tmp_vals, qd.ndarray(qd.u32, (A.sort_scratch_slots(N, 2),)), N)
    np.testing.assert_array_equal(vals.to_numpy(), np.argsort(host, kind="stable").astype(np.uint32))


@test_utils.test(arch=qd.cpu)
def test_emitted_for_the_gpu_arches():
    """qd.compile without a device: PTX (cuda), AMDGCN (amdgpu) and MSL (metal, 32-bit dtypes) for
    the GPU forms of the ops."""
    def ops(dt):
        @qd.kernel
        def k(a: nd(dt), b: nd(dt), f: nd(qd.i32), c: nd(qd.i32), v: nd(qd.u32), tv: nd(qd.u32),
              s: nd(qd.u32 if dt.bits == 32 else qd.u64), s32: nd(qd.u32), n: qd.i32):
            A.exclusive_scan_min(a, b, s, n, dt, 2)
            A.select(a, f, b, c, s32, n, 2)
            A.sort(a, b, v, tv, s32, n, dt, True, dt.bits, 2)
            A.reduce_by_key_add(a, f, b, c, c, s32, n, qd.i32, 2)
        return k

    for arch, dt, artefact in (("cuda", qd.u64, "ptx"), ("amdgpu", qd.f64, "amdgcn"), ("metal", qd.f32, "msl")):
        a = qd.ndarray(dt, (8,))
        i, u = qd.ndarray(qd.i32, (8,)), qd.ndarray(qd.u32, (8,))
        s = qd.ndarray(qd.u32 if dt.bits == 32 else qd.u64, (8,))
        art = qd.compile(ops(dt), a, a, i, i, u, u, s, u, 8, arch=arch)
        assert len(getattr(art, artefact)) > 1000, arch


@test_utils.test(arch=[qd.cpu, qd.vulkan, qd.cuda, qd.amdgpu, qd.metal])
def test_fields_with_offsets():
    """qd.field(..., offset=o): x[o] is the first element, in kernels and in Python scope, `for i in x`
    runs o .. o + n - 1; the deprecated entry points take such fields (the reference's
    test_scan_with_offset / test_sort_with_offset)."""
    N = 3000
    for off in (-23333, -1, 0, 7):
        x = qd.field(qd.i32, N, offset=off)
        y = qd.field(qd.f32, shape=(4, 5), offset=(off, -2))

        @qd.kernel
        def fill():
            for i in x:
                x[i] = (i * 7919) % 1000
            for i, j in y:
                y[i, j] = i * 10.0 + j

        fill()
        h = x.to_numpy()
        np.testing.assert_array_equal(h, ((np.arange(N) + off) * 7919) % 1000)
        assert x[off] == h[0] and x[off + N - 1] == h[-1]
        x[off + 5] = -4
        assert x.to_numpy()[5] == -4
        assert y[off + 3, 2] == (off + 3) * 10.0 + 2
        with pytest.raises(IndexError):
            x[off + N]
        x.from_numpy(h)
        with pytest.warns(DeprecationWarning):
            A.PrefixSumExecutor(N).run(x)
        np.testing.assert_array_equal(x.to_numpy(), np.cumsum(h))
        vals = qd.field(qd.i32, N, offset=-off)
        x.from_numpy(h)
        vals.from_numpy(np.arange(N, dtype=np.int32))
        with pytest.warns(DeprecationWarning):
            A.parallel_sort(x, vals)
        np.testing.assert_array_equal(x.to_numpy(), np.sort(h))
        np.testing.assert_array_equal(vals.to_numpy(), np.argsort(h, kind="stable"))
    with pytest.raises(ValueError, match="offset"):
        qd.field(qd.i32, (3, 4), offset=1)
    shifted = qd.field(qd.i32, 16, offset=4)
    out = qd.field(qd.i32, 1)
    scratch = qd.field(qd.u32, 16)

    @qd.kernel
    def on_shifted():
        A.reduce_add(shifted, out, scratch, 16, qd.i32, 1)

    with pytest.raises(qd.QuadrantsTypeError, match="offset"):
        on_shifted()
