"""Single-pass exclusive scan and select with decoupled look-back (Merrill and Garland, "Single-pass
Parallel Prefix Scan with Decoupled Look-back", 2016), and the choice between it and the
reduce-then-scan staircase (docs/algorithms.md, "How they work").

One parallel loop over tiles. Each tile takes its id from an atomic counter (so a tile only ever
waits on tiles that some worker has already started: waiting never depends on the order in which
the loop's iterations or workgroups are scheduled), reduces its elements, publishes that aggregate,
then walks back over its predecessors' published state until one of them has its inclusive prefix,
publishes its own inclusive prefix and finally scans its elements (again: the tile is still in
cache) from the exclusive prefix it found. The input is read from memory once.

Per-tile state, in the caller's scratch (u32 slots for 4-byte values, u64 for 8-byte ones), reset
by a small phase before the loop (scratch is uninitialised):

    scratch[0]                 the tile counter
    scratch[1 + t]             tile t's status: 0 nothing yet, 1 aggregate, 2 inclusive prefix
    scratch[1 + c + t]         tile t's aggregate (the value's bits)
    scratch[1 + 2c + t]        tile t's inclusive prefix

A value is written with a plain store, then its status with a Release atomic store; a reader loads
the status with an Acquire atomic load before it reads the value (so it sees the value written
before the status). Statuses only grow, and each value slot is written once.

Waiting on another workgroup needs facts of the device (forward progress for a workgroup that
started earlier, exact ordered atomics inside loops): the target's can_wait_on_other_workgroups
(csrc/target/target.h) decides, and where it is false the ops keep the reduce-then-scan staircase.
`qd.algorithms.scan_lowering()` reports the choice."""
import contextlib

from quadrants import types as T
from quadrants._lib import _core, runtime
from quadrants.lang.ast.context import require
from quadrants.lang.ops import builtin
from quadrants.types import template

from quadrants import language as qd
from quadrants.algorithms._common import combine, helper_func, identity_of, k_add, k_cdiv, k_mul, tile_size, top_level_func
from quadrants.algorithms._phases import (
    GPU_BLOCK_DIM, group_size, lane, load, reassoc_combine, rounds_per_tile, sg_exclusive, sg_first, sg_last,
    sg_reduce, span_exclusive_scan, span_scan_ok, store,
)

LOOKBACK = "decoupled_lookback"
REDUCE_THEN_SCAN = "reduce_then_scan"
LOWERINGS = (LOOKBACK, REDUCE_THEN_SCAN)
# The smallest look-back tile of any arch (GPUs: 1024; cpu: 4096): what the scratch helpers size for.
LOOKBACK_SIZING_TILE = 1024

_override = None

_RELAXED, _ACQUIRE, _RELEASE = qd.MemoryOrder.Relaxed, qd.MemoryOrder.Acquire, qd.MemoryOrder.Release
_AGGREGATE, _INCLUSIVE = 1, 2


@contextlib.contextmanager
def forced(lowering):
    """Kernels compiled inside use `lowering` whatever the target says (for tests and benchmarks;
    a look-back forced onto a target that cannot wait on other workgroups may hang or be wrong)."""
    global _override
    if lowering not in LOWERINGS:
        raise ValueError(f"lowering must be one of {LOWERINGS}, got {lowering!r}")
    prev, _override = _override, lowering
    try:
        yield
    finally:
        _override = prev


def _features(arch):
    prog = runtime.program()
    if arch is prog.config.arch:
        return list(prog.runtime.features)
    return list(_core.compile_features(arch.name))  # compiling without the device (qd.compile)


def lowering_for(arch, value_bits=32):
    """LOOKBACK or REDUCE_THEN_SCAN for a scan whose values (and scratch slots) have `value_bits`."""
    if _override is not None:
        return _override
    feats = _features(arch)
    if not _core.can_wait_on_other_workgroups(arch.name, feats):
        return REDUCE_THEN_SCAN
    # 8-byte values take u64 slots: their counter and statuses need 64-bit atomics
    if value_bits == 64 and arch.name == "vulkan" and "int64_atomics_buffer" not in feats:
        return REDUCE_THEN_SCAN
    return LOOKBACK


def scan_lowering(dtype=None, arch=None):
    """How exclusive_scan_{add,min,max} of `dtype` (default qd.u32; select counts in u32) compiles on
    `arch` (default the current one): "decoupled_lookback" (single pass) or "reduce_then_scan"
    (the fallback, where the target cannot wait on another workgroup). Host-callable."""
    arch = arch or runtime.program().config.arch
    if isinstance(arch, str):
        arch = runtime.arch_from_name(arch)
    dtype = T.u32 if dtype is None else T.to_dtype(dtype)
    return lowering_for(arch, dtype.bits)


@builtin
def use_lookback(value_bits):
    return lowering_for(require("qd.algorithms").arch, value_bits) == LOOKBACK


def lookback_slots(n):
    """Scratch slots of the look-back state for n elements (host ints or kernel values)."""
    what = "scratch_slots"
    return k_add(what, k_mul(what, k_cdiv(what, n, LOOKBACK_SIZING_TILE), 3), 1)


# --- phases -------------------------------------------------------------------------------------
@top_level_func
def reset_state(state: template(), c):
    """The counter and the c statuses to 0 (a phase of its own, before the look-back loop)."""
    for i in range(c + 1):
        state[i] = 0


@helper_func
def _claim(state: template()):
    return qd.cast(qd.atomic_add(state[0], 1, memory_order=_RELAXED), qd.i32)


@helper_func
def _publish_and_look_back(state: template(), c, tile, agg, op: template(), dtype: template()):
    """Publishes tile's aggregate, waits for / combines its predecessors' state, publishes its
    inclusive prefix; returns its exclusive prefix (the identity for tile 0)."""
    prefix = identity_of(op, dtype)
    if tile == 0:
        store(state, 1 + 2 * c, True, tile, agg, dtype)
        qd.atomic_store(state[1 + tile], _INCLUSIVE, memory_order=_RELEASE)
    else:
        store(state, 1 + c, True, tile, agg, dtype)
        qd.atomic_store(state[1 + tile], _AGGREGATE, memory_order=_RELEASE)
        j = tile - 1
        while j >= 0:
            s = qd.atomic_load(state[1 + j], memory_order=_ACQUIRE)
            if s == _INCLUSIVE:
                prefix = combine(op, load(state, 1 + 2 * c, True, j, dtype), prefix)
                j = -1
            elif s == _AGGREGATE:
                prefix = combine(op, load(state, 1 + c, True, j, dtype), prefix)
                j -= 1
            # status 0: tile j has started (its id was taken before ours) but not published: read again
        store(state, 1 + 2 * c, True, tile, combine(op, prefix, agg), dtype)
        qd.atomic_store(state[1 + tile], _INCLUSIVE, memory_order=_RELEASE)
    return prefix


@top_level_func
def scan_cpu(src: template(), src_slot: template(), dst: template(), count, state: template(), c,
             op: template(), dtype: template()):
    # Integers of 32 / 64 bits: the tile is scanned by a span statement (in-register prefix sums
    # over vectors, one combine per vector on the carried path). Otherwise (floats, conversions) a
    # full tile is scanned as two interleaved serial chains, one per half (the second starting
    # from the first half's aggregate): two elements per combine's latency. The first half is 8
    # elements longer, so that the chains' elements are not a multiple of 4 KiB apart (which the
    # cpu's store-to-load forwarding would take for possible aliases).
    for _ in range(c):
        tile = _claim(state)
        lo = tile * tile_size()
        hi = qd.min(lo + tile_size(), count)
        if qd.static(span_scan_ok(src, src_slot, dst, dtype)):
            agg = identity_of(op, dtype)
            for idx in range(lo, hi):
                agg = reassoc_combine(op, agg, load(src, 0, src_slot, idx, dtype))
            span_exclusive_scan(dst, src, lo, hi - lo, _publish_and_look_back(state, c, tile, agg, op, dtype), op,
                                dtype)
        elif hi - lo == tile_size():
            h = tile_size() // 2 + 8
            a0 = identity_of(op, dtype)
            for idx in range(lo, lo + h):
                a0 = reassoc_combine(op, a0, load(src, 0, src_slot, idx, dtype))
            a1 = identity_of(op, dtype)
            for idx in range(lo + h, hi):
                a1 = reassoc_combine(op, a1, load(src, 0, src_slot, idx, dtype))
            r0 = _publish_and_look_back(state, c, tile, combine(op, a0, a1), op, dtype)
            r1 = combine(op, r0, a0)
            for k in range(tile_size() - h):
                v0 = load(src, 0, src_slot, lo + k, dtype)
                v1 = load(src, 0, src_slot, lo + h + k, dtype)
                store(dst, 0, False, lo + k, r0, dtype)
                store(dst, 0, False, lo + h + k, r1, dtype)
                r0 = combine(op, r0, v0)
                r1 = combine(op, r1, v1)
            for k in range(tile_size() - h, h):
                v0 = load(src, 0, src_slot, lo + k, dtype)
                store(dst, 0, False, lo + k, r0, dtype)
                r0 = combine(op, r0, v0)
        else:
            agg = identity_of(op, dtype)
            for idx in range(lo, hi):
                agg = reassoc_combine(op, agg, load(src, 0, src_slot, idx, dtype))
            run = _publish_and_look_back(state, c, tile, agg, op, dtype)
            for idx in range(lo, hi):
                v = load(src, 0, src_slot, idx, dtype)
                store(dst, 0, False, idx, run, dtype)
                run = combine(op, run, v)


@top_level_func
def scan_gpu(src: template(), src_slot: template(), dst: template(), count, state: template(), c,
             op: template(), dtype: template()):
    qd.loop_config(block_dim=GPU_BLOCK_DIM)
    for _ in range(c * group_size()):
        ln = lane()
        t = 0
        if ln == 0:
            t = _claim(state)
        tile = sg_first(t)
        base = tile * tile_size()
        rounds = qd.min(rounds_per_tile(), (count - base + group_size() - 1) // group_size())
        acc = identity_of(op, dtype)
        for r in range(rounds):
            idx = base + r * group_size() + ln
            if idx < count:
                acc = combine(op, acc, load(src, 0, src_slot, idx, dtype))
        total = sg_reduce(acc, op, dtype)
        prefix = identity_of(op, dtype)
        if ln == 0:
            prefix = _publish_and_look_back(state, c, tile, total, op, dtype)
        carry = sg_first(prefix)
        for r in range(rounds):
            idx = base + r * group_size() + ln
            v = identity_of(op, dtype)
            if idx < count:
                v = load(src, 0, src_slot, idx, dtype)
            ex = sg_exclusive(v, op, dtype)
            if idx < count:
                store(dst, 0, False, idx, combine(op, carry, ex), dtype)
            carry = combine(op, carry, sg_last(combine(op, ex, v)))
