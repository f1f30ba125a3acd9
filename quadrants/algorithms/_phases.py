"""The phase loops the algorithms are composed of, and the staircase that chains them.

Each phase is a `requires_top_level` func holding one parallel loop (one task) over *tiles* of
`tile_size()` consecutive elements. Two shapes of tile, chosen by arch when the kernel compiles:

- cpu: a tile is one iteration of the parallel loop, a serial loop over its elements (the worker
  threads take tiles; no block machinery, the loops vectorize where they can);
- GPUs (vulkan, cuda, amdgpu, metal): a tile is one subgroup, which walks it in rounds of
  group_size() consecutive elements (coalesced), combining each round with subgroup shuffles and
  carrying the running value from round to round. No shared memory and no barriers.

A *source* or *destination* is a 1-D array plus an offset and a flag `slot`: slot arrays are the
caller's u32 / u64 scratch holding a value's bits (qd.bit_cast), the others the user's arrays of the
value's dtype (slot == "nonzero": a user array read as 1 where nonzero, else 0).

The staircase (`scan_staircase`, `reduce_staircase`) is built at compile time for a capacity of
256 ** depth: level 0 is the input (count n), level l + 1 holds one partial per tile of level l,
ceil(c_l / tile) of them, stored one level after another in scratch from `part_off` on. Tiles have at
least 256 elements, so level depth - 1 has at most 256 entries: one tile."""
from quadrants import types as T
from quadrants._lib import _core
from quadrants.lang.ast.values import NdarrayArg
from quadrants.memory.field import Field
from quadrants.lang.ast.context import require
from quadrants.lang.ops import builtin
from quadrants.lang.simt import reductions as R
from quadrants.lang.simt import subgroup as _subgroup
from quadrants.types import template

from quadrants import language as qd
from quadrants.algorithms._common import combine, head_flag, identity_of, tile_size, top_level_func

GPU_BLOCK_DIM = 128   # threads of a GPU phase block (a multiple of every subgroup size); no block collectives


@builtin
def on_cpu():
    return require("qd.algorithms").arch.name == "cpu"


@builtin
def group_size():
    return _subgroup.group_size()


@builtin
def rounds_per_tile():
    """GPU: rounds of group_size() elements in a tile."""
    return tile_size() // _subgroup.group_size()


@builtin
def load(a, off, slot, i, dtype):
    """Element i of a source: the bits of a scratch slot, or the user's element converted to dtype
    (slot == "nonzero": 1 where the user's element is nonzero, else 0)."""
    ctx = require("qd.algorithms")
    if slot == "head":  # 1 where element i heads a run of equal keys (reduce_by_key)
        return ctx.cast(head_flag(a, ctx.binary("add", off, i)), dtype)
    v = ctx.rvalue(ctx.element(a, [ctx.binary("add", off, i)]))
    if isinstance(slot, str):
        return ctx.cast(ctx.binary("ne", v, 0), dtype)
    if slot:
        return ctx.expr(ctx.b.bitcast(v.stmt, dtype.core)) if v.dtype is not dtype else v
    return ctx.cast(v, dtype) if v.dtype is not dtype else v


@builtin
def store(a, off, slot, i, v, dtype):
    ctx = require("qd.algorithms")
    v = ctx.scalar(v)
    v = ctx.cast(v, dtype) if v.dtype is not dtype else v
    if slot and a.dtype is not dtype:
        v = ctx.expr(ctx.b.bitcast(v.stmt, a.dtype.core))
    ctx.store(ctx.element(a, [ctx.binary("add", off, i)]), v)
    return None


# --- span statements (cpu vector loops, csrc/codegen/llvm/span_llvm.cpp) ---------------------------
def _spans(ctx):
    """Span statements are made for the cpu, without bounds checks (which check one index per pointer)."""
    return ctx.arch.name == "cpu" and not ctx.config.bounds_checks


def _int_of(a, bits):
    """`a` (a 1-D array of scalars) holds integers of `bits` bits."""
    return isinstance(a, (Field, NdarrayArg)) and not a.element_shape and not a.dtype.is_real and a.dtype.bits == bits


@builtin
def span_scan_ok(src, src_slot, dst, dtype):
    """Compile-time: the cpu scans src (a slot array, or the user's) into dst with a span statement:
    an integer dtype of 32 / 64 bits that both arrays hold (by width: a slot holds the value's bits)."""
    ctx = require("qd.algorithms")
    return (_spans(ctx) and isinstance(src_slot, bool) and not dtype.is_real and dtype.bits in (32, 64) and
            _int_of(src, dtype.bits) and _int_of(dst, dtype.bits))


@builtin
def span_exclusive_scan(dst, src, lo, count, carry, op, dtype):
    """dst[lo + k] = carry op src[lo] op ... op src[lo + k - 1] for k < count; returns carry op all."""
    ctx = require("qd.algorithms")
    carry = ctx.scalar(carry)
    carry = ctx.cast(carry, dtype) if carry.dtype is not dtype else carry
    return ctx.expr(ctx.b.span_exclusive_scan(getattr(_core.BinaryOp, op), ctx.element(dst, [lo]).stmt,
                                              ctx.element(src, [lo]).stmt, ctx.scalar(count).stmt, carry.stmt))


@builtin
def span_compress_ok(arr, flags, out):
    """Compile-time: the cpu compacts arr by flags into out with a span statement (scalars of one
    32 / 64-bit dtype, integer flags)."""
    ctx = require("qd.algorithms")
    plain = all(isinstance(a, (Field, NdarrayArg)) and not a.element_shape for a in (arr, flags, out))
    return (_spans(ctx) and plain and arr.dtype is out.dtype and arr.dtype.bits in (32, 64) and
            not flags.dtype.is_real and flags.dtype.bits >= 8)


@builtin
def span_compress(out, pos, arr, flags, lo, count, room):
    """The arr[lo + j] with flags[lo + j] != 0 (j < count), in order, to out[pos:pos + room] (room:
    exactly their number, or more); returns their number."""
    ctx = require("qd.algorithms")
    return ctx.expr(ctx.b.span_compress(ctx.element(out, [pos]).stmt, ctx.element(flags, [lo]).stmt,
                                        ctx.scalar(count).stmt, ctx.scalar(room).stmt, ctx.element(arr, [lo]).stmt))


def _tiles(ctx, count, tile):
    """ceil(count / tile) as a kernel value (count >= 0, without count + tile - 1 overflowing)."""
    pos = ctx.binary("gt", count, 0)
    q = ctx.binary("add", ctx.binary("floordiv", ctx.binary("sub", count, 1), tile), 1)
    return ctx.expr(ctx.b.select(pos.stmt, ctx.scalar(q).stmt, ctx.const(0, T.i32).stmt))


@builtin
def num_tiles(count, tile):
    """ceil(count / tile) for 0 <= count."""
    return _tiles(require("qd.algorithms"), count, tile)


@builtin
def reassoc_combine(op, a, b):
    """op(a, b); a float sum may be reassociated by the compiler (several accumulators, vectorized)."""
    ctx = require("qd.algorithms")
    r = combine(op, a, b)
    if op == "add" and r.dtype.is_real:
        ctx.b.mark_reassoc(r.stmt)
    return r


# --- subgroup building blocks (GPU tiles) ---------------------------------------------------------
@builtin
def lane():
    return R.lane_id(require("qd.algorithms"))


@builtin
def sg_reduce(v, op, dtype):
    """op over the subgroup's values, on lane 0 (the other lanes: partial values)."""
    ctx = require("qd.algorithms")
    return R.reduce_tiled(ctx, ctx.cast(ctx.scalar(v), dtype), op, _subgroup.log2_group_size())


@builtin
def sg_exclusive(v, op, dtype):
    ctx = require("qd.algorithms")
    return R.exclusive_scan_tiled(ctx, ctx.cast(ctx.scalar(v), dtype), op, R.identity(op, dtype),
                                  _subgroup.log2_group_size())


@builtin
def sg_last(v):
    """The value of the subgroup's last lane, on every lane."""
    ctx = require("qd.algorithms")
    return R.shuffle(ctx, "shuffle", ctx.scalar(v), _subgroup.group_size() - 1)


@builtin
def sg_first(v):
    ctx = require("qd.algorithms")
    return R.shuffle(ctx, "shuffle", ctx.scalar(v), 0)


@builtin
def sg_shuffle_up(v, k):
    """The value of lane - k (lanes below k: their own)."""
    ctx = require("qd.algorithms")
    return R.shuffle(ctx, "shuffle_up", ctx.scalar(v), k)


# --- phases -------------------------------------------------------------------------------------
@top_level_func
def _tile_reduce_cpu(src: template(), src_off, src_slot: template(), count, dst: template(), dst_off,
                     dst_slot: template(), op: template(), dtype: template(), one_tile_at_least: template()):
    tiles = num_tiles(count, tile_size())
    if qd.static(one_tile_at_least):
        tiles = qd.max(tiles, 1)
    for tile in range(tiles):
        acc = identity_of(op, dtype)
        for idx in range(tile * tile_size(), qd.min(tile * tile_size() + tile_size(), count)):
            acc = reassoc_combine(op, acc, load(src, src_off, src_slot, idx, dtype))
        store(dst, dst_off, dst_slot, tile, acc, dtype)


@top_level_func
def _tile_reduce_gpu(src: template(), src_off, src_slot: template(), count, dst: template(), dst_off,
                     dst_slot: template(), op: template(), dtype: template(), one_tile_at_least: template()):
    tiles = num_tiles(count, tile_size())
    if qd.static(one_tile_at_least):
        tiles = qd.max(tiles, 1)
    qd.loop_config(block_dim=GPU_BLOCK_DIM)
    for i in range(tiles * group_size()):
        tile = i // group_size()
        ln = lane()
        base = tile * tile_size()
        rounds = qd.min(rounds_per_tile(), (count - base + group_size() - 1) // group_size())
        acc = identity_of(op, dtype)
        for r in range(rounds):
            idx = base + r * group_size() + ln
            if idx < count:
                acc = combine(op, acc, load(src, src_off, src_slot, idx, dtype))
        total = sg_reduce(acc, op, dtype)
        if ln == 0:
            store(dst, dst_off, dst_slot, tile, total, dtype)


@top_level_func
def _tile_scan_cpu(src: template(), src_off, src_slot: template(), dst: template(), dst_off, dst_slot: template(),
                   count, parent: template(), parent_off, has_parent: template(), op: template(),
                   dtype: template()):
    for tile in range(num_tiles(count, tile_size())):
        run = identity_of(op, dtype)
        if qd.static(has_parent):
            run = load(parent, parent_off, True, tile, dtype)
        for idx in range(tile * tile_size(), qd.min(tile * tile_size() + tile_size(), count)):
            v = load(src, src_off, src_slot, idx, dtype)
            store(dst, dst_off, dst_slot, idx, run, dtype)
            run = combine(op, run, v)


@top_level_func
def _tile_scan_gpu(src: template(), src_off, src_slot: template(), dst: template(), dst_off, dst_slot: template(),
                   count, parent: template(), parent_off, has_parent: template(), op: template(),
                   dtype: template()):
    qd.loop_config(block_dim=GPU_BLOCK_DIM)
    for i in range(num_tiles(count, tile_size()) * group_size()):
        tile = i // group_size()
        ln = lane()
        base = tile * tile_size()
        rounds = qd.min(rounds_per_tile(), (count - base + group_size() - 1) // group_size())
        carry = identity_of(op, dtype)
        if qd.static(has_parent):
            carry = load(parent, parent_off, True, tile, dtype)
        for r in range(rounds):
            idx = base + r * group_size() + ln
            v = identity_of(op, dtype)
            if idx < count:
                v = load(src, src_off, src_slot, idx, dtype)
            ex = sg_exclusive(v, op, dtype)
            if idx < count:
                store(dst, dst_off, dst_slot, idx, combine(op, carry, ex), dtype)
            carry = combine(op, carry, sg_last(combine(op, ex, v)))


@builtin
def tile_reduce(src, src_off, src_slot, count, dst, dst_off, dst_slot, op, dtype, one_tile_at_least):
    """dst[dst_off + t] = op over tile t of src[src_off : src_off + count]; one_tile_at_least: an
    empty source still writes the identity to dst[dst_off]."""
    ctx = require("qd.algorithms")
    f = _tile_reduce_cpu if ctx.arch.name == "cpu" else _tile_reduce_gpu
    return f.inline(ctx, [src, src_off, src_slot, count, dst, dst_off, dst_slot, op, dtype, one_tile_at_least], {})


@builtin
def tile_scan(src, src_off, src_slot, dst, dst_off, dst_slot, count, parent, parent_off, has_parent, op, dtype):
    """Exclusive scan of each tile of src[src_off : src_off + count] into dst, each tile started at
    parent[parent_off + tile] (a slot array) when has_parent, else at the identity. src and dst may
    be the same slots (each element is read before it is written)."""
    ctx = require("qd.algorithms")
    f = _tile_scan_cpu if ctx.arch.name == "cpu" else _tile_scan_gpu
    return f.inline(ctx, [src, src_off, src_slot, dst, dst_off, dst_slot, count, parent, parent_off, has_parent, op,
                          dtype], {})


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
        tile_reduce(a, off, slot, c, scratch, below[l][2], True, op, dtype, False)
    for l in reversed(range(depth)):  # the top level in place, then each level from its parent
        c, a, off, slot = below[l]
        to, to_off, to_slot = (dst, dst_off, dst_slot) if l == 0 else (scratch, off, True)
        if l == depth - 1:
            tile_scan(a, off, slot, to, to_off, to_slot, c, scratch, 0, False, op, dtype)
        else:
            tile_scan(a, off, slot, to, to_off, to_slot, c, scratch, below[l + 1][2], True, op, dtype)
    return None


@builtin
def reduce_staircase(src, src_off, src_slot, dst, dst_off, dst_slot, scratch, part_off, n, op, dtype, depth):
    """dst[dst_off] = op over the n elements of src (the identity for n == 0), n <= 256 ** depth."""
    ctx = require("qd.algorithms")
    lv = _staircase_levels(ctx, n, part_off, depth)
    below = [(n, src, src_off, src_slot)] + [(c, scratch, off, True) for c, off in lv]
    for l in range(1, depth):
        c, a, off, slot = below[l - 1]
        tile_reduce(a, off, slot, c, scratch, below[l][2], True, op, dtype, False)
    c, a, off, slot = below[depth - 1]
    tile_reduce(a, off, slot, c, dst, dst_off, dst_slot, op, dtype, True)  # one tile, written even for n == 0
    return None
