"""qd.algorithms.select: stream compaction (docs/algorithms.md).

Where the target can wait on other workgroups (_lookback.py): one pass with decoupled look-back,
each tile counting its set flags, finding its output offset from its predecessors' published counts
and scattering its selected elements (the last tile writes the count). Otherwise three phases over tiles of the flags: per-tile counts of the set flags (scratch[0:c]), their
exclusive scan (scratch[c:2c], the staircase's partials after it), then a scatter in which each
tile re-reads its flags and copies the selected elements to out[tile offset + rank] (cpu: a serial
walk; GPUs: a subgroup scan per round of the tile); the count is written between the scan and the
scatter."""
from quadrants import types as T
from quadrants.lang.ast.context import require
from quadrants.lang.ops import builtin
from quadrants.types import template

from quadrants import language as qd
from quadrants.algorithms._common import (
    SIZING_TILE, check_array, check_depth, count_of, k_add, k_cdiv, k_count, k_max, k_mul, staircase_slots,
    helper_func, store_count, tile_size, top_level_func,
)
from quadrants.algorithms._lookback import _claim, _claim_tile, _publish_and_look_back, reset_state, use_lookback
from quadrants.algorithms._phases import (
    GPU_BLOCK_DIM, group_size, lane, num_tiles, rounds_per_tile, scan_staircase, sg_exclusive, sg_first, sg_last,
    sg_reduce, span_compress, span_compress_ok, tile_reduce,
)


def select_scratch_slots(N):
    """u32 scratch slots select needs for up to N elements (any log256_max_n). Host- and kernel-callable."""
    what = "select_scratch_slots"
    n = k_count(what, N)
    c = k_cdiv(what, n, SIZING_TILE)
    # counts + their exclusive scan + that scan's staircase (at most depth 4, one slot per extra level)
    return k_max(what, k_add(what, k_add(what, k_mul(what, c, 2), staircase_slots(what, c, 4)), 4), 1)


select_scratch_slots._qd_builtin = True


@builtin
def flag_count(flags, idx):
    ctx = require("qd.algorithms")
    return ctx.cast(ctx.binary("ne", ctx.rvalue(ctx.element(flags, [idx])), 0), T.i32)


@top_level_func
def _write_total(num_out, scratch, c):
    """num_out[0] = the scanned total of c tile counts (exclusive scan at scratch[c:2c])."""
    total = 0
    if c > 0:
        total = qd.cast(scratch[c - 1], qd.i32) + qd.cast(scratch[2 * c - 1], qd.i32)
    store_count(num_out, total)


@top_level_func
def _scatter_cpu(arr: template(), flags: template(), out: template(), scratch, c, n):
    for tile in range(num_tiles(n, tile_size())):
        pos = qd.cast(scratch[c + tile], qd.i32)
        # this tile's outputs end where the next tile's begin (the total after the last tile)
        end = qd.cast(scratch[c - 1], qd.i32) + qd.cast(scratch[2 * c - 1], qd.i32)
        if tile + 1 < c:
            end = qd.cast(scratch[c + tile + 1], qd.i32)
        _compact_tile_cpu(arr, flags, out, tile * tile_size(), qd.min(tile * tile_size() + tile_size(), n), pos, end)


@helper_func
def _compact_tile_cpu(arr: template(), flags: template(), out: template(), lo, hi, pos, end):
    """The flagged elements of arr[lo:hi], in order, to out[pos:end] (end - pos: their number)."""
    if qd.static(span_compress_ok(arr, flags, out)):
        span_compress(out, pos, arr, flags, lo, hi - lo, end - pos)  # vectors of flags, a permute each
    else:
        # branch-free: every element is written at pos, which advances only past selected ones, so
        # an unselected element's write is overwritten by the next selected one; the writes at the
        # tile's end (another tile's first output) are skipped
        at = pos
        for idx in range(lo, hi):
            if at < end:
                out[at] = arr[idx]
            at += flag_count(flags, idx)


@helper_func
def _scatter_tile_gpu(arr: template(), flags: template(), out: template(), base, rounds, pos, n):
    """One tile's flagged elements, in order, to out[pos:]: a subgroup exclusive scan of the flags per round."""
    ln = lane()
    for r in range(rounds):
        idx = base + r * group_size() + ln
        f = 0
        if idx < n:
            f = flag_count(flags, idx)
        ex = sg_exclusive(f, "add", qd.i32)
        if f != 0:
            out[pos + ex] = arr[idx]
        pos += sg_last(ex + f)


@top_level_func
def _scatter_gpu(arr: template(), flags: template(), out: template(), scratch, c, n):
    qd.loop_config(block_dim=GPU_BLOCK_DIM)
    for i in range(num_tiles(n, tile_size()) * group_size()):
        tile = i // group_size()
        base = tile * tile_size()
        rounds = qd.min(rounds_per_tile(), (n - base + group_size() - 1) // group_size())
        _scatter_tile_gpu(arr, flags, out, base, rounds, qd.cast(scratch[c + tile], qd.i32), n)


@top_level_func
def _lookback_cpu(arr: template(), flags: template(), out: template(), num_out: template(), state: template(), c, n):
    for _ in range(c):
        tile = _claim(state)
        lo = tile * tile_size()
        hi = qd.min(lo + tile_size(), n)
        cnt = 0
        for idx in range(lo, hi):
            cnt += flag_count(flags, idx)
        pos = _publish_and_look_back(state, c, tile, cnt, "add", qd.i32)
        end = pos + cnt
        if tile == c - 1:
            store_count(num_out, end)
        _compact_tile_cpu(arr, flags, out, lo, hi, pos, end)


@top_level_func
def _lookback_gpu(arr: template(), flags: template(), out: template(), num_out: template(), state: template(), c, n):
    qd.loop_config(block_dim=GPU_BLOCK_DIM)
    for _ in range(c * group_size()):
        ln = lane()
        tile = _claim_tile(state, ln)
        base = tile * tile_size()
        rounds = qd.min(rounds_per_tile(), (n - base + group_size() - 1) // group_size())
        cnt = 0
        for r in range(rounds):
            idx = base + r * group_size() + ln
            if idx < n:
                cnt += flag_count(flags, idx)
        total = sg_reduce(cnt, "add", qd.i32)
        first = 0
        if ln == 0:
            first = _publish_and_look_back(state, c, tile, total, "add", qd.i32)
            if tile == c - 1:
                store_count(num_out, first + total)
        _scatter_tile_gpu(arr, flags, out, base, rounds, sg_first(first), n)


@top_level_func
def _write_zero_if_empty(num_out, c):
    if c == 0:
        store_count(num_out, 0)


@builtin
def _select(arr, flags, out, num_out, scratch, n, log256_max_n):
    ctx = require("qd.algorithms")
    what = "select"
    depth = check_depth(log256_max_n)
    check_array(what, "arr", arr, any_element=True)
    check_array(what, "flags", flags)
    check_array(what, "out", out, any_element=True)
    check_array(what, "scratch", scratch, T.u32)
    if flags.dtype.is_real:
        ctx.type_error("qd.algorithms.select: flags must be an integer array (qd.i32: 1 selects, 0 drops)")
    n = count_of(n)
    c = num_tiles(n, tile_size())
    c = ctx.scalar(c)
    if use_lookback(32):
        reset_state.inline(ctx, [scratch, c], {})
        _write_zero_if_empty.inline(ctx, [num_out, c], {})
        (_lookback_cpu if ctx.arch.name == "cpu" else _lookback_gpu).inline(ctx, [arr, flags, out, num_out, scratch,
                                                                                  c, n], {})
        return None
    tile_reduce(flags, 0, "nonzero", n, scratch, 0, True, "add", T.u32, False)
    scan_staircase(scratch, 0, True, scratch, c, True, scratch, ctx.binary("mul", c, 2), c, "add", T.u32,
                   max(1, depth - 1))
    _write_total.inline(ctx, [num_out, scratch, c], {})
    (_scatter_cpu if ctx.arch.name == "cpu" else _scatter_gpu).inline(ctx, [arr, flags, out, scratch, c, n], {})
    return None


@top_level_func
def select(arr, flags, out, num_out, scratch, n, log256_max_n: template()):
    """Copies arr[i] for every i < n with flags[i] != 0 (0 / 1 flags) to out[0:k] in input order and
    writes k to num_out[0]. Call at the top level of a kernel."""
    _select(arr, flags, out, num_out, scratch, n, log256_max_n)
