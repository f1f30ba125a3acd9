"""qd.simt.block and qd.simt.grid (spec simt.md sections 1, 2, 4, 7, 8): shared arrays, barriers,
votes, fences, thread indices, and every atomic on shared memory. Run on vulkan (lavapipe here);
the CUDA and AMDGPU code is checked in the emitted PTX / AMDGCN (ptxas sm_75 / sm_90)."""
import os
import re
import warnings

import numpy as np
import pytest

import quadrants as qd
from tests import test_utils
from tests.python.test_gpu_codegen import has, ptxas

RUNS = [qd.cpu, qd.vulkan]  # cpu runs blocks on its workers (docs/backends.md); vulkan: lavapipe here; cuda / amdgpu are checked in their assembly below


# ------------------------------------------------------------------------------- block operations
@test_utils.test(arch=RUNS)
def test_sync_orders_shared_writes_across_the_block():
    block_dim, n = 256, 1024

    @qd.kernel
    def k(out: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        qd.loop_config(block_dim=block_dim)
        for i in range(n):
            tid = qd.simt.block.thread_idx()
            s = qd.simt.block.SharedArray((block_dim,), qd.i32)
            s[tid] = i
            qd.simt.block.sync()
            out[i] = s[block_dim - 1 - tid]  # another thread's write

    out = np.zeros(n, np.int32)
    k(out)
    blocks = np.arange(n) // block_dim * block_dim
    np.testing.assert_array_equal(out, blocks + block_dim - 1 - np.arange(n) % block_dim)


@test_utils.test(arch=RUNS)
def test_sync_votes():
    block_dim, n = 256, 1024

    @qd.kernel
    def k(out: qd.types.ndarray(dtype=qd.i32, ndim=2)):
        qd.loop_config(block_dim=block_dim)
        for i in range(n):
            out[i, 0] = qd.simt.block.sync_all_nonzero(i % 256 != 3 or i < 256)
            out[i, 1] = qd.simt.block.sync_any_nonzero(i == 700)
            out[i, 2] = qd.simt.block.sync_count_nonzero(i % 3 == 0)

    out = np.zeros((n, 3), np.int32)
    k(out)
    for b in range(n // block_dim):
        ids = np.arange(b * block_dim, (b + 1) * block_dim)
        want = [int(all((ids % 256 != 3) | (ids < 256))), int(any(ids == 700)), int(np.sum(ids % 3 == 0))]
        np.testing.assert_array_equal(out[ids], np.tile(want, (block_dim, 1)), err_msg=f"block {b}")


@test_utils.test(arch=RUNS)
def test_thread_idx_and_global_thread_idx():
    @qd.kernel
    def k(out: qd.types.ndarray(dtype=qd.i32, ndim=2)):
        qd.loop_config(block_dim=8)
        for i in range(32):
            out[i, 0] = qd.simt.block.thread_idx()
            out[i, 1] = qd.simt.block.global_thread_idx()

    out = np.zeros((32, 2), np.int32)
    k(out)
    np.testing.assert_array_equal(out[:, 0], np.arange(32) % 8)
    np.testing.assert_array_equal(out[:, 1], np.arange(32))


@test_utils.test(arch=RUNS)
def test_fences_in_divergent_code():
    @qd.kernel
    def k(out: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        qd.loop_config(block_dim=32)
        for i in range(64):
            out[i] = i
            if qd.simt.block.thread_idx() == 0:
                qd.simt.block.mem_fence()
                qd.simt.grid.mem_fence()
            out[i] += 1

    out = np.zeros(64, np.int32)
    k(out)
    np.testing.assert_array_equal(out, np.arange(64) + 1)


@test_utils.test(arch=RUNS)
def test_deprecated_aliases_warn_and_work():
    @qd.kernel
    def k(out: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        for i in range(4):
            qd.simt.block.mem_sync()
            qd.simt.grid.memfence()
            out[i] = 1

    out = np.zeros(4, np.int32)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        k(out)
    messages = [str(x.message) for x in w if issubclass(x.category, DeprecationWarning)]
    assert any("qd.simt.block.mem_sync" in m and "mem_fence" in m for m in messages), messages
    assert any("qd.simt.grid.memfence" in m and "mem_fence" in m for m in messages), messages
    assert out.tolist() == [1] * 4


@test_utils.test(arch=RUNS)
def test_shared_arrays_per_block_and_per_site():
    # Two arrays of one helper called twice do not alias; 2-D and vector arrays index row-major.
    @qd.func
    def stash(v):
        s = qd.simt.block.SharedArray(16, qd.i32)
        s[qd.simt.block.thread_idx()] = v
        qd.simt.block.sync()
        return s[15 - qd.simt.block.thread_idx()]

    @qd.kernel
    def k(out: qd.types.ndarray(dtype=qd.i32, ndim=2)):
        qd.loop_config(block_dim=16)
        for i in range(64):
            tid = qd.simt.block.thread_idx()
            m = qd.simt.block.SharedArray((4, 4), qd.i32)
            v = qd.simt.block.SharedArray(16, qd.types.vector(2, qd.i32))
            m[tid // 4, tid % 4] = tid
            v[tid] = qd.Vector([tid, -tid])
            a = stash(i)
            b = stash(-i)
            qd.simt.block.sync()
            out[i, 0] = a
            out[i, 1] = b
            out[i, 2] = m[3 - tid // 4, tid % 4]
            out[i, 3] = v[15 - tid][1]

    out = np.zeros((64, 4), np.int32)
    k(out)
    i = np.arange(64)
    tid = i % 16
    partner = i - tid + 15 - tid
    np.testing.assert_array_equal(out[:, 0], partner)
    np.testing.assert_array_equal(out[:, 1], -partner)
    np.testing.assert_array_equal(out[:, 2], (3 - tid // 4) * 4 + tid % 4)
    np.testing.assert_array_equal(out[:, 3], -(15 - tid))


# ------------------------------------------------------------------- cpu: blocks on one worker
@test_utils.test(arch=qd.cpu)
def test_cpu_barriers_in_uniform_loops_and_branches():
    # A block's threads pass each barrier together also inside loops and branches the whole block
    # takes: every round rotates the block's values by one thread through shared memory.
    bd, n = 64, 256

    @qd.kernel
    def k(a: qd.types.ndarray(dtype=qd.i32, ndim=1), out: qd.types.ndarray(dtype=qd.i32, ndim=2), rounds: qd.i32):
        qd.loop_config(block_dim=bd)
        for i in range(n):
            tid = qd.simt.block.thread_idx()
            s = qd.simt.block.SharedArray((bd,), qd.i32)
            acc = a[i]
            for r in range(rounds):
                s[tid] = acc
                qd.simt.block.sync()
                acc = s[(tid + 1) % bd]
                qd.simt.block.sync()
            out[i, 0] = acc
            j = 0
            while True:
                if j >= rounds + 1:
                    break
                s[tid] = acc
                qd.simt.block.sync()
                acc = s[(tid + bd - 1) % bd]
                qd.simt.block.sync()
                j += 1
            if rounds > 2:
                s[tid] = acc * 2
                qd.simt.block.sync()
                acc = s[bd - 1 - tid]
            out[i, 1] = acc

    a = np.arange(n, dtype=np.int32) * 7
    for rounds in (0, 3, 5):
        out = np.zeros((n, 2), np.int32)
        k(a, out, rounds)
        blk = a.reshape(-1, bd)
        first = np.roll(blk, -rounds, axis=1)
        second = np.roll(first, 1 + rounds, axis=1)
        if rounds > 2:
            second = second[:, ::-1] * 2
        np.testing.assert_array_equal(out[:, 0], first.ravel(), err_msg=f"rounds={rounds}")
        np.testing.assert_array_equal(out[:, 1], second.ravel(), err_msg=f"rounds={rounds}")

    # i // block_dim (a multiple of it) is the same on the whole block: a loop bound read with it is
    # uniform, though the loop index is not.
    @qd.kernel
    def per_block(cnt: qd.types.ndarray(dtype=qd.i32, ndim=1), out: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        qd.loop_config(block_dim=bd)
        for i in range(n):
            s = qd.simt.block.SharedArray((bd,), qd.i32)
            acc = i
            for r in range(cnt[i // bd] + cnt[qd.simt.block.global_thread_idx() >> 7]):
                s[qd.simt.block.thread_idx()] = acc
                qd.simt.block.sync()
                acc = s[(qd.simt.block.thread_idx() + 1) % bd]
                qd.simt.block.sync()
            out[i] = acc

    cnt = np.array([1, 2, 3, 4], np.int32)
    out = np.zeros(n, np.int32)
    per_block(cnt, out)
    blocks = np.arange(n).reshape(-1, bd)
    shifts = cnt[np.arange(n // bd)] + cnt[np.arange(n // bd) * bd >> 7]
    np.testing.assert_array_equal(out, np.concatenate([np.roll(b, -k) for b, k in zip(blocks, shifts)]))


@test_utils.test(arch=qd.cpu)
def test_cpu_partial_last_block_and_finished_threads():
    # The last block of 100 iterations at block_dim 32 has 4 threads; threads that `continue` are
    # done for the rest of the iteration (they skip the later barriers, like a thread past the end).
    @qd.kernel
    def k(out: qd.types.ndarray(dtype=qd.i32, ndim=2)):
        qd.loop_config(block_dim=32)
        for i in range(100):
            tid = qd.simt.block.thread_idx()
            s = qd.simt.block.SharedArray((2,), qd.i32)
            if tid == 0:
                s[0] = 0
                s[1] = 0
            qd.simt.block.sync()
            qd.atomic_add(s[0], 1)
            out[i, 1] = -1
            if tid >= 20:
                continue
            qd.atomic_add(s[1], 1)
            qd.simt.block.sync()
            out[i, 0] = s[0]
            out[i, 1] = s[1]

    out = np.zeros((100, 2), np.int32)
    k(out)
    tid = np.arange(100) % 32
    size = np.where(np.arange(100) < 96, 32, 4)
    np.testing.assert_array_equal(out[:, 0], np.where(tid < 20, size, 0))
    np.testing.assert_array_equal(out[:, 1], np.where(tid < 20, np.minimum(size, 20), -1))

    # A uniform loop bound computed after thread 0 left: the threads still running decide it.
    @qd.kernel
    def late(out: qd.types.ndarray(dtype=qd.i32, ndim=1), m: qd.i32):
        qd.loop_config(block_dim=32)
        for i in range(64):
            if qd.simt.block.thread_idx() < 3:
                continue
            rounds = m * 2 + 1
            acc = 0
            for r in range(rounds):
                qd.simt.block.sync()
                acc += 1
            out[i] = acc

    o = np.zeros(64, np.int32)
    late(o, 2)
    np.testing.assert_array_equal(o, np.where(np.arange(64) % 32 < 3, 0, 5))


@test_utils.test(arch=qd.cpu)
def test_cpu_divergent_barriers_are_syntax_errors_naming_the_line():
    @qd.kernel
    def branch(out: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        qd.loop_config(block_dim=32)
        for i in range(64):
            if i % 2 == 0:
                qd.simt.block.sync()  # divergent
            out[i] = i

    @qd.kernel
    def loop(out: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        qd.loop_config(block_dim=32)
        for i in range(64):
            for j in range(out[i]):
                qd.simt.block.sync()  # divergent
            out[i] = i

    @qd.kernel
    def shuffle(out: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        qd.loop_config(block_dim=32)
        for i in range(64):
            if qd.simt.block.thread_idx() < 5:
                out[i] = qd.simt.subgroup.shuffle_xor(i * 2, 1)  # divergent

    out = np.zeros(64, np.int32)
    for kernel, what in ((branch, r"qd\.simt\.block\.sync\(\) inside a branch"),
                         (loop, r"qd\.simt\.block\.sync\(\) inside a loop"),
                         (shuffle, r"a subgroup operation .* inside a branch")):
        with pytest.raises(qd.QuadrantsSyntaxError, match=what) as e:
            kernel(out)
        assert "# divergent" in str(e.value) and "differ between the threads of a block" in str(e.value)


@test_utils.test(arch=qd.cpu)
def test_cpu_subgroup_ops_in_uniform_loops_serial_code_and_limits():
    from quadrants.lang.simt import subgroup

    @qd.kernel
    def k(out: qd.types.ndarray(dtype=qd.i32, ndim=1), rounds: qd.i32) -> qd.i32:
        qd.loop_config(block_dim=64)
        for i in range(128):
            v = i
            for r in range(rounds):  # each round needs every lane's value of the round before
                v = subgroup.shuffle_xor(v, 1) * 2 + subgroup.shuffle_down(v, 1) - v
            out[i] = v
        return qd.simt.block.thread_idx() + subgroup.shuffle(7, 3)  # serial code: one thread, its own value

    out = np.zeros(128, np.int32)
    assert k(out, 3) == 7
    want = np.arange(128)
    for r in range(3):
        lane = np.arange(128) % 32
        down = np.where(lane + 1 < 32, want[np.minimum(np.arange(128) + 1, 127)], want)
        want = want[np.arange(128) ^ 1] * 2 + down - want
    np.testing.assert_array_equal(out, want)

    @qd.kernel
    def too_big(out: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        qd.loop_config(block_dim=2048)
        for i in range(4096):
            out[i] = qd.simt.block.thread_idx()

    with pytest.raises(qd.QuadrantsSyntaxError, match="block_dim=2048 is out of range on cpu"):
        too_big(np.zeros(4096, np.int32))


@test_utils.test(arch=qd.cpu)
def test_cpu_shared_memory_is_per_block_and_lanes_are_32_consecutive_threads():
    from quadrants.lang.simt import subgroup
    assert subgroup.group_size() == 32 and qd.lang.impl.get_max_shared_memory_bytes(is_lowerbound_ok=True) == 65536

    @qd.kernel
    def k(out: qd.types.ndarray(dtype=qd.i32, ndim=2)):
        qd.loop_config(block_dim=128)
        for i in range(100_352):  # 784 blocks: many on every worker at once
            s = qd.simt.block.SharedArray((128,), qd.i32)
            s[qd.simt.block.thread_idx()] = i
            qd.simt.block.sync()
            out[i, 0] = s[(qd.simt.block.thread_idx() + 5) % 128]
            out[i, 1] = subgroup.invocation_id() + 100 * subgroup.broadcast_first(i)

    out = np.zeros((100_352, 2), np.int32)
    k(out)
    i = np.arange(100_352)
    base = i // 128 * 128
    np.testing.assert_array_equal(out[:, 0], base + (i % 128 + 5) % 128)
    np.testing.assert_array_equal(out[:, 1], i % 32 + 100 * (i // 32 * 32))


@test_utils.test(arch=RUNS)
def test_shared_array_bad_shape_and_placement():
    for shape in [(4, 0), 2.5, (), ("a",)]:
        @qd.kernel
        def k():
            for i in range(4):
                qd.simt.block.SharedArray(shape, qd.i32)

        with pytest.raises(qd.QuadrantsCompilationError, match="SharedArray"):
            k()

    @qd.kernel
    def outside():
        qd.simt.block.sync()

    with pytest.raises(qd.QuadrantsSyntaxError, match="parallel for loop"):
        outside()


# ------------------------------------------------------------------- atomics on shared memory
INTS = ("i32", "u32", "i64", "u64")
FLOATS = ("f16", "f32", "f64")
SHARED_CASES = [(op, t) for op in ("add", "sub", "mul", "min", "max", "exchange") for t in INTS + FLOATS] + \
               [(op, t) for op in ("and", "or", "xor", "cas") for t in INTS]
BLOCK = 8  # small, so integer mul stays exact: values 1..8


def _host(op, dtype, values):
    """The final value of s[0] (starting at `start`) after every value is applied, in any order."""
    acc = values.dtype.type(3)
    for v in values:
        with np.errstate(over="ignore"):  # unsigned sub wraps, as on the device
            acc = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
                   "min": min, "max": max, "and": lambda a, b: a & b, "or": lambda a, b: a | b,
                   "xor": lambda a, b: a ^ b}[op](acc, v)
    return acc


def _shared_atomic_kernel(op, dtype):
    d = getattr(qd, dtype)
    fn = getattr(qd, f"atomic_{op}")

    @qd.kernel
    def k(vals: qd.types.ndarray(dtype=d, ndim=1), final: qd.types.ndarray(dtype=d, ndim=1),
          olds: qd.types.ndarray(dtype=d, ndim=1)):
        qd.loop_config(block_dim=BLOCK)
        for i in range(2 * BLOCK):
            tid = qd.simt.block.thread_idx()
            s = qd.simt.block.SharedArray((BLOCK,), d)
            if tid == 0:
                s[0] = qd.cast(3, d)
            qd.simt.block.sync()
            if qd.static(op == "cas"):
                olds[i] = fn(s[0], qd.cast(3, d), vals[i])  # exactly one thread of the block wins
            else:
                olds[i] = fn(s[0], vals[i])
            qd.simt.block.sync()
            if tid == 0:
                final[i // BLOCK] = s[0]

    return k


def _device_has(cap):
    if qd.lang.impl.current_cfg().arch == qd.cpu:  # the host has every atomic the support table names
        return True
    return bool(qd.lang.impl.get_runtime().prog.runtime.vulkan_caps.get(cap, False))


@pytest.mark.parametrize("op,dtype", SHARED_CASES)
@test_utils.test(arch=RUNS)
def test_shared_atomic(op, dtype):
    if dtype in ("i64", "u64", "f64") and not _device_has("int64_atomics_shared"):
        pytest.skip("the device has no 64-bit shared atomics")
    npt = np.dtype({"f16": np.float16}.get(dtype, dtype.replace("i", "int").replace("u", "uint").replace("f", "float")))
    if dtype.startswith("u") or op in ("and", "or", "xor"):
        vals = np.tile(np.array([1, 2, 4, 8, 16, 5, 6, 7], npt), 2)
    else:
        vals = np.tile(np.array([1, 2, 3, -1, 2, 1, 5, 1] if dtype[0] != "u" else [1] * 8, npt), 2)
    if op == "cas":
        vals = np.arange(10, 10 + 2 * BLOCK).astype(npt)
    final, olds = np.zeros(2, npt), np.zeros(2 * BLOCK, npt)
    _shared_atomic_kernel(op, dtype)(vals, final, olds)
    for b in range(2):
        v, o = vals[b * BLOCK:(b + 1) * BLOCK], olds[b * BLOCK:(b + 1) * BLOCK]
        if op == "exchange":  # the olds and the final value are the start and the values, each once
            assert sorted(np.append(o, final[b]).tolist()) == sorted([3] + v.tolist())
        elif op == "cas":
            winners = np.flatnonzero(o == 3)
            assert len(winners) == 1 and final[b] == v[winners[0]], (o, final[b])
        else:
            assert final[b] == _host(op, dtype, v), (final[b], v)
            if op in ("add",) and dtype in INTS:  # the olds are the prefix sums of some order
                assert sorted(o.tolist())[0] == 3


@test_utils.test(arch=RUNS)
def test_shared_float_atomic_min_max_nan_loses():
    # Spec (atomics.md): float min/max are minNum/maxNum: a NaN operand loses. On lavapipe they are
    # native OpAtomicFMin/FMaxEXT on global and on shared memory.
    @qd.kernel
    def k(out: qd.types.ndarray(dtype=qd.f32, ndim=1), g: qd.types.ndarray(dtype=qd.f32, ndim=1)):
        qd.loop_config(block_dim=4)
        for i in range(4):
            s = qd.simt.block.SharedArray((2,), qd.f32)
            if i == 0:
                s[0] = 5.0
                s[1] = 5.0
            qd.simt.block.sync()
            v = qd.math.nan if i % 2 == 0 else qd.cast(i, qd.f32)
            qd.atomic_min(s[0], v)
            qd.atomic_max(s[1], v)
            qd.atomic_min(g[0], v)
            qd.atomic_max(g[1], v)
            qd.simt.block.sync()
            if i == 0:
                out[0] = s[0]
                out[1] = s[1]

    out, g = np.zeros(2, np.float32), np.array([5, 5], np.float32)
    k(out, g)
    assert out.tolist() == [1.0, 5.0] and g.tolist() == [1.0, 5.0]


@test_utils.test(arch=RUNS)
def test_shared_float_exchange_beyond_the_reference():
    @qd.kernel
    def k(out: qd.types.ndarray(dtype=qd.f32, ndim=1)):
        qd.loop_config(block_dim=4)
        for i in range(4):
            s = qd.simt.block.SharedArray((4,), qd.f32)
            s[qd.simt.block.thread_idx()] = 0.5
            qd.simt.block.sync()
            out[i] = qd.atomic_exchange(s[(i + 1) % 4], qd.cast(i, qd.f32) + 0.25)
            qd.simt.block.sync()
            out[i] += s[i] * 10

    out = np.zeros(4, np.float32)
    k(out)
    np.testing.assert_array_equal(out, 0.5 + 10 * (np.array([3, 0, 1, 2]) + 0.25))


# --------------------------------------------------------------------- CUDA and AMDGPU assembly
def _codegen_kernel(dtype, op):
    d = getattr(qd, dtype)
    fn = getattr(qd, f"atomic_{op}")

    @qd.kernel
    def k(out: qd.types.ndarray(dtype=d, ndim=1)):
        qd.loop_config(block_dim=256)
        for i in range(512):
            s = qd.simt.block.SharedArray((256,), d)
            s[qd.simt.block.thread_idx()] = out[i]
            qd.simt.block.sync()
            if qd.static(op == "cas"):
                out[i] = fn(s[0], out[i], out[i])
            else:
                out[i] = fn(s[0], out[i])
            qd.simt.block.mem_fence()
            qd.simt.grid.mem_fence()
            out[i] += qd.simt.block.global_thread_idx()

    return k


@pytest.fixture
def cpu_program():
    qd.init(arch=qd.cpu)
    yield
    qd.reset()


def _ptx_shared(op, dtype):
    """The PTX instruction of a native shared atomic, or the CAS of a CAS loop."""
    w = "64" if dtype in ("i64", "u64", "f64") else "32"
    native_float = op in ("add", "sub", "exchange") and dtype in ("f32", "f64")
    if dtype == "f16" or op == "mul" or (op in ("min", "max") and dtype in FLOATS):
        return f"atom.shared.cas.b{w}"
    if op in ("add", "sub"):
        return f"atom.shared.add.{dtype}" if native_float else f"atom.shared.add.u{w}"
    if op in ("min", "max"):
        return f"atom.shared.{op}.{dtype[0].replace('i', 's')}{w}"
    if op == "exchange":
        return f"atom.shared.exch.b{w}"
    if op == "cas":
        return f"atom.shared.cas.b{w}"
    return f"atom.shared.{op}.b{w}"


@pytest.mark.parametrize("op,dtype", SHARED_CASES)
def test_shared_atomics_in_ptx_and_amdgcn(cpu_program, op, dtype):
    k = _codegen_kernel(dtype, op)
    npt = np.float16 if dtype == "f16" else np.dtype(dtype.replace("i", "int").replace("u", "uint").replace("f", "float"))
    a = np.zeros(512, npt)
    ptx = qd.compile(k, a, arch="cuda").ptx
    for instr in ("bar.sync", "membar.cta", "membar.gl", _ptx_shared(op, dtype)):
        assert has(ptx, instr), instr
    for sm in ("sm_75", "sm_90"):
        ptxas(ptx, sm)
    amdgcn = qd.compile(k, a, arch="amdgpu").amdgcn
    assert has(amdgcn, "s_barrier")
    assert re.search(r"\bds_(?:add|sub|min|max|and|or|xor|swap|cmpst|cmpswap|mskor|wrxchg|max_f|min_f)\w*", amdgcn), \
        "no LDS atomic"


def test_cpu_ir_runs_blocks_region_by_region(cpu_program):
    # transforms/cpu_blocks.cpp: the loop steps by blocks; each barrier-free region is a serial
    # loop over the block's threads; a value crossing a barrier lives in a per-thread array.
    @qd.kernel
    def k(out: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        qd.loop_config(block_dim=16)
        for i in range(64):
            v = out[i] * 3
            qd.simt.block.sync()
            out[i] = v + qd.simt.block.thread_idx()

    ir = qd.compile(k, np.zeros(64, np.int32), arch="cpu").ir
    assert "block_dim=16" in ir and len(re.findall(r"for range\(\$\d+, \$\d+\) serial", ir)) == 2, ir
    assert "simt" not in ir and "block.sync" not in ir and "per-thread" in ir, ir


def test_simt_thread_idx_reads_tid_x_in_ptx(tmp_path):
    """In a fresh interpreter: twice (of ~8 full runs) this PTX came back without `tid.x` late in a
    long in-process run and never alone; not yet explained (the IR is in the message if it recurs)."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        import numpy as np
        import quadrants as qd
        qd.init(arch=qd.cpu)

        @qd.kernel
        def k(out: qd.types.ndarray(dtype=qd.i32, ndim=1)):
            for i in range(8):
                out[i] = qd.simt.block.thread_idx()

        art = qd.compile(k, np.zeros(8, np.int32), arch="cuda")
        assert "tid.x" in art.ptx, art.ir
        print("ok")
    """)
    path = str(tmp_path / "tid_x_probe.py")
    with open(path, "w") as f:
        f.write(code)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    r = subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=300, cwd=root, env=env)
    assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr


# ------------------------------------------------------------------------------------ example
@test_utils.test(arch=RUNS)
def test_block_histogram_example():
    import importlib.util
    import os

    path = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "block_histogram.py")
    spec = importlib.util.spec_from_file_location("block_histogram_example", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    data = np.random.default_rng(1).integers(0, 256, 100_003, dtype=np.uint8)  # not a multiple of anything
    expected = np.bincount(data, minlength=256)
    for kernel in (example.block_histogram, example.global_histogram):
        np.testing.assert_array_equal(example.histogram(data, kernel), expected)


@test_utils.test(arch=RUNS)
def test_shared_float_array_with_native_and_cas_atomics():
    # add / max are native on lavapipe's shared memory and mul is a CAS loop: on one SPIR-V shared
    # array (one element type) all become CAS loops on the bits.
    @qd.kernel
    def k(out: qd.types.ndarray(dtype=qd.f32, ndim=1)):
        qd.loop_config(block_dim=4)
        for i in range(8):
            s = qd.simt.block.SharedArray((3,), qd.f32)
            if qd.simt.block.thread_idx() == 0:
                s[0], s[1], s[2] = 0.0, 1.0, -1.0
            qd.simt.block.sync()
            qd.atomic_add(s[0], 0.5)
            qd.atomic_mul(s[1], 2.0)
            qd.atomic_max(s[2], qd.cast(qd.simt.block.thread_idx(), qd.f32))
            qd.simt.block.sync()
            if qd.simt.block.thread_idx() == 0:
                out[i // 4 * 3 + 0] = s[0]
                out[i // 4 * 3 + 1] = s[1]
                out[i // 4 * 3 + 2] = s[2]

    out = np.zeros(6, np.float32)
    k(out)
    assert out.tolist() == [2.0, 16.0, 3.0] * 2


def test_block_ops_in_metal_msl(cpu_program):
    @qd.kernel
    def k(out: qd.types.ndarray(dtype=qd.f32, ndim=1)):
        qd.loop_config(block_dim=64)
        for i in range(128):
            s = qd.simt.block.SharedArray((64,), qd.f32)
            t = qd.simt.block.SharedArray((4,), qd.i32)
            s[qd.simt.block.thread_idx()] = 1.0
            qd.simt.block.sync()
            qd.atomic_add(s[0], 2.0)  # a CAS loop on Metal (no float atomics)
            t[0] += 1
            qd.simt.block.mem_fence()
            out[i] = s[0] + qd.atomic_add(t[1], 3) + qd.simt.block.sync_count_nonzero(i)

    msl = qd.compile(k, np.zeros(128, np.float32), arch="metal").msl
    for needle in ("threadgroup_barrier(", "threadgroup atomic_uint", "threadgroup atomic_int",
                   "atomic_compare_exchange_weak_explicit", "atomic_fetch_add_explicit"):
        assert needle in msl, needle


def test_relaxed_shared_atomics_at_workgroup_scope(cpu_program):
    # Only the block sees a shared array: a relaxed atomic on one is at block scope (decide_atomics),
    # which AMDGPU emits as syncscope("workgroup"); an ordered one keeps its scope (its release /
    # acquire orders global memory too), and global atomics stay at agent scope. CUDA: atom.shared.
    @qd.kernel
    def k(out: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        qd.loop_config(block_dim=64)
        for i in range(128):
            s = qd.simt.block.SharedArray((4,), qd.i32)
            f = qd.simt.block.SharedArray((4,), qd.f32)
            qd.simt.block.sync()
            a = qd.atomic_add(s[0], out[i])
            b = qd.atomic_max(s[1], out[i], memory_order=qd.MemoryOrder.Release)
            c = qd.atomic_mul(f[0], 2.0)  # a CAS loop: its compare-exchange at workgroup scope too
            out[i] = a + b + qd.cast(c, qd.i32) + qd.atomic_add(out[(i + 1) % 128], 1)

    a = np.zeros(128, np.int32)
    ir = qd.compile(k, a, arch="amdgpu").llvm_ir
    shared = re.findall(r"(?:atomicrmw|cmpxchg) \w* ?ptr addrspace\(3\).*", ir)
    assert any(re.search(r'atomicrmw add .*syncscope\("workgroup"\) monotonic', x) for x in shared), shared
    assert any(re.search(r'cmpxchg .*syncscope\("workgroup"\) monotonic', x) for x in shared), shared
    assert any(re.search(r'atomicrmw max .*syncscope\("agent"\) release', x) for x in shared), shared
    assert re.search(r'atomicrmw add ptr addrspace\(1\).*syncscope\("agent"\) monotonic', ir), ir
    amdgcn = qd.compile(k, a, arch="amdgpu").amdgcn
    assert re.search(r"\bds_add_rtn_u32\b", amdgcn) and re.search(r"\bds_(?:cmpst|cmpswap)_rtn_b32\b", amdgcn)
    ptx = qd.compile(k, a, arch="cuda").ptx
    assert has(ptx, "atom.shared.add.u32") and has(ptx, "atom.shared.cas.b32"), ptx
    ptxas(ptx, "sm_75")


# ---------------------------------------------------- shared memory size: CUDA dynamic, limits
def _shared_kernel(*sizes):
    """One loop with an f32 SharedArray per size (elements), each written and read by the block."""
    @qd.func
    def use(n: qd.template(), i):
        s = qd.simt.block.SharedArray((n,), qd.f32)
        tid = qd.simt.block.thread_idx()
        for j in range(n // 64):
            s[j * 64 + tid] = qd.cast(i + j, qd.f32)
        qd.simt.block.sync()
        return s[(tid * 37) % n]

    @qd.kernel
    def k(out: qd.types.ndarray(dtype=qd.f32, ndim=1)):
        qd.loop_config(block_dim=64)
        for i in range(128):
            acc = 0.0
            for n in qd.static(sizes):
                acc += use(n, i)
            out[i] = acc

    return k


def test_cuda_shared_arrays_above_48_kib_use_dynamic_shared_memory(cpu_program):
    a = np.zeros(128, np.float32)
    # 48 KiB: static .shared arrays, as before.
    ptx = qd.compile(_shared_kernel(8192, 4096), a, arch="cuda", features=["sm_90"]).ptx
    assert ".extern .shared" not in ptx and re.search(r"\.shared \.align 16 \.b8 shared\d+\[32768\]", ptx), ptx
    # 64 KiB (the reference's test size) and two arrays above 48 KiB together: one .extern .shared
    # region, each array at its offset, sized at launch (CUDA's runtime sets the kernel's
    # MAX_DYNAMIC_SHARED_SIZE_BYTES; tests/cpp/test_gpu_runtime.cpp checks the launch).
    for sizes, sms in (((16384,), ("sm_75", "sm_90")), ((16384, 12288, 4), ("sm_90",))):
        for sm in sms:
            ptx = qd.compile(_shared_kernel(*sizes), a, arch="cuda", features=[sm]).ptx
            assert ".extern .shared .align 16 .b8 qd_dynamic_shared[];" in ptx, ptx
            assert not re.search(r"\.shared \.align \d+ \.b8 shared\d+\[", ptx), ptx
            ptxas(ptx, sm)
    ir = qd.compile(_shared_kernel(16384, 12288, 4), a, arch="cuda", features=["sm_90"]).llvm_ir
    # the arrays at 16-byte aligned offsets in creation order: 0, 65536, 65536 + 49152
    assert sorted(set(re.findall(r"@qd_dynamic_shared, i64 (\d+)", ir))) == ["114688", "65536"], ir


@pytest.mark.parametrize("arch,features,limit", [
    ("cuda", ["sm_75"], 64 * 1024), ("cuda", ["sm_86"], 99 * 1024), ("cuda", ["sm_90"], 227 * 1024),
    ("cuda", ["sm_90", "max_shared_memory_bytes=50000"], 50000),  # a device's own limit wins
    ("amdgpu", None, 64 * 1024), ("metal", None, 32 * 1024), ("vulkan", None, 32 * 1024)])
def test_shared_memory_over_the_limit_is_a_runtime_error(cpu_program, arch, features, limit):
    a = np.zeros(128, np.float32)
    fits = limit // 4 // 64 * 64  # f32 elements, a multiple of the block
    qd.compile(_shared_kernel(fits), a, arch=arch, features=features)  # exactly at (or just under) the limit
    with pytest.raises(RuntimeError) as e:  # the spec's class (simt.md: dynamic size over the device limit)
        qd.compile(_shared_kernel(fits, 64), a, arch=arch, features=features)
    msg = str(e.value)
    assert "kernel 'k'" in msg and f"{fits * 4 + 256} bytes" in msg, msg
    assert re.search(rf"more than the {limit} bytes[^\n]* of shared memory one block can use on {arch}", msg), msg
    assert f"{fits * 4} bytes: SharedArray of f32 at" in msg and "256 bytes: SharedArray of f32 at" in msg, msg


@test_utils.test(arch=RUNS)
def test_shared_memory_limit_of_the_device():
    limit = qd.lang.impl.get_max_shared_memory_bytes(is_lowerbound_ok=True)
    n = limit // 4 // 64 * 64
    out = np.zeros(128, np.float32)
    _shared_kernel(n)(out)  # the whole of the device's shared memory: runs
    i = np.arange(128)
    e = i % 64 * 37 % n  # the element each thread reads: written by thread e % 64 of its block, in round e // 64
    np.testing.assert_array_equal(out, i // 64 * 64 + e % 64 + e // 64)
    with pytest.raises(RuntimeError, match=rf"more than the {limit} bytes"):
        _shared_kernel(n, 64)(out)
