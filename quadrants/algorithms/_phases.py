"""The phase loops the algorithms are composed of, and the staircase that chains them.

Each phase is a `requires_top_level` func holding one parallel loop (one task) over tiles: a block of
BLOCK_DIM threads per tile of `tile_size()` elements. A *source* or *destination* is a 1-D array
plus an offset and a flag `slot`: slot arrays are the caller's u32 / u64 scratch, holding a value's
bits (qd.bit_cast), the others are the user's arrays of the value's dtype.

The staircase (`scan_staircase`, `reduce_staircase`) is built at compile time for a capacity of
256 ** depth: level 0 is the input (count n), level l + 1 holds one partial per tile of level l,
ceil(c_l / tile) of them, stored one level after another in scratch from `part_off` on. With tiles
of at least 256 elements, level depth - 1 has at most 256 entries: one tile."""
from quadrants.lang import types as T
from quadrants.lang.context import require
from quadrants.lang.ops import builtin
from quadrants.lang.types import template

import quadrants as qd
from quadrants.algorithms._common import (
    BLOCK_DIM, combine, helper_func, identity_of, items_per_thread, scratch_dtype_for, tile_size, top_level_func,
)


@builtin
def slot_dtype(dtype):
    return scratch_dtype_for(dtype)


@helper_func
def load(a: template(), off, slot: template(), i, dtype: template()):
    """Element i of a source: the bits of a scratch slot, or the user's element converted to dtype
    (slot == "nonzero": 1 where the user's element is nonzero, else 0)."""
    if qd.static(isinstance(slot, str)):
        return qd.select(a[off + i] != 0, qd.cast(1, dtype), qd.cast(0, dtype))
    elif qd.static(slot):
        return qd.bit_cast(a[off + i], dtype)
    else:
        return qd.cast(a[off + i], dtype)


@helper_func
def store(a: template(), off, slot: template(), i, v, dtype: template()):
    if qd.static(slot):
        a[off + i] = qd.bit_cast(qd.cast(v, dtype), slot_dtype(dtype))
    else:
        a[off + i] = qd.cast(v, dtype)


@helper_func
def num_tiles(count, tile: template()):
    """ceil(count / tile) for 0 <= count (without count + tile - 1 overflowing)."""
    return qd.select(count > 0, (count - 1) // tile + 1, 0)


@top_level_func
def tile_reduce(src: template(), src_off, src_slot: template(), count, dst: template(), dst_off,
                dst_slot: template(), op: template(), dtype: template(), one_tile_at_least: template()):
    """dst[dst_off + t] = op over tile t of src[src_off : src_off + count] (striped: thread k reads
    elements k, k + BLOCK_DIM, ... of its tile); one_tile_at_least: an empty source gives the identity."""
    tiles = num_tiles(count, tile_size())
    if qd.static(one_tile_at_least):
        tiles = qd.max(tiles, 1)
    qd.loop_config(block_dim=BLOCK_DIM)
    for i in range(tiles * BLOCK_DIM):
        t = i % BLOCK_DIM
        tile = i // BLOCK_DIM
        base = tile * tile_size() + t
        acc = identity_of(op, dtype)
        for j in qd.static(range(items_per_thread())):
            idx = base + j * BLOCK_DIM
            if idx < count:
                acc = combine(op, acc, load(src, src_off, src_slot, idx, dtype))
        total = qd.simt.block.reduce(acc, BLOCK_DIM, op, dtype)
        if t == 0:
            store(dst, dst_off, dst_slot, tile, total, dtype)


@top_level_func
def tile_scan(src: template(), src_off, src_slot: template(), dst: template(), dst_off, dst_slot: template(), count,
              parent: template(), parent_off, has_parent: template(), op: template(), dtype: template()):
    """Exclusive scan of each tile of src[src_off : src_off + count] into dst, each tile started at
    parent[parent_off + tile] (a slot array) when has_parent, else at the identity. Blocked: thread k
    owns elements k * items .. (k + 1) * items - 1 of its tile. src and dst may be the same slots."""
    qd.loop_config(block_dim=BLOCK_DIM)
    for i in range(num_tiles(count, tile_size()) * BLOCK_DIM):
        t = i % BLOCK_DIM
        tile = i // BLOCK_DIM
        base = tile * tile_size() + t * items_per_thread()
        ident = identity_of(op, dtype)
        acc = ident
        for j in qd.static(range(items_per_thread())):
            idx = base + j
            if idx < count:
                acc = combine(op, acc, load(src, src_off, src_slot, idx, dtype))
        run = qd.simt.block.exclusive_scan(acc, BLOCK_DIM, op, ident, dtype)
        if qd.static(has_parent):
            run = combine(op, load(parent, parent_off, True, tile, dtype), run)
        for j in qd.static(range(items_per_thread())):
            idx = base + j
            if idx < count:
                v = load(src, src_off, src_slot, idx, dtype)
                store(dst, dst_off, dst_slot, idx, run, dtype)
                run = combine(op, run, v)


def _tiles(ctx, count, tile):
    """ceil(count / tile) as a kernel value (count >= 0)."""
    pos = ctx.binary("gt", count, 0)
    q = ctx.binary("add", ctx.binary("floordiv", ctx.binary("sub", count, 1), tile), 1)
    return ctx.expr(ctx.b.select(pos.stmt, ctx.scalar(q).stmt, ctx.const(0, T.i32).stmt))


def _staircase_levels(ctx, n, part_off, depth):
    """[(count, offset)] of levels 1 .. depth-1 (kernel values), their partials from part_off on."""
    tile = tile_size()
    out, c, off = [], n, part_off
    for _ in range(depth - 1):
        c = _tiles(ctx, c, tile)
        out.append((c, off))
        off = ctx.binary("add", off, c)
    return out


@builtin
def scan_staircase(src, src_off, src_slot, dst, dst_off, dst_slot, scratch, part_off, n, op, dtype, depth):
    """Exclusive scan of n elements of src into dst (either may be scratch slots; in place is fine),
    for n <= 256 ** depth, the partials in scratch from part_off on."""
    ctx = require("qd.algorithms")
    lv = _staircase_levels(ctx, n, part_off, depth)
    below = [(n, src, src_off, src_slot)] + [(c, scratch, off, True) for c, off in lv]
    for l in range(1, depth):  # upsweep: tile partials of level l - 1 into level l
        c, a, off, slot = below[l - 1]
        tile_reduce.inline(ctx, [a, off, slot, c, scratch, below[l][2], True, op, dtype, False], {})
    for l in reversed(range(depth)):  # the top level in place, then each level from its parent
        c, a, off, slot = below[l]
        to, to_off, to_slot = (dst, dst_off, dst_slot) if l == 0 else (scratch, off, True)
        if l == depth - 1:
            tile_scan.inline(ctx, [a, off, slot, to, to_off, to_slot, c, scratch, 0, False, op, dtype], {})
        else:
            tile_scan.inline(ctx, [a, off, slot, to, to_off, to_slot, c, scratch, below[l + 1][2], True, op, dtype],
                             {})
    return None


@builtin
def reduce_staircase(src, src_off, src_slot, dst, dst_off, dst_slot, scratch, part_off, n, op, dtype, depth):
    """dst[dst_off] = op over the n elements of src (identity for n == 0), n <= 256 ** depth."""
    ctx = require("qd.algorithms")
    lv = _staircase_levels(ctx, n, part_off, depth)
    below = [(n, src, src_off, src_slot)] + [(c, scratch, off, True) for c, off in lv]
    for l in range(1, depth):
        c, a, off, slot = below[l - 1]
        tile_reduce.inline(ctx, [a, off, slot, c, scratch, below[l][2], True, op, dtype, False], {})
    c, a, off, slot = below[depth - 1]
    # the top level is one tile; launched even for n == 0, which writes the identity
    tile_reduce.inline(ctx, [a, off, slot, c, dst, dst_off, dst_slot, op, dtype, True], {})
    return None
