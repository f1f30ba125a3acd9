"""The subgroup collectives built from the subgroup primitives (shuffles, votes): tiled reduce,
reduce-all, scans, segmented reduce, votes and the bitonic sort. Everything here runs while the
kernel is traced and emits primitive IR; no codegen knows these algorithms. See docs/simt.md.

`op` is a binary operation name of the IR ("add", "mul", "min", "max", "bit_and", "bit_or",
"bit_xor"), a @qd.func(a, b), or a Python callable on kernel values; it is always applied as
op(value from the lower lane, value of the higher lane)."""
import math

import numpy as np

from quadrants import types as T
from quadrants.lang.ast.context import require


def ctx_():
    return require("qd.simt.subgroup")


def simt(ctx, name, *operands):
    """One subgroup primitive (csrc/ir/ops.h) on kernel values; its value, or None."""
    stmts = [ctx.scalar(o).stmt for o in operands]
    s = ctx.b.simt(name, stmts)
    return ctx.expr(s) if s is not None else None


def lane_const(ctx, v):
    """A lane / offset / mask operand: u32 (a Python int becomes a u32 constant)."""
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return ctx.const(int(v) & 0xFFFFFFFF, T.u32)
    return ctx.cast(ctx.scalar(v), T.u32)


def shuffle(ctx, kind, v, lane):
    return ctx.expr(ctx.b.simt(f"subgroup.{kind}", [ctx.scalar(v).stmt, lane_const(ctx, lane).stmt]))


def lane_id(ctx):
    return ctx.expr(ctx.b.simt("subgroup.invocation_id", []))


def apply(ctx, op, a, b):
    """op(a, b), cast back to a's dtype (so a scan keeps its value's type)."""
    if isinstance(op, str):
        r = ctx.binary(op, a, b)
    elif getattr(op, "_qd_func", False):  # a @qd.func
        r = op.inline(ctx, [a, b], {})
    else:
        r = op(a, b)
    r = ctx.scalar(r)
    return ctx.cast(r, a.dtype) if r.dtype is not a.dtype else r


def select(ctx, cond, a, b):
    a, b = ctx.scalar(a), ctx.scalar(b, a.dtype)
    if b.dtype is not a.dtype:
        b = ctx.cast(b, a.dtype)
    return ctx.expr(ctx.b.select(ctx.scalar(cond).stmt, a.stmt, b.stmt))


def tile_lane(ctx, log2_size):
    """This lane's index in its tile of 2**log2_size lanes."""
    return ctx.binary("bit_and", lane_id(ctx), (1 << log2_size) - 1)


def identity(op, dtype):
    """The identity of a named op for `dtype` (exclusive scans' tile lane 0; block collectives)."""
    if op in ("add", "bit_or", "bit_xor"):
        return 0
    if op == "mul":
        return 1
    if op == "bit_and":
        return -1 if dtype.is_signed else (1 << dtype.bits) - 1
    if dtype.is_real:
        return math.inf if op == "min" else -math.inf
    if dtype.bits == 1:
        return 1 if op == "min" else 0
    if dtype.is_signed:
        return (1 << (dtype.bits - 1)) - 1 if op == "min" else -(1 << (dtype.bits - 1))
    return (1 << dtype.bits) - 1 if op == "min" else 0


def check_log2(ctx, what, log2_size, group_log2):
    """log2_size as an int: a compile-time Python int from 0 to log2 of the subgroup's size (a larger
    tile would read lanes that do not exist: undefined values, never a result)."""
    if not isinstance(log2_size, (int, np.integer)) or isinstance(log2_size, bool):
        raise TypeError(f"{what}: log2_size must be a compile-time Python int (a qd.template()), got {log2_size!r}")
    if not 0 <= log2_size <= group_log2:
        ctx.type_error(f"{what}: a tile of 2**{int(log2_size)} lanes does not fit in this device's subgroup of "
                       f"{1 << group_log2} lanes (log2_size must be 0..{group_log2}; "
                       f"qd.simt.subgroup.log2_group_size() is the largest)")
    return int(log2_size)


def reduce_tiled(ctx, v, op, log2_size):
    """shuffle_down tree: tile lane 0 holds op over its tile (the other lanes hold partials)."""
    v = ctx.scalar(v)
    for k in reversed(range(log2_size)):
        v = apply(ctx, op, v, shuffle(ctx, "shuffle_down", v, 1 << k))
    return v


def reduce_all_tiled(ctx, v, op, log2_size):
    """XOR butterfly: every lane of the tile holds op over the tile, combined lower-half first."""
    v = ctx.scalar(v)
    lane = lane_id(ctx)
    for k in range(log2_size):
        other = shuffle(ctx, "shuffle_xor", v, 1 << k)
        upper = ctx.binary("ne", ctx.binary("bit_and", lane, 1 << k), 0)
        v = select(ctx, upper, apply(ctx, op, other, v), apply(ctx, op, v, other))
    return v


def inclusive_scan_tiled(ctx, v, op, log2_size):
    """Hillis-Steele: lane j of a tile holds op(v_start, ..., v_j), combined op(lower, own)."""
    v = ctx.scalar(v)
    tl = tile_lane(ctx, log2_size)
    for k in range(log2_size):
        lower = shuffle(ctx, "shuffle_up", v, 1 << k)
        v = select(ctx, ctx.binary("ge", tl, 1 << k), apply(ctx, op, lower, v), v)
    return v


def exclusive_scan_tiled(ctx, v, op, ident, log2_size):
    """The input shifted up one lane, the identity in tile lane 0, then the inclusive scan."""
    v = ctx.scalar(v)
    up = shuffle(ctx, "shuffle_up", v, 1)
    v = select(ctx, ctx.binary("eq", tile_lane(ctx, log2_size), 0), ctx.scalar(ident, v.dtype), up)
    return inclusive_scan_tiled(ctx, v, op, log2_size)


def segmented_inclusive_tiled(ctx, v, head_flag, op, log2_size):
    """Scan of (value, segment-start-seen) pairs: lane j holds op over [h..j], h its segment head."""
    v = ctx.scalar(v)
    seen = ctx.cast(ctx.binary("ne", ctx.scalar(head_flag), 0), T.i32)
    tl = tile_lane(ctx, log2_size)
    for k in range(log2_size):
        lower_v = shuffle(ctx, "shuffle_up", v, 1 << k)
        lower_seen = shuffle(ctx, "shuffle_up", seen, 1 << k)
        take = ctx.binary("and_", ctx.binary("ge", tl, 1 << k), ctx.binary("eq", seen, 0))
        v = select(ctx, take, apply(ctx, op, lower_v, v), v)
        seen = select(ctx, take, ctx.binary("bit_or", seen, lower_seen), seen)
    return v


def vote_tiled(ctx, p, want_all, log2_size, group_log2):
    """i32 0/1 on every lane: all / any of p != 0 over the tile (the native vote for the whole
    subgroup, else an AND / OR butterfly)."""
    p = ctx.scalar(p)
    if log2_size == group_log2:
        return simt(ctx, "subgroup.all" if want_all else "subgroup.any", p)
    t = ctx.cast(ctx.binary("ne", p, 0), T.i32)
    return reduce_all_tiled(ctx, t, "bit_and" if want_all else "bit_or", log2_size)


def all_equal_tiled(ctx, v, log2_size, group_log2):
    v = ctx.scalar(v)
    start = ctx.binary("bit_and", lane_id(ctx), ~((1 << log2_size) - 1) & 0x7FFFFFFF)
    first = shuffle(ctx, "shuffle", v, start)
    return vote_tiled(ctx, ctx.binary("eq", v, first), True, log2_size, group_log2)


def bitonic_sort_kv_tiled(ctx, key, value, log2_size):
    """A bitonic network across the tile by shuffle_xor: lane j ends with the j-th smallest
    (key, value) pair (ties on key broken by value)."""
    key, value = ctx.scalar(key), ctx.scalar(value)
    tl = tile_lane(ctx, log2_size)
    for s in range(1, log2_size + 1):
        ascending = ctx.binary("eq", ctx.binary("bit_and", tl, 1 << s), 0) if s < log2_size else 1
        for j in reversed(range(s)):
            pk = shuffle(ctx, "shuffle_xor", key, 1 << j)
            pv = shuffle(ctx, "shuffle_xor", value, 1 << j)
            lower = ctx.binary("eq", ctx.binary("bit_and", tl, 1 << j), 0)
            partner_less = ctx.binary("or_", ctx.binary("lt", pk, key),
                                      ctx.binary("and_", ctx.binary("eq", pk, key), ctx.binary("lt", pv, value)))
            partner_greater = ctx.binary("or_", ctx.binary("gt", pk, key),
                                         ctx.binary("and_", ctx.binary("eq", pk, key), ctx.binary("gt", pv, value)))
            keep_min = ctx.binary("eq", lower, ascending) if not isinstance(ascending, int) else lower
            take = select(ctx, keep_min, ctx.cast(partner_less, T.i32), ctx.cast(partner_greater, T.i32))
            key, value = select(ctx, take, pk, key), select(ctx, take, pv, value)
    return key, value


def _inclusive_scan_tiled(value, op, log2_size):
    """inclusive scan of `value` over tiles of 2**log2_size lanes with a @qd.func op(lower, own)."""
    return inclusive_scan_tiled(ctx_(), value, op, int(log2_size))


_inclusive_scan_tiled._qd_builtin = True
