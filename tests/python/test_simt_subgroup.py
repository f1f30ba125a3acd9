"""qd.simt.subgroup (spec simt.md section 3): every primitive and collective run on vulkan (lavapipe
here, 8 lanes) against numpy, results stated in terms of group_size(); the CUDA and AMDGPU code is
checked in the emitted PTX (ptxas) and AMDGCN."""
import re
import warnings

import numpy as np
import pytest

import quadrants as qd
from quadrants.lang.simt import reductions, subgroup
from tests import test_utils
from tests.python.test_gpu_codegen import has, ptxas

RUNS = [qd.cpu, qd.vulkan]
N = 64


def _lanes():
    g = subgroup.group_size()
    return g, np.arange(N) % g, np.arange(N) // g * g  # size, lane, subgroup start


@test_utils.test(arch=RUNS)
def test_group_size_is_a_python_int_fixed_by_the_device():
    g = subgroup.group_size()
    arch = qd.lang.impl.current_cfg().arch
    device = qd.vulkan_caps()["subgroup_size"] if arch == qd.vulkan else 32  # cpu: 32, documented
    assert isinstance(g, int) and g == device and g & (g - 1) == 0
    assert 1 << subgroup.log2_group_size() == g

    @qd.kernel
    def k(out: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        for i in range(N):
            out[i] = subgroup.group_size() * 1000 + subgroup.invocation_id() * 10 + subgroup.elect()

    out = np.zeros(N, np.int32)
    k(out)
    _, lane, _ = _lanes()
    np.testing.assert_array_equal(out, g * 1000 + lane * 10 + (lane == 0))
    qd.reset()
    qd.init(arch=arch)
    assert subgroup.group_size() == g


@test_utils.test(arch=RUNS)
@pytest.mark.parametrize("dtype", [qd.i32, qd.u32, qd.i64, qd.u64, qd.f32, qd.f64])
def test_shuffles_and_broadcasts(dtype):
    g, lane, start = _lanes()

    @qd.kernel
    def k(a: qd.types.ndarray(dtype=dtype, ndim=1), out: qd.types.ndarray(dtype=dtype, ndim=2)):
        qd.loop_config(block_dim=32)
        for i in range(N):
            v = a[i]
            lane = subgroup.invocation_id()
            out[i, 0] = subgroup.shuffle(v, qd.u32((lane * 3 + 1) % subgroup.group_size()))
            out[i, 1] = subgroup.shuffle_xor(v, 1)
            out[i, 2] = subgroup.broadcast(v, 2)
            out[i, 3] = subgroup.broadcast_first(v)
            out[i, 4] = v
            up = subgroup.shuffle_up(v, 1)
            if lane >= 1:
                out[i, 4] = up
            out[i, 5] = v
            down = subgroup.shuffle_down(v, 2)
            if lane + 2 < subgroup.group_size():
                out[i, 5] = down

    a = (np.arange(N) * 3 + 1).astype(_np(dtype))
    out = np.zeros((N, 6), a.dtype)
    k(a, out)
    want = np.stack([a[start + (lane * 3 + 1) % g], a[start + (lane ^ 1)], a[start + 2], a[start],
                     np.where(lane >= 1, a[np.maximum(np.arange(N) - 1, 0)], a),
                     np.where(lane + 2 < g, a[np.minimum(np.arange(N) + 2, N - 1)], a)], axis=1)
    np.testing.assert_array_equal(out, want)


def _np(dtype):
    return {qd.i32: np.int32, qd.u32: np.uint32, qd.i64: np.int64, qd.u64: np.uint64, qd.f32: np.float32,
            qd.f64: np.float64}[dtype]


@test_utils.test(arch=RUNS)
def test_votes_ballots_and_lanemasks():
    g, lane, start = _lanes()

    @qd.kernel
    def k(a: qd.types.ndarray(dtype=qd.i32, ndim=1), out: qd.types.ndarray(dtype=qd.i64, ndim=2)):
        qd.loop_config(block_dim=32)
        for i in range(N):
            v = a[i]
            out[i, 0] = qd.cast(subgroup.ballot(v % 3 == 0), qd.i64)
            out[i, 1] = qd.cast(subgroup.ballot_first_n(v % 3 == 0, 3), qd.i64)
            out[i, 2] = subgroup.all_true(v < 40)
            out[i, 3] = subgroup.any_true(v == 17)
            out[i, 4] = subgroup.all_equal(v // 16)
            out[i, 5] = qd.cast(subgroup.lanemask_lt(i % 32), qd.i64)
            out[i, 6] = qd.cast(subgroup.lanemask_le(i % 32), qd.i64)
            out[i, 7] = qd.cast(subgroup.lanemask_eq(i % 32), qd.i64)
            out[i, 8] = qd.cast(subgroup.lanemask_gt(i % 32), qd.i64)
            out[i, 9] = qd.cast(subgroup.lanemask_ge(i % 32), qd.i64)
            out[i, 10] = subgroup.all_true_tiled(v % 2 == 0, 1) + 10 * subgroup.any_true_tiled(v % 4 == 1, 1)

    a = np.arange(N, dtype=np.int32)
    out = np.zeros((N, 11), np.int64)
    k(a, out)
    groups = [a[s:s + g] for s in start]
    ballot = np.array([sum(1 << j for j, x in enumerate(grp) if x % 3 == 0) for grp in groups], np.int64)
    np.testing.assert_array_equal(out[:, 0], ballot)
    np.testing.assert_array_equal(out[:, 1], ballot & 7)
    np.testing.assert_array_equal(out[:, 2], [int(all(grp < 40)) for grp in groups])
    np.testing.assert_array_equal(out[:, 3], [int(any(grp == 17)) for grp in groups])
    np.testing.assert_array_equal(out[:, 4], [int(len(set(grp // 16)) == 1) for grp in groups])
    m = np.arange(N) % 32
    full = 0xFFFFFFFF
    lt = (1 << m) - 1
    for c, want in enumerate([lt, lt | (1 << m), 1 << m, full & ~(lt | (1 << m)), full & ~lt]):
        np.testing.assert_array_equal(out[:, 5 + c], want, err_msg=f"lanemask {c}")
    pair = a // 2 * 2  # tiles of two lanes: never both even; one of them is 1 mod 4 iff the pair starts at 0 mod 4
    np.testing.assert_array_equal(out[:, 10], 10 * (pair % 4 == 0))


def _tiles(a, k):
    size = 1 << k
    return [a[s:s + size] for s in range(0, len(a), size)]


FAMILIES = {"add": np.add, "min": np.minimum, "max": np.maximum, "mul": np.multiply, "and": np.bitwise_and,
            "or": np.bitwise_or, "xor": np.bitwise_xor}


def _collective_kernel(name, dtype, log2):
    f = getattr(subgroup, f"{name}_tiled")

    @qd.kernel
    def k(a: qd.types.ndarray(dtype=dtype, ndim=1), out: qd.types.ndarray(dtype=dtype, ndim=1)):
        qd.loop_config(block_dim=32)
        for i in range(N):
            out[i] = f(a[i], log2)

    return k


@test_utils.test(arch=RUNS)
@pytest.mark.parametrize("dtype", [qd.i32, qd.i64, qd.u64, qd.f32, qd.f64])
@pytest.mark.parametrize("log2", [0, 1, 2, 3])
def test_reduce_scan_families(dtype, log2):
    g = subgroup.group_size()
    if log2 > subgroup.log2_group_size():  # subgroups of 4 lanes (LP_NATIVE_VECTOR_WIDTH=128)
        with pytest.raises(qd.QuadrantsTypeError, match=r"tile of 2\*\*\d lanes does not fit"):
            _collective_kernel("inclusive_add", dtype, log2)(np.zeros(N, _np(dtype)), np.zeros(N, _np(dtype)))
        return
    rng = np.random.default_rng(log2)
    a = rng.integers(1, 4 if dtype in (qd.i32, qd.i64, qd.u64) else 9, N).astype(_np(dtype))
    size = 1 << log2
    ops = ["add", "min", "max"] + (["mul", "and", "or", "xor"] if not dtype.is_real else ["mul"])
    for op in ops:
        ufunc = FAMILIES[op]
        tiles = _tiles(a, log2)
        for fam in (["reduce", "reduce_all"] if op in ("add", "min", "max") else []) + ["inclusive", "exclusive"]:
            out = np.zeros(N, a.dtype)
            _collective_kernel(f"{fam}_{op}", dtype, log2)(a, out)
            if fam in ("reduce", "reduce_all"):
                red = np.repeat([ufunc.reduce(t) for t in tiles], size)
                got = out if fam == "reduce_all" else out[::size]
                np.testing.assert_array_equal(got, red if fam == "reduce_all" else red[::size], err_msg=f"{fam}_{op}")
            elif fam == "inclusive":
                np.testing.assert_array_equal(out, np.concatenate([ufunc.accumulate(t) for t in tiles]), err_msg=op)
            else:
                ident = reductions.identity({"and": "bit_and", "or": "bit_or", "xor": "bit_xor"}.get(op, op), dtype)
                want = np.concatenate([np.concatenate([[ident], ufunc.accumulate(t)[:-1]]).astype(a.dtype)
                                       if len(t) > 1 else np.array([ident]).astype(a.dtype) for t in tiles])
                np.testing.assert_array_equal(out, want, err_msg=op)
    assert g >= size


@test_utils.test(arch=RUNS)
def test_tile_larger_than_the_subgroup_is_a_compile_error_naming_the_line():
    """A tile of more lanes than the device's subgroup would read lanes that do not exist: an error
    when the kernel compiles (the size is the device's, known then), never undefined values."""
    too_big = subgroup.log2_group_size() + 1

    @qd.kernel
    def k(a: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        for i in range(N):
            a[i] = subgroup.reduce_all_add_tiled(a[i], too_big)

    with pytest.raises(qd.QuadrantsTypeError) as e:
        k(np.zeros(N, np.int32))
    msg = str(e.value)
    assert f"subgroup of {subgroup.group_size()} lanes" in msg and "reduce_all_add_tiled(a[i], too_big)" in msg, msg


@test_utils.test(arch=RUNS)
@pytest.mark.parametrize("dtype", [qd.i64, qd.u64, qd.f64])
@pytest.mark.parametrize("pattern", ["up_up", "xor_add_xor", "up_add_up"])
def test_chained_64bit_shuffles(dtype, pattern):
    """A 64-bit shuffle of a value that came from another (the inclusive scan's pattern): lavapipe's
    compiler crashed on chained 64-bit ShuffleUp on some hosts; there it gets 32-bit halves. One
    pattern per kernel (lavapipe mixes up lanes for some chains: docs/backends.md, "lavapipe")."""
    @qd.kernel
    def k(a: qd.types.ndarray(dtype=dtype, ndim=1), out: qd.types.ndarray(dtype=dtype, ndim=1)):
        qd.loop_config(block_dim=32)
        for i in range(N):
            v = a[i]
            if qd.static(pattern == "up_up"):
                out[i] = subgroup.shuffle_up(subgroup.shuffle_up(v, 1), 1)
            elif qd.static(pattern == "xor_add_xor"):
                w = subgroup.shuffle_xor(v, 1) + v
                out[i] = subgroup.shuffle_xor(w, 2) + w
            else:
                w = subgroup.shuffle_up(v, 1) + v
                out[i] = subgroup.shuffle_up(w, 2) + w

    # values whose two 32-bit halves differ and both matter
    bits = (np.arange(N, dtype=np.uint64) + 1) * np.uint64(0x1_0000_0001) + np.uint64(1 << 63)
    a = bits.view(_np(dtype)) if dtype != qd.f64 else (np.arange(N) * 1.25e200 - 3e-300).astype(np.float64)
    out = np.zeros(N, a.dtype)
    k(a, out)
    _, lane, start = _lanes()
    i = np.arange(N)
    if pattern == "up_up":
        np.testing.assert_array_equal(out[lane >= 2], a[i[lane >= 2] - 2])
    elif pattern == "xor_add_xor":
        w = a[i ^ 1] + a  # as the kernel adds (and rounds), wrapping for the integers
        np.testing.assert_array_equal(out, w[i ^ 2] + w)
    else:  # lanes from 3 up: a[j-3] + a[j-2] + a[j-1] + a[j], rounded as the kernel adds
        j = i[lane >= 3]
        np.testing.assert_array_equal(out[j], (a[j - 3] + a[j - 2]) + (a[j - 1] + a[j]))


def test_64bit_shuffles_split_in_halves_only_where_the_driver_needs_it():
    """Cap splits_64bit_shuffles (set for llvmpipe, docs/backends.md): one shuffle of the value's
    bits as a uvec2 (two u32 halves); elsewhere one 64-bit OpGroupNonUniformShuffleUp."""
    qd.init(arch=qd.cpu)

    @qd.kernel
    def k(a: qd.types.ndarray(dtype=qd.f64, ndim=1)):
        for i in range(N):
            a[i] = subgroup.shuffle_up(a[i], 1)

    a = np.zeros(N, np.float64)
    caps = ["subgroup_basic", "subgroup_shuffle", "subgroup_shuffle_relative"]
    plain = qd.compile(k, a, arch=qd.vulkan, features=caps).spirv_asm
    split = qd.compile(k, a, arch=qd.vulkan, features=caps + ["splits_64bit_shuffles"]).spirv_asm
    shuffles = lambda asm: re.findall(r"= OpGroupNonUniformShuffleUp %(\w+)", asm)
    assert shuffles(plain) == ["double"], plain
    assert shuffles(split) == ["v2uint"], split
    qd.reset()


@test_utils.test(arch=RUNS)
def test_full_forms_match_the_tiled_forms_at_log2_group_size():
    k = subgroup.log2_group_size()

    @qd.kernel
    def run(a: qd.types.ndarray(dtype=qd.i32, ndim=1), out: qd.types.ndarray(dtype=qd.i32, ndim=2)):
        qd.loop_config(block_dim=32)
        for i in range(N):
            v = a[i]
            out[i, 0] = subgroup.reduce_all_add(v) - subgroup.reduce_all_add_tiled(v, k)
            out[i, 1] = subgroup.inclusive_xor(v) - subgroup.inclusive_xor_tiled(v, k)
            out[i, 2] = subgroup.exclusive_max(v) - subgroup.exclusive_max_tiled(v, k)
            out[i, 3] = subgroup.segmented_reduce_min(v, i % 3 == 0) - subgroup.segmented_reduce_min_tiled(v, i % 3 == 0, k)
            out[i, 4] = subgroup.all_equal(v) - subgroup.all_equal_tiled(v, k)

    out = np.ones((N, 5), np.int32)
    run(np.arange(N, dtype=np.int32) * 7 % 11, out)
    np.testing.assert_array_equal(out, 0)


@test_utils.test(arch=RUNS)
@pytest.mark.parametrize("log2", [1, 2, 3])
def test_segmented_reduce_and_sort(log2):
    size = 1 << log2
    rng = np.random.default_rng(log2)
    a = rng.integers(-5, 6, N).astype(np.int32)
    heads = (rng.random(N) < 0.3).astype(np.int32)

    @qd.kernel
    def k(a: qd.types.ndarray(dtype=qd.i32, ndim=1), h: qd.types.ndarray(dtype=qd.i32, ndim=1),
          out: qd.types.ndarray(dtype=qd.i32, ndim=2)):
        qd.loop_config(block_dim=32)
        for i in range(N):
            out[i, 0] = subgroup.segmented_reduce_add_tiled(a[i], h[i], log2)
            out[i, 1] = subgroup.segmented_reduce_max_tiled(a[i], h[i], log2)
            key, val = subgroup.bitonic_sort_kv_tiled(a[i], i % 3, log2)
            out[i, 2] = key
            out[i, 3] = val

    out = np.zeros((N, 4), np.int32)
    if size > subgroup.group_size():  # a tile larger than the device's subgroup: an error, not a value
        with pytest.raises(qd.QuadrantsTypeError, match=r"does not fit in this device's subgroup"):
            k(a, heads, out)
        return
    k(a, heads, out)
    for j in range(N):
        t0 = j // size * size
        h = max([t for t in range(t0, j + 1) if heads[t]], default=t0)
        assert out[j, 0] == a[h:j + 1].sum() and out[j, 1] == a[h:j + 1].max(), j
    for t0 in range(0, N, size):
        pairs = sorted(zip(a[t0:t0 + size], np.arange(t0, t0 + size) % 3))
        np.testing.assert_array_equal(out[t0:t0 + size, 2:], np.array(pairs, np.int32).reshape(-1, 2))


@test_utils.test(arch=RUNS)
def test_non_commutative_scan_folds_lower_lane_first():
    @qd.func
    def keep_lower(x, y):
        return x * 0 + x  # op(lower, own) keeps the lower lane's value: the scan gives the tile start

    @qd.func
    def keep_own(x, y):
        return y * 0 + y

    @qd.kernel
    def k(out: qd.types.ndarray(dtype=qd.i32, ndim=2)):
        qd.loop_config(block_dim=32)
        for i in range(N):
            out[i, 0] = reductions._inclusive_scan_tiled(i, keep_lower, 2)
            out[i, 1] = reductions._inclusive_scan_tiled(i, keep_own, 2)

    out = np.zeros((N, 2), np.int32)
    k(out)
    np.testing.assert_array_equal(out[:, 0], np.arange(N) // 4 * 4)
    np.testing.assert_array_equal(out[:, 1], np.arange(N))


@test_utils.test(arch=RUNS)
def test_ops_on_a_partial_subgroup_and_bad_values():
    # Every arch here has subgroups (the cpu: 32 consecutive threads of a block). A block of 4
    # threads is one partial subgroup.
    @qd.kernel
    def k(out: qd.types.ndarray(dtype=qd.i32, ndim=2)):
        qd.loop_config(block_dim=4)
        for i in range(4):
            out[i, 0] = subgroup.shuffle(i + 10, 2)
            out[i, 1] = qd.cast(subgroup.ballot(i != 1), qd.i32)
            out[i, 2] = subgroup.all_true(i < 4) + 10 * subgroup.any_true(i == 3)

    out = np.zeros((4, 3), np.int32)
    k(out)
    assert out.tolist() == [[12, 0b1101, 11]] * 4

    @qd.kernel
    def bad(out: qd.types.ndarray(dtype=qd.i8, ndim=1)):
        for i in range(4):
            out[i] = subgroup.shuffle(qd.i8(i), 0)

    with pytest.raises(qd.QuadrantsTypeError, match="must be i32, u32, i64, u64, f32 or f64"):
        bad(np.zeros(4, np.int8))


def test_deprecated_aliases_warn_once_and_call_the_new_name(monkeypatch):
    calls = []
    monkeypatch.setattr(subgroup, "sync", lambda: calls.append("sync"))
    monkeypatch.setattr(subgroup, "mem_fence", lambda: calls.append("mem_fence"))
    monkeypatch.setattr(subgroup, "ballot", lambda p: calls.append(("ballot", p)))
    for flag in ("_barrier_deprecation_warned", "_memory_barrier_deprecation_warned",
                 "_ballot_full_subgroup_deprecation_warned"):
        monkeypatch.setattr(subgroup, flag, False)
    with pytest.warns(DeprecationWarning, match=r"qd.simt.subgroup.barrier\(\).*qd.simt.subgroup.sync\(\)"):
        subgroup.barrier()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        subgroup.barrier()  # once per process
    with pytest.warns(DeprecationWarning, match="memory_barrier"):
        subgroup.memory_barrier()
    with pytest.warns(DeprecationWarning, match="ballot_full_subgroup"):
        subgroup.ballot_full_subgroup(1)
    assert calls == ["sync", "sync", "mem_fence", ("ballot", 1)]


@pytest.fixture
def cpu_program():
    qd.init(arch=qd.cpu)  # qd.compile needs a program; nothing below launches on a GPU
    yield
    qd.reset()


def test_subgroup_ops_in_ptx_and_amdgcn(cpu_program):
    @qd.kernel
    def k(a: qd.types.ndarray(dtype=qd.f64, ndim=1), out: qd.types.ndarray(dtype=qd.f64, ndim=2)):
        qd.loop_config(block_dim=64)
        for i in range(128):
            v = a[i]
            out[i, 0] = subgroup.invocation_id()
            out[i, 1] = subgroup.shuffle(v, qd.u32(i % 7)) + subgroup.shuffle_xor(v, 1)
            out[i, 2] = subgroup.shuffle_up(v, 2) + subgroup.shuffle_down(v, 3)
            out[i, 3] = subgroup.reduce_all_add(v) + subgroup.inclusive_max(v)
            out[i, 4] = subgroup.any_true(v == 5) + subgroup.all_true(v == 5)
            out[i, 5] = qd.cast(subgroup.ballot(v > 2), qd.f64)
            out[i, 6] = subgroup.broadcast(v, 3) + subgroup.broadcast_first(v)
            subgroup.sync()
            subgroup.mem_fence()

    a, o = np.zeros(128), np.zeros((128, 7))
    ptx = qd.compile(k, a, o, arch="cuda").ptx
    for instr in ("%laneid", "activemask.b32", "shfl.sync.idx.b32", "shfl.sync.bfly.b32", "shfl.sync.up.b32",
                  "shfl.sync.down.b32", "vote.sync.any.pred", "vote.sync.all.pred", "vote.sync.ballot.b32",
                  "bar.warp.sync", "membar.cta"):
        assert instr in ptx, instr
    ptxas(ptx, "sm_75")
    amdgcn = qd.compile(k, a, o, arch="amdgpu").amdgcn
    for instr in ("v_mbcnt_lo_u32_b32", "v_mbcnt_hi_u32_b32", "ds_bpermute_b32", "v_readlane_b32",
                  "v_readfirstlane_b32"):
        assert has(amdgcn, instr), instr
    assert "ballot.i32" not in qd.compile(k, a, o, arch="amdgpu").llvm_ir
    assert re.search(r"amdgcn_ballot|llvm\.amdgcn\.ballot\.i64", qd.compile(k, a, o, arch="amdgpu").llvm_ir)


# ------------------------------------------------------------------------------ block collectives
@test_utils.test(arch=RUNS)
@pytest.mark.parametrize("dtype", [qd.i32, qd.i64, qd.u64, qd.f32, qd.f64])
@pytest.mark.parametrize("sg_per_block", [1, 4, 8])
def test_block_collectives(dtype, sg_per_block):
    from quadrants.lang.simt import block
    bd = sg_per_block * subgroup.group_size()
    n = 4 * bd
    a = ((np.arange(n) * 1009) % 997 % 7 + 1).astype(_np(dtype))

    @qd.kernel
    def k(a: qd.types.ndarray(dtype=dtype, ndim=1), out: qd.types.ndarray(dtype=dtype, ndim=2)):
        qd.loop_config(block_dim=bd)
        for i in range(n):
            v = a[i]
            r = block.reduce_add(v, bd, dtype)
            if i % bd == 0:
                out[i, 0] = r
            out[i, 1] = block.reduce_all_max(v, bd, dtype)
            out[i, 2] = block.inclusive_add(v, bd, dtype)
            out[i, 3] = block.exclusive_min(v, bd, dtype)
            out[i, 4] = block.exclusive_add(v, bd, dtype)
            out[i, 5] = block.inclusive_max(v, bd, dtype)
            out[i, 6] = block.reduce_all_min(v, bd, dtype)

    out = np.zeros((n, 7), a.dtype)
    k(a, out)
    big = reductions.identity("min", dtype)
    for b in range(4):
        s = slice(b * bd, (b + 1) * bd)
        x = a[s]
        assert out[b * bd, 0] == x.sum()
        np.testing.assert_array_equal(out[s, 1], x.max())
        np.testing.assert_array_equal(out[s, 2], np.cumsum(x).astype(a.dtype))
        np.testing.assert_array_equal(out[s, 3], np.concatenate([[big], np.minimum.accumulate(x)[:-1]]).astype(a.dtype))
        np.testing.assert_array_equal(out[s, 4], np.concatenate([[0], np.cumsum(x)[:-1]]).astype(a.dtype))
        np.testing.assert_array_equal(out[s, 5], np.maximum.accumulate(x))
        np.testing.assert_array_equal(out[s, 6], x.min())


@test_utils.test(arch=RUNS)
def test_block_generic_op_and_block_dim_checks():
    from quadrants.lang.simt import block
    g = subgroup.group_size()
    bd = 4 * g

    @qd.func
    def keep_lower(x, y):
        return x * 0 + x

    @qd.kernel
    def k(out: qd.types.ndarray(dtype=qd.i32, ndim=2)):
        qd.loop_config(block_dim=bd)
        for i in range(2 * bd):
            out[i, 0] = block.inclusive_scan(i, bd, keep_lower, qd.i32)
            out[i, 1] = block.exclusive_scan(i + 1, bd, keep_lower, -7, qd.i32)
            out[i, 2] = block.reduce_all(i, bd, keep_lower, qd.i32)

    out = np.zeros((2 * bd, 3), np.int32)
    k(out)
    start = np.arange(2 * bd) // bd * bd
    np.testing.assert_array_equal(out[:, 0], start)
    np.testing.assert_array_equal(out[:, 1], np.where(np.arange(2 * bd) % bd == 0, -7, start + 1))
    np.testing.assert_array_equal(out[:, 2], start)

    @qd.kernel
    def bad(out: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        qd.loop_config(block_dim=g + 1)
        for i in range(g + 1):
            out[i] = block.reduce_add(i, g + 1, qd.i32)

    with pytest.raises(AssertionError, match="block.reduce: block_dim must be a positive multiple"):
        bad(np.zeros(g + 1, np.int32))


def test_warp_is_cuda_only_and_in_ptx(cpu_program):
    from quadrants.lang.simt import warp

    @qd.kernel
    def k(out: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        qd.loop_config(block_dim=32)
        for i in range(64):
            m = warp.active_mask()
            out[i] = warp.shfl_down_i32(m, i, 1) + warp.all_nonzero(m, i > 3) + warp.unique(m, i > 100) + \
                qd.cast(warp.ballot(i % 2 == 0), qd.i32) + qd.cast(warp.match_any(m, i // 4), qd.i32)
            warp.sync(m)

    a = np.zeros(64, np.int32)
    ptx = qd.compile(k, a, arch="cuda").ptx
    assert "vote.sync.ballot.b32" in ptx and "shfl.sync.down.b32" in ptx and "bar.warp.sync" in ptx
    ptxas(ptx, "sm_75")
    with pytest.raises(RuntimeError, match="qd.simt.warp.active_mask is CUDA-only"):
        qd.compile(k, a, arch="amdgpu")


@test_utils.test(arch=RUNS)
@pytest.mark.parametrize("bit_start,num_bits", [(0, 8), (4, 4), (8, 3)])
def test_block_radix_rank(bit_start, num_bits):
    from quadrants.lang.simt import block
    bd, n = 256, 512
    keys = np.random.default_rng(num_bits).integers(0, 1 << 16, n).astype(np.uint32)
    keys[:40] = 7  # many equal digits in one block

    @qd.kernel
    def k(keys: qd.types.ndarray(dtype=qd.u32, ndim=1), out: qd.types.ndarray(dtype=qd.i32, ndim=2)):
        qd.loop_config(block_dim=bd)
        for i in range(n):
            tid = block.thread_idx()
            bins = block.SharedArray((256,), qd.i32)
            excl = block.SharedArray((256,), qd.i32)
            out[i, 0] = block.radix_rank_match_atomic_or(keys[i], bd, 8, bit_start, num_bits, bins, excl)
            out[i, 1] = bins[tid]
            out[i, 2] = excl[tid]

    out = np.zeros((n, 3), np.int32)
    k(keys, out)
    for b in range(n // bd):
        d = (keys[b * bd:(b + 1) * bd] >> bit_start) & ((1 << num_bits) - 1)
        hist = np.bincount(d, minlength=256)
        prefix = np.concatenate([[0], np.cumsum(hist)[:-1]])
        rank = [prefix[d[t]] + np.sum(d[:t] == d[t]) for t in range(bd)]
        np.testing.assert_array_equal(out[b * bd:(b + 1) * bd, 0], rank)
        np.testing.assert_array_equal(out[b * bd:(b + 1) * bd, 1], hist)
        np.testing.assert_array_equal(out[b * bd:(b + 1) * bd, 2], prefix)


@test_utils.test(arch=RUNS)
def test_subgroup_pre_aggregation_benchmark_kernels_agree():
    """benchmarks/subgroup_aggregation.py (docs/atomics.md): one atomic per subgroup gives the same
    exact i32 sum as one atomic per thread."""
    import importlib.util
    import os
    import sys

    benchmarks = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks")
    spec = importlib.util.spec_from_file_location("subgroup_aggregation_bench", os.path.join(benchmarks, "subgroup_aggregation.py"))
    bench = importlib.util.module_from_spec(spec)
    sys.path.insert(0, benchmarks)  # its `from timing import best_of`
    try:
        spec.loader.exec_module(bench)
    finally:
        sys.path.remove(benchmarks)
    x = np.random.default_rng(3).integers(-1000, 1000, 1 << 14, dtype=np.int32)
    for kernel in (bench.per_thread, bench.per_subgroup):
        total = np.zeros(1, np.int32)
        kernel(x, total)
        assert int(total[0]) == int(x.astype(np.int64).sum()), kernel.__name__
