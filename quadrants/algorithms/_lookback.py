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
`qd.algorithms.scan_lowering()` reports the choice.

Where ordered atomics are slow barriers (llvmpipe: `ordered_atomics_act_as_barriers`; one
Release store there costs about a microsecond), the scan of 32-bit values has a third lowering,
the relaxed look-back: every state access is a Relaxed atomic, so nothing orders a status before
its value; instead each value is published as two self-checking words, (bits & 0xFFFF) | TAG and
(bits >> 16) | TAG, each written once: a reader that sees both tags has the value, one that sees
either word still 0 treats it as not published. Nothing ever waits: a predecessor without a
published aggregate is reduced from its input by the tile looking back (on llvmpipe a spin is a
loop its limiter may end). The tiles are RELAXED_TILE elements, each lane's share held in
registers from the load to the store, so the input is loaded once:

    scratch[0]                           the tile counter
    scratch[1 + 2t], scratch[2 + 2t]     tile t's aggregate, as two tagged halves
    scratch[1 + 2c + 2t], [2 + 2c + 2t]  tile t's inclusive prefix, the same way"""
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
RELAXED_LOOKBACK = "relaxed_lookback"  # GPU exclusive scans of 32-bit values; select, 64-bit values and the cpu
                                       # (also where forced) take reduce-then-scan
LOWERINGS = (LOOKBACK, REDUCE_THEN_SCAN, RELAXED_LOOKBACK)
# The decoupled look-back's tiles are 1024 (GPUs) or 4096 (cpu) elements and take 3 state slots
# each; the relaxed look-back's take 4 per RELAXED_TILE: what lookback_slots sizes for.
RELAXED_TILE = 128  # elements of a relaxed look-back tile (a multiple of every subgroup size)
_TAG = 0x10000      # a published half: its 16 bits | _TAG (0 = not yet written)

_fallback_only = False  # tests: the relaxed look-back ignores published aggregates (reduces every predecessor)

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
        if arch.name == "vulkan" and "ordered_atomics_act_as_barriers" in feats and value_bits == 32:
            return RELAXED_LOOKBACK
        return REDUCE_THEN_SCAN
    # 8-byte values take u64 slots: their counter and statuses need 64-bit atomics
    if value_bits == 64 and arch.name == "vulkan" and "int64_atomics_buffer" not in feats:
        return REDUCE_THEN_SCAN
    return LOOKBACK


def scan_lowering(dtype=None, arch=None):
    """How exclusive_scan_{add,min,max} of `dtype` (default qd.u32; select counts in u32) compiles on
    `arch` (default the current one): "decoupled_lookback" (single pass) or "reduce_then_scan"
    (the fallback, where the target cannot wait on another workgroup); "relaxed_lookback" (single
    pass without ordered atomics, 32-bit dtypes where ordered atomics act as barriers: lavapipe),
    for which select takes reduce-then-scan. Host-callable."""
    arch = arch or runtime.program().config.arch
    if isinstance(arch, str):
        arch = runtime.arch_from_name(arch)
    dtype = T.u32 if dtype is None else T.to_dtype(dtype)
    return lowering_for(arch, dtype.bits)


@builtin
def use_lookback(value_bits):
    return lowering_for(require("qd.algorithms").arch, value_bits) == LOOKBACK


@builtin
def use_relaxed_lookback(value_bits):
    return lowering_for(require("qd.algorithms").arch, value_bits) == RELAXED_LOOKBACK


@contextlib.contextmanager
def fallback_only():
    """Kernels compiled inside take the relaxed look-back's fallback for every predecessor (tests:
    the path a tile takes when its predecessor has not published yet, which scheduling decides)."""
    global _fallback_only
    prev, _fallback_only = _fallback_only, True
    try:
        yield
    finally:
        _fallback_only = prev


@builtin
def _fallback_forced():
    return _fallback_only


def lookback_slots(n):
    """Scratch slots of the look-back state for n elements (host ints or kernel values): the relaxed
    look-back's 4 per tile of RELAXED_TILE + 1, more than the decoupled one's 3 per 1024 + 1."""
    what = "scratch_slots"
    return k_add(what, k_mul(what, k_cdiv(what, n, RELAXED_TILE), 4), 1)


# --- phases -------------------------------------------------------------------------------------
@top_level_func
def reset_state(state: template(), c):
    """state[0 : c + 1] (the counter and the statuses, or the relaxed look-back's tagged halves) to 0
    (a phase of its own, before the look-back loop)."""
    for i in range(c + 1):
        state[i] = 0


@helper_func
def _claim(state: template()):
    return qd.cast(qd.atomic_add(state[0], 1, memory_order=_RELAXED), qd.i32)


@helper_func
def _claim_tile(state: template(), ln):
    """The next tile id from the counter: lane `ln` 0 claims it, every lane of the subgroup gets it."""
    t = 0
    if ln == 0:
        t = _claim(state)
    return sg_first(t)


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
        tile = _claim_tile(state, ln)
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


# --- the relaxed look-back (see the module doc) -------------------------------------------------
@builtin
def _bits_of(v, dtype):
    ctx = require("qd.algorithms")
    v = ctx.scalar(v)
    return ctx.expr(ctx.b.bitcast(v.stmt, T.u32.core)) if dtype is not T.u32 else v


@builtin
def _value_of(bits, dtype):
    ctx = require("qd.algorithms")
    bits = ctx.scalar(bits)
    return ctx.expr(ctx.b.bitcast(bits.stmt, dtype.core)) if dtype is not T.u32 else bits


@helper_func
def _put_halves(state: template(), at, v, dtype: template()):
    b = _bits_of(v, dtype)
    qd.atomic_store(state[at], (b & 0xFFFF) | _TAG, memory_order=_RELAXED)
    qd.atomic_store(state[at + 1], (b >> 16) | _TAG, memory_order=_RELAXED)


@helper_func
def _relaxed_tile_reduce(src: template(), src_slot: template(), count, tile, ln, op: template(), dtype: template()):
    """op over tile `tile` of the source, on every lane (each lane its RELAXED_TILE / group_size()
    consecutive elements)."""
    lo = tile * RELAXED_TILE + ln * (RELAXED_TILE // group_size())
    acc = identity_of(op, dtype)
    for q in qd.static(range(RELAXED_TILE // group_size())):
        if lo + q < count:
            acc = combine(op, acc, load(src, 0, src_slot, lo + q, dtype))
    return sg_first(sg_reduce(acc, op, dtype))


@top_level_func
def scan_relaxed_gpu(src: template(), src_slot: template(), dst: template(), count, state: template(), c,
                     op: template(), dtype: template()):
    """Exclusive scan of src[0:count] into dst, one tile of RELAXED_TILE per subgroup (claimed from
    the counter), lane ln holding elements ln * K .. ln * K + K - 1 of it (K = RELAXED_TILE /
    group_size()) in registers; the look-back reads only Relaxed atomics (see the module doc)."""
    qd.loop_config(block_dim=GPU_BLOCK_DIM)
    for _ in range(c * group_size()):
        ln = lane()
        tile = _claim_tile(state, ln)
        k = qd.static(RELAXED_TILE // group_size())
        lo = tile * RELAXED_TILE + ln * k
        v = qd.Vector([0] * k, dt=dtype)
        mine = identity_of(op, dtype)
        for q in qd.static(range(k)):
            v[q] = identity_of(op, dtype)
            if lo + q < count:
                v[q] = load(src, 0, src_slot, lo + q, dtype)
            mine = combine(op, mine, v[q])
        agg = sg_first(sg_reduce(mine, op, dtype))
        prefix = identity_of(op, dtype)
        if tile > 0:
            if ln == 0:
                _put_halves(state, 1 + 2 * tile, agg, dtype)
            j = tile - 1
            while j >= 0:  # steps back over the tiles still in flight (a few), each j once
                i0 = sg_first(qd.atomic_load(state[1 + 2 * c + 2 * j], memory_order=_RELAXED))
                i1 = sg_first(qd.atomic_load(state[2 + 2 * c + 2 * j], memory_order=_RELAXED))
                if qd.static(_fallback_forced()):
                    i0 = qd.u32(0)
                if (i0 & i1 & _TAG) != 0:  # its inclusive prefix: done
                    prefix = combine(op, _value_of((i0 & 0xFFFF) | (i1 << 16), dtype), prefix)
                    j = -1
                else:
                    a0 = sg_first(qd.atomic_load(state[1 + 2 * j], memory_order=_RELAXED))
                    a1 = sg_first(qd.atomic_load(state[2 + 2 * j], memory_order=_RELAXED))
                    if qd.static(_fallback_forced()):
                        a0 = qd.u32(0)
                    if (a0 & a1 & _TAG) != 0:
                        prefix = combine(op, _value_of((a0 & 0xFFFF) | (a1 << 16), dtype), prefix)
                    else:  # not published yet: reduce its input here (no waiting)
                        prefix = combine(op, _relaxed_tile_reduce(src, src_slot, count, j, ln, op, dtype), prefix)
                    j -= 1
        if ln == 0:
            _put_halves(state, 1 + 2 * c + 2 * tile, combine(op, prefix, agg), dtype)
        run = combine(op, prefix, sg_exclusive(mine, op, dtype))
        for q in qd.static(range(k)):
            if lo + q < count:
                store(dst, 0, False, lo + q, run, dtype)
            run = combine(op, run, v[q])
