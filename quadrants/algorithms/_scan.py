"""qd.algorithms.exclusive_scan_{add,min,max}: out[i] = op over arr[0:i] (docs/algorithms.md)."""
from quadrants.lang.ast.context import require
from quadrants.lang.ops import builtin
from quadrants.types import template

from quadrants.algorithms._common import value_error
from quadrants.algorithms._common import (
    check_array, check_depth, check_dtype, check_scratch, count_of, depth_arg, k_count, k_max, staircase_slots,
    top_level_func,
)
from quadrants.algorithms._lookback import (
    RELAXED_TILE, lookback_slots, reset_state, scan_cpu, scan_gpu, scan_relaxed_gpu, use_lookback,
    use_relaxed_lookback,
)
from quadrants.algorithms._phases import num_tiles, scan_staircase
from quadrants.algorithms._common import tile_size


def exclusive_scan_scratch_slots(N, log256_max_n=None):
    """Scratch slots exclusive_scan_{add,min,max} needs for up to N elements compiled for log256_max_n
    (u32 slots for 4-byte dtypes, u64 for 8-byte ones). Host- and kernel-callable; without
    log256_max_n (host only) the smallest depth covering N. Enough for either lowering (the
    staircase's partials, or the look-back's per-tile state)."""
    what = "exclusive_scan_scratch_slots"
    n = k_count(what, N)
    return k_max(what, k_max(what, staircase_slots(what, n, depth_arg(what, n, log256_max_n)), lookback_slots(n)), 1)


exclusive_scan_scratch_slots._qd_builtin = True


@builtin
def _scan(what, arr, out, scratch, n, op, dtype, log256_max_n):
    ctx = require("qd.algorithms")
    check_dtype(what, dtype)
    depth = check_depth(log256_max_n)
    check_array(what, "arr", arr, dtype)
    check_array(what, "out", out, dtype)
    if out is arr or getattr(out, "buffer", object()) == getattr(arr, "buffer", None):
        value_error(f"qd.algorithms.{what}: out must be a distinct buffer from arr (no in-place scan)")
    check_scratch(what, scratch, dtype)
    n = count_of(n)
    if use_lookback(dtype.bits):
        c = ctx.scalar(num_tiles(n, tile_size()))
        reset_state.inline(ctx, [scratch, c], {})
        (scan_cpu if ctx.arch.name == "cpu" else scan_gpu).inline(ctx, [arr, False, out, n, scratch, c, op, dtype], {})
    elif use_relaxed_lookback(dtype.bits) and dtype.bits == 32 and ctx.arch.name != "cpu":
        c = ctx.scalar(num_tiles(n, RELAXED_TILE))
        reset_state.inline(ctx, [scratch, ctx.binary("mul", c, 4)], {})
        scan_relaxed_gpu.inline(ctx, [arr, False, out, n, scratch, c, op, dtype], {})
    else:
        scan_staircase(arr, 0, False, out, 0, False, scratch, 0, n, op, dtype, depth)
    return None


@top_level_func
def exclusive_scan_add(arr, out, scratch, n, dtype: template(), log256_max_n: template()):
    """out[i] = arr[0] + ... + arr[i-1] for i < n (out[0] = 0). Call at the top level of a kernel."""
    _scan("exclusive_scan_add", arr, out, scratch, n, "add", dtype, log256_max_n)


@top_level_func
def exclusive_scan_min(arr, out, scratch, n, dtype: template(), log256_max_n: template()):
    """out[i] = min(arr[0:i]) for i < n (out[0] = the dtype's largest value / +inf)."""
    _scan("exclusive_scan_min", arr, out, scratch, n, "min", dtype, log256_max_n)


@top_level_func
def exclusive_scan_max(arr, out, scratch, n, dtype: template(), log256_max_n: template()):
    """out[i] = max(arr[0:i]) for i < n (out[0] = the dtype's smallest value / -inf)."""
    _scan("exclusive_scan_max", arr, out, scratch, n, "max", dtype, log256_max_n)
