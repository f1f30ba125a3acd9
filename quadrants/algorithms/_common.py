"""What the device-wide algorithms share: the tile shape, the dtype rules, the capacity checks and a
few compile-time helpers the phase funcs call with kernel values (docs/algorithms.md).

Every algorithm is a `@qd.func(requires_top_level=True)`: inlined at the top level of the user's
kernel, each of its parallel loops is a task of its own (the tasks of a kernel run one after
another, each seeing the writes of those before it), and its kernel-scope statements (the counts
and offsets derived from the device-resident `n`) are small serial tasks between them.

The phase loops walk *tiles* of `tile_size()` elements (4096 on the cpu, 1024 on GPUs): see
_phases.py for their shapes."""
import numpy as np

from quadrants import types as T
from quadrants.lang.ast.context import current, require
from quadrants.lang.simt import reductions as R
from quadrants.memory.struct import StructField
from quadrants.types.exceptions import QuadrantsCompilationError
from quadrants.memory.field import Field
from quadrants.kernels.kernel import Func
from quadrants.lang.ops import builtin
from quadrants.lang.ast.values import Expr, NdarrayArg, Ptr, Var

MAX_LOG256 = 4                 # 256 ** 4 == 2 ** 32 already exceeds what an i32 index addresses
SCALAR_DTYPES = (T.i32, T.u32, T.f32, T.i64, T.u64, T.f64)
_TILE = {"cpu": 4096}          # elements of a tile, per arch (default below); at least 256
_DEFAULT_TILE = 1024


class AlgorithmsValueError(QuadrantsCompilationError, ValueError):
    """An invalid compile-time argument of a qd.algorithms op (a ValueError naming the kernel line)."""


class AlgorithmsNotImplementedError(QuadrantsCompilationError, NotImplementedError):
    """A dtype (or other argument) qd.algorithms does not support yet, named at the kernel line."""


def _located(msg):
    ctx = current()
    return ctx.walker.located(msg) if ctx is not None and ctx.walker is not None else msg


def value_error(msg):
    """ValueError on the host; in a kernel a ValueError that is also a QuadrantsCompilationError
    naming the call's line."""
    if current() is None:
        raise ValueError(msg)
    raise AlgorithmsValueError(_located(msg))


def top_level_func(f):
    """@qd.func(requires_top_level=True) for the library's own functions."""
    return Func(f, requires_top_level=True)


def helper_func(f):
    """@qd.func for the library's own functions (qd.func refuses functions of the quadrants package)."""
    return Func(f)


def tile_size_for(arch_name):
    return _TILE.get(arch_name, _DEFAULT_TILE)


@builtin
def tile_size():
    """Compile-time int: elements of one tile (cpu: one loop iteration's; GPUs: one subgroup's)."""
    return tile_size_for(require("qd.algorithms").arch.name)


def check_depth(log256_max_n, what="log256_max_n"):
    """The capacity exponent as a Python int in [1, 4] (a ValueError naming it otherwise)."""
    if isinstance(log256_max_n, (bool, np.bool_)) or not isinstance(log256_max_n, (int, np.integer)):
        value_error(f"{what} must be a compile-time Python int in [1, {MAX_LOG256}], got {log256_max_n!r}")
    d = int(log256_max_n)
    if not 1 <= d <= MAX_LOG256:
        value_error(f"{what} = {d} is outside [1, {MAX_LOG256}]: an op compiled for log256_max_n = D handles "
                         f"counts up to 256 ** D, and 256 ** {MAX_LOG256} = 2 ** 32 already exceeds what an i32 "
                         f"index addresses")
    return d


def min_depth_for(n):
    """The smallest log256_max_n whose capacity 256 ** D covers n (at least 1), for a host-side int n."""
    n = int(n)
    if n < 0:
        raise ValueError(f"the element count must be >= 0, got {n}")
    d = 1
    while 256 ** d < n:
        d += 1
    return d


def check_dtype(what, dtype, allowed=SCALAR_DTYPES):
    if not isinstance(dtype, T.DataType) or dtype not in allowed:
        names = ", ".join(f"qd.{d}" for d in allowed)
        msg = f"qd.algorithms.{what}: dtype {dtype!r} is not supported (supported: {names})"
        if current() is None:
            raise NotImplementedError(msg)
        raise AlgorithmsNotImplementedError(_located(msg))
    return dtype


def scratch_dtype_for(dtype):
    """u32 scratch stages 4-byte values, u64 scratch 8-byte ones (their bits)."""
    return T.u32 if dtype.bits == 32 else T.u64


@builtin
def check_array(what, name, a, dtype=None, scratch=False, any_element=False):
    """Compile-time: `a` is a 1-D field or ndarray argument (of `dtype` when given); any_element: of
    any element type (vectors, matrices, a struct field)."""
    ctx = require("qd.algorithms")
    if any_element and isinstance(a, StructField):
        if len(a.shape) != 1:
            ctx.type_error(f"qd.algorithms.{what}: '{name}' must be 1-D, got shape {a.shape}")
        return None
    if not isinstance(a, (Field, NdarrayArg)):
        ctx.type_error(f"qd.algorithms.{what}: '{name}' must be a 1-D qd.field or qd.ndarray, got {type(a).__name__}")
    if isinstance(a, Field) and a.offset:
        ctx.type_error(f"qd.algorithms.{what}: '{name}' is a field with an offset ({a.offset}); the ops index their "
                       f"arrays from 0 (the deprecated parallel_sort / PrefixSumExecutor take such fields)")
    nd = len(a.shape) if isinstance(a, Field) else a.ndim - len(a.element_shape)
    if not any_element and a.element_shape:
        ctx.type_error(f"qd.algorithms.{what}: '{name}' must hold scalars, got elements of shape {a.element_shape}")
    if nd != 1:
        ctx.type_error(f"qd.algorithms.{what}: '{name}' must be 1-D, got {nd} dimension(s)")
    if dtype is not None and a.dtype is not dtype and not (scratch and a.dtype.bits == dtype.bits and
                                                          not a.dtype.is_real and not a.dtype.is_signed):
        ctx.type_error(f"qd.algorithms.{what}: '{name}' holds {a.dtype} but {dtype} is expected")
    return None


@builtin
def check_scratch(what, scratch, dtype):
    """Compile-time: scratch is a 1-D u32 (4-byte dtype) / u64 (8-byte dtype) array."""
    want = scratch_dtype_for(dtype)
    check_array(what, "scratch", scratch)
    if scratch.dtype is not want:
        require("qd.algorithms").type_error(
            f"qd.algorithms.{what}: scratch must be a 1-D {want} array for {dtype} values (4-byte dtypes stage "
            f"through u32 scratch, 8-byte ones through u64), got {scratch.dtype}")
    return None


@builtin
def count_of(n):
    """The live count as an i32 kernel value: `n` is a kernel value (`count[0]`), or a 0-d / 1-element
    field or ndarray argument (read on the device)."""
    ctx = require("qd.algorithms")
    if isinstance(n, Field):
        v = ctx.rvalue(ctx.element(n, [0] * len(n.shape)))
    elif isinstance(n, NdarrayArg):
        v = ctx.rvalue(ctx.element(n, [0] * (n.ndim - len(n.element_shape))))
    else:
        v = ctx.rvalue(n)
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return ctx.const(int(v), T.i32)
    if not isinstance(v, Expr) or v.dtype.is_real:
        ctx.type_error(f"qd.algorithms: the count n must be an integer (a device value such as count[0], or a 0-d "
                       f"i32 field / ndarray), got {type(v).__name__}")
    return ctx.cast(v, T.i32) if v.dtype is not T.i32 else v


@builtin
def identity_of(op, dtype):
    """The op's identity as a constant of `dtype`: add 0, min the largest value (+inf), max the smallest (-inf)."""
    ctx = require("qd.algorithms")
    return ctx.const(R.identity(op, dtype), dtype)


@builtin
def combine(op, a, b):
    """op(a, b) for op in add / min / max, in a's dtype."""
    ctx = require("qd.algorithms")
    return R.apply(ctx, op, ctx.scalar(a), ctx.scalar(b))


def div_up(a, b):
    """ceil(a / b) for a >= 0: host ints."""
    return -(-int(a) // int(b))


# The host-side scratch helpers size for tiles of 256 elements (no arch uses smaller ones), so one
# allocation serves every arch: a larger tile needs fewer partials.
SIZING_TILE = 256




# --- arithmetic on host ints or kernel values (the *_scratch_slots helpers run in both) -----------
def _is_int(v):
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _ctx_for(what):
    ctx = current()
    if ctx is None:
        raise TypeError(f"qd.algorithms.{what}: the count must be a Python int (or a kernel value inside a kernel)")
    return ctx


def k_cdiv(what, a, b):
    """ceil(a / b), a >= 0, b a positive Python int."""
    if _is_int(a):
        return div_up(a, b)
    ctx = _ctx_for(what)
    a = ctx.scalar(a)
    pos = ctx.binary("gt", a, 0)
    q = ctx.binary("add", ctx.binary("floordiv", ctx.binary("sub", a, 1), b), 1)
    return ctx.expr(ctx.b.select(pos.stmt, ctx.scalar(q).stmt, ctx.const(0, a.dtype).stmt))


def k_add(what, a, b):
    if _is_int(a) and _is_int(b):
        return int(a) + int(b)
    return _ctx_for(what).binary("add", a, b)


def k_mul(what, a, b):
    if _is_int(a) and _is_int(b):
        return int(a) * int(b)
    return _ctx_for(what).binary("mul", a, b)


def k_max(what, a, b):
    if _is_int(a) and _is_int(b):
        return max(int(a), int(b))
    return _ctx_for(what).binary("max", a, b)


def k_count(what, n):
    """A count argument of a sizing helper: a Python int >= 0, or a kernel value (loaded)."""
    if _is_int(n):
        if int(n) < 0:
            raise ValueError(f"qd.algorithms.{what}: the element count must be >= 0, got {int(n)}")
        return int(n)
    ctx = _ctx_for(what)
    return count_of(n) if not isinstance(n, (Expr, Var, Ptr)) else ctx.cast(ctx.scalar(ctx.rvalue(n)), T.i32)


def staircase_slots(what, n, depth):
    """Slots the partials of levels 1 .. depth-1 above n take, for tiles of SIZING_TILE."""
    total, c = 0, n
    for _ in range(depth - 1):
        c = k_cdiv(what, c, SIZING_TILE)
        total = k_add(what, total, c)
    return total


def depth_arg(what, n, log256_max_n):
    """The explicit depth, or (host only) the smallest depth covering n."""
    if log256_max_n is None:
        if not _is_int(n):
            raise TypeError(f"qd.algorithms.{what}: inside a kernel pass log256_max_n explicitly (deriving it from "
                            f"the count is host-only)")
        return min_depth_for(n)
    return check_depth(log256_max_n)


@builtin
def store_count(dst, v):
    """dst[0] = v (an i32) for a 1-element (or 0-d) field / ndarray argument `dst`."""
    ctx = require("qd.algorithms")
    if isinstance(dst, Field):
        nd = len(dst.shape)
    elif isinstance(dst, NdarrayArg):
        nd = dst.ndim - len(dst.element_shape)
    else:
        ctx.type_error(f"qd.algorithms: a count output must be a 1-element qd.field or qd.ndarray, got "
                       f"{type(dst).__name__}")
    if nd > 1:
        ctx.type_error("qd.algorithms: a count output must be 0-d or 1-D (1 element)")
    ctx.store(ctx.element(dst, [0] * nd), ctx.cast(ctx.scalar(v), dst.dtype))
    return None


@builtin
def head_flag(keys, idx):
    """i32 1 when element idx heads a run (idx == 0 or keys[idx] != keys[idx - 1]), else 0."""
    ctx = require("qd.algorithms")
    prev = ctx.binary("max", ctx.binary("sub", idx, 1), 0)
    differs = ctx.binary("ne", ctx.rvalue(ctx.element(keys, [idx])), ctx.rvalue(ctx.element(keys, [prev])))
    return ctx.cast(ctx.binary("or_", ctx.binary("eq", idx, 0), differs), T.i32)
