"""Atomics on 8 / 16-bit memory (i8/u8/i16/u16, and f16 where the target has no 16-bit float
atomic): a CAS loop on the aligned 32-bit word holding the element (Lowering::WordCasLoop,
transforms/legalize.cpp). No update is lost, old values are the element's own (sign-extended for
signed dtypes), and the other elements of the word are never clobbered, also when they are updated
at the same time."""
import re

import numpy as np
import pytest

import quadrants as qd
from quadrants import _core
from test_utils import current_arch, test

NARROW_INTS = [qd.i8, qd.u8, qd.i16, qd.u16]
INT_OPS = ["add", "sub", "mul", "min", "max", "and", "or", "xor", "exchange"]
FLOAT_OPS = ["add", "sub", "mul", "min", "max", "exchange"]


def _word_cas(dtype):
    """Whether the current arch's support table makes (add, dtype) on global memory a word CAS loop."""
    from quadrants._lib import runtime
    kind, _ = _core.atomic_lowering(current_arch().name, "add", dtype.core, False, runtime.program().runtime.features)
    return kind == "word_cas"


def _cases():
    cases = [(op, t) for t in NARROW_INTS for op in INT_OPS]
    return cases + [(op, qd.f16) for op in FLOAT_OPS]


CASES = _cases()
CASE_IDS = [f"{o}-{t.name}" for o, t in CASES]


def _apply(op, old, y, dtype):
    t = dtype.np.type
    old, y = t(old), t(y)
    with np.errstate(over="ignore"):
        return {
            "add": lambda: t(old + y), "sub": lambda: t(old - y), "mul": lambda: t(old * y),
            "min": lambda: t(np.fmin(old, y)), "max": lambda: t(np.fmax(old, y)),
            "and": lambda: t(old & y), "or": lambda: t(old | y), "xor": lambda: t(old ^ y),
            "exchange": lambda: y,
        }[op]()


def _sentinels(dtype, n):
    """Distinct values, none 0 or -1, for the elements an update must not touch."""
    if dtype.is_real:
        return np.array([-3.5 - k for k in range(n)], dtype.np)
    return np.array([(0x5A + 37 * k) % 120 + 1 for k in range(n)], dtype.np)


@pytest.mark.parametrize("dtype", NARROW_INTS + [qd.f16], ids=lambda t: t.name)
@test()
def test_contended_counters_lose_nothing(dtype):
    """Every lane of several words counted up by all threads at once (10^5 updates per lane): each
    lane ends at its count (modulo the dtype), so no lane's update overwrote another's."""
    if not _word_cas(dtype):
        pytest.skip(f"{dtype} atomics are native on {current_arch()}")
    lanes, n = 8, 100_000
    x = qd.field(dtype, shape=lanes)
    step = qd.field(dtype, shape=lanes)  # a distinct increment per lane: a lane mixed up with another shows
    incs = np.array([1, 2, 3, 5, 1, 2, 3, 5], dtype.np) if dtype.is_real else np.array(
        [1, 2, 3, 5, 7, 11, 13, 17], dtype.np)
    step.from_numpy(incs)

    @qd.kernel
    def k(total: qd.i32):
        for i in range(total):
            x[i % 8] += step[i % 8]

    k(lanes * n)
    if dtype.is_real:  # f16 counts saturate where the spacing exceeds twice the step: count in f16
        want = []
        for inc in incs:
            v = np.float16(0)
            while True:
                nxt = np.float16(v + inc)
                if nxt == v:
                    break
                v = nxt
            want.append(v)
        np.testing.assert_array_equal(x.to_numpy(), np.array(want, np.float16))
    else:
        want = (incs.astype(np.int64) * n) % (1 << dtype.bits)
        np.testing.assert_array_equal(x.to_numpy(), want.astype(dtype.np))


@test()
def test_contended_u16_old_values_are_a_permutation():
    """add 1 on 8 u16 counters (4 words) from every thread: the old values each counter returned are
    exactly 0 .. n-1, each once."""
    if not _word_cas(qd.u16):
        pytest.skip(f"u16 atomics are native on {current_arch()}")
    n = 60000
    x = qd.field(qd.u16, shape=9)
    olds = qd.field(qd.u16, shape=8 * n)

    @qd.kernel
    def k():
        for i in range(8 * n):
            olds[i] = qd.atomic_add(x[i % 8], 1)

    x[8] = 4321
    k()
    assert x.to_numpy().tolist() == [n] * 8 + [4321]
    o = olds.to_numpy().reshape(n, 8)
    for j in range(8):
        np.testing.assert_array_equal(np.sort(o[:, j]), np.arange(n, dtype=np.uint16))


@pytest.mark.parametrize("op, dtype", CASES, ids=CASE_IDS)
@test()
def test_parallel_ops_exact_and_neighbours_untouched(op, dtype):
    """Many threads apply `op` to the even elements of an odd-length array (so the last element's
    word runs past the array's end); the odd elements, in the same words, keep their values."""
    if not _word_cas(dtype):
        pytest.skip(f"{dtype} atomics are native on {current_arch()}")
    size, n = 9, 6000
    targets = list(range(0, size, 2))
    rng = np.random.default_rng(hash((op, dtype.name)) % 2**32)
    if op == "mul":
        vals = rng.choice([1, 1, 3, -1] if dtype.is_signed else [1, 1, 3], n)  # products wrap: exact in any order
        if dtype.is_real:
            vals = rng.choice([1.0, -1.0], n)
            vals[rng.choice(n, 8, replace=False)] = 2.0
    elif dtype.is_real:
        vals = rng.integers(0, 2, n) if op in ("add", "sub") else rng.integers(-64, 64, n) / 4
    elif op in ("and", "or", "xor"):
        vals = rng.integers(0, 2 ** dtype.bits, n).astype(np.int64)
    else:
        lo = -(2 ** (dtype.bits - 1)) if dtype.is_signed else 0
        vals = rng.integers(lo, lo + 2 ** dtype.bits, n)
    vals = vals.astype(dtype.np)
    x = qd.field(dtype, shape=size)
    v = qd.field(dtype, shape=n)
    v.from_numpy(vals)
    fn = getattr(qd, f"atomic_{op}")

    @qd.kernel
    def k():
        for i in range(n):
            fn(x[i % 5 * 2], v[i])

    start = _sentinels(dtype, size)
    init = {"mul": 1, "and": -1 if dtype.is_signed else 2 ** dtype.bits - 1}.get(op, 3)
    start[targets] = init
    x.from_numpy(start)
    k()
    got = x.to_numpy()
    want = start.copy()
    for j, t in enumerate(targets):
        if op == "exchange":
            continue
        acc = dtype.np.type(init)
        for y in vals[j::5]:
            acc = _apply(op, acc, y, dtype)
        want[t] = acc
    if op == "exchange":  # the last writer of each element wins: one of its operands
        for j, t in enumerate(targets):
            assert got[t] in vals[j::5], (t, got[t])
        want[targets] = got[targets]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("op, dtype", CASES, ids=CASE_IDS)
@test()
def test_serial_old_values(op, dtype):
    """A chain of atomics on the element in every lane position: each returned old value exactly,
    widened to i32 / f32 with its sign."""
    if not _word_cas(dtype):
        pytest.skip(f"{dtype} atomics are native on {current_arch()}")
    seq = [1.5, -2.25, 3.0, 0.5, -7.75, 2.0] if dtype.is_real else \
        [5, -3, 100, 7, -128, 9] if dtype.is_signed else [5, 3, 200, 7, 255, 9]
    wide = qd.f32 if dtype.is_real else qd.i32
    lanes = 32 // dtype.bits
    x = qd.field(dtype, shape=lanes + 1)
    vals = qd.field(dtype, shape=len(seq))
    olds = qd.field(wide, shape=(lanes, len(seq)))
    fn = getattr(qd, f"atomic_{op}")

    @qd.kernel
    def chain():
        for j in range(lanes):  # one lane per thread, each in order
            for i in range(len(seq)):
                olds[j, i] = qd.cast(fn(x[j], vals[i]), wide)

    start = dtype.np.type(-4 if dtype.is_signed and op != "mul" else 4 if op != "mul" else 1)
    neighbour = _sentinels(dtype, 1)[0]
    x.from_numpy(np.array([start] * lanes + [neighbour], dtype.np))
    vals.from_numpy(np.array(seq, dtype=dtype.np))
    chain()
    expect_old, cur = [], start
    for y in seq:
        expect_old.append(cur)
        cur = _apply(op, cur, dtype.np.type(y), dtype)
    for j in range(lanes):
        np.testing.assert_array_equal(olds.to_numpy()[j], np.array(expect_old, dtype.np).astype(wide.np))
    assert x.to_numpy().tolist() == [cur] * lanes + [neighbour]


@pytest.mark.parametrize("dtype", NARROW_INTS, ids=lambda t: t.name)
@test()
def test_cas(dtype):
    """atomic_cas hits and misses, and a CAS increment loop on every lane under contention."""
    x = qd.field(dtype, shape=5)
    olds = qd.field(qd.i32, shape=4)
    last = -7 if dtype.is_signed else 77

    @qd.kernel
    def serial():
        olds[0] = qd.atomic_cas(x[1], 3, 10)   # hit: 3 -> 10
        olds[1] = qd.atomic_cas(x[1], 3, 20)   # miss: stays 10
        olds[2] = qd.atomic_cas(x[1], 10, last)
        olds[3] = x[1]

    x.from_numpy(np.array([1, 3, 2, 9, 8], dtype.np))
    serial()
    assert olds.to_numpy().tolist() == [3, 10, 10, last]
    assert x.to_numpy().tolist() == [1, last, 2, 9, 8]

    n = 4000

    @qd.kernel
    def spin():
        for i in range(n):
            j = i % 4
            old = x[j]
            while True:  # an increment by hand: retry until the compare-exchange succeeds
                seen = qd.atomic_cas(x[j], old, old + 1)
                if seen == old:
                    break
                old = seen

    x.from_numpy(np.zeros(5, dtype.np))
    spin()
    assert x.to_numpy().tolist() == [np.array(n // 4).astype(dtype.np).item()] * 4 + [0]


@pytest.mark.parametrize("dtype", [qd.u8, qd.u16], ids=lambda t: t.name)
@test()
def test_inc_dec(dtype):
    x = qd.field(dtype, shape=3)
    olds = qd.field(qd.i32, shape=8)

    @qd.kernel
    def k():
        for i in range(4):
            olds[i] = qd.atomic_inc(x[0], 2)      # 0 1 2 0
            olds[4 + i] = qd.atomic_dec(x[1], 2)  # 0 2 1 0

    x[2] = 99
    k()
    assert olds.to_numpy().tolist() == [0, 1, 2, 0, 0, 2, 1, 0]
    assert x.to_numpy().tolist() == [1, 2, 99]

    @qd.kernel
    def many():
        for i in range(3000):
            qd.atomic_inc(x[0], 9)

    x.from_numpy(np.array([0, 0, 99], dtype.np))
    many()
    assert x.to_numpy().tolist() == [3000 % 10, 0, 99]


@pytest.mark.parametrize("dtype", [qd.u8, qd.i16], ids=lambda t: t.name)
@test()
def test_ndarrays_2d_and_odd_length(dtype):
    """The word of an element of a 2-D ndarray (its row length is a launch argument) and of a 3-D
    field, and a 1-D numpy array of odd length; on the cpu also a numpy view that does not start on
    a 4-byte boundary (staged, as the word index assumes an aligned start)."""
    rows, cols, n = 3, 5, 20000

    @qd.kernel
    def k2(a: qd.types.ndarray(dtype=dtype, ndim=2)):
        for i in range(n):
            a[i % 3, i % 5] += 1

    a = np.zeros((rows, cols), dtype.np)
    k2(a)
    want = np.zeros((rows, cols), np.int64)
    for i in range(n):
        want[i % 3, i % 5] += 1
    np.testing.assert_array_equal(a, (want % (1 << dtype.bits)).astype(dtype.np))

    f = qd.field(dtype, shape=(2, 3, 3))

    @qd.kernel
    def k3():
        for i in range(n):
            f[i % 2, i % 3, (i // 6) % 3] += 1

    k3()
    want = np.zeros((2, 3, 3), np.int64)
    for i in range(n):
        want[i % 2, i % 3, (i // 6) % 3] += 1
    np.testing.assert_array_equal(f.to_numpy(), (want % (1 << dtype.bits)).astype(dtype.np))

    @qd.kernel
    def k1(a: qd.types.ndarray(dtype=dtype, ndim=1)):
        for i in range(n):
            a[i % a.shape[0]] += 1

    base = np.full(8, 50, dtype.np)
    for start, stop in ((0, 7), (1, 6)):  # odd lengths; base[1:] starts off a word boundary
        want = base.astype(np.int64)
        k1(base[start:stop])
        want[start:stop] += np.bincount(np.arange(n) % (stop - start), minlength=stop - start)
        np.testing.assert_array_equal(base, (want % (1 << dtype.bits)).astype(dtype.np))


@test()
def test_kernel_scope_narrow_variable():
    """A u8 kernel-scope variable updated by every iteration: the 8-byte slot's first word."""
    @qd.kernel
    def k() -> qd.i32:
        total = qd.cast(0, qd.u8)
        other = qd.cast(0, qd.i16)
        for i in range(1000):
            total += 1
            other -= 3
        return qd.cast(total, qd.i32) * 100000 + qd.cast(other, qd.i32)

    assert k() == (1000 % 256) * 100000 - 3000


@pytest.mark.parametrize("dtype", [qd.u8, qd.i16], ids=lambda t: t.name)
@test(arch=qd.cpu)
def test_lowering_is_a_cas_loop_on_the_word_cpu(dtype):
    """The optimised LLVM IR: compare-exchanges on i32 only, no narrow atomic instruction."""
    x = qd.field(dtype, shape=8)
    o = qd.field(dtype, shape=64)

    @qd.kernel
    def k():
        for i in range(64):
            o[i] = qd.atomic_add(x[i % 8], 1)

    qir = qd.compile(k, arch=qd.cpu).ir  # after legalization: a loop around a compare-exchange of the word
    word = re.search(r"\$(\d+) : u32 = global ptr field \S+ word\[", qir)
    assert word and re.search(rf"while true:\n(.*\n)*? +\$\d+ : u32 = global atomic cas \${word[1]}, ", qir), qir
    assert not re.search(rf": {dtype.name} = global atomic", qir), qir
    ir = qd.compile(k, arch=qd.cpu).llvm_ir
    assert re.search(r"cmpxchg ptr %\S+, i32 %\S+, i32 %\S+ monotonic monotonic, align 4", ir), ir
    assert "atomicrmw" not in ir and not re.search(r"cmpxchg ptr %\S+, i(8|16) ", ir), ir
    assert re.search(r"%(\S+) = extractvalue \{ i32, i1 \} %\S+, 1\n\s+br i1 %\1,", ir), ir  # the retry


@test(arch=qd.cpu)
def test_lowering_is_a_cas_loop_on_the_word_gpus_and_spirv():
    """PTX: 32-bit compare-exchanges on global and shared memory; AMDGPU: i32 cmpxchg; SPIR-V: an
    OpAtomicCompareExchange on a uint view of the u8 field in a loop (shared: widened words)."""
    x = qd.field(qd.u8, shape=8)
    o = qd.field(qd.u8, shape=64)

    @qd.kernel
    def k():
        qd.loop_config(block_dim=64)
        for i in range(64):
            s = qd.simt.block.SharedArray((5,), qd.u8)
            qd.atomic_max(s[i % 5], qd.cast(i, qd.u8))
            o[i] = qd.atomic_add(x[i % 8], 1)

    ptx = qd.compile(k, arch="cuda").ptx
    atoms = [ln.split()[0] for ln in ptx.splitlines() if "atom." in ln]
    assert atoms and set(atoms) == {"atom.global.cas.b32", "atom.shared.cas.b32"}, atoms
    amd = qd.compile(k, arch="amdgpu").llvm_ir
    assert re.search(r"cmpxchg ptr addrspace\(1\) %\S+, i32 ", amd) and "atomicrmw" not in amd, amd
    assert re.search(r"cmpxchg ptr addrspace\(3\) %\S+, i32 ", amd), amd
    asm = qd.compile(k, arch="vulkan").spirv_asm
    atomic_lines = [ln for ln in asm.splitlines() if "OpAtomic" in ln]
    assert atomic_lines and all("OpAtomicCompareExchange %uint " in ln for ln in atomic_lines), atomic_lines
    assert "OpLoopMerge" in asm


@test()
def test_narrow_atomic_load_store_rejected():
    x = qd.field(qd.u8, shape=2)

    @qd.kernel
    def k() -> qd.i32:
        return qd.cast(qd.atomic_load(x[0]), qd.i32)

    with pytest.raises(qd.QuadrantsTypeError, match="u8 has no atomic loads and stores; use i32/u32"):
        k()


@test(arch=qd.cpu)
def test_metal_rejects_narrow_atomics_clearly():
    x = qd.field(qd.u8, shape=8)

    @qd.kernel
    def k():
        for i in range(64):
            x[i % 8] += 1

    with pytest.raises(qd.QuadrantsTypeError, match="not supported on Metal yet") as info:
        qd.compile(k, arch="metal")
    assert "x[i % 8] += 1" in str(info.value)


@test(arch=qd.cpu)
def test_bool_atomics_rejected():
    x = qd.field(qd.u1, shape=2)

    @qd.kernel
    def k():
        for i in range(4):
            qd.atomic_or(x[0], 1)

    with pytest.raises(qd.QuadrantsTypeError, match="atomics on memory take integers and floats") as info:
        k()
    assert "qd.atomic_or(x[0], 1)" in str(info.value)


@pytest.mark.parametrize("op", ["add", "max", "or"])
@pytest.mark.parametrize("dtype", [qd.u8, qd.i16], ids=lambda t: t.name)
@test()
def test_one_address_reductions(op, dtype):
    """`fn(total[None], v[i])` with the old value unused (the LLVM backends accumulate per thread and
    flush with one word CAS loop each), next to a neighbour in the same word."""
    n = 30000
    rng = np.random.default_rng(5)
    vals = rng.integers(0, 100, n).astype(dtype.np)
    total = qd.field(dtype, shape=2)
    v = qd.field(dtype, shape=n)
    v.from_numpy(vals)
    fn = getattr(qd, f"atomic_{op}")

    @qd.kernel
    def k():
        for i in range(n):
            fn(total[0], v[i])

    total.from_numpy(np.array([0, 77], dtype.np))
    k()
    want = {"add": vals.astype(np.int64).sum() % (1 << dtype.bits), "max": vals.max(),
            "or": np.bitwise_or.reduce(vals)}[op]
    assert total.to_numpy().tolist() == [np.array(want).astype(dtype.np).item(), 77]


@test()
def test_scattered_updates_of_a_large_u8_field():
    """Data-dependent indices into 2^17 u8 bins (the cpu partitions such scatters over threads;
    elsewhere each is a word CAS loop)."""
    bins, n = 1 << 17, 400_000
    idx = np.random.default_rng(9).integers(0, bins, n).astype(np.int32)
    h = qd.field(qd.u8, shape=bins)

    @qd.kernel
    def k(idx: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        for i in range(idx.shape[0]):
            qd.atomic_add(h[idx[i]], 1)

    k(idx)
    np.testing.assert_array_equal(h.to_numpy(), (np.bincount(idx, minlength=bins) % 256).astype(np.uint8))


@test()
def test_ordered_word_cas_loop():
    """An AcqRel u16 ticket counter publishing u32 slots: the fences around the word loop order them."""
    n = 4000
    tickets = qd.field(qd.u16, shape=2)
    slots = qd.field(qd.i32, shape=n)

    @qd.kernel
    def k():
        for i in range(n):
            t = qd.atomic_add(tickets[1], 1, memory_order=qd.MemoryOrder.AcqRel)
            slots[qd.cast(t, qd.i32)] = i + 1

    tickets[0] = 999
    k()
    assert tickets.to_numpy().tolist() == [999, n]
    np.testing.assert_array_equal(np.sort(slots.to_numpy()), np.arange(1, n + 1))
    if current_arch() is qd.cpu:
        ir = qd.compile(k, arch=qd.cpu).llvm_ir
        assert "fence release" in ir and "fence acquire" in ir and "cmpxchg" in ir


@pytest.mark.parametrize("dtype", NARROW_INTS + [qd.f16], ids=lambda t: t.name)
@test(arch=[qd.vulkan, qd.cuda, qd.amdgpu])
def test_block_shared_arrays(dtype):
    """Atomics on a block-shared array of a narrow dtype (SPIR-V: a word per element; CUDA / AMDGPU:
    word CAS loops as in global memory): per-block counters with every old value, a max, a CAS
    and an exchange in neighbouring elements, each block on its own copy."""
    blocks, threads = 4, 64

    @qd.kernel
    def k(out: qd.types.ndarray(dtype=dtype, ndim=1), old: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        qd.loop_config(block_dim=threads)
        for i in range(blocks * threads):
            s = qd.simt.block.SharedArray((7,), dtype)
            t = qd.simt.block.thread_idx()
            if t < 7:
                s[t] = 0
            qd.simt.block.sync()
            old[i] = qd.cast(qd.atomic_add(s[t % 4], 1), qd.i32)
            qd.atomic_max(s[4], qd.cast(t, dtype))
            if t == 5:
                if qd.static(dtype.is_real):  # no float CAS: the same effect by exchange
                    qd.atomic_exchange(s[5], 9)
                else:
                    qd.atomic_cas(s[5], 0, 9)
            if t == 6:
                qd.atomic_exchange(s[6], 3)
            qd.simt.block.sync()
            if t < 7:
                out[i // threads * 7 + t] = s[t]

    out = np.zeros(blocks * 7, dtype.np)
    old = np.zeros(blocks * threads, np.int32)
    k(out, old)
    np.testing.assert_array_equal(out.reshape(blocks, 7), np.array([[16, 16, 16, 16, 63, 9, 3]] * blocks, dtype.np))
    o = old.reshape(blocks, threads // 4, 4)
    for b in range(blocks):
        for j in range(4):
            np.testing.assert_array_equal(np.sort(o[b, :, j]), np.arange(threads // 4))
