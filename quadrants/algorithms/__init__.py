"""qd.algorithms: device-wide reduce, scan, select, sort and reduce-by-key, composed at the top level
of the user's kernel (docs/algorithms.md)."""
from quadrants.algorithms._lookback import scan_lowering
from quadrants.algorithms._legacy import PrefixSumExecutor, parallel_sort
from quadrants.algorithms._radix_sort import sort, sort_scratch_slots
from quadrants.algorithms._reduce_by_key import (
    reduce_by_key_add, reduce_by_key_max, reduce_by_key_min, reduce_by_key_scratch_slots,
)
from quadrants.algorithms._scan import (
    exclusive_scan_add, exclusive_scan_max, exclusive_scan_min, exclusive_scan_scratch_slots,
)
from quadrants.algorithms._select import select, select_scratch_slots
from quadrants.algorithms._reduce import reduce_add, reduce_max, reduce_min, reduce_scratch_slots

__all__ = [
    "PrefixSumExecutor",
    "parallel_sort",
    "exclusive_scan_add",
    "exclusive_scan_max",
    "exclusive_scan_min",
    "exclusive_scan_scratch_slots",
    "select",
    "sort",
    "sort_scratch_slots",
    "select_scratch_slots",
    "reduce_add",
    "reduce_by_key_add",
    "reduce_by_key_max",
    "reduce_by_key_min",
    "reduce_by_key_scratch_slots",
    "reduce_max",
    "reduce_min",
    "reduce_scratch_slots",
    "scan_lowering",
]
