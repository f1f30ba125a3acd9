"""qd.simt.block: the threads of one block (qd.loop_config(block_dim=N) threads of the parallel
loop) sharing memory and waiting for each other. See docs/simt.md."""
import warnings
from typing import TYPE_CHECKING, Any

import numpy as np

from quadrants import types as T
from quadrants._lib import runtime
from quadrants.lang.simt import reductions as R
from quadrants.lang.simt import subgroup
from quadrants.lang.ops import builtin
from quadrants.lang.simt._common import gpu_context, in_parallel_loop


def _block_op(name):
    return gpu_context(f"qd.simt.block.{name}", f"qd.block.{name}")


@builtin
def sync():
    """Waits until every thread of the block gets here; the block's memory writes before it are
    visible to the block after it. Every thread of the block must reach it."""
    ctx = _block_op("sync")
    in_parallel_loop(ctx, "qd.simt.block.sync()")
    ctx.b.simt("block.sync")


@builtin
def mem_fence():
    """A block-scope memory fence (no waiting): legal in divergent code."""
    ctx = _block_op("mem_fence")
    ctx.b.simt("block.mem_fence")


@builtin
def mem_sync():
    """Deprecated spelling of qd.simt.block.mem_fence()."""
    warnings.warn("qd.simt.block.mem_sync() is deprecated; use qd.simt.block.mem_fence() instead.",
                  DeprecationWarning, stacklevel=2)
    return globals()["mem_fence"]()


@builtin
def thread_idx():
    """This thread's index in its block (i32, 0 .. block_dim - 1)."""
    ctx = _block_op("thread_idx")
    return ctx.expr(ctx.b.simt("block.thread_idx"))


@builtin
def global_thread_idx():
    """block index * block_dim + thread_idx() (i32)."""
    ctx = _block_op("global_thread_idx")
    return ctx.expr(ctx.b.simt("block.global_thread_idx"))


def _vote(name, predicate, combine):
    # One fresh shared counter: thread 0 zeroes it, every thread adds its vote (unconditionally:
    # no divergent atomics), and all read the total after a second barrier.
    ctx = _block_op(name)
    in_parallel_loop(ctx, f"qd.simt.block.{name}()")
    counter = SharedArray((1,), T.i32)
    slot = ctx.element(counter, [0])
    first = ctx.b.begin_if(ctx.binary("eq", thread_idx(), 0).stmt)
    ctx.store(slot, 0)
    ctx.b.end_if(first)
    ctx.b.simt("block.sync")
    vote = ctx.binary("eq" if name == "sync_all_nonzero" else "ne", predicate, 0)
    ctx.atomic("add", slot, ctx.cast(vote, T.i32))
    ctx.b.simt("block.sync")
    return combine(ctx, ctx.rvalue(slot))


@builtin
def sync_all_nonzero(predicate):
    """sync(), and 1 (i32) if `predicate` is nonzero on every thread of the block, else 0."""
    return _vote("sync_all_nonzero", predicate, lambda ctx, n: ctx.binary("sub", 1, ctx.binary("min", n, 1)))


@builtin
def sync_any_nonzero(predicate):
    """sync(), and 1 (i32) if `predicate` is nonzero on some thread of the block, else 0."""
    return _vote("sync_any_nonzero", predicate, lambda ctx, n: ctx.binary("min", n, 1))


@builtin
def sync_count_nonzero(predicate):
    """sync(), and the number (i32) of threads of the block whose `predicate` is nonzero."""
    return _vote("sync_count_nonzero", predicate, lambda ctx, n: n)


def _element_type(dtype, ctx):
    """(scalar dtype, element shape) of a SharedArray dtype: a scalar, qd.types.vector/matrix or
    qd.math.vecN."""
    if isinstance(dtype, T.DataType):
        return dtype, ()
    if isinstance(dtype, (T.VectorType, T.MatrixType)):
        scalar = {float: ctx.config.default_fp, int: ctx.config.default_ip}.get(dtype.dtype, dtype.dtype)
        return scalar, dtype.shape
    raise TypeError(f"SharedArray: dtype must be a Quadrants dtype (qd.f32, qd.types.vector(3, qd.f32), "
                    f"qd.math.vec3, ...), got {dtype!r}")


class SharedArray:
    """SharedArray(shape, dtype): an array in the block's shared memory, one per block and per
    allocation site, shared by the block's threads, not zeroed, gone when the block ends. `shape`
    is a Python int or a tuple of ints known at compile time."""

    _qd_builtin = True

    def __init__(self, shape, dtype):
        ctx = _block_op("SharedArray")
        in_parallel_loop(ctx, "qd.simt.block.SharedArray(...)")
        if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
            shape = (int(shape),)
        if not isinstance(shape, (tuple, list)) or not shape or \
                not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) for d in shape):
            raise ValueError(f"SharedArray: shape must be a Python int or a tuple/list of Python ints known at "
                             f"compile time, got {shape!r}")
        if any(int(d) <= 0 for d in shape):
            raise ValueError(f"SharedArray: every dimension must be positive, got {tuple(shape)}")
        self.shape = tuple(int(d) for d in shape)
        self.dtype, self.element_shape = _element_type(dtype, ctx)
        self.name = f"shared{len(ctx.shared_arrays)}"
        ctx.shared_arrays.append(self)
        self.buffer = ctx.b.add_shared(self.dtype.core, list(self.shape + self.element_shape), self.name)

    def __repr__(self):
        return f"SharedArray({self.shape}, {self.dtype!r})"

    if TYPE_CHECKING:  # element access is compiled by the kernel front end; these are for type checkers
        def __getitem__(self, index: Any) -> Any: ...
        def __setitem__(self, index: Any, value: Any) -> None: ...


def _on_cpu(ctx):
    return ctx.arch is runtime.cpu


# ------------------------------------------------------------------------------------ collectives
# Built from the subgroup primitives: a shuffle tree / scan per subgroup, one slot per subgroup in a
# fresh SharedArray, one sync(), a serial fold; with one subgroup per block no shared memory at all.
# A closing sync() lets the same call site run again (in a loop) without racing on its slots.
def _collective(name, what, value, block_dim, dtype):
    ctx = _block_op(name)
    in_parallel_loop(ctx, f"qd.simt.block.{name}()")
    g = subgroup.group_size()
    assert isinstance(block_dim, int) and block_dim > 0 and g > 0 and block_dim % g == 0, \
        f"block.{what}: block_dim must be a positive multiple of qd.simt.subgroup.group_size() = {g}, got {block_dim!r}"
    if not isinstance(dtype, T.DataType):
        raise TypeError(f"block.{what}: dtype must be a scalar Quadrants dtype, got {dtype!r}")
    v = ctx.cast(ctx.scalar(value), dtype)
    tid = thread_idx()
    log2g = subgroup.log2_group_size()
    return ctx, v, g, log2g, block_dim // g, ctx.binary("shr", tid, log2g), ctx.binary("bit_and", tid, g - 1)


def _cpu_fold(ctx, op, v, dtype, reduction):
    """cpu (docs/backends.md, blocks on the cpu): the block's threads run a region one after
    another, so they fold their values in thread order into one shared slot, op(lower, higher) as
    the spec orders it. Returns (op(v0..v(tid-1)) or garbage on thread 0, op(v0..v(tid)), the slot).
    A sum of floats may be reassociated (the spec leaves its order open): LLVM vectorizes it."""
    slot = SharedArray((1,), dtype)
    el = ctx.element(slot, [0])
    named = isinstance(op, str)
    if reduction and named:  # thread 0 starts the slot at the identity: a plain loop LLVM vectorizes
        first = ctx.b.begin_if(ctx.binary("eq", thread_idx(), 0).stmt)
        ctx.store(el, ctx.cast(ctx.scalar(R.identity(op, dtype), dtype), dtype))
        ctx.b.end_if(first)
        ctx.b.simt("block.sync", [])
    prev = ctx.rvalue(el)
    if named:
        acc = ctx.binary(op, prev, v)
        if reduction and op == "add" and dtype.is_real:
            ctx.b.mark_reassoc(acc.stmt)
        acc = ctx.cast(acc, dtype) if acc.dtype is not dtype else acc
    else:
        acc = R.apply(ctx, op, prev, v)
    if not (reduction and named):  # thread 0's value starts the fold
        acc = R.select(ctx, ctx.binary("eq", thread_idx(), 0), v, acc)
    ctx.store(el, acc)
    return prev, acc, el


def _stage(ctx, slots, writer_lane, lane, w, v):
    s = ctx.b.begin_if(ctx.binary("eq", lane, writer_lane).stmt)
    ctx.store(ctx.element(slots, [w]), v)
    ctx.b.end_if(s)
    ctx.b.simt("block.sync", [])


def _fold(ctx, slots, op, n, w=None):
    """op over slots[0 .. n-1] in order; with `w`, over slots[0 .. w-1] (w >= 1)."""
    acc = ctx.rvalue(ctx.element(slots, [0]))
    for k in range(1, n):
        nxt = R.apply(ctx, op, acc, ctx.rvalue(ctx.element(slots, [k])))
        acc = nxt if w is None else R.select(ctx, ctx.binary("lt", k, w), nxt, acc)
    return acc


def _cpu_total(ctx, op, v, dtype):
    """cpu: op over the whole block's values, read by every thread once all have folded theirs."""
    _, _, el = _cpu_fold(ctx, op, v, dtype, True)
    ctx.b.simt("block.sync", [])
    return ctx.rvalue(el)


@builtin
def reduce(value, block_dim, op, dtype):
    """op over the block's values (op(lower, higher), associative), on thread 0; the other threads
    get partial values. Every thread of the block must call it."""
    ctx, v, g, log2g, nsub, w, lane = _collective("reduce", "reduce", value, block_dim, dtype)
    if _on_cpu(ctx):  # every thread gets the total
        return _cpu_total(ctx, op, v, dtype)
    v = R.reduce_tiled(ctx, v, op, log2g)
    if nsub == 1:
        return v
    slots = SharedArray((nsub,), dtype)
    _stage(ctx, slots, 0, lane, w, v)
    result = ctx.new_var(v)
    s = ctx.b.begin_if(ctx.binary("eq", thread_idx(), 0).stmt)
    ctx.store(result, _fold(ctx, slots, op, nsub))
    ctx.b.end_if(s)
    ctx.b.simt("block.sync", [])
    return ctx.rvalue(result)


@builtin
def reduce_all(value, block_dim, op, dtype):
    """op over the block's values, on every thread."""
    ctx, v, g, log2g, nsub, w, lane = _collective("reduce_all", "reduce", value, block_dim, dtype)
    if _on_cpu(ctx):
        return _cpu_total(ctx, op, v, dtype)
    v = R.reduce_all_tiled(ctx, v, op, log2g)
    if nsub == 1:
        return v
    slots = SharedArray((nsub,), dtype)
    _stage(ctx, slots, 0, lane, w, v)
    r = _fold(ctx, slots, op, nsub)
    ctx.b.simt("block.sync", [])
    return r


@builtin
def inclusive_scan(value, block_dim, op, dtype):
    """Thread t: op(v0, ..., vt)."""
    ctx, v, g, log2g, nsub, w, lane = _collective("inclusive_scan", "inclusive_scan", value, block_dim, dtype)
    if _on_cpu(ctx):
        _, acc, _ = _cpu_fold(ctx, op, v, dtype, False)
        r = ctx.new_var(acc)
        ctx.b.simt("block.sync", [])  # the slot is free again (a call in a loop)
        return ctx.rvalue(r)
    inc = R.inclusive_scan_tiled(ctx, v, op, log2g)
    if nsub == 1:
        return inc
    slots = SharedArray((nsub,), dtype)
    _stage(ctx, slots, g - 1, lane, w, inc)
    prefix = _fold(ctx, slots, op, nsub - 1, w)
    r = R.select(ctx, ctx.binary("gt", w, 0), R.apply(ctx, op, prefix, inc), inc)
    ctx.b.simt("block.sync", [])
    return r


@builtin
def exclusive_scan(value, block_dim, op, identity, dtype):
    """Thread t: op(v0, ..., v(t-1)); thread 0: identity."""
    ctx, v, g, log2g, nsub, w, lane = _collective("exclusive_scan", "exclusive_scan", value, block_dim, dtype)
    ident = ctx.cast(ctx.scalar(identity, dtype), dtype)
    if _on_cpu(ctx):
        prev, _, _ = _cpu_fold(ctx, op, v, dtype, False)
        r = ctx.new_var(R.select(ctx, ctx.binary("eq", thread_idx(), 0), ident, prev))
        ctx.b.simt("block.sync", [])
        return ctx.rvalue(r)
    inc = R.inclusive_scan_tiled(ctx, v, op, log2g)
    exc = R.select(ctx, ctx.binary("eq", lane, 0), ident, R.shuffle(ctx, "shuffle_up", inc, 1))
    if nsub == 1:
        return exc
    slots = SharedArray((nsub,), dtype)
    _stage(ctx, slots, g - 1, lane, w, inc)
    prefix = _fold(ctx, slots, op, nsub - 1, w)
    within = R.select(ctx, ctx.binary("eq", lane, 0), prefix, R.apply(ctx, op, prefix, exc))
    r = R.select(ctx, ctx.binary("gt", w, 0), within, exc)
    ctx.b.simt("block.sync", [])
    return r


def _named(kind, opname):
    def f(value, block_dim, dtype):
        if kind == "exclusive":
            return exclusive_scan(value, block_dim, opname, R.identity(opname, dtype), dtype)
        return {"reduce": reduce, "reduce_all": reduce_all, "inclusive": inclusive_scan}[kind](
            value, block_dim, opname, dtype)

    f._qd_builtin = True
    f.__name__ = f.__qualname__ = f"{kind}_{opname}"
    f.__doc__ = f"{kind}(value, block_dim, '{opname}', dtype) (see {'exclusive_scan' if kind == 'exclusive' else kind})."
    return f


reduce_add, reduce_min, reduce_max = (_named("reduce", o) for o in ("add", "min", "max"))
reduce_all_add, reduce_all_min, reduce_all_max = (_named("reduce_all", o) for o in ("add", "min", "max"))
inclusive_add, inclusive_min, inclusive_max = (_named("inclusive", o) for o in ("add", "min", "max"))
exclusive_add, exclusive_min, exclusive_max = (_named("exclusive", o) for o in ("add", "min", "max"))


@builtin
def radix_rank_match_atomic_or(key, block_dim, radix_bits, bit_start, num_bits, bins, excl_prefix):
    """The stable rank (i32) of this thread's digit d = (key >> bit_start) & ((1 << num_bits) - 1)
    among the block's: excl_prefix[d] + #{j < tid : d_j == d}. Fills the caller's
    SharedArray((1 << radix_bits,), qd.i32)s `bins` (count per digit) and `excl_prefix` (their
    exclusive prefix sum). block_dim == 1 << radix_bits; every thread of the block must call it."""
    ctx = _block_op("radix_rank_match_atomic_or")
    in_parallel_loop(ctx, "qd.simt.block.radix_rank_match_atomic_or()")
    what = "block.radix_rank_match_atomic_or"
    for name, v in (("block_dim", block_dim), ("radix_bits", radix_bits), ("bit_start", bit_start),
                    ("num_bits", num_bits)):
        assert isinstance(v, int) and v >= 0, f"{what}: {name} must be a compile-time int, got {v!r}"
    assert block_dim == 1 << radix_bits, f"{what}: block_dim ({block_dim}) must equal 1 << radix_bits ({1 << radix_bits})"
    assert 1 <= num_bits <= radix_bits, f"{what}: num_bits ({num_bits}) must be in [1, radix_bits = {radix_bits}]"
    g = subgroup.group_size()
    # Threads are grouped in chunks of 32 (64 on wave64): a chunk's threads holding digit d OR their
    # bit into mask[chunk][d] in shared memory, so any subgroup size works.
    width = 64 if g == 64 else 32
    assert block_dim % width == 0, f"{what}: needs block_dim a multiple of {width}, got {block_dim}"
    mtype = T.u64 if width == 64 else T.u32
    digits, chunks = 1 << radix_bits, block_dim // width
    tid = thread_idx()
    chunk = ctx.binary("shr", tid, width.bit_length() - 1)
    bit = ctx.cast(ctx.binary("bit_and", tid, width - 1), mtype)
    k32 = ctx.cast(ctx.scalar(key), T.u32)
    d = ctx.cast(ctx.binary("bit_and", ctx.binary("shr", k32, ctx.const(bit_start, T.u32)),
                            ctx.const((1 << num_bits) - 1, T.u32)), T.i32)
    masks = SharedArray((chunks * digits,), mtype)
    for c in range(chunks):  # block_dim == digits: thread t clears digit t of every chunk
        ctx.store(ctx.element(masks, [ctx.binary("add", tid, c * digits)]), ctx.const(0, mtype))
    ctx.b.simt("block.sync", [])
    mine = ctx.binary("add", ctx.binary("mul", chunk, digits), d)
    ctx.atomic("or", ctx.element(masks, [mine]), ctx.binary("shl", ctx.const(1, mtype), bit))
    ctx.b.simt("block.sync", [])

    def count(m):
        return ctx.cast(ctx.unary("popcnt", m), T.i32)

    total = ctx.const(0, T.i32)  # thread t: how many threads hold digit t
    for c in range(chunks):
        total = ctx.binary("add", total, count(ctx.rvalue(ctx.element(masks, [ctx.binary("add", tid, c * digits)]))))
    ctx.store(ctx.element(bins, [tid]), total)
    ctx.store(ctx.element(excl_prefix, [tid]), exclusive_scan(total, block_dim, "add", 0, T.i32))
    ctx.b.simt("block.sync", [])
    below = ctx.const(0, T.i32)  # threads of earlier chunks with my digit
    for c in range(chunks - 1):
        n = count(ctx.rvalue(ctx.element(masks, [ctx.binary("add", d, c * digits)])))
        below = ctx.binary("add", below, ctx.expr(ctx.b.select(ctx.binary("lt", c, chunk).stmt, n.stmt,
                                                               ctx.const(0, T.i32).stmt)))
    lower_lanes = ctx.binary("sub", ctx.binary("shl", ctx.const(1, mtype), bit), ctx.const(1, mtype))
    within = count(ctx.binary("bit_and", ctx.rvalue(ctx.element(masks, [mine])), lower_lanes))
    rank = ctx.binary("add", ctx.binary("add", ctx.rvalue(ctx.element(excl_prefix, [d])), below), within)
    r = ctx.new_var(rank)
    ctx.b.simt("block.sync", [])  # the masks are read by all before the call site may run again
    return ctx.rvalue(r)


__all__ = ["SharedArray", "sync", "sync_all_nonzero", "sync_any_nonzero", "sync_count_nonzero", "mem_fence",
           "mem_sync", "thread_idx", "global_thread_idx", "reduce", "reduce_add", "reduce_min", "reduce_max",
           "reduce_all", "reduce_all_add", "reduce_all_min", "reduce_all_max", "inclusive_scan", "inclusive_add",
           "inclusive_min", "inclusive_max", "exclusive_scan", "exclusive_add", "exclusive_min", "exclusive_max",
           "radix_rank_match_atomic_or"]
