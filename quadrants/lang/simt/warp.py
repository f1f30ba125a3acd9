"""qd.simt.warp: CUDA's warp intrinsics under their CUDA names (32 lanes, `mask` a u32 of lanes).
CUDA only: on another arch every name raises RuntimeError; portable code uses qd.simt.subgroup.
Built from the subgroup primitives (shfl.sync, vote.sync over the active lanes); `mask` selects
the lanes a vote or match looks at, and like CUDA every active lane named in it must take part."""
from quadrants._lib import runtime
from quadrants import types as T
from quadrants.lang import impl
from quadrants.lang.ops import builtin
from quadrants.lang.simt import reductions as R
from quadrants.lang.simt._common import gpu_context


def _ctx(name):
    ctx = gpu_context(f"qd.simt.warp.{name}")
    if ctx.arch is not runtime.cuda:
        raise RuntimeError(f"qd.simt.warp.{name} is CUDA-only (arch {ctx.arch.name}); use the qd.simt.subgroup "
                           f"operations, which exist on every GPU arch")
    return ctx


def _u32(ctx, v):
    return ctx.cast(ctx.scalar(v), T.u32)


def _ballot32(ctx, p):
    return ctx.cast(R.simt(ctx, "subgroup.ballot", p), T.u32)


def _in_mask(ctx, mask):
    """(lanes of `mask` whose predicate is set is computed by the caller) the active lanes of mask."""
    return ctx.binary("bit_and", _ballot32(ctx, 1), _u32(ctx, mask))


@builtin
def all_nonzero(mask, predicate):
    """__all_sync: i32 1 iff predicate != 0 on every active lane of mask."""
    ctx = _ctx("all_nonzero")
    set_ = ctx.binary("bit_and", _ballot32(ctx, predicate), _u32(ctx, mask))
    return ctx.cast(ctx.binary("eq", set_, _in_mask(ctx, mask)), T.i32)


@builtin
def any_nonzero(mask, predicate):
    """__any_sync: i32 1 iff predicate != 0 on some active lane of mask."""
    ctx = _ctx("any_nonzero")
    return ctx.cast(ctx.binary("ne", ctx.binary("bit_and", _ballot32(ctx, predicate), _u32(ctx, mask)), 0), T.i32)


@builtin
def unique(mask, predicate):
    """__uni_sync: i32 1 iff every active lane of mask agrees on predicate != 0."""
    ctx = _ctx("unique")
    set_ = ctx.binary("bit_and", _ballot32(ctx, predicate), _u32(ctx, mask))
    return ctx.cast(ctx.binary("or_", ctx.binary("eq", set_, 0), ctx.binary("eq", set_, _in_mask(ctx, mask))), T.i32)


@builtin
def ballot(predicate):
    """__ballot_sync over all lanes: u32, bit i iff lane i's predicate != 0."""
    ctx = _ctx("ballot")
    return _ballot32(ctx, predicate)


@builtin
def active_mask():
    """__activemask(): u32 of the lanes running this call."""
    ctx = _ctx("active_mask")
    return _ballot32(ctx, 1)


@builtin
def sync(mask):
    """__syncwarp(mask)."""
    _ctx("sync").b.simt("subgroup.sync", [])


def _shfl(name, dtype, kind, v, n):
    ctx = _ctx(name)
    v = ctx.cast(ctx.scalar(v), dtype)
    got = R.shuffle(ctx, kind, v, n)
    if kind == "shuffle":
        return got
    lane = R.lane_id(ctx)  # CUDA: a source lane outside the warp leaves the value unchanged
    inside = ctx.binary("ge", lane, n) if kind == "shuffle_up" else ctx.binary("lt", ctx.binary("add", lane, n), 32)
    return R.select(ctx, inside, got, v)


def _def_shfl(name, dtype, kind):
    def f(mask, value, n):
        return _shfl(name, dtype, kind, value, n)

    f._qd_builtin = True
    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"__{kind.replace('shuffle', 'shfl')}_sync(mask, value, n) on {dtype}."
    return f


shfl_sync_i32 = _def_shfl("shfl_sync_i32", T.i32, "shuffle")
shfl_sync_f32 = _def_shfl("shfl_sync_f32", T.f32, "shuffle")
shfl_up_i32 = _def_shfl("shfl_up_i32", T.i32, "shuffle_up")
shfl_up_f32 = _def_shfl("shfl_up_f32", T.f32, "shuffle_up")
shfl_down_i32 = _def_shfl("shfl_down_i32", T.i32, "shuffle_down")
shfl_down_f32 = _def_shfl("shfl_down_f32", T.f32, "shuffle_down")
shfl_xor_i32 = _def_shfl("shfl_xor_i32", T.i32, "shuffle_xor")


def _match_mask(ctx, mask, value):
    """u32 of the active lanes of mask whose value equals this lane's (32 shuffles)."""
    v = ctx.scalar(value)
    active = _in_mask(ctx, mask)
    same = ctx.const(0, T.u32)
    for k in range(32):
        eq = ctx.binary("eq", R.shuffle(ctx, "shuffle", v, k), v)
        same = ctx.binary("bit_or", same, R.select(ctx, eq, ctx.const(1 << k, T.u32), ctx.const(0, T.u32)))
    return ctx.binary("bit_and", same, active)


def _check_sm70(ctx, name):
    """match.sync needs sm_70: checked against the CUDA device when one runs the program."""
    if runtime.program().config.arch is runtime.cuda:
        cc = impl.get_cuda_compute_capability()
        assert cc >= 70, f"qd.simt.warp.{name} needs compute capability 7.0 or newer, got {cc}"


@builtin
def match_any(mask, value):
    """__match_any_sync: u32 of the active lanes of mask holding the same value as this lane."""
    ctx = _ctx("match_any")
    _check_sm70(ctx, "match_any")
    return _match_mask(ctx, mask, value)


@builtin
def match_all(mask, value):
    """__match_all_sync: the active lanes of mask if they all hold the same value, else 0."""
    ctx = _ctx("match_all")
    _check_sm70(ctx, "match_all")
    same = _match_mask(ctx, mask, value)
    active = _in_mask(ctx, mask)
    return R.select(ctx, ctx.binary("eq", same, active), active, ctx.const(0, T.u32))


__all__ = ["all_nonzero", "any_nonzero", "unique", "ballot", "active_mask", "sync", "shfl_sync_i32", "shfl_sync_f32",
           "shfl_up_i32", "shfl_up_f32", "shfl_down_i32", "shfl_down_f32", "shfl_xor_i32", "match_any", "match_all"]
