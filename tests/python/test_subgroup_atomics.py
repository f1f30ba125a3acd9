"""Subgroup aggregation of atomics on a uniform address (issue 15 item 2, transforms/subgroup_atomics.cpp):
the rewrite is applied (printed IR, SPIR-V, PTX, AMDGCN) and, on vulkan, gives exactly the results of
the unrewritten atomics (qd.init(subgroup_aggregation=False)): final values, and returned old values
that some order of the original atomics returns (compaction: every slot 0..count-1 once)."""
import numpy as np
import pytest

import quadrants as qd
from test_utils import test

INT_OPS = ["add", "sub", "min", "max", "and", "or", "xor"]
INT_TYPES = [qd.i32, qd.u32, qd.i8, qd.u8, qd.i16, qd.u16, qd.i64, qd.u64]
CASES = [(op, t) for op in INT_OPS for t in INT_TYPES]
N = 3001  # not a multiple of any subgroup or block size


def _values(op, dtype, rng):
    info = np.iinfo(dtype.np)
    if op in ("add", "sub"):
        return rng.integers(info.min, info.max, N, dtype=dtype.np, endpoint=True)
    if op in ("and", "or", "xor"):  # few bits each: and / or change the value a few times
        bits = info.bits
        v = (np.ones(N, dtype=np.uint64) << rng.integers(0, bits, N).astype(np.uint64)).astype(dtype.np)
        return ~v if op == "and" else v
    return rng.integers(info.min, info.max, N, dtype=dtype.np, endpoint=True)


def _apply(op, a, b, dtype):
    t = dtype.np.type
    with np.errstate(over="ignore"):
        return t({"add": lambda: a + b, "sub": lambda: a - b, "min": lambda: min(a, b), "max": lambda: max(a, b),
                  "and": lambda: a & b, "or": lambda: a | b, "xor": lambda: a ^ b}[op]())


def _init(op, dtype):
    info = np.iinfo(dtype.np)
    return {"min": info.max, "max": info.min, "and": -1 if dtype.np.kind == "i" else info.max}.get(op, 5)


def _linearizable(op, dtype, init, olds, vals, final):
    """Whether the atomics op(x, vals[k]) returning olds[k] ran one after another in some order from
    init to final: each is an edge old -> op(old, value) between values of x, and such an order is
    a walk from init to final using every edge once (an Eulerian trail: the edges connected, every
    value entered as often as left, but init left once more and final entered once more)."""
    t = dtype.np.type
    balance, parent = {}, {}

    def find(a):
        while parent.setdefault(a, a) != a:
            a = parent[a]
        return a

    for o, v in zip(olds, vals):
        a, b = int(t(o)), int(_apply(op, t(o), t(v), dtype))
        balance[a] = balance.get(a, 0) + 1
        balance[b] = balance.get(b, 0) - 1
        parent[find(a)] = find(b)
    start, end = int(t(init)), int(t(final))
    if start != end:
        balance[start] = balance.get(start, 0) - 1
        balance[end] = balance.get(end, 0) + 1
    roots = {find(a) for a in list(parent)} | {find(start)}
    return all(d == 0 for d in balance.values()) and len(roots) == 1


def _skip_without_64bit_subgroup_ops(dtype):
    from quadrants._lib import runtime
    have = set(runtime.program().runtime.features)
    if dtype in (qd.i64, qd.u64) and not {"subgroup_extended_types", "int64_atomics_buffer"} <= have:
        pytest.skip("64-bit subgroup arithmetic needs shaderSubgroupExtendedTypes and 64-bit atomics")


def _both(run):
    """run() with the rewrite, then under qd.init(subgroup_aggregation=False)."""
    out = []
    for on in (True, False):
        qd.init(arch=qd.vulkan, subgroup_aggregation=on, enable_fallback=False)
        out.append(run())
    return out


@pytest.mark.parametrize("op, dtype", CASES, ids=[f"{o}-{t.name}" for o, t in CASES])
@test(arch=qd.vulkan)
def test_unused_result_equals_atomics(op, dtype):
    """`fn(total[0], v[i])` in a divergent branch over a range that is not a multiple of the subgroup
    leaves exactly what the unrewritten atomics leave."""
    _skip_without_64bit_subgroup_ops(dtype)
    vals = _values(op, dtype, np.random.default_rng(7))
    fn = getattr(qd, f"atomic_{op}")
    init = _init(op, dtype)

    def run():
        total = qd.field(dtype, shape=2)

        @qd.kernel
        def k(v: qd.types.ndarray(dtype=dtype, ndim=1), keep: qd.types.ndarray(dtype=qd.i32, ndim=1)):
            for i in range(v.shape[0]):
                if keep[i] != 0:
                    fn(total[0], v[i])

        keep = (np.arange(N) % 3 != 1).astype(np.int32)
        total.fill(init)
        k(vals, keep)
        ir = qd.compile(k, vals, keep).ir
        return total.to_numpy()[0], ir

    (got, ir), (plain, plain_ir) = _both(run)
    assert "subgroup.reduce" in ir and "subgroup.elect" in ir
    assert "subgroup" not in plain_ir
    want = dtype.np.type(init)
    for v in vals[np.arange(N) % 3 != 1]:
        want = _apply(op, want, v, dtype)
    assert got == plain == want


@pytest.mark.parametrize("op, dtype", CASES, ids=[f"{o}-{t.name}" for o, t in CASES])
@test(arch=qd.vulkan)
def test_used_result_is_an_atomic_order(op, dtype):
    """`olds[i] = fn(x[None], v[i])` under a divergent branch, with grid-stride tails (block_dim 4
    and 32, the range not a multiple of either): the olds are what the atomics return in some
    order, and the final value is exact."""
    _skip_without_64bit_subgroup_ops(dtype)
    vals = _values(op, dtype, np.random.default_rng(11))
    fn = getattr(qd, f"atomic_{op}")
    init = _init(op, dtype)
    keep = (np.arange(N) % 5 != 2).astype(np.int32)

    def run():
        x = qd.field(dtype, shape=())
        olds = qd.field(dtype, shape=N)

        @qd.kernel
        def k(v: qd.types.ndarray(dtype=dtype, ndim=1), keep: qd.types.ndarray(dtype=qd.i32, ndim=1)):
            qd.loop_config(block_dim=4)
            for i in range(v.shape[0]):
                if keep[i] != 0:
                    olds[i] = fn(x[None], v[i])

        x[None] = init
        k(vals, keep)
        return x[None], olds.to_numpy(), qd.compile(k, vals, keep).ir

    (final, olds, ir), (plain_final, _, _) = _both(run)
    assert "subgroup.exclusive_scan" in ir or "subgroup.ballot" in ir
    assert final == plain_final
    sel = keep != 0
    assert _linearizable(op, dtype, init, olds[sel], vals[sel], final)


@pytest.mark.parametrize("block_dim", [4, 8, 128])
@test(arch=qd.vulkan)
def test_compaction(block_dim):
    """`out[qd.atomic_add(c[None], 1)] = i` under `if x[i] > 0.5`: the slots are exactly 0..count-1,
    each taken once, and every passing index is written once."""
    n = 10007
    xs = np.random.default_rng(block_dim).random(n).astype(np.float32)
    x = qd.field(qd.f32, shape=n)
    out = qd.field(qd.i32, shape=n)
    slot = qd.field(qd.i32, shape=n)
    c = qd.field(qd.i32, shape=())
    x.from_numpy(xs)

    @qd.kernel
    def compaction():
        c[None] = 0
        qd.loop_config(block_dim=block_dim)
        for i in range(n):
            slot[i] = -1
            if x[i] > 0.5:
                s = qd.atomic_add(c[None], 1)
                slot[i] = s
                out[s] = i

    compaction()
    count = int((xs > 0.5).sum())
    assert c[None] == count
    slots = slot.to_numpy()
    assert sorted(slots[slots >= 0].tolist()) == list(range(count))
    assert (slots[xs <= 0.5] == -1).all()
    assert sorted(out.to_numpy()[:count].tolist()) == np.flatnonzero(xs > 0.5).tolist()
    assert "subgroup.elect" in qd.compile(compaction).ir


@test(arch=qd.vulkan)
def test_counter_in_inner_loop_and_kernel_scope_variable():
    """A data-dependent inner loop (lanes leave it at different trips) adding to a kernel-scope
    variable and to a 0-D field, with used results: exact counts, distinct slots."""
    n = 999
    reps = qd.field(qd.i32, shape=n)
    seen = qd.field(qd.i32, shape=4 * n)
    c = qd.field(qd.i32, shape=())
    reps.from_numpy((np.arange(n) % 4).astype(np.int32))

    @qd.kernel
    def k() -> qd.i32:
        total = 0
        for i in range(n):
            for j in range(reps[i]):
                total += j + 1
                seen[qd.atomic_add(c[None], 1)] += 1
        return total

    c[None] = 0
    assert k() == sum(sum(range(1, r + 1)) for r in np.arange(n) % 4)
    m = int((np.arange(n) % 4).sum())
    assert c[None] == m
    got = seen.to_numpy()
    assert (got[:m] == 1).all() and (got[m:] == 0).all()


@test(arch=qd.vulkan)
def test_float_sums_and_nan_min_max():
    """f32: add of small integers (exact in any order) and min / max with NaN operands (a NaN loses;
    a subgroup whose operands are all NaN applies NaN, which loses to the value in memory), each
    against the unrewritten atomics."""
    rng = np.random.default_rng(5)
    vals = rng.integers(-50, 50, N).astype(np.float32)
    vals[rng.choice(N, N // 5, replace=False)] = np.nan
    vals[64:96] = np.nan  # whole subgroups of NaN
    ints = np.nan_to_num(vals, nan=1.0)

    def run():
        t = qd.field(qd.f32, shape=3)

        @qd.kernel
        def k(v: qd.types.ndarray(dtype=qd.f32, ndim=1), w: qd.types.ndarray(dtype=qd.f32, ndim=1)):
            for i in range(v.shape[0]):
                qd.atomic_add(t[0], w[i])
                qd.atomic_min(t[1], v[i])
                qd.atomic_max(t[2], v[i])

        t.from_numpy(np.array([0.5, 1000, -1000], np.float32))
        k(vals, ints)
        return t.to_numpy(), qd.compile(k, vals, ints).spirv_asm

    (got, spirv), (plain, _) = _both(run)
    assert "OpGroupNonUniformFAdd" in spirv and "OpGroupNonUniformElect" in spirv
    assert got.tolist() == plain.tolist() == [0.5 + ints.sum(), np.nanmin(vals), np.nanmax(vals)]


@test(arch=qd.vulkan)
def test_not_rewritten():
    """Left alone: an ordered atomic, a per-element address, a float sum whose old value is used,
    mul, a shared array."""
    n = 64
    a = qd.field(qd.f32, shape=())
    b = qd.field(qd.i32, shape=n)
    c = qd.field(qd.i32, shape=())
    olds = qd.field(qd.f32, shape=n)

    @qd.kernel
    def k():
        for i in range(n):
            olds[i] = qd.atomic_add(a[None], 1.0)
            qd.atomic_add(b[i % 7], 1)
            qd.atomic_mul(c[None], 1)

    @qd.kernel
    def ordered():
        for i in range(n):
            qd.atomic_add(c[None], 1, memory_order=qd.MemoryOrder.AcqRel)

    for kern in (k, ordered):
        assert "subgroup" not in qd.compile(kern).ir


def _ptx_kernel():
    total = qd.field(qd.i32, shape=())
    c = qd.field(qd.i32, shape=())
    x = qd.field(qd.f32, shape=1000)
    out = qd.field(qd.i32, shape=1000)

    @qd.kernel
    def reduce(v: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        for i in range(v.shape[0]):
            if v[i] > 3:
                qd.atomic_add(total[None], v[i])  # privatized, then aggregated

    @qd.kernel
    def compaction():
        for i in range(1000):
            if x[i] > 0.5:
                out[qd.atomic_add(c[None], 1)] = i

    @qd.kernel
    def maxes(v: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        for i in range(v.shape[0]):
            out[i] = qd.atomic_max(c[None], v[i])  # a used max: a scan

    return reduce, compaction, maxes


@test(arch=qd.cpu)
def test_cuda_ptx():
    """PTX: over activemask, shfl.sync reductions (redux.sync on sm_80+), a ballot-counted compaction
    prefix, one atom per subgroup; none with the rewrite off."""
    reduce, compaction, maxes = _ptx_kernel()
    v = np.arange(100, dtype=np.int32)
    ptx = qd.compile(reduce, v, arch="cuda").ptx
    assert "activemask.b32" in ptx and "shfl.sync.idx.b32" in ptx and "fns.b32" in ptx
    assert ptx.count("atom.global.add") == 1
    assert "redux.sync.add.s32" in qd.compile(reduce, v, arch="cuda", features=["sm_90"]).ptx
    ptx = qd.compile(compaction, arch="cuda").ptx
    assert "activemask.b32" in ptx and "popc.b" in ptx and "shfl.sync.idx.b32" in ptx
    assert ptx.count("atom.global.add") == 1
    ptx = qd.compile(maxes, v, arch="cuda").ptx
    assert "fns.b32" in ptx and "shfl.sync.idx.b32" in ptx and ptx.count("atom.global.max") == 1
    off = qd.compile(compaction, arch="cuda", features=["sm_75", "no_subgroup_aggregation"]).ptx
    assert "shfl" not in off and "activemask" not in off


DTYPE_CASES = [("add", qd.i64), ("sub", qd.u64), ("add", qd.f32), ("add", qd.f64), ("max", qd.f32),
               ("min", qd.f64), ("or", qd.u8), ("add", qd.i16), ("xor", qd.u32)]


@pytest.mark.parametrize("op, dtype", DTYPE_CASES, ids=[f"{o}-{t.name}" for o, t in DTYPE_CASES])
@test(arch=qd.cpu)
def test_every_dtype_assembles(op, dtype):
    """Every dtype's reduction (unused result) and, for integers, its scan (used result) compile for
    CUDA (ptxas for sm_75 and sm_90, where installed) and AMDGPU, with one atomic each."""
    from test_gpu_codegen import ptxas
    fn = getattr(qd, f"atomic_{op}")
    x = qd.field(dtype, shape=())
    olds = qd.field(dtype, shape=64)

    @qd.kernel
    def unused(v: qd.types.ndarray(dtype=dtype, ndim=1)):
        for i in range(v.shape[0]):
            if v[i] != 3:
                fn(x[None], v[i])

    @qd.kernel
    def used(v: qd.types.ndarray(dtype=dtype, ndim=1)):
        for i in range(v.shape[0]):
            if v[i] != 3:
                olds[i % 64] = fn(x[None], v[i])

    v = np.arange(64).astype(dtype.np)
    kernels = [unused] if dtype.is_real else [unused, used]
    for k in kernels:
        for sm in ("sm_75", "sm_90"):
            art = qd.compile(k, v, arch="cuda", features=[sm])
            assert "subgroup.elect" in art.ir and "activemask.b32" in art.ptx
            ptxas(art.ptx, sm)
        art = qd.compile(k, v, arch="amdgpu")
        assert "subgroup.elect" in art.ir and "v_readlane_b32" in art.amdgcn


@test(arch=qd.cpu)
def test_amdgpu_amdgcn():
    """AMDGCN: the active lanes' values read in lane order (v_readlane over the exec ballot), a
    ballot-counted compaction prefix (mbcnt / bcnt), and the atomic."""
    reduce, compaction, maxes = _ptx_kernel()
    v = np.arange(100, dtype=np.int32)
    asm = qd.compile(reduce, v, arch="amdgpu").amdgcn
    assert "v_readlane_b32" in asm and "global_atomic_add" in asm
    asm = qd.compile(maxes, v, arch="amdgpu").amdgcn
    assert "v_writelane_b32" in asm and "global_atomic_smax" in asm
    asm = qd.compile(compaction, arch="amdgpu").amdgcn
    assert "v_mbcnt_lo_u32_b32" in asm and "s_bcnt1_i32_b64" in asm and "global_atomic_add" in asm
    assert "subgroup.elect" in qd.compile(compaction, arch="amdgpu").ir
