"""qd.algorithms.sort: LSB radix sort of 32- / 64-bit keys, optionally carrying values (docs/algorithms.md).

8-bit digits, one pass per digit below end_bit, each of three phases over tiles of the keys:
  1. histogram: each tile counts its digits and writes the counts digit-major to
     scratch[d * tiles + tile];
  2. an exclusive scan of those 256 * tiles counts in place (the staircase, its partials after them):
     entry (d, tile) becomes where tile's first key of digit d goes;
  3. a stable scatter: each tile walks its keys in order and writes each key (and value) at its
     digit's counter, which then moves on by one.
On the cpu only the most significant digit takes those phases (a tile is one iteration of a loop
of one-thread blocks, which counts and scatters serially, the bins / counters in the block's shared
array, the scatter's writes through a cache-line buffer per digit, full lines out in streaming
stores); the keys are then in RADIX buckets by that digit, and each bucket, one per iteration, is
sorted by the digits below it: their counts in one read, then a stable pass per digit, inside the
worker's cache for buckets of up to a few ten thousand keys. On GPUs a tile is one subgroup, which
walks it in rounds of group_size() keys: shared atomics on the subgroup's own bins for the
histogram; for the scatter the lanes holding the same digit find each other with one ballot per
digit bit (match-any), take their ranks among them from the ballot, and the last of them moves the
digit's shared counter.
The keys ping-pong between keys and tmp_keys; an odd number of passes ends with a copy back (the
cpu's buckets copy themselves back).

The digits come from an order-preserving map of the key's bits to an unsigned integer (computed on
the fly, the keys themselves move unchanged): unsigned keys as they are, signed ones with the sign
bit flipped, floats with the sign bit flipped on positives and every bit on negatives, -0.0 mapped
as +0.0 and every NaN above +inf. The order is therefore numpy's np.sort(kind="stable") /
np.argsort(kind="stable"): -0.0 and +0.0 equal (input order kept), NaNs last in input order."""
from quadrants import types as T
from quadrants.lang.ast.context import require
from quadrants.lang.ops import builtin
from quadrants.lang.simt import subgroup as _subgroup
from quadrants.types import template

from quadrants import language as qd
from quadrants import math as qdmath
from quadrants.algorithms._collectives import shared
from quadrants.algorithms._common import value_error
from quadrants.algorithms._common import (
    SIZING_TILE, check_array, check_depth, check_dtype, count_of, depth_arg, helper_func, k_add, k_cdiv, k_count,
    k_max, k_mul, min_depth_for, staircase_slots, tile_size,
    top_level_func,
)
from quadrants.algorithms._phases import group_size, lane, num_tiles, rounds_per_tile, scan_staircase

import os as _os
RADIX_BITS = 8
MIN_CPU_SORT_TILE = 65536
RADIX = 1 << RADIX_BITS
SORT_BLOCK_DIM = 64  # GPU: threads of a block; each subgroup has RADIX shared counters


def _min_log256_for_n(n):
    """The smallest log256_max_n whose capacity 256 ** D covers n (at least 1)."""
    return min_depth_for(n)


def sort_scratch_slots(N, log256_max_n=None):
    """u32 scratch slots sort needs for up to N keys compiled for log256_max_n (the same for every
    key width). Host- and kernel-callable; without log256_max_n (host only) the smallest depth."""
    what = "sort_scratch_slots"
    n = k_count(what, N)
    depth = depth_arg(what, n, log256_max_n)
    # the tile histograms: 256 bins per tile of >= 256 keys (GPUs; the cpu's tiles are longer)
    m = k_mul(what, k_cdiv(what, n, SIZING_TILE), RADIX)
    return k_max(what, k_add(what, m, staircase_slots(what, m, depth)), 1)


sort_scratch_slots._qd_builtin = True


@builtin
def sort_tile():
    """GPUs: keys per tile of the sort, the scans' tile."""
    return tile_size()


def _cpu_workers(ctx):
    return int(getattr(ctx.config, "cpu_max_num_threads", 0) or _os.cpu_count() or 1)


@builtin
def cpu_sort_tile(n):
    """cpu: keys per tile, a run-time value: n split into about 4 tiles per worker thread, and at
    least MIN_CPU_SORT_TILE (a tile's output for each digit is then a long run: the scatter's
    writes are closer to sequential than with small tiles)."""
    ctx = require("qd.algorithms")
    per = ctx.binary("floordiv", ctx.binary("add", n, 4 * _cpu_workers(ctx) - 1), 4 * _cpu_workers(ctx))
    return ctx.binary("max", per, MIN_CPU_SORT_TILE)


@builtin
def _on_cpu():
    return require("qd.algorithms").arch.name == "cpu"


@builtin
def _bits_dtype(key_dtype):
    return T.u32 if key_dtype.bits == 32 else T.u64


@builtin
def ordered_bits(k, key_dtype):
    """The key's bits mapped to an unsigned integer whose order is the keys' (see the module doc)."""
    ctx = require("qd.algorithms")
    U, bits = _bits_dtype(key_dtype), key_dtype.bits
    c = lambda v: ctx.const(v, U)  # noqa: E731
    sel = lambda p, a, b: ctx.expr(ctx.b.select(p.stmt, a.stmt, b.stmt))  # noqa: E731
    k = ctx.scalar(k)
    b = ctx.expr(ctx.b.bitcast(k.stmt, U.core)) if k.dtype is not U else k
    sign = 1 << (bits - 1)
    if key_dtype.is_real:
        inf = 0x7F800000 if bits == 32 else 0x7FF0000000000000
        mag = ctx.binary("bit_and", b, c(sign - 1))
        b = ctx.binary("bit_xor", b, sel(ctx.binary("ge", b, c(sign)), c((1 << bits) - 1), c(sign)))
        b = sel(ctx.binary("eq", mag, c(0)), c(sign), b)                  # -0.0 sorts as +0.0
        b = sel(ctx.binary("gt", mag, c(inf)), c((1 << bits) - 1), b)     # every NaN after +inf
    elif key_dtype.is_signed:
        b = ctx.binary("bit_xor", b, c(sign))
    return b


@builtin
def digit(k, key_dtype, shift, width=RADIX_BITS):
    """Digit (i32) of `width` bits of the key's ordered bits at bit `shift` (both compile-time)."""
    ctx = require("qd.algorithms")
    U = _bits_dtype(key_dtype)
    b = ordered_bits(k, key_dtype)
    d = ctx.binary("bit_and", ctx.binary("shr", b, ctx.const(shift, U)), ctx.const((1 << width) - 1, U))
    return ctx.cast(d, T.i32)


@top_level_func
def _histogram_cpu(src: template(), n, tile_keys, scratch: template(), key_dtype: template(), shift: template()):
    nt = (n + tile_keys - 1) // tile_keys
    qd.loop_config(block_dim=1)  # a tile per iteration; the bins are the worker's
    for tile in range(nt):
        hist = shared("digits", RADIX, qd.i32)
        for d in range(RADIX):
            hist[d] = 0
        for idx in range(tile * tile_keys, qd.min(tile * tile_keys + tile_keys, n)):
            hist[digit(src[idx], key_dtype, shift)] += 1
        for d in range(RADIX):
            scratch[d * nt + tile] = qd.cast(hist[d], qd.u32)


@builtin
def _sg_bins():
    """Elements of the per-block shared bins: RADIX per subgroup of the block."""
    return (SORT_BLOCK_DIM // _subgroup.group_size()) * RADIX


@helper_func
def _sg_sync():
    qd.simt.subgroup.mem_fence()
    qd.simt.subgroup.sync()


@top_level_func
def _histogram_gpu(src: template(), n, scratch: template(), key_dtype: template(), shift: template()):
    nt = num_tiles(n, sort_tile())
    qd.loop_config(block_dim=SORT_BLOCK_DIM)
    for i in range(nt * group_size()):
        tile = i // group_size()
        ln = lane()
        hist = shared("sg_digits", _sg_bins(), qd.i32)
        hb = (qd.simt.block.thread_idx() // group_size()) * RADIX  # this subgroup's bins
        for d in range(ln, RADIX, group_size()):
            hist[hb + d] = 0
        _sg_sync()
        base = tile * sort_tile()
        rounds = qd.min(rounds_per_tile(), (n - base + group_size() - 1) // group_size())
        for r in range(rounds):
            idx = base + r * group_size() + ln
            if idx < n:
                qd.atomic_add(hist[hb + digit(src[idx], key_dtype, shift)], 1)
        _sg_sync()
        for d in range(ln, RADIX, group_size()):
            scratch[d * nt + tile] = qd.cast(hist[hb + d], qd.u32)


LINE_BYTES = 64  # cpu: a cache line, the unit the scatter writes in


@builtin
def _line_lanes(dtype):
    """cpu: elements of `dtype` per cache line."""
    return LINE_BYTES // (dtype.bits // 8)


@builtin
def _stream_store(arr, idx, value):
    """arr[idx] = value as a streaming store (Stmt::nontemporal: on the cpu a non-temporal store)."""
    ctx = require("qd.algorithms")
    target = ctx.element(arr, [ctx.scalar(idx)])
    ctx.written.add(target.buffer)
    ctx.b.global_store(target.stmt, ctx.scalar(value, target.dtype).stmt, True)


@helper_func
def _line_put(dst: template(), line: template(), first, d, pos, v, lanes: template()):
    """cpu: element `pos` of digit d's run (its first element `first`) into the run's line
    buffer, line[d * lanes + pos % lanes]; a line that this puts the last element of goes out as a
    whole, in streaming stores (the elements of it before `first` belong to another tile or digit,
    so a run's first line goes out element by element, from `first` on)."""
    line[d * lanes + (pos & (lanes - 1))] = v
    if (pos + 1) & (lanes - 1) == 0:
        lo = pos & ~(lanes - 1)  # (its low bits known zero, lo | j below are consecutive addresses)
        if lo >= first:
            for j in qd.static(range(lanes)):
                _stream_store(dst, lo | j, line[d * lanes + j])
        else:
            for j in range(first, pos + 1):
                dst[j] = line[d * lanes + (j & (lanes - 1))]


@helper_func
def _line_flush(dst: template(), line: template(), first, d, end, lanes: template()):
    """cpu: the elements of digit d's run [first, end) still in its line buffer (end's line)."""
    for j in range(qd.max(end & ~(lanes - 1), first), end):
        dst[j] = line[d * lanes + (j & (lanes - 1))]


@top_level_func
def _scatter_cpu(src: template(), dst: template(), src_v: template(), dst_v: template(), has_values: template(), n,
                 tile_keys, scratch: template(), key_dtype: template(), shift: template()):
    """cpu: each tile's keys (and values) to their digits' runs, in order (stable). The writes go
    through a line buffer per digit in the worker's cache and out a cache line at a time in streaming
    stores (software write-combining): the 256 runs then cost no read of each line before it is
    written (2^22 u32 keys by the top byte, one thread, a C model on an Intel Xeon: 14.2 -> 6.2 ms)."""
    nt = (n + tile_keys - 1) // tile_keys
    qd.loop_config(block_dim=1)
    for tile in range(nt):
        off = shared("digits", RADIX, qd.i32)
        first = shared("digit_firsts", RADIX, qd.i32)
        keys_line = shared("key_lines", RADIX * _line_lanes(key_dtype), key_dtype)
        values_line = shared("value_lines", RADIX * _line_lanes(dst_v.dtype), dst_v.dtype) \
            if qd.static(has_values) else keys_line
        for d in range(RADIX):
            o = qd.cast(scratch[d * nt + tile], qd.i32)
            off[d] = o
            first[d] = o
        for idx in range(tile * tile_keys, qd.min(tile * tile_keys + tile_keys, n)):  # in order: stable
            k = src[idx]
            d = digit(k, key_dtype, shift)
            pos = off[d]
            off[d] = pos + 1
            _line_put(dst, keys_line, first[d], d, pos, k, _line_lanes(key_dtype))
            if qd.static(has_values):
                _line_put(dst_v, values_line, first[d], d, pos, src_v[idx], _line_lanes(dst_v.dtype))
        for d in range(RADIX):
            _line_flush(dst, keys_line, first[d], d, off[d], _line_lanes(key_dtype))
            if qd.static(has_values):
                _line_flush(dst_v, values_line, first[d], d, off[d], _line_lanes(dst_v.dtype))


def bucket_digits(bits):
    """cpu: the (shift, width, first counter) of the digits a bucket is sorted by, for its keys' low
    `bits` bits, and the number of counters: as few digits as ones of at most 12 bits allow (a
    bucket's 4096 counters and its keys then stay in the worker's cache), of near-equal widths."""
    k = -(-bits // 12)
    widths = [bits // k + (1 if i < bits % k else 0) for i in range(k)]
    digits = [(sum(widths[:i]), w, sum(1 << v for v in widths[:i])) for i, w in enumerate(widths)]
    return digits, sum(1 << w for w in widths)


@helper_func
def _bucket_pass(src: template(), dst: template(), src_v: template(), dst_v: template(), has_values: template(),
                 lo, hi, bins: template(), b0: template(), key_dtype: template(), shift: template(),
                 width: template()):
    """cpu: one stable pass over keys[lo:hi] (one bucket) by the digit at (shift, width), src -> dst;
    the digit counts at bins[b0:b0 + 2^width] become the digits' next positions."""
    pos = lo
    for d in range(1 << width):
        cnt = bins[b0 + d]
        bins[b0 + d] = pos
        pos += cnt
    for idx in range(lo, hi):  # in order: stable
        k = src[idx]
        d = digit(k, key_dtype, shift, width)
        p = bins[b0 + d]
        bins[b0 + d] = p + 1
        dst[p] = k
        if qd.static(has_values):
            dst_v[p] = src_v[idx]


@top_level_func
def _buckets_cpu(keys: template(), tmp_keys: template(), values: template(), tmp_values: template(),
                 has_values: template(), n, nt, scratch: template(), key_dtype: template(), low_bits: template()):
    """cpu, after the pass by the most significant digit (keys -> tmp_keys, which the scan's
    offsets in scratch split into RADIX buckets): each bucket sorted by its keys' `low_bits` bits
    below that digit, one bucket per iteration (it stays in the worker's cache): the counts of every
    digit (bucket_digits) in one read, then a stable pass per digit, tmp_keys -> keys -> tmp_keys
    ...; ending in keys."""
    digits, counters = qd.static(bucket_digits(low_bits))
    qd.loop_config(block_dim=1)
    for b in range(RADIX):
        lo = qd.cast(scratch[b * nt], qd.i32)
        hi = n
        if b + 1 < RADIX:
            hi = qd.cast(scratch[(b + 1) * nt], qd.i32)
        if hi > lo:
            bins = shared("bucket_digits", counters, qd.i32)
            for i in range(counters):
                bins[i] = 0
            for idx in range(lo, hi):
                k = tmp_keys[idx]
                for p in qd.static(range(len(digits))):
                    bins[digits[p][2] + digit(k, key_dtype, digits[p][0], digits[p][1])] += 1
            for p in qd.static(range(len(digits))):
                if qd.static(p % 2 == 0):
                    _bucket_pass(tmp_keys, keys, tmp_values, values, has_values, lo, hi, bins, digits[p][2], key_dtype,
                                 digits[p][0], digits[p][1])
                else:
                    _bucket_pass(keys, tmp_keys, values, tmp_values, has_values, lo, hi, bins, digits[p][2], key_dtype,
                                 digits[p][0], digits[p][1])
            if qd.static(len(digits) % 2 == 0):
                for idx in range(lo, hi):
                    keys[idx] = tmp_keys[idx]
                    if qd.static(has_values):
                        values[idx] = tmp_values[idx]


@builtin
def _mask_dtype():
    """Lane masks: u32 for subgroups of up to 32 lanes, else u64."""
    return T.u32 if _subgroup.group_size() <= 32 else T.u64


@builtin
def _lanes_below(ln):
    """The mask of the lanes below ln."""
    ctx = require("qd.algorithms")
    M = _mask_dtype()
    one = ctx.const(1, M)
    return ctx.binary("sub", ctx.binary("shl", one, ctx.cast(ln, M)), one)


@builtin
def _match_by_ballots():
    """How the scatter finds the lanes holding the same digit: one ballot per digit bit, or (Metal,
    whose ballots are 64-bit values it lacks before MSL 2.2) OR-ing lane bits into shared masks."""
    return require("qd.algorithms").arch.name != "metal" and not _os.environ.get("QD_ALGORITHMS_SHARED_MATCH")


@builtin
def _match_masks():
    """The shared lane masks of the shared-mask match (None with ballots)."""
    if _match_by_ballots():
        return None
    return shared("sg_masks", _sg_bins(), _mask_dtype())


@top_level_func
def _scatter_gpu(src: template(), dst: template(), src_v: template(), dst_v: template(), has_values: template(), n,
                 scratch: template(), key_dtype: template(), shift: template()):
    nt = num_tiles(n, sort_tile())
    qd.loop_config(block_dim=SORT_BLOCK_DIM)
    for i in range(nt * group_size()):
        tile = i // group_size()
        ln = lane()
        off = shared("sg_digits", _sg_bins(), qd.i32)
        masks = _match_masks()
        hb = (qd.simt.block.thread_idx() // group_size()) * RADIX
        for dd in range(ln, RADIX, group_size()):
            off[hb + dd] = qd.cast(scratch[dd * nt + tile], qd.i32)
            if qd.static(not _match_by_ballots()):
                masks[hb + dd] = 0
        _sg_sync()
        base = tile * sort_tile()
        below = _lanes_below(ln)
        rounds = qd.min(rounds_per_tile(), (n - base + group_size() - 1) // group_size())
        for r in range(rounds):  # round r: elements base + r * group_size() + lane, in lane order
            idx = base + r * group_size() + ln
            valid = idx < n
            k = qd.cast(0, key_dtype)
            d = 0
            if valid:
                k = src[idx]
                d = digit(k, key_dtype, shift)
            # the lanes holding my digit (match-any)
            peers = qd.cast(0, _mask_dtype())
            if qd.static(_match_by_ballots()):  # one ballot per digit bit
                peers = qd.cast(qd.simt.subgroup.ballot(valid), _mask_dtype())
                for b in qd.static(range(RADIX_BITS)):
                    bit = (d >> b) & 1
                    m = qd.cast(qd.simt.subgroup.ballot(bit), _mask_dtype())
                    peers &= qd.select(bit != 0, m, ~m)
            else:  # each lane ORs its bit into its digit's mask of the subgroup
                if valid:
                    qd.atomic_or(masks[hb + d], below + qd.cast(1, _mask_dtype()))
                _sg_sync()
                if valid:
                    peers = masks[hb + d]
            start = 0
            if valid:
                start = off[hb + d]
            _sg_sync()  # every lane has read its counter (and mask) before the last of its peers moves it
            if valid:
                pos = start + qd.cast(qdmath.popcnt(peers & below), qd.i32)
                dst[pos] = k
                if qd.static(has_values):
                    dst_v[pos] = src_v[idx]
                if (peers & ~(below | (below + qd.cast(1, _mask_dtype())))) == 0:  # the last lane of this digit
                    off[hb + d] = start + qd.cast(qdmath.popcnt(peers), qd.i32)
                    if qd.static(not _match_by_ballots()):
                        masks[hb + d] = 0
            _sg_sync()


@top_level_func
def _copy(src: template(), dst: template(), n):
    for i in range(n):
        dst[i] = src[i]


@builtin
def _sort(keys, tmp_keys, values, tmp_values, scratch, n, key_dtype, has_values, end_bit, log256_max_n):
    ctx = require("qd.algorithms")
    what = "sort"
    check_dtype(what, key_dtype)
    depth = check_depth(log256_max_n)
    if not isinstance(has_values, (bool, int)):
        value_error(f"qd.algorithms.sort: has_values must be a compile-time bool, got {has_values!r}")
    has_values = bool(has_values)
    if isinstance(end_bit, bool) or not isinstance(end_bit, int) or end_bit % RADIX_BITS or \
            not RADIX_BITS <= end_bit <= key_dtype.bits:
        value_error(f"qd.algorithms.sort: end_bit must be a compile-time multiple of {RADIX_BITS} in "
                         f"[{RADIX_BITS}, {key_dtype.bits}] for {key_dtype} keys, got {end_bit!r}")
    check_array(what, "keys", keys, key_dtype)
    check_array(what, "tmp_keys", tmp_keys, key_dtype)
    if tmp_keys is keys:
        value_error("qd.algorithms.sort: tmp_keys must be a distinct buffer from keys")
    if has_values:
        check_array(what, "values", values)
        check_array(what, "tmp_values", tmp_values, values.dtype)
        check_dtype(what, values.dtype)
        if tmp_values is values:
            value_error("qd.algorithms.sort: tmp_values must be a distinct buffer from values")
    check_array(what, "scratch", scratch, T.u32)
    n = count_of(n)
    cpu = ctx.arch.name == "cpu"
    passes = end_bit // RADIX_BITS
    if cpu:
        # the most significant digit first (a stable pass over tiles of the keys, keys -> tmp_keys),
        # then the digits below it inside each of its buckets
        tile_keys = ctx.scalar(cpu_sort_tile(n))
        nt = ctx.scalar(num_tiles(n, tile_keys))
        shift = (passes - 1) * RADIX_BITS
        _histogram_cpu.inline(ctx, [keys, n, tile_keys, scratch, key_dtype, shift], {})
        m = ctx.binary("mul", nt, RADIX)
        scan_staircase(scratch, 0, True, scratch, 0, True, scratch, m, m, "add", T.u32, depth)
        _scatter_cpu.inline(ctx, [keys, tmp_keys, values, tmp_values, has_values, n, tile_keys, scratch, key_dtype,
                                  shift], {})
        if passes > 1:
            _buckets_cpu.inline(ctx, [keys, tmp_keys, values, tmp_values, has_values, n, nt, scratch, key_dtype,
                                      shift], {})
            return None
    else:
        nt = ctx.scalar(num_tiles(n, sort_tile()))
        m = ctx.binary("mul", nt, RADIX)
        bufs = [(keys, values), (tmp_keys, tmp_values)]
        for p in range(passes):
            (src, src_v), (dst, dst_v) = bufs[p % 2], bufs[(p + 1) % 2]
            shift = p * RADIX_BITS
            _histogram_gpu.inline(ctx, [src, n, scratch, key_dtype, shift], {})
            scan_staircase(scratch, 0, True, scratch, 0, True, scratch, m, m, "add", T.u32, depth)
            _scatter_gpu.inline(ctx, [src, dst, src_v, dst_v, has_values, n, scratch, key_dtype, shift], {})
    if passes % 2:  # the keys (and values) end in tmp_keys
        _copy.inline(ctx, [tmp_keys, keys, n], {})
        if has_values:
            _copy.inline(ctx, [tmp_values, values, n], {})
    return None


@top_level_func
def sort(keys, tmp_keys, values, tmp_values, scratch, n, key_dtype: template(), has_values: template(),
         end_bit: template(), log256_max_n: template()):
    """Sorts keys[0:n] ascending in place, stably (values[0:n] along when has_values; for a keys-only
    sort pass keys / tmp_keys as values / tmp_values). n: a 0-d i32 ndarray / field (or a device
    value). Call at the top level of a kernel."""
    _sort(keys, tmp_keys, values, tmp_values, scratch, n, key_dtype, has_values, end_bit, log256_max_n)
