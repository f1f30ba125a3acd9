"""qd.simt.subgroup: the lanes of one subgroup (CUDA warp, AMDGPU wavefront, Vulkan subgroup)
exchanging values without shared memory. Lane = thread_idx % group_size(); every lane of the
subgroup must run each call together. See docs/simt.md."""
import warnings

import numpy as np

from quadrants._lib import runtime
from quadrants import types as T
from quadrants.lang.ast.context import current
from quadrants.lang.ops import builtin
from quadrants.lang.simt import reductions as R
from quadrants.lang.simt._common import gpu_context

# arch name -> lanes per subgroup, fixed the first time it is read (stable across qd.reset/init)
_GROUP_SIZES = {"cuda": 32, "amdgpu": 64, "metal": 32, "cpu": 32}


def _size_for(arch):
    if arch.name not in _GROUP_SIZES:  # vulkan: the device's subgroupSize, once a device is up
        prog = runtime.program()
        if prog.config.arch is not runtime.vulkan:
            return 32  # compiling for vulkan without its device (qd.compile): the common size
        _GROUP_SIZES[arch.name] = int(prog.runtime.vulkan_caps.get("subgroup_size", 32))
    return _GROUP_SIZES[arch.name]


@builtin
def group_size():
    """Lanes per subgroup, a Python int: CUDA 32, AMDGPU 64, Metal 32, Vulkan the device's
    subgroupSize (8 on Mesa lavapipe), cpu 32 (32 consecutive threads of a block)."""
    ctx = current()
    return _size_for(ctx.arch if ctx is not None else runtime.program().config.arch)


@builtin
def log2_group_size():
    """log2(group_size()), a Python int; AssertionError unless group_size() is a power of two."""
    n = group_size()
    assert n > 0 and n & (n - 1) == 0, f"qd.simt.subgroup.log2_group_size: group_size() = {n} is not a power of two"
    return n.bit_length() - 1


def _ctx(name):
    return gpu_context(f"qd.simt.subgroup.{name}")


# ------------------------------------------------------------------------------------ primitives
@builtin
def invocation_id():
    """This thread's lane in its subgroup (i32)."""
    return R.lane_id(_ctx("invocation_id"))


@builtin
def elect():
    """i32 1 on lane 0, else 0."""
    ctx = _ctx("elect")
    return ctx.cast(ctx.binary("eq", R.lane_id(ctx), 0), T.i32)


@builtin
def sync():
    """A barrier of the subgroup (no memory effect)."""
    _ctx("sync").b.simt("subgroup.sync", [])


@builtin
def mem_fence():
    """A memory fence for the subgroup's accesses (no waiting)."""
    _ctx("mem_fence").b.simt("subgroup.mem_fence", [])


@builtin
def shuffle(value, index):
    """The value of lane `index` (u32)."""
    return R.shuffle(_ctx("shuffle"), "shuffle", value, index)


@builtin
def shuffle_up(value, offset):
    """The value of lane i - offset (unspecified below lane `offset`)."""
    return R.shuffle(_ctx("shuffle_up"), "shuffle_up", value, offset)


@builtin
def shuffle_down(value, offset):
    """The value of lane i + offset (unspecified past the last lane)."""
    return R.shuffle(_ctx("shuffle_down"), "shuffle_down", value, offset)


@builtin
def shuffle_xor(value, mask):
    """The value of lane i ^ mask."""
    return R.shuffle(_ctx("shuffle_xor"), "shuffle_xor", value, mask)


@builtin
def broadcast(value, index):
    """The value of lane `index`, the same on every lane (index uniform over the subgroup)."""
    ctx = _ctx("broadcast")
    if isinstance(index, (int, np.integer)) and not isinstance(index, bool):
        return R.shuffle(ctx, "broadcast", value, index)
    return R.shuffle(ctx, "shuffle", value, index)


@builtin
def broadcast_first(value):
    """The value of lane 0."""
    ctx = _ctx("broadcast_first")
    return R.simt(ctx, "subgroup.broadcast_first", value)


@builtin
def ballot(predicate):
    """u64: bit i set iff lane i's predicate is nonzero (the high half is 0 below 33 lanes)."""
    ctx = _ctx("ballot")
    return R.simt(ctx, "subgroup.ballot", predicate)


@builtin
def ballot_first_n(predicate, n):
    """u32: bit i set iff i < n and lane i's predicate is nonzero; n a compile-time int in [1, 32]."""
    ctx = _ctx("ballot_first_n")
    assert isinstance(n, int) and 1 <= n <= 32, f"qd.simt.subgroup.ballot_first_n: n must be an int in [1, 32], got {n!r}"
    bits = R.simt(ctx, "subgroup.ballot", predicate)
    return ctx.cast(ctx.binary("bit_and", bits, ctx.const((1 << n) - 1, T.u64)), T.u32)


def _lanemask(name, lane, f):
    ctx = _ctx(name)
    one = ctx.const(1, T.u32)
    bit = ctx.binary("shl", one, ctx.cast(ctx.scalar(lane), T.u32)) if not isinstance(lane, int) else \
        ctx.const((1 << lane) & 0xFFFFFFFF, T.u32)
    below = ctx.binary("sub", bit, one)
    return ctx.cast(f(ctx, bit, below), T.u32)


@builtin
def lanemask_lt(lane):
    """u32 with the bits of lanes < lane (lane in [0, 31])."""
    return _lanemask("lanemask_lt", lane, lambda ctx, bit, below: below)


@builtin
def lanemask_le(lane):
    """u32 with the bits of lanes <= lane."""
    return _lanemask("lanemask_le", lane, lambda ctx, bit, below: ctx.binary("bit_or", below, bit))


@builtin
def lanemask_eq(lane):
    """u32 with the bit of `lane`."""
    return _lanemask("lanemask_eq", lane, lambda ctx, bit, below: bit)


@builtin
def lanemask_gt(lane):
    """u32 with the bits of lanes > lane."""
    return _lanemask("lanemask_gt", lane, lambda ctx, bit, below: ctx.unary("bit_not", ctx.binary("bit_or", below, bit)))


@builtin
def lanemask_ge(lane):
    """u32 with the bits of lanes >= lane."""
    return _lanemask("lanemask_ge", lane, lambda ctx, bit, below: ctx.unary("bit_not", below))


# ------------------------------------------------------------------------------ tiled collectives
def _tiled(name, log2_size):
    ctx = _ctx(name)
    return ctx, R.check_log2(ctx, f"qd.simt.subgroup.{name}_tiled", log2_size, log2_group_size())


def _make_family():
    ops = {"add": "add", "mul": "mul", "min": "min", "max": "max", "and": "bit_and", "or": "bit_or", "xor": "bit_xor"}
    g = globals()

    def define(name, tiled):
        tiled._qd_builtin = True
        tiled.__name__ = tiled.__qualname__ = f"{name}_tiled"
        g[f"{name}_tiled"] = tiled

        def full(*args):
            return g[f"{name}_tiled"](*args, log2_group_size())

        full._qd_builtin = True
        full.__name__ = full.__qualname__ = name
        full.__doc__ = f"{name}_tiled(..., log2_group_size()): the whole subgroup as one tile."
        g[name] = full

    for short, op in ops.items():
        if short in ("add", "min", "max"):
            def reduce_t(value, log2_size, _op=op, _n=f"reduce_{short}"):
                ctx, k = _tiled(_n, log2_size)
                return R.reduce_tiled(ctx, value, _op, k)

            def reduce_all_t(value, log2_size, _op=op, _n=f"reduce_all_{short}"):
                ctx, k = _tiled(_n, log2_size)
                return R.reduce_all_tiled(ctx, value, _op, k)

            def segmented_t(value, head_flag, log2_size, _op=op, _n=f"segmented_reduce_{short}"):
                ctx, k = _tiled(_n, log2_size)
                assert k <= 6, f"qd.simt.subgroup.{_n}_tiled: log2_size must be <= 6, got {k}"
                return R.segmented_inclusive_tiled(ctx, value, head_flag, _op, k)

            reduce_t.__doc__ = f"Tile lane 0: {short} over the tile (shuffle_down tree; other lanes partial)."
            reduce_all_t.__doc__ = f"Every lane: {short} over its tile (XOR butterfly)."
            segmented_t.__doc__ = (f"Lane j: {short} over [h..j], h the last lane <= j of the tile with head_flag != 0, "
                                   f"else the tile start.")
            define(f"reduce_{short}", reduce_t)
            define(f"reduce_all_{short}", reduce_all_t)
            define(f"segmented_reduce_{short}", segmented_t)

        def inclusive_t(value, log2_size, _op=op, _n=f"inclusive_{short}"):
            ctx, k = _tiled(_n, log2_size)
            return R.inclusive_scan_tiled(ctx, value, _op, k)

        def exclusive_t(value, log2_size, _op=op, _n=f"exclusive_{short}"):
            ctx, k = _tiled(_n, log2_size)
            v = ctx.scalar(value)
            return R.exclusive_scan_tiled(ctx, v, _op, R.identity(_op, v.dtype), k)

        inclusive_t.__doc__ = f"Lane j: {short} over tile start..j, combined op(lower, own)."
        exclusive_t.__doc__ = f"Lane j: {short} over tile start..j-1; tile lane 0 holds the identity."
        define(f"inclusive_{short}", inclusive_t)
        define(f"exclusive_{short}", exclusive_t)

    def all_true_t(predicate, log2_size):
        ctx, k = _tiled("all_true", log2_size)
        return R.vote_tiled(ctx, predicate, True, k, log2_group_size())

    def any_true_t(predicate, log2_size):
        ctx, k = _tiled("any_true", log2_size)
        return R.vote_tiled(ctx, predicate, False, k, log2_group_size())

    def all_equal_t(value, log2_size):
        ctx, k = _tiled("all_equal", log2_size)
        return R.all_equal_tiled(ctx, value, k, log2_group_size())

    def bitonic_t(key, value, log2_size):
        ctx, k = _tiled("bitonic_sort_kv", log2_size)
        return R.bitonic_sort_kv_tiled(ctx, key, value, k)

    all_true_t.__doc__ = "i32 1 on every lane of the tile iff every lane's predicate is nonzero."
    any_true_t.__doc__ = "i32 1 on every lane of the tile iff some lane's predicate is nonzero."
    all_equal_t.__doc__ = "i32 1 on every lane of the tile iff every lane's value == tile lane 0's (NaN unequal)."
    bitonic_t.__doc__ = "(key, value) sorted across the tile: lane j holds the j-th smallest pair."
    define("all_true", all_true_t)
    define("any_true", any_true_t)
    define("all_equal", all_equal_t)
    define("bitonic_sort_kv", bitonic_t)


_make_family()


# ------------------------------------------------------------------------------ deprecated names
_barrier_deprecation_warned = False
_memory_barrier_deprecation_warned = False
_ballot_full_subgroup_deprecation_warned = False


def _deprecated(flag, old, new):
    g = globals()
    if not g[flag]:
        g[flag] = True
        warnings.warn(f"qd.simt.subgroup.{old} is deprecated; use qd.simt.subgroup.{new} instead.",
                      DeprecationWarning, stacklevel=3)


@builtin
def barrier():
    """Deprecated spelling of qd.simt.subgroup.sync()."""
    _deprecated("_barrier_deprecation_warned", "barrier()", "sync()")
    return globals()["sync"]()


@builtin
def memory_barrier():
    """Deprecated spelling of qd.simt.subgroup.mem_fence()."""
    _deprecated("_memory_barrier_deprecation_warned", "memory_barrier()", "mem_fence()")
    return globals()["mem_fence"]()


@builtin
def ballot_full_subgroup(predicate):
    """Deprecated spelling of qd.simt.subgroup.ballot()."""
    _deprecated("_ballot_full_subgroup_deprecation_warned", "ballot_full_subgroup()", "ballot()")
    return globals()["ballot"](predicate)


_FAMILIES = [f"{p}_{s}" for p in ("reduce", "reduce_all", "segmented_reduce") for s in ("add", "min", "max")] + \
    [f"{p}_{s}" for p in ("inclusive", "exclusive") for s in ("add", "mul", "min", "max", "and", "or", "xor")] + \
    ["all_true", "any_true", "all_equal", "bitonic_sort_kv"]

__all__ = ["group_size", "log2_group_size", "invocation_id", "elect", "sync", "mem_fence", "shuffle", "shuffle_up",
           "shuffle_down", "shuffle_xor", "broadcast_first", "ballot", "ballot_first_n", "lanemask_lt", "lanemask_le",
           "lanemask_eq", "lanemask_gt", "lanemask_ge", "barrier", "memory_barrier", "ballot_full_subgroup"] + \
    _FAMILIES + [f"{n}_tiled" for n in _FAMILIES]
