"""qd.algorithms.reduce_by_key_{add,min,max}: one (key, op over its values) per run of equal
consecutive keys (docs/algorithms.md).

Element i heads a run when i == 0 or keys[i] != keys[i-1] (so a NaN key is a run of its own, and
-0.0 continues a run of +0.0). Phases over tiles: per-tile head counts (scratch[0:c]), their
exclusive scan (scratch[c:2c]: the index of the first run headed in each tile), num_runs, then
  A. each tile writes keys_out[run] for the runs it heads and values_out[run] = the sum of the run's
     values inside the tile (plain stores: each run has one head);
  B. each tile whose first element continues a run from an earlier tile combines that leading
     segment into the run with an atomic add / min / max (a later task than A's stores).
On the cpu a tile is one loop iteration walking its elements; on GPUs one subgroup in rounds,
with a segmented scan of each round. Float sums: the order within a tile is the walk's (cpu) or a
tree per round (GPUs); segments of a run spanning tiles are added in any order."""
from quadrants import types as T
from quadrants.lang.ast.context import require
from quadrants.lang import ops
from quadrants.lang.ops import builtin
from quadrants.lang.simt import reductions as R
from quadrants.lang.simt import subgroup as _subgroup
from quadrants.types import template

from quadrants import language as qd
from quadrants.algorithms._common import (
    SIZING_TILE, check_array, check_depth, check_dtype, combine, count_of, head_flag, identity_of, k_add, k_cdiv,
    k_count, k_max, k_mul, staircase_slots, store_count, tile_size, top_level_func,
)
from quadrants.algorithms._phases import (
    GPU_BLOCK_DIM, group_size, lane, num_tiles, rounds_per_tile, scan_staircase, sg_last, sg_reduce, sg_shuffle_up,
    tile_reduce,
)


def reduce_by_key_scratch_slots(N):
    """u32 scratch slots reduce_by_key_add needs for up to N elements (any log256_max_n). Host- and
    kernel-callable."""
    what = "reduce_by_key_scratch_slots"
    n = k_count(what, N)
    c = k_cdiv(what, n, SIZING_TILE)
    return k_max(what, k_add(what, k_add(what, k_mul(what, c, 2), staircase_slots(what, c, 4)), 4), 1)


reduce_by_key_scratch_slots._qd_builtin = True


@builtin
def _sg_inclusive_add(v):
    ctx = require("qd.algorithms")
    return R.inclusive_scan_tiled(ctx, ctx.scalar(v), "add", _subgroup.log2_group_size())


@builtin
def _sg_segmented(v, h, op):
    ctx = require("qd.algorithms")
    return R.segmented_inclusive_tiled(ctx, ctx.scalar(v), h, op, _subgroup.log2_group_size())


@builtin
def _atomic_combine(op, target, v):
    """atomic add / min / max of v into target (the old value discarded)."""
    return ops.ATOMIC_OPS[op](target, v)


@top_level_func
def _owned_cpu(keys: template(), values: template(), keys_out: template(), values_out: template(), scratch, c, n,
               value_dtype: template(), op: template()):
    for tile in range(num_tiles(n, tile_size())):
        run = qd.cast(scratch[c + tile], qd.i32) - 1
        acc = qd.cast(0, value_dtype)
        owned = 0
        for idx in range(tile * tile_size(), qd.min(tile * tile_size() + tile_size(), n)):
            v = values[idx]
            if head_flag(keys, idx) != 0:
                if owned != 0:
                    values_out[run] = acc
                run += 1
                keys_out[run] = keys[idx]
                acc = v
                owned = 1
            else:
                acc = combine(op, acc, v)
        if owned != 0:
            values_out[run] = acc


@top_level_func
def _leading_cpu(keys: template(), values: template(), values_out: template(), scratch, c, n,
                 value_dtype: template(), op: template()):
    for tile in range(num_tiles(n, tile_size())):
        idx = tile * tile_size()
        hi = qd.min(idx + tile_size(), n)
        if head_flag(keys, idx) == 0:
            acc = identity_of(op, value_dtype)
            while idx < hi and head_flag(keys, idx) == 0:
                acc = combine(op, acc, values[idx])
                idx += 1
            _atomic_combine(op, values_out[qd.cast(scratch[c + tile], qd.i32) - 1], acc)


@top_level_func
def _owned_gpu(keys: template(), values: template(), keys_out: template(), values_out: template(), scratch, c, n,
               value_dtype: template(), op: template()):
    qd.loop_config(block_dim=GPU_BLOCK_DIM)
    for i in range(num_tiles(n, tile_size()) * group_size()):
        tile = i // group_size()
        ln = lane()
        base = tile * tile_size()
        hi = qd.min(base + tile_size(), n)
        first_run = qd.cast(scratch[c + tile], qd.i32)
        rounds = qd.min(rounds_per_tile(), (n - base + group_size() - 1) // group_size())
        heads = 0                             # heads in the tile before this round
        carry = identity_of(op, value_dtype)  # the open run's value at the end of the previous round
        for r in range(rounds):
            idx = base + r * group_size() + ln
            h = 0
            v = identity_of(op, value_dtype)
            if idx < n:
                h = head_flag(keys, idx)
                v = values[idx]
            seen = _sg_inclusive_add(h)       # heads of this round up to my lane
            seg = _sg_segmented(v, h, op)     # op since the last head of the round (or its start)
            if seen == 0:
                seg = combine(op, seg, carry)
            below = sg_shuffle_up(seg, 1)     # the previous element's running sum
            if ln == 0:
                below = carry
            k = heads + seen                  # heads of the tile up to me: my run is first_run + k - 1
            if idx < n:
                if h != 0:
                    keys_out[first_run + k - 1] = keys[idx]
                    if k >= 2:                # the run before mine ended just before me, headed in this tile
                        values_out[first_run + k - 2] = below
                if idx == hi - 1 and k >= 1:  # the tile's last element: its run's part in this tile
                    values_out[first_run + k - 1] = seg
            carry = sg_last(seg)
            heads += sg_last(seen)


@top_level_func
def _leading_gpu(keys: template(), values: template(), values_out: template(), scratch, c, n,
                 value_dtype: template(), op: template()):
    qd.loop_config(block_dim=GPU_BLOCK_DIM)
    for i in range(num_tiles(n, tile_size()) * group_size()):
        tile = i // group_size()
        ln = lane()
        base = tile * tile_size()
        rounds = qd.min(rounds_per_tile(), (n - base + group_size() - 1) // group_size())
        if head_flag(keys, base) == 0:        # uniform over the subgroup
            acc = identity_of(op, value_dtype)
            done = 0
            r = 0
            while r < rounds and done == 0:
                idx = base + r * group_size() + ln
                h = 0
                v = identity_of(op, value_dtype)
                if idx < n:
                    h = head_flag(keys, idx)
                    v = values[idx]
                seen = _sg_inclusive_add(h)
                if seen == 0:
                    acc = combine(op, acc, v)
                done = sg_last(seen)
                r += 1
            total = sg_reduce(acc, op, value_dtype)
            if ln == 0:
                _atomic_combine(op, values_out[qd.cast(scratch[c + tile], qd.i32) - 1], total)


@top_level_func
def _write_total(num_runs, scratch, c):
    total = 0
    if c > 0:
        total = qd.cast(scratch[c - 1], qd.i32) + qd.cast(scratch[2 * c - 1], qd.i32)
    store_count(num_runs, total)


@builtin
def _reduce_by_key(what, op, keys_in, values_in, keys_out, values_out, num_runs, scratch, n, value_dtype,
                   log256_max_n):
    ctx = require("qd.algorithms")
    depth = check_depth(log256_max_n)
    check_dtype(what, value_dtype)
    check_array(what, "keys_in", keys_in)
    check_dtype(what, keys_in.dtype)
    check_array(what, "values_in", values_in, value_dtype)
    check_array(what, "keys_out", keys_out, keys_in.dtype)
    check_array(what, "values_out", values_out, value_dtype)
    check_array(what, "scratch", scratch, T.u32)
    n = count_of(n)
    c = ctx.scalar(num_tiles(n, tile_size()))
    tile_reduce(keys_in, 0, "head", n, scratch, 0, True, "add", T.u32, False)
    scan_staircase(scratch, 0, True, scratch, c, True, scratch, ctx.binary("mul", c, 2), c, "add", T.u32,
                   max(1, depth - 1))
    _write_total.inline(ctx, [num_runs, scratch, c], {})
    cpu = ctx.arch.name == "cpu"
    (_owned_cpu if cpu else _owned_gpu).inline(ctx, [keys_in, values_in, keys_out, values_out, scratch, c, n,
                                                     value_dtype, op], {})
    (_leading_cpu if cpu else _leading_gpu).inline(ctx, [keys_in, values_in, values_out, scratch, c, n, value_dtype,
                                                         op], {})
    return None


@top_level_func
def reduce_by_key_add(keys_in, values_in, keys_out, values_out, num_runs, scratch, n, value_dtype: template(),
                      log256_max_n: template()):
    """For each run of equal consecutive keys among keys_in[0:n]: keys_out[r] = its key, values_out[r]
    = the sum of its values; num_runs[0] = the number of runs. Call at the top level of a kernel."""
    _reduce_by_key("reduce_by_key_add", "add", keys_in, values_in, keys_out, values_out, num_runs, scratch, n,
                   value_dtype, log256_max_n)


@top_level_func
def reduce_by_key_min(keys_in, values_in, keys_out, values_out, num_runs, scratch, n, value_dtype: template(),
                      log256_max_n: template()):
    """As reduce_by_key_add, with values_out[r] = the minimum of run r's values (a NaN value: see
    docs/algorithms.md). Call at the top level of a kernel."""
    _reduce_by_key("reduce_by_key_min", "min", keys_in, values_in, keys_out, values_out, num_runs, scratch, n,
                   value_dtype, log256_max_n)


@top_level_func
def reduce_by_key_max(keys_in, values_in, keys_out, values_out, num_runs, scratch, n, value_dtype: template(),
                      log256_max_n: template()):
    """As reduce_by_key_add, with values_out[r] = the maximum of run r's values."""
    _reduce_by_key("reduce_by_key_max", "max", keys_in, values_in, keys_out, values_out, num_runs, scratch, n,
                   value_dtype, log256_max_n)
