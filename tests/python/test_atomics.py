"""The atomic family on every arch: old values, final memory, targets, dtypes, errors."""
import numpy as np
import pytest

import quadrants as qd
from test_utils import current_arch, test

INT_TYPES = [qd.i32, qd.u32, qd.i64, qd.u64]
FLOAT_TYPES = [qd.f16, qd.f32, qd.f64]
ARITH_OPS = ["add", "sub", "mul", "min", "max", "exchange"]
BIT_OPS = ["and", "or", "xor"]
# Every (op, dtype) the spec defines: bitwise ops on integers only.
OP_DTYPES = [(op, t) for op in ARITH_OPS + BIT_OPS for t in INT_TYPES + FLOAT_TYPES
             if not (op in BIT_OPS and t.is_real)]


def supported(op, dtype):
    """Whether the current arch's support table accepts (op, dtype) on global memory."""
    from quadrants import _core
    from quadrants._lib import runtime
    kind, _ = _core.atomic_lowering(current_arch().name, op, dtype.core, False, runtime.program().runtime.features)
    return kind != "rejected"


def py_apply(op, old, y, dtype):
    """The spec's effect of one op, computed in numpy at the target's dtype."""
    t = dtype.np.type
    old, y = t(old), t(y)
    with np.errstate(over="ignore"):
        return {
            "add": lambda: t(old + y), "sub": lambda: t(old - y), "mul": lambda: t(old * y),
            "min": lambda: t(np.fmin(old, y)), "max": lambda: t(np.fmax(old, y)),
            "and": lambda: t(old & y), "or": lambda: t(old | y), "xor": lambda: t(old ^ y),
            "exchange": lambda: y,
        }[op]()


def _sequence(dtype):
    if dtype.is_real:
        return [1.5, -2.25, 3.0, 0.5, -7.75, 2.0]
    if dtype.is_signed:
        return [5, -3, 12, 7, -40, 9]
    return [5, 3, 12, 7, 40, 9]


@pytest.mark.parametrize("op, dtype", OP_DTYPES, ids=[f"{o}-{t.name}" for o, t in OP_DTYPES])
@test()
def test_old_values_and_final_memory_serial(op, dtype):
    """A serial chain of atomics: every returned old value and the final value, exactly."""
    if not supported(op, dtype):
        pytest.skip(f"{op} on {dtype} is rejected on {current_arch()} (tested in the support-table tests)")
    seq = _sequence(dtype)
    x = qd.field(dtype, shape=())
    vals = qd.field(dtype, shape=len(seq))
    olds = qd.field(dtype, shape=len(seq))
    fn = getattr(qd, f"atomic_{op}")

    @qd.kernel
    def chain():
        qd.loop_config(serialize=True)  # in order, so every old value is known exactly
        for i in range(len(seq)):
            olds[i] = fn(x[None], vals[i])

    start = dtype.np.type(4 if op != "mul" else 1)
    x[None] = start
    vals.from_numpy(np.array(seq, dtype=dtype.np))
    chain()
    expect_old, cur = [], start
    for v in seq:
        expect_old.append(cur)
        cur = py_apply(op, cur, v, dtype)
    np.testing.assert_array_equal(olds.to_numpy(), np.array(expect_old, dtype=dtype.np))
    assert x[None] == cur


@pytest.mark.parametrize("dtype", INT_TYPES, ids=lambda t: t.name)
@test()
def test_cas_serial(dtype):
    if not supported("cas", dtype):
        pytest.skip(f"cas on {dtype} is rejected on {current_arch()}")
    x = qd.field(dtype, shape=())
    olds = qd.field(dtype, shape=4)

    @qd.kernel
    def k():
        olds[0] = qd.atomic_cas(x[None], 3, 10)   # hit: 3 -> 10
        olds[1] = qd.atomic_cas(x[None], 3, 20)   # miss: stays 10
        olds[2] = qd.atomic_cas(x[None], 10, 7)   # hit: 10 -> 7
        olds[3] = x[None]

    x[None] = 3
    k()
    assert list(olds.to_numpy()) == [3, 10, 10, 7]


@pytest.mark.parametrize("op, dtype", OP_DTYPES, ids=[f"{o}-{t.name}" for o, t in OP_DTYPES])
@test()
def test_parallel_against_numpy(op, dtype):
    """Many threads on a few addresses: the final memory equals numpy's reduction."""
    if not supported(op, dtype):
        pytest.skip(f"{op} on {dtype} is not available on {current_arch()}")
    n, bins = 20000, 7
    rng = np.random.default_rng(hash((op, dtype.name)) % 2**32)
    if op == "mul" and dtype.is_real:
        vals = rng.choice([1.0, -1.0], n)
        vals[rng.choice(n, 5 * bins, replace=False)] = 2.0  # products stay exact in any order, even in f16
    elif op == "mul":
        vals = rng.choice([1, 1, 1, 2, 3], n)  # integer products wrap: exact in any order
    elif dtype is qd.f16:
        vals = rng.integers(0, 2, n)  # partial sums stay below 2048: exact in f16 in any order
    elif dtype.is_real:
        vals = rng.integers(-64, 64, n) / 4  # exactly representable: float sums are exact in any order
    elif dtype.is_signed:
        vals = rng.integers(-1000, 1000, n)
    else:
        vals = rng.integers(0, 2000, n)
    vals = vals.astype(dtype.np)
    target = qd.field(dtype, shape=bins)
    olds = qd.field(dtype, shape=n)
    v = qd.field(dtype, shape=n)
    v.from_numpy(vals)
    fn = getattr(qd, f"atomic_{op}")

    @qd.kernel
    def k():
        for i in range(n):
            olds[i] = fn(target[i % bins], v[i])

    init = {"mul": 1, "and": -1 if dtype.is_signed else np.iinfo(dtype.np).max if not dtype.is_real else 0}.get(op, 0)
    target.fill(init)
    k()
    got = target.to_numpy()
    for b in range(bins):
        col = vals[b::bins]
        if op == "exchange":
            # The last writer's value stays; every other value (and the initial one) came back as an old value.
            written = list(col) + [dtype.np.type(init)]
            returned = list(olds.to_numpy()[b::bins]) + [got[b]]
            assert sorted(written) == sorted(returned)
            continue
        ref = dtype.np.type(init)
        for x in col:
            ref = py_apply(op, ref, x, dtype)
        assert got[b] == ref, (b, got[b], ref)


@pytest.mark.parametrize("dtype", [qd.i32, qd.u32, qd.i64, qd.u64], ids=lambda t: t.name)
@test()
def test_counter_reservation_unique_slots(dtype):
    """slot = atomic_add(counter, 1) over 10**6 iterations hands out each of 0..n-1 exactly once."""
    if not supported("add", dtype):
        pytest.skip(f"add on {dtype} is rejected on {current_arch()}")
    n = 10**6
    counter = qd.field(dtype, shape=())
    slots = qd.field(dtype, shape=n)

    @qd.kernel
    def k():
        for i in range(n):
            slots[i] = qd.atomic_add(counter[None], 1)

    k()
    assert counter[None] == n
    np.testing.assert_array_equal(np.sort(slots.to_numpy()), np.arange(n, dtype=dtype.np))


@test()
def test_cas_loop_max_example():
    """The spec's CAS-loop pattern gives the true max under contention."""
    n = 200000
    x = qd.field(qd.i32, shape=())
    cand = qd.field(qd.i32, shape=n)
    data = np.random.default_rng(3).integers(-10**9, 10**9, n).astype(np.int32)
    cand.from_numpy(data)

    @qd.kernel
    def cas_loop_max():
        for i in range(n):
            candidate = cand[i]
            for _attempt in range(1000000):
                cur = x[None]
                new = qd.max(cur, candidate)
                old = qd.atomic_cas(x[None], cur, new)
                if old == cur:
                    break

    x[None] = -2**31
    cas_loop_max()
    assert x[None] == data.max()


@test()
def test_exchange_handoff_loses_no_task():
    """Every task put into a slot with atomic_exchange is taken out exactly once."""
    n, no_task = 100000, -1
    slot = qd.field(qd.i32, shape=())
    taken = qd.field(qd.i32, shape=n + 1)

    @qd.kernel
    def handoff():
        for i in range(n):
            prev = qd.atomic_exchange(slot[None], i)   # put my task, take what was there
            if prev != no_task:
                qd.atomic_add(taken[prev], 1)

    slot[None] = no_task
    handoff()
    counts = taken.to_numpy()[:n]
    counts[slot[None]] += 1  # the task left in the slot at the end
    np.testing.assert_array_equal(counts, np.ones(n, np.int32))


@test(xfail={"vulkan": ("Vulkan guarantees no independent forward progress to the invocations of one subgroup: "
                         "lanes spinning on a lock held by a lane of their own subgroup deadlock (lavapipe runs "
                         "8 lanes in lockstep)", False)})
def test_spin_lock_from_cas_and_exchange():
    """A critical section guarded by a spin lock: a non-atomic read-modify-write loses no update."""
    n = 20000
    lock = qd.field(qd.i32, shape=())
    total = qd.field(qd.i32, shape=())
    total64 = qd.field(qd.i64, shape=())

    @qd.kernel
    def k():
        for i in range(n):
            while qd.atomic_cas(lock[None], 0, 1) != 0:
                pass
            # Protected by the lock: plain loads and stores (the atomic ops order them).
            total[None] = qd.volatile_load(total[None]) + 1
            total64[None] = qd.volatile_load(total64[None]) + i
            qd.atomic_exchange(lock[None], 0)

    k()
    assert total[None] == n and total64[None] == n * (n - 1) // 2 and lock[None] == 0


@test()
def test_float_min_max_nan():
    """minNum / maxNum: one NaN operand -> the other wins; both NaN -> NaN."""
    nan = float("nan")
    x = qd.field(qd.f32, shape=6)
    olds = qd.field(qd.f32, shape=6)

    @qd.kernel
    def k(a: qd.f32, b: qd.f32):
        olds[0] = qd.atomic_min(x[0], b)   # x = NaN, y = 2 -> 2
        olds[1] = qd.atomic_max(x[1], b)   # x = NaN, y = 2 -> 2
        olds[2] = qd.atomic_min(x[2], a)   # x = 1,   y = NaN -> 1
        olds[3] = qd.atomic_max(x[3], a)   # x = 1,   y = NaN -> 1
        olds[4] = qd.atomic_min(x[4], a)   # both NaN -> NaN
        olds[5] = qd.atomic_max(x[5], a)

    x.from_numpy(np.array([nan, nan, 1, 1, nan, nan], np.float32))
    k(nan, 2.0)
    r = x.to_numpy()
    assert list(r[:4]) == [2, 2, 1, 1] and np.isnan(r[4]) and np.isnan(r[5])
    assert np.isnan(olds[0]) and olds[2] == 1


@test()
def test_targets_vector_matrix_ndarray_zero_d():
    v = qd.Vector.field(3, qd.f32, shape=4)
    m = qd.Matrix.field(2, 2, qd.i32, shape=())
    c = qd.field(qd.i32, shape=())
    out = qd.Vector.field(3, qd.f32, shape=())

    @qd.kernel
    def k(a: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        for i in range(100):
            qd.atomic_add(v[i % 4], qd.Vector([1.0, 2.0, 3.0]))   # fan-out per component
            qd.atomic_max(v[i % 4], 0.5)                          # a scalar operand broadcast
            qd.atomic_add(v[i % 4][1], 1.0)                       # one slot of a vector
            qd.atomic_or(m[None][1, 0], 1 << (i % 8))             # one slot of a matrix
            qd.atomic_add(c[None], 1)                             # 0-D field
            qd.atomic_sub(a[i % 3], 2)                            # ndarray element
        out[None] = qd.atomic_exchange(v[0], qd.Vector([9.0, 9.0, 9.0]))  # returns the old vector

    a = np.zeros(3, np.int32)
    k(a)
    np.testing.assert_array_equal(out[None], [25, 75, 75])
    np.testing.assert_array_equal(v.to_numpy(), [[9, 9, 9]] + [[25, 75, 75]] * 3)
    assert m[None][1, 0] == 255 and m[None][0, 0] == 0 and c[None] == 100
    np.testing.assert_array_equal(a, [-68, -66, -66])


@test()
def test_local_atomics_demoted_return_old():
    out = qd.field(qd.i64, shape=6)

    @qd.kernel
    def k():
        x: qd.u16 = 1000
        y: qd.u8 = 250
        out[0] = qd.atomic_sub(x, y)        # u16 -= u8 on a local: returns 1000
        out[1] = x                          # 750
        z = 5
        out[2] = qd.atomic_max(z, 9)        # 5
        out[3] = qd.atomic_cas(z, 9, 1)     # 9 (hit)
        out[4] = z                          # 1
        f = 2.5
        qd.atomic_mul(f, 4.0)
        out[5] = qd.cast(f, qd.i64)         # 10
        for i in range(1):
            w: qd.i8 = 100
            w += 100                        # i8 local wraps: narrow dtypes are fine on locals
            out[5] += w

    k()
    assert list(out.to_numpy()) == [1000, 750, 5, 9, 1, 10 + (-56)]


@test()
def test_non_lvalue_targets_rejected():
    x = qd.field(qd.i32, shape=4)

    @qd.kernel
    def const_target():
        qd.atomic_add(1, 2)

    @qd.kernel
    def expr_target():
        for i in range(4):
            qd.atomic_add(x[i] + 1, 2)

    @qd.kernel
    def whole_field():
        qd.atomic_add(x, 2)

    for kern, what in ((const_target, "a constant"), (expr_target, "an expression"), (whole_field, "a whole field")):
        with pytest.raises(qd.QuadrantsSyntaxError, match=f"writable lvalue.*got {what}"):
            kern()


@pytest.mark.parametrize("op", ["and", "or", "xor", "cas"])
@test()
def test_float_bitwise_and_cas_rejected(op):
    x = qd.field(qd.f32, shape=2)
    fn = getattr(qd, f"atomic_{op}")

    @qd.kernel
    def k():
        if qd.static(op == "cas"):
            fn(x[0], 1.0, 2.0)
        else:
            fn(x[0], 1.0)

    with pytest.raises(qd.QuadrantsTypeError, match=f"atomic_{op} takes integer"):
        k()


@pytest.mark.parametrize("dtype", [qd.i8, qd.i16, qd.u8, qd.u16], ids=lambda t: t.name)
@test()
def test_narrow_int_global_atomics(dtype):
    """Shared by the parallel loop's iterations: a CAS loop on the 32-bit word holding the element
    (tests/python/test_narrow_atomics.py; serial or per-iteration code is a plain read-modify-write,
    tests/python/test_frontend.py)."""
    x = qd.field(dtype, shape=2)

    @qd.kernel
    def k():
        for i in range(4):
            x[0] += 1

    k()
    assert x.to_numpy().tolist() == [4, 0]


@test()
def test_augmented_assignment_atomicity():
    """`+= -= &= |= ^=` on global memory are atomic; `*=` and the rest are plain read-modify-writes."""
    x = qd.field(qd.i32, shape=6)

    @qd.kernel
    def k():
        for i in range(10000):
            x[0] += 1
            x[1] -= 1
            x[2] |= 1 << (i % 31)
            x[3] ^= 1
            x[4] &= ~(1 << (i % 31))

    x[4] = -1
    k()
    got = x.to_numpy()
    assert got[0] == 10000 and got[1] == -10000 and got[2] == 2**31 - 1 and got[3] == 0 and got[4] == -2**31
    ir = qd.compile(k).ir
    assert ir.count("global atomic") == 5

    @qd.kernel
    def plain():
        for i in range(4):
            x[5] *= 2
            x[5] //= 1
    assert "global atomic" not in qd.compile(plain).ir


@test()
def test_kernel_scope_variable_accumulated_in_parallel_loop():
    """A variable defined outside the parallel loop is shared by its iterations: `+=` on it is atomic."""
    n = 100000
    out = qd.field(qd.i32, shape=2)

    @qd.kernel
    def k() -> qd.i32:
        total = 0
        bits = 0
        for i in range(n):
            total += 1
            bits |= 1 << (i % 20)
            local = 0
            local += i           # a per-iteration variable stays a plain operation
        out[0] = total
        out[1] = bits
        return total

    assert k() == n
    assert list(out.to_numpy()) == [n, 2**20 - 1]
    ir = qd.compile(k).ir
    assert "global atomic add" in ir and "global atomic or" in ir


REDUCIBLE = [(op, t) for op, t in OP_DTYPES if op != "exchange"]


@pytest.mark.parametrize("op, dtype", REDUCIBLE, ids=[f"{o}-{t.name}" for o, t in REDUCIBLE])
@test()
def test_one_address_reductions(op, dtype):
    """`fn(total[None], v[i])` with the old value unused: exact against numpy (the LLVM backends
    privatize these per thread; the result must not change)."""
    if not supported(op, dtype):
        pytest.skip(f"{op} on {dtype} is not available on {current_arch()}")
    n = 3000 if dtype is qd.f16 else 30000  # f16 sums stay below 2048: exact in any order
    rng = np.random.default_rng(7)
    if op == "mul":
        vals = rng.choice([1, -1] if dtype.is_signed or dtype.is_real else [1, 3], n).astype(dtype.np)
        vals[rng.choice(n, 12, replace=False)] = 2
    elif dtype is qd.f16:
        vals = rng.integers(0, 2, n).astype(dtype.np)
    else:
        vals = (rng.integers(-64, 64, n) / 4 if dtype.is_real else
                rng.integers(-1000 if dtype.is_signed else 0, 1000, n)).astype(dtype.np)
    total = qd.field(dtype, shape=())
    v = qd.field(dtype, shape=n)
    v.from_numpy(vals)
    fn = getattr(qd, f"atomic_{op}")

    @qd.kernel
    def k():
        for i in range(n):
            fn(total[None], v[i])

    init = {"mul": 1, "and": -1 if dtype.is_signed else np.iinfo(dtype.np).max if not dtype.is_real else 0}.get(op, 0)
    total[None] = init
    k()
    ref = dtype.np.type(init)
    for x in vals:
        ref = py_apply(op, ref, x, dtype)
    assert total[None] == ref


@test(arch=qd.cpu)
def test_reduction_privatization_choices():
    """Which atomics the LLVM backends privatize, read from the IR."""
    n = 1000
    total = qd.field(qd.f32, shape=2)
    hist = qd.field(qd.i32, shape=8)
    olds = qd.field(qd.f32, shape=n)

    @qd.kernel
    def reduce_all(x: qd.types.ndarray(dtype=qd.f32, ndim=1)) -> qd.f32:
        acc = 0.0
        for i in range(x.shape[0]):
            total[0] += x[i]                 # invariant address, old value unused
            qd.atomic_max(total[1], x[i])
            acc += x[i]                      # a kernel-scope variable is a reduction too
        return acc

    @qd.kernel
    def kept(x: qd.types.ndarray(dtype=qd.f32, ndim=1)):
        for i in range(x.shape[0]):
            olds[i] = qd.atomic_add(total[0], x[i])   # the old value is used
            qd.atomic_exchange(total[1], x[i])         # order-dependent
            qd.atomic_add(hist[i % 8], 1)             # a small field updated only by adds: a private copy (cpu)
            if hist[0] < 0:                           # ... unless the loop also reads it
                pass

    x = np.arange(n, dtype=np.float32)
    ir = qd.compile(reduce_all, x).ir
    loop, flush = ir.split("each thread, after its share of the loop:")
    assert "global atomic" not in loop.split("for range")[1] and flush.count("global atomic") == 3
    kept_ir = qd.compile(kept, x).ir
    assert "after its share of the loop" not in kept_ir and "private copy" not in kept_ir
    assert reduce_all(x) == float(x.sum())
    assert total[0] == float(x.sum()) and total[1] == n - 1
    llvm = qd.compile(reduce_all, x).llvm_ir
    assert "atomicrmw fadd" in llvm  # the flush: one atomic per thread and chunk


@test()
def test_privatized_min_keeps_nan_semantics():
    """All-NaN operands leave a NaN in memory as NaN; a NaN operand loses to a number."""
    nan = float("nan")
    x = qd.field(qd.f32, shape=2)
    v = qd.field(qd.f32, shape=64)

    @qd.kernel
    def k():
        for i in range(64):
            qd.atomic_min(x[0], v[i])
            qd.atomic_max(x[1], v[i])

    v.fill(nan)
    x.fill(nan)
    k()
    assert np.isnan(x[0]) and np.isnan(x[1])
    v[5] = 3.0
    k()
    assert x[0] == 3.0 and x[1] == 3.0


@pytest.mark.parametrize("op, dtype", [("add", qd.i32), ("add", qd.f32), ("max", qd.f32), ("min", qd.i64),
                                       ("or", qd.u32), ("mul", qd.i32)], ids=lambda v: getattr(v, "name", v))
@test()
def test_histogram_reductions(op, dtype):
    """A small field updated at data-dependent indices only by one reducible op: exact results
    (the cpu accumulates a private copy per thread and flushes the touched bins)."""
    n, bins = 50000, 37
    rng = np.random.default_rng(11)
    idx = rng.integers(0, bins, n).astype(np.int32)
    vals = (rng.choice([1, 2, 3], n) if op == "mul" else rng.integers(0, 1000, n)).astype(dtype.np)
    hist = qd.field(dtype, shape=bins)
    fn = getattr(qd, f"atomic_{op}")

    @qd.kernel
    def k(ix: qd.types.ndarray(dtype=qd.i32, ndim=1), v: qd.types.ndarray(dtype=dtype, ndim=1)):
        for i in range(ix.shape[0]):
            fn(hist[ix[i]], v[i])

    init = {"mul": 1, "min": 10**6, "max": -1}.get(op, 0)
    hist.fill(init)
    k(idx, vals)
    ref = np.full(bins, init, dtype=dtype.np)
    for i, v in zip(idx, vals):
        ref[i] = py_apply(op, ref[i], v, dtype)
    np.testing.assert_array_equal(hist.to_numpy(), ref)
    if current_arch() is qd.cpu:
        assert "private copy of" in qd.compile(k, idx, vals).ir
