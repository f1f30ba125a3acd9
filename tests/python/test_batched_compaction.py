"""Batched compaction (transforms/compaction.cpp, docs/atomics.md): a parallel loop
`if cond: out[qd.atomic_add(c[None], v)] = ...` handles a batch of elements per thread with one
atomic per batch (and subgroup, on Vulkan, the passing elements moved to the first lanes). Shown applied (printed IR) and
exact: the counter's final value, every passing element given one slot, the slots exactly
c0, c0 + v, ..., what the unbatched atomics return in some order, every store made once; loops it
does not match run as before."""
import re

import numpy as np
import pytest

import quadrants as qd
from test_utils import host_has_avx512f, test


def _batched(ir):
    return "(batched compaction" in ir and ir.count("global atomic") == 1


def _check_slots(slots, keep, init, step, final, sub=False):
    """Each passing element got one slot, the slots being exactly those an atomic add / sub of
    `step` per passing element returns in some order."""
    got = np.sort(slots[keep].astype(np.int64))
    k = np.arange(int(keep.sum()), dtype=np.int64)
    want = np.sort(init - step * k) if sub else init + step * k
    assert got.tolist() == np.sort(want).tolist()
    assert final == (init - step * len(k) if sub else init + step * len(k))


@pytest.mark.parametrize("n", [0, 1, 7, 8, 63, 64, 65, 127, 128, 129, 1000, 1023, 1024, 1025, 4097, 10007, (1 << 21) + 5])
@test(arch=[qd.cpu, qd.vulkan])
def test_compaction_every_length(n, req_arch):
    """Lengths around the subgroup (8 on lavapipe) and batch sizes (128 elements on lavapipe, 1024
    on the cpu), empty included; on the cpu the passing indices are listed by a span compress
    (vectors of conditions, ir/ops.h)."""
    xs = np.random.default_rng(n).random(max(n, 1)).astype(np.float32)[:n]
    x = qd.field(qd.f32, shape=max(n, 1))
    out = qd.field(qd.i32, shape=max(n, 1))
    c = qd.field(qd.i32, shape=())
    if n:
        x.from_numpy(np.pad(xs, (0, max(n, 1) - n)))
    out.fill(-1)

    @qd.kernel
    def compaction():
        for i in range(n):
            if x[i] > 0.5:
                out[qd.atomic_add(c[None], 1)] = i

    compaction()
    count = int((xs > 0.5).sum())
    assert c[None] == count
    got = out.to_numpy()
    assert sorted(got[:count].tolist()) == np.flatnonzero(xs > 0.5).tolist()
    assert (got[count:] == -1).all()  # nothing written past the slots taken
    ir = qd.compile(compaction).ir
    assert _batched(ir)
    assert ("span compress" in ir) == (req_arch == qd.cpu)


@pytest.mark.parametrize("block_dim", [None, 4, 12, 128])
@pytest.mark.parametrize("dtype, step, op", [(qd.i32, 1, "add"), (qd.u32, 3, "add"), (qd.i64, 2, "add"),
                                             (qd.i32, 1, "sub"), (qd.u64, 5, "sub")])
@test(arch=[qd.cpu, qd.vulkan])
def test_slots_are_an_atomic_order(block_dim, dtype, step, op):
    """`slot[i] = s; out[s] = i` with s = atomic_add / atomic_sub(c[None], step) from a nonzero start,
    over range(a, b) with ndarray inputs: one slot per passing element, exactly the values the
    atomics return, the final counter exact; block sizes below, not a multiple of, and above the
    subgroup."""
    if dtype in (qd.i64, qd.u64):
        from quadrants._lib import runtime
        if runtime.program().config.arch is runtime.vulkan and \
                "int64_atomics_buffer" not in set(runtime.program().runtime.features):
            pytest.skip("64-bit atomics")
    a, b = 37, 5000
    keep = (np.random.default_rng(3).random(b) < 0.3).astype(np.int32)
    init = 1 << 20
    fn = getattr(qd, f"atomic_{op}")
    c = qd.field(dtype, shape=())
    slot = qd.field(qd.i64, shape=b)
    out = qd.field(qd.i32, shape=(init + step * b + 1) if op == "add" else 1)
    seen = qd.field(qd.i32, shape=(init + 1) if op == "sub" else 1)

    @qd.kernel
    def k(keep: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        qd.loop_config(block_dim=block_dim)
        for i in range(a, b):
            if keep[i] != 0:
                s = fn(c[None], step)
                slot[i] = qd.cast(s, qd.i64)
                if qd.static(op == "add"):
                    out[s] = i
                else:
                    seen[s] = i

    c[None] = init
    slot.fill(-1)
    k(keep)
    sel = np.zeros(b, dtype=bool)
    sel[a:] = keep[a:] != 0
    slots = slot.to_numpy()
    _check_slots(slots, sel, init, step, int(c[None]), sub=op == "sub")
    assert (slots[~sel] == -1).all()
    dest = (out if op == "add" else seen).to_numpy()
    assert (dest[slots[sel]] == np.flatnonzero(sel)).all()
    assert _batched(qd.compile(k, keep).ir)


@test(arch=[qd.cpu, qd.vulkan])
def test_moved_values_of_every_type():
    """The values the stores use move between lanes with their types intact: f32 (NaN, -0.0 and
    denormals bit-exact), i32, u8, bool, i16, the index itself and a value loaded and computed in the
    branch."""
    n = 3001
    rng = np.random.default_rng(5)
    fs = rng.standard_normal(n).astype(np.float32)
    fs[::97] = np.nan
    fs[5::89] = -0.0
    fs[7::101] = np.float32(1e-41)
    ks = rng.integers(-2**31, 2**31 - 1, n, dtype=np.int64).astype(np.int32)
    keep = rng.random(n) < 0.5
    f, k, sel = qd.field(qd.f32, shape=n), qd.field(qd.i32, shape=n), qd.field(qd.i32, shape=n)
    of, ok, ou8, ob, oi16, oi, osum = (qd.field(t, shape=n) for t in (qd.f32, qd.i32, qd.u8, qd.i32, qd.i16, qd.i32, qd.i32))
    c = qd.field(qd.i32, shape=())
    f.from_numpy(fs)
    k.from_numpy(ks)
    sel.from_numpy(keep.astype(np.int32))

    @qd.kernel
    def compaction():
        for i in range(n):
            v = f[i]
            w = k[i]
            if sel[i] == 1:
                s = qd.atomic_add(c[None], 1)
                of[s] = v
                ok[s] = w
                ou8[s] = qd.cast(w, qd.u8)
                ob[s] = qd.cast(v > 0.0, qd.i32)
                oi16[s] = qd.cast(w, qd.i16)
                oi[s] = i
                osum[s] = k[i] + i * 3  # loaded again in the branch

    compaction()
    assert _batched(qd.compile(compaction).ir)
    count = int(keep.sum())
    assert c[None] == count
    order = oi.to_numpy()[:count]
    assert sorted(order.tolist()) == np.flatnonzero(keep).tolist()
    assert (of.to_numpy()[:count].view(np.uint32) == fs[order].view(np.uint32)).all()
    assert (ok.to_numpy()[:count] == ks[order]).all()
    assert (ou8.to_numpy()[:count] == ks[order].astype(np.uint8)).all()
    assert (ob.to_numpy()[:count] == (fs[order] > 0)).all()
    assert (oi16.to_numpy()[:count] == ks[order].astype(np.int16)).all()
    with np.errstate(over="ignore"):
        assert (osum.to_numpy()[:count] == ks[order] + order.astype(np.int32) * 3).all()


@pytest.mark.parametrize("n", [1, 1023, 1025, 20000])
@test(arch=qd.cpu)
def test_cpu_loops_load_only_what_the_loop_loads(n):
    """The cpu's loops list the passing elements' indices, then run the body for each: it runs for
    exactly the passing elements, so its loads are the loop's own: `out[s] = x[g[i]]` where g[i] is
    2^30 (4 GiB past x) for the elements that do not pass. Exact, and so is a body loading the slot
    it stores to."""
    m = max(1, n // 3)
    rng = np.random.default_rng(n)
    xs = rng.standard_normal(m).astype(np.float32)
    keep = rng.random(n) < 0.5
    gs = np.where(keep, rng.integers(0, m, n), 1 << 30).astype(np.int32)
    x, f, g = qd.ndarray(qd.f32, (m,)), qd.ndarray(qd.i32, (n,)), qd.ndarray(qd.i32, (n,))
    out, out_i = qd.ndarray(qd.f32, (n,)), qd.ndarray(qd.i32, (n,))
    c = qd.ndarray(qd.i32, (1,))
    x.from_numpy(xs)
    f.from_numpy(keep.astype(np.int32))
    g.from_numpy(gs)
    out_i.from_numpy(np.full(n, -1, np.int32))
    c.from_numpy(np.zeros(1, np.int32))
    nd = qd.types.ndarray

    @qd.kernel
    def gather(x: nd(qd.f32, 1), f: nd(qd.i32, 1), g: nd(qd.i32, 1), out: nd(qd.f32, 1), out_i: nd(qd.i32, 1),
               c: nd(qd.i32, 1)):
        for i in range(n):
            if f[i] != 0:
                s = qd.atomic_add(c[0], 1)
                out[s] = x[g[i]] * 2.0
                out_i[s] = i

    @qd.kernel
    def in_place(f: nd(qd.i32, 1), out_i: nd(qd.i32, 1), c: nd(qd.i32, 1)):
        for i in range(n):
            if f[i] != 0:
                s = qd.atomic_add(c[0], 1)
                out_i[s] = out_i[s] + 1

    gather(x, f, g, out, out_i, c)
    k = int(keep.sum())
    assert c.to_numpy()[0] == k
    got_i = out_i.to_numpy()
    assert sorted(got_i[:k].tolist()) == np.flatnonzero(keep).tolist() and (got_i[k:] == -1).all()
    assert (out.to_numpy()[:k] == xs[gs[got_i[:k]]] * 2).all()
    assert "(batched compaction, in loops)" in qd.compile(gather, x, f, g, out, out_i, c).ir
    c.from_numpy(np.zeros(1, np.int32))
    in_place(f, out_i, c)
    assert c.to_numpy()[0] == k and (out_i.to_numpy()[:k] == got_i[:k] + 1).all()
    assert "(batched compaction, in loops)" in qd.compile(in_place, f, out_i, c).ir


@test(arch=qd.cpu)
def test_cpu_body_loop_is_vectorized():
    """The cpu's loop running the body for each listed element is marked independent (each
    iteration loads its own element and stores its own slot), so LLVM vectorizes it although the
    gathered loads may alias the stores: the slot stores become vector stores. Exact results."""
    nd = qd.types.ndarray

    @qd.kernel
    def compaction(x: nd(qd.f32, 1), f: nd(qd.i32, 1), y: nd(qd.f32, 1), c: nd(qd.i32, 1), m: qd.i32):
        for i in range(m):
            if f[i] != 0:
                y[qd.atomic_add(c[0], 1)] = x[i]

    n = 5000
    rng = np.random.default_rng(3)
    xs = rng.standard_normal(n).astype(np.float32)
    keep = rng.random(n) < 0.5
    x, f, y, c = qd.ndarray(qd.f32, (n,)), qd.ndarray(qd.i32, (n,)), qd.ndarray(qd.f32, (n,)), qd.ndarray(qd.i32, (1,))
    x.from_numpy(xs)
    f.from_numpy(keep.astype(np.int32))
    y.from_numpy(np.full(n, -1, np.float32))
    c.from_numpy(np.zeros(1, np.int32))
    compaction(x, f, y, c, n)
    k = int(keep.sum())
    assert c.to_numpy()[0] == k
    got = y.to_numpy()
    # each thread's batch of 1024 elements lands in order in its slots; batches in any order
    assert np.array_equal(np.sort(got[:k]), np.sort(xs[keep])) and (got[k:] == -1).all()
    art = qd.compile(compaction, x, f, y, c, n)
    assert " serial independent" in art.ir
    assert "llvm.loop.parallel_accesses" in art.llvm_ir
    assert re.search(r"store <\d+ x float>", art.llvm_ir)  # only the body loop stores floats


def _batches_in_order(got_idx, keep, batch=1024):
    """The slots as the cpu's batches give them: each batch's passing elements in a run of slots,
    in index order; the batches' runs in any order."""
    assert sorted(got_idx.tolist()) == np.flatnonzero(keep).tolist()
    if len(got_idx) == 0:
        return
    b = got_idx // batch
    for start in np.flatnonzero(np.r_[True, b[1:] != b[:-1]]):
        run_b = b[start]
        want = np.flatnonzero(keep[run_b * batch:(run_b + 1) * batch]) + run_b * batch
        assert got_idx[start:start + len(want)].tolist() == want.tolist()


@pytest.mark.parametrize("dtype", [qd.f32, qd.f64, qd.i64])
@test(arch=qd.cpu)
def test_cpu_body_reads_its_elements_compressed(dtype):
    """cpu: where the body uses the element only through loads x[i] of its own index (in the body,
    or before the `if` and used in it) from 1-D fields / ndarrays of 32- or 64-bit elements that the
    body does not write, each x is compressed from x itself for the batch (a private array of the
    passing values, read in order) instead of gathered at listed indices. Only where x holds the
    batch's elements: a loop longer than x (its condition false past x's end) lists indices and
    gathers there; so does a body that also uses the index. Exact: each batch's passing elements in
    index order in a run of slots."""
    npt = {qd.f32: np.float32, qd.f64: np.float64, qd.i64: np.int64}[dtype]
    nd = qd.types.ndarray

    @qd.kernel
    def body_load(x: nd(dtype, 1), f: nd(qd.i32, 1), y: nd(dtype, 1), c: nd(qd.i32, 1), m: qd.i32):
        for i in range(m):
            if f[i] != 0:
                y[qd.atomic_add(c[0], 1)] = x[i]

    @qd.kernel
    def moved_load(x: nd(dtype, 1), f: nd(qd.i32, 1), y: nd(dtype, 1), c: nd(qd.i32, 1), m: qd.i32):
        for i in range(m):
            v = x[i]
            if f[i] != 0:
                y[qd.atomic_add(c[0], 1)] = v + v

    @qd.kernel
    def with_index(x: nd(dtype, 1), f: nd(qd.i32, 1), y: nd(dtype, 1), c: nd(qd.i32, 1), m: qd.i32):
        for i in range(m):
            if f[i] != 0:
                y[qd.atomic_add(c[0], 1)] = x[i] + qd.cast(i % 2, dtype)

    @qd.kernel
    def writes_x(x: nd(dtype, 1), f: nd(qd.i32, 1), y: nd(dtype, 1), c: nd(qd.i32, 1), m: qd.i32):
        for i in range(m):
            if f[i] != 0:
                y[qd.atomic_add(c[0], 1)] = x[i]
                x[i] = 0

    rng = np.random.default_rng(5)
    for n, x_len in ((1, 1), (1023, 1023), (1025, 1025), (20000, 20000), (5000, 1500)):
        keep = (rng.random(n) < 0.5) & (np.arange(n) < x_len)  # (past x's end: never)
        xs = (rng.permutation(x_len) * 3 + 1).astype(npt)  # distinct: a value names its element
        index_of = {v: i for i, v in enumerate(xs.tolist())}
        x, y = qd.ndarray(dtype, (x_len,)), qd.ndarray(dtype, (n,))
        f, c = qd.ndarray(qd.i32, (n,)), qd.ndarray(qd.i32, (1,))
        x.from_numpy(xs)
        f.from_numpy(keep.astype(np.int32))
        k = int(keep.sum())
        for kernel, compressed in ((body_load, True), (moved_load, True), (with_index, False), (writes_x, False)):
            c.from_numpy(np.zeros(1, np.int32))
            kernel(x, f, y, c, n)
            assert c.to_numpy()[0] == k
            got = y.to_numpy()[:k]
            if kernel is moved_load:
                got = got / npt(2) if dtype.is_real else got // 2
            elif kernel is with_index:
                got = np.array([v if v in index_of and index_of[v] % 2 == 0 else v - 1 for v in got.tolist()], npt)
            _batches_in_order(np.array([index_of[v] for v in got.tolist()], np.int64), keep)
            ir = qd.compile(kernel, x, f, y, c, n).ir
            assert "(batched compaction, in loops)" in ir and ("passing values" in ir) == compressed, kernel
            # the compress: AVX-512's instruction where the host has it (else a table and a permute)
            llvm_ir = qd.compile(kernel, x, f, y, c, n).llvm_ir
            assert ("llvm.x86.avx512.mask.compress" in llvm_ir) == host_has_avx512f()
            if kernel is writes_x:
                mine = keep[:x_len]
                assert (x.to_numpy()[mine] == 0).all() and np.array_equal(x.to_numpy()[~mine], xs[~mine])

    xf = qd.field(dtype, shape=3000)  # a field: its length known when compiling
    yf = qd.field(dtype, shape=3000)
    cf = qd.field(qd.i32, shape=())
    xs = (rng.permutation(3000) * 3 + 1).astype(npt)
    xf.from_numpy(xs)

    @qd.kernel
    def from_field(m: qd.i32):
        for i in range(m):
            if i % 3 == 0:
                yf[qd.atomic_add(cf[None], 1)] = xf[i]

    from_field(3000)
    index_of = {v: i for i, v in enumerate(xs.tolist())}
    assert cf[None] == 1000
    _batches_in_order(np.array([index_of[v] for v in yf.to_numpy()[:1000].tolist()]), np.arange(3000) % 3 == 0)
    assert "passing values" in qd.compile(from_field, 3000).ir


@test(arch=[qd.cpu, qd.vulkan])
def test_other_loops_keep_their_lowering(req_arch):
    """Not batched, and still exact: a store before the branch, an else branch, a counter whose
    step differs per element, a used old value outside the branch, an ordered atomic; with
    qd.init(subgroup_aggregation=False) nothing is batched."""
    n = 2000
    xs = np.random.default_rng(9).random(n).astype(np.float32)
    x = qd.field(qd.f32, shape=n)
    out = qd.field(qd.i32, shape=n)
    mark = qd.field(qd.i32, shape=n)
    c = qd.field(qd.i32, shape=())
    x.from_numpy(xs)

    @qd.kernel
    def store_before():
        for i in range(n):
            mark[i] = 0
            if x[i] > 0.5:
                out[qd.atomic_add(c[None], 1)] = i

    @qd.kernel
    def with_else():
        for i in range(n):
            if x[i] > 0.5:
                out[qd.atomic_add(c[None], 1)] = i
            else:
                mark[i] = 1

    @qd.kernel
    def varying_step():
        for i in range(n):
            if x[i] > 0.5:
                out[qd.atomic_add(c[None], i % 2 + 1) // 3] = i

    @qd.kernel
    def ordered():
        for i in range(n):
            if x[i] > 0.5:
                out[qd.atomic_add(c[None], 1, memory_order=qd.MemoryOrder.AcqRel)] = i

    count = int((xs > 0.5).sum())
    for kern in (store_before, with_else, ordered):
        c[None] = 0
        kern()
        assert not _batched(qd.compile(kern).ir)
        assert c[None] == count
        assert sorted(out.to_numpy()[:count].tolist()) == np.flatnonzero(xs > 0.5).tolist()
    c[None] = 0
    varying_step()
    assert not _batched(qd.compile(varying_step).ir)
    assert c[None] == int((np.flatnonzero(xs > 0.5) % 2 + 1).sum())
    qd.init(arch=req_arch, subgroup_aggregation=False)
    x2, out2, c2 = qd.field(qd.f32, shape=n), qd.field(qd.i32, shape=n), qd.field(qd.i32, shape=())
    x2.from_numpy(xs)

    @qd.kernel
    def plain():
        for i in range(n):
            if x2[i] > 0.5:
                out2[qd.atomic_add(c2[None], 1)] = i

    assert "batched" not in qd.compile(plain).ir
    plain()
    assert c2[None] == count


def test_compile_only_without_a_device_uses_ballots():
    """qd.compile for vulkan with named features: a known subgroup size packs the masks into or-
    reductions, an unknown one uses 64-bit ballots (right for any size); SPIR-V is emitted."""
    qd.init(arch=qd.cpu)
    x = qd.field(qd.f32, shape=100)
    out = qd.field(qd.i32, shape=100)
    c = qd.field(qd.i32, shape=())

    @qd.kernel
    def compaction():
        for i in range(100):
            if x[i] > 0.5:
                out[qd.atomic_add(c[None], 1)] = i

    caps = ["subgroup_basic", "subgroup_vote", "subgroup_arithmetic", "subgroup_ballot", "subgroup_shuffle",
            "shader_int64"]
    packed = qd.compile(compaction, arch=qd.vulkan, features=caps + ["subgroup_size=8"])
    ballots = qd.compile(compaction, arch=qd.vulkan, features=caps)
    assert _batched(packed.ir) and _batched(ballots.ir)
    assert "subgroup.ballot" not in packed.ir and "subgroup.reduce" in packed.ir
    assert "subgroup.ballot" in ballots.ir
    assert "OpGroupNonUniformShuffle" in packed.spirv_asm and "OpGroupNonUniformBitwiseOr" in packed.spirv_asm
    no_shuffle = qd.compile(compaction, arch=qd.vulkan, features=caps[:-2] + ["shader_int64"])
    assert not _batched(no_shuffle.ir)
    qd.reset()


@pytest.mark.parametrize("seed", range(12))
@test(arch=[qd.cpu, qd.vulkan])
def test_random_compactions(seed):
    """Random shapes: the condition (a threshold, a residue of the index, NaN, bits of an int), the
    range (begin, end, empty), block_dim, add or sub, the step and the counter's type; the stores take
    the index, a loaded value and a value computed from the slot.
    Exact against numpy, nothing written outside the slots."""
    rng = np.random.default_rng(seed)
    n = int(rng.choice([1, 9, 200, 4099, 70001]))
    a = int(rng.integers(0, n)) if rng.random() < 0.5 else 0
    b = int(rng.integers(a, n + 1)) if rng.random() < 0.5 else n
    block_dim = [None, 1, 3, 8, 32, 64, 256][int(rng.integers(0, 7))]
    step = int(rng.integers(1, 5))
    dtype = [qd.i32, qd.u32, qd.i64][int(rng.integers(0, 3))]
    sub = bool(rng.random() < 0.3)
    fn = qd.atomic_sub if sub else qd.atomic_add
    kind = int(rng.integers(0, 4))
    t = float(rng.random())
    m, r = int(rng.integers(1, 7)), 0
    r = int(rng.integers(0, m))
    mask = int(rng.integers(1, 16))
    xs = rng.random(n).astype(np.float32)
    xs[rng.random(n) < 0.2] = np.nan
    ks = rng.integers(0, 1 << 16, n).astype(np.int32)
    x, k = qd.field(qd.f32, shape=n), qd.field(qd.i32, shape=n)
    x.from_numpy(xs)
    k.from_numpy(ks)
    c = qd.field(dtype, shape=())
    size = 8 + step * n
    out_i, out_v, out_s = qd.field(qd.i32, shape=size), qd.field(qd.f32, shape=size), qd.field(qd.i64, shape=size)

    @qd.kernel
    def compaction():
        qd.loop_config(block_dim=block_dim)
        for i in range(a, b):
            v = x[i]
            keep = v > t
            if qd.static(kind == 1):
                keep = i % m == r
            if qd.static(kind == 2):
                keep = v != v
            if qd.static(kind == 3):
                keep = (k[i] & mask) == 0
            if keep:
                s = fn(c[None], step)
                out_i[s] = i
                out_v[s] = v
                out_s[s] = qd.cast(s, qd.i64) * 2 + 1

    init = 7 + step * n if sub else 7
    c[None] = init
    out_i.fill(-1)
    compaction()
    idx = np.arange(a, b)
    sel = [xs[idx] > t, idx % m == r, np.isnan(xs[idx]), (ks[idx] & mask) == 0][kind]
    want = idx[sel]
    assert int(c[None]) == init + (-1 if sub else 1) * step * len(want)
    slots = init + (-1 if sub else 1) * step * np.arange(len(want))
    got_i = out_i.to_numpy()
    assert sorted(got_i[slots].tolist()) == want.tolist()
    assert (np.delete(got_i, slots) == -1).all()
    assert (out_v.to_numpy()[slots].view(np.uint32) == xs[got_i[slots]].view(np.uint32)).all()
    assert (out_s.to_numpy()[slots] == slots * 2 + 1).all()
    assert _batched(qd.compile(compaction).ir)


@test(arch=[qd.cpu, qd.vulkan])
def test_variables_assigned_from_themselves():
    """Forwarding straight-line variables (a step of the rewrite, which runs on any loop ending in a
    branch) keeps chains of stores of earlier loads: `w = 4; w = w; w >>= (w << 7)` in a branch, and
    a variable read before it is reassigned. (The differential fuzzer found the first one.)"""
    n = 64
    out = qd.field(qd.i32, shape=(n, 3))

    @qd.kernel
    def k():
        for i in range(n):
            a = i * 3
            b = a + 1
            a = b * 2
            if i % 2 == 0:
                out[i, 0] = a + b
            else:
                w = qd.u8(4)
                w = w
                w >>= (w << 7)
                out[i, 1] = qd.cast(w, qd.i32)
                w = w + qd.u8(1)
                out[i, 2] = qd.cast(w, qd.i32)

    k()
    got = out.to_numpy()
    i = np.arange(n)
    even, odd = i % 2 == 0, i % 2 == 1
    assert (got[even, 0] == (i[even] * 3 + 1) * 2 + i[even] * 3 + 1).all()
    w = np.uint8(4) >> np.uint8((4 << 7) & 0xFF)
    assert (got[odd, 1] == int(w)).all() and (got[odd, 2] == int(w) + 1).all()
