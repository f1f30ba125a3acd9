"""qd.algorithms.reduce_{add,min,max}: out[0] = op over arr[0:n] (docs/algorithms.md)."""
from quadrants.lang.ops import builtin
from quadrants.lang.ast.context import require
from quadrants.types import template

from quadrants.algorithms._common import (
    check_array, check_depth, check_dtype, check_scratch, count_of, depth_arg, k_max, k_count, min_depth_for,
    staircase_slots, top_level_func,
)
from quadrants.algorithms._phases import reduce_staircase


def _reduce_depth_for_n(n):
    """The smallest log256_max_n whose capacity 256 ** D covers n (at least 1)."""
    return min_depth_for(n)


def reduce_scratch_slots(N, log256_max_n=None):
    """Scratch slots reduce_{add,min,max} needs for up to N elements compiled for log256_max_n (u32
    slots for 4-byte dtypes, u64 for 8-byte ones). Host- and kernel-callable; without log256_max_n
    (host only) the smallest depth covering N."""
    what = "reduce_scratch_slots"
    n = k_count(what, N)
    return k_max(what, staircase_slots(what, n, depth_arg(what, n, log256_max_n)), 1)


reduce_scratch_slots._qd_builtin = True


@builtin
def _reduce(what, arr, out, scratch, n, op, dtype, log256_max_n):
    ctx = require("qd.algorithms")
    check_dtype(what, dtype)
    if ctx.deterministic and dtype.is_real:  # its tiles combine in an order of the backend's tiling
        ctx.type_error(f"qd.algorithms.{what} on {dtype}: deterministic mode (docs/atomics.md) gives float sums one "
                       f"rounding on every backend, and this op's tiles combine in an order of their own; reduce "
                       f"with qd.atomic_add into a field instead")
    depth = check_depth(log256_max_n)
    check_array(what, "arr", arr, dtype)
    check_array(what, "out", out, dtype)
    check_scratch(what, scratch, dtype)
    reduce_staircase(arr, 0, False, out, 0, False, scratch, 0, count_of(n), op, dtype, depth)
    return None


@top_level_func
def reduce_add(arr, out, scratch, n, dtype: template(), log256_max_n: template()):
    """out[0] = arr[0] + ... + arr[n-1] (0 for n == 0). Call at the top level of a kernel."""
    _reduce("reduce_add", arr, out, scratch, n, "add", dtype, log256_max_n)


@top_level_func
def reduce_min(arr, out, scratch, n, dtype: template(), log256_max_n: template()):
    """out[0] = min(arr[0:n]) (the dtype's largest value / +inf for n == 0)."""
    _reduce("reduce_min", arr, out, scratch, n, "min", dtype, log256_max_n)


@top_level_func
def reduce_max(arr, out, scratch, n, dtype: template(), log256_max_n: template()):
    """out[0] = max(arr[0:n]) (the dtype's smallest value / -inf for n == 0)."""
    _reduce("reduce_max", arr, out, scratch, n, "max", dtype, log256_max_n)
