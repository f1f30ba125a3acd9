"""qd.simt.block: the threads of one block (qd.loop_config(block_dim=N) threads of the parallel
loop) sharing memory and waiting for each other. See docs/simt.md."""
import warnings
from typing import TYPE_CHECKING, Any

import numpy as np

from quadrants.lang import types as T
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


__all__ = ["SharedArray", "sync", "sync_all_nonzero", "sync_any_nonzero", "sync_count_nonzero", "mem_fence",
           "mem_sync", "thread_idx", "global_thread_idx"]
