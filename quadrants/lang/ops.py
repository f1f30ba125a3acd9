"""Kernel intrinsics: thin wrappers, each mapping to one core operation.

The atomic family is generated from the core's single table of atomic ops (csrc/atomics).
"""
import builtins
import math
import operator

import numpy as np

from quadrants._lib import _core
from quadrants import types as T
from quadrants.types.exceptions import QuadrantsStaticAssertionError, QuadrantsSyntaxError, QuadrantsTypeError
from quadrants.lang.ast.context import check_numeric, current, is_py_scalar, require, type_error
from quadrants.memory.field import Field
from quadrants.memory.host import PyMatrix
from quadrants.lang.ast.values import Expr, LoopGroup, MatrixValue, NdarrayArg, Ptr, Var


def builtin(f):
    """Marks a function the kernel front end calls with kernel values."""
    f._qd_builtin = True
    return f


class StaticIterable:
    def __init__(self, values):
        self.values = list(values)


def _is_runtime(v):
    if isinstance(v, MatrixValue):
        return any(_is_runtime(e) for e in v.entries)
    return isinstance(v, (Expr, Var, Ptr))


@builtin
def static(x, *more):
    """Evaluates `x` at compile time: `if qd.static(c):` picks a branch, `qd.static(range(n))` unrolls."""
    if more:
        return tuple(static(v) for v in (x,) + more)
    ctx = current()
    if ctx is None:
        return x
    if _is_runtime(x):
        ctx.syntax_error("qd.static() arguments must be compile-time constants (Python values, template arguments)")
    if isinstance(x, range):
        return StaticIterable(x)
    if isinstance(x, StaticIterable):
        ctx.syntax_error("qd.static(qd.static(...)): qd.static takes its argument once")
    if isinstance(x, LoopGroup) and not x.from_ndrange:
        ctx.syntax_error("qd.static(qd.grouped(field)): a loop over a field's elements cannot be unrolled; use "
                         "qd.static(qd.grouped(qd.ndrange(...)))")
    if isinstance(x, LoopGroup):
        if any(_is_runtime(v) or not hasattr(v, "__index__") for b in x.bounds for v in b):
            ctx.syntax_error("qd.static(qd.ndrange(...)) needs compile-time bounds")
        points = list(x.static_points())  # in the kernel's order (axes=); numpy integers too
        if x.grouped:  # qd.static(qd.grouped(qd.ndrange(...))): each point a vector of compile-time ints
            points = [MatrixValue([int(i) for i in p], (len(p),)) for p in points]
        return StaticIterable(points)
    return x


def _unary(name, doc):
    @builtin
    def f(x):
        check_numeric(f"qd.{name}()", x)
        if current() is None:  # Python scope: numpy's (qd.math functions run there too)
            import numpy as np
            return getattr(np, {"asin": "arcsin", "acos": "arccos", "atan": "arctan"}.get(name, name))(_np_operand(x))
        return require(f"qd.{name}").unary(name, x)
    f.__name__, f.__doc__ = name, doc
    return f


sqrt = _unary("sqrt", "Square root.")
sin, cos, tan = _unary("sin", "Sine."), _unary("cos", "Cosine."), _unary("tan", "Tangent.")
asin, acos, atan = _unary("asin", "Arc sine."), _unary("acos", "Arc cosine."), _unary("atan", "Arc tangent.")
exp, log, tanh = _unary("exp", "e**x."), _unary("log", "Natural log."), _unary("tanh", "Hyperbolic tangent.")
floor, ceil, round = _unary("floor", "Floor."), _unary("ceil", "Ceiling."), _unary("round", "Round half to even.")


@builtin
def rsqrt(x):
    """1 / sqrt(x)."""
    check_numeric("qd.rsqrt()", x)
    ctx = current()
    if ctx is None:
        import numpy as np
        return 1 / np.sqrt(_np_operand(x))
    return ctx.binary("div", 1.0, sqrt(x))


@builtin
def logical_not(x):
    """1 where x is 0, else 0 (elementwise on vectors and matrices); `not x` in a kernel is the same."""
    ctx = current()
    if ctx is None:
        import numpy as np
        r = np.logical_not(x)
        return r.astype(np.int32).view(PyMatrix) if isinstance(x, PyMatrix) else int(r) if np.ndim(r) == 0 else r
    return ctx.unary("not_", x)


def _np_operand(x):
    """x for a numpy function: an int beyond 64 bits as a float (numpy keeps it as an object)."""
    if isinstance(x, int) and not -(1 << 63) <= x < 1 << 64:
        return float(x)
    return x


@builtin
def abs(x):
    if current() is None and not isinstance(x, (str, bytes)) and hasattr(type(x), "__abs__"):
        return builtins.abs(x)  # any Python number-like object (an autodiff library's boxed value)
    check_numeric("abs()", x)
    ctx = current()
    if ctx is None and isinstance(x, (list, tuple)):
        import numpy as np
        return np.abs(x)
    if ctx is None or is_py_scalar(x):
        return builtins.abs(x)
    return ctx.unary("abs", x)


def _nary(name):
    @builtin
    def f(*xs):
        ctx = current()
        if len(xs) == 1:  # one vector / sequence: reduce over its components
            if not isinstance(xs[0], MatrixValue) and not hasattr(xs[0], "__iter__"):
                raise TypeError(f"qd.{name} takes two or more values, or one vector or sequence; got {xs[0]!r}")
            xs = tuple(xs[0].entries if isinstance(xs[0], MatrixValue) else xs[0])
        if not xs:
            raise TypeError(f"qd.{name} takes two or more values, or one vector or sequence")
        check_numeric(f"qd.{name}()", *xs)
        if ctx is None:
            if any(isinstance(x, (list, tuple)) or getattr(x, "ndim", 0) for x in xs):  # arrays: element-wise
                import functools
                import numpy as np
                return functools.reduce(np.fmin if name == "min" else np.fmax, [_np_operand(x) for x in xs])
            return getattr(builtins, name)(*xs)
        result = xs[0]
        for x in xs[1:]:
            result = ctx.binary(name, result, x)
        return result
    f.__name__ = name
    f.__doc__ = f"Element-wise {name} of two or more values (floats: {name}Num, a NaN operand loses)."
    return f


min, max = _nary("min"), _nary("max")


@builtin
def atan2(y, x):
    check_numeric("qd.atan2()", y, x)
    if current() is None:
        import numpy as np
        return np.arctan2(_np_operand(y), _np_operand(x))
    return require("qd.atan2").binary("atan2", y, x)


@builtin
def pow(x, y):
    check_numeric("qd.pow()", x, y)
    if current() is None:
        import numpy as np
        return np.power(_np_operand(x), _np_operand(y))
    return require("qd.pow").binary("pow", x, y)


@builtin
def cast(x, dtype):
    """Converts `x` to `dtype` (value conversion)."""

    try:
        dtype = T.to_dtype(dtype)
    except TypeError as e:
        type_error(f"qd.cast(): {e}")
    check_numeric("qd.cast()", x)
    ctx = current()
    if ctx is None:
        return dtype(x)
    return ctx.cast(x, dtype)


@builtin
def bit_cast(x, dtype):
    """Reinterprets the bits of `x` as `dtype` (same width)."""
    ctx = require("qd.bit_cast")
    return ctx.expr(ctx.b.bitcast(ctx.scalar(x).stmt, dtype.core))


def _filled(x, value):
    """x's shape and dtype, every component `value`."""
    ctx = current()
    if ctx is None:
        return np.full_like(x, value) if isinstance(x, np.ndarray) else type(x)(value)
    x = ctx.rvalue(x)
    if isinstance(x, MatrixValue):
        return MatrixValue([ctx.cast(value, ctx.scalar(e).dtype) for e in x.entries], x.shape)
    return ctx.cast(value, ctx.scalar(x).dtype)


@builtin
def zero(x):
    """A zero of x's dtype (and shape, for a vector / matrix): qd.zero(tot[None])."""
    return _filled(x, 0)


@builtin
def stop_grad(x):
    """In a kernel: no gradient flows into field `x` from this kernel's reverse-mode adjoint (its
    reads of x count as constants)."""
    ctx = current()
    if ctx is None:
        raise QuadrantsSyntaxError("qd.stop_grad(x) is used inside a kernel")
    if not isinstance(x, Field):
        ctx.type_error(f"qd.stop_grad takes a field, got {type(x).__name__}")
    ctx.stop_grad.add(x)


@builtin
def one(x):
    """A one of x's dtype and shape."""
    return _filled(x, 1)


@builtin
def select(cond, a, b):
    """a where cond is nonzero, else b; element-wise when any of them is a vector / matrix (a
    scalar broadcasts). In Python scope numpy's where."""
    ctx = current()
    if ctx is None:
        import numpy as np
        return np.where(np.asarray(cond) != 0, a, b)
    cond, a, b = ctx.rvalue(cond), ctx.rvalue(a), ctx.rvalue(b)
    matrices = [v for v in (cond, a, b) if isinstance(v, MatrixValue)]
    if matrices:
        shape = matrices[0].shape
        if any(m.shape != shape for m in matrices):
            type_error(f"qd.select(): shapes {[m.shape for m in matrices]} differ")

        def entry(v, k):
            return v.entries[k] if isinstance(v, MatrixValue) else v

        return MatrixValue([select(entry(cond, k), entry(a, k), entry(b, k))
                            for k in range(len(matrices[0].entries))], shape)
    c = ctx.truth(cond)
    if isinstance(c, bool):
        return a if c else b
    return ctx.expr(ctx.b.select(c.stmt, ctx.scalar(a).stmt, ctx.scalar(b).stmt))


# --- loops -------------------------------------------------------------------------------------
@builtin
def ndrange(*dims, axes=None):
    """The iteration space of `for i, j in qd.ndrange(n, (a, b))`. axes=: the axis at each nesting
    level, outermost first (axes=(1, 0): j outer, i fastest); the loop variables stay in order."""
    for d in dims:
        if isinstance(d, (tuple, list)) and len(d) != 2:
            _loop_error(QuadrantsSyntaxError, f"qd.ndrange({d!r}): Every argument of ndrange should be a scalar or a "
                                              f"tuple/list like (begin, end)")
        for v in d if isinstance(d, (tuple, list)) else (d,):
            if isinstance(v, (bool, float, np.floating)) or (isinstance(v, (Expr, Var, Ptr)) and v.dtype.is_real):
                _loop_error(QuadrantsTypeError, f"qd.ndrange: {v!r}: Every argument of ndrange should be an integer "
                                                f"scalar or a tuple/list of (int, int)")
    bounds = [(d[0], d[1]) if isinstance(d, (tuple, list)) else (0, d) for d in dims]
    return LoopGroup(bounds, axes=_ndrange_axes(axes, len(bounds)), from_ndrange=True)


def _loop_error(exc, msg):
    """QuadrantsSyntaxError / QuadrantsTypeError, naming the kernel line while a kernel compiles."""
    ctx = current()
    if ctx is not None:
        (ctx.type_error if exc is QuadrantsTypeError else ctx.syntax_error)(msg)
    raise exc(msg)


def _ndrange_axes(axes, n):
    """A validated permutation of range(n), or None for None and the identity."""
    if axes is None:
        return None
    axes = tuple(axes)
    if any(isinstance(a, bool) or not isinstance(a, int) for a in axes):
        raise QuadrantsTypeError(f"qd.ndrange(axes={axes!r}): entries must be Python ints (an axis index each)")
    if len(axes) != n:
        raise QuadrantsSyntaxError(f"qd.ndrange(axes={axes!r}) has {len(axes)} entries but ndrange has {n} "
                                   f"dimension(s)")
    if sorted(axes) != list(range(n)):
        raise QuadrantsSyntaxError(f"qd.ndrange(axes={axes!r}) is not a permutation of range({n})")
    return None if axes == tuple(range(n)) else axes


def grouped_impl(ctx, x, grouped=True):
    if isinstance(x, LoopGroup):
        return LoopGroup(x.bounds, grouped=grouped, axes=x.axes, from_ndrange=x.from_ndrange)
    if isinstance(x, Field):
        bounds = [(o, o + n) for n, o in zip(x.shape, x.offset or (0,) * len(x.shape))]
    elif type(x).__name__ == "StructField":
        bounds = [(0, n) for n in x.shape]
    elif isinstance(x, NdarrayArg):
        bounds = [(0, n) for n in ctx.ndarray_sizes(x)]
    else:
        ctx.syntax_error(f"cannot iterate over {type(x).__name__}")
    return LoopGroup(bounds, grouped=grouped)


@builtin
def grouped(x):
    """`for I in qd.grouped(qd.ndrange(n, m))`: I is a vector of the indices."""
    return grouped_impl(require("qd.grouped"), x)


def _addr_indices(f, indices):
    """The canonical index per axis of qd.get_addr's `indices` (a list, a vector or one index of a 1-D field)."""
    if isinstance(indices, MatrixValue):
        indices = list(indices.entries)
    elif isinstance(indices, (list, tuple, np.ndarray)):
        indices = list(indices)
    else:
        indices = [indices]
    if len(indices) != len(f.shape):
        raise QuadrantsTypeError(f"qd.get_addr: field {f.name} has {len(f.shape)} axes, got {len(indices)} index(es)")
    return indices


@builtin
def get_addr(f, indices):
    """qd.get_addr(x, [i, j]): the address (u64) of element x[i, j] of a placed field, in the memory
    the field's kernels use (a host address on the cpu, a device address on a GPU). The elements of a
    field are laid out densely, its axes outermost first in `order=` (row-major without it), each
    element's components together; addresses of one field differ by whole elements. Works in
    kernels and in Python scope."""
    if not isinstance(f, Field) or f.shape is None:
        raise QuadrantsTypeError(f"qd.get_addr takes a placed field, got {type(f).__name__}")
    f._check()
    indices = _addr_indices(f, indices)
    offset = f.offset or (0,) * len(f.shape)
    order = f._qd_layout or tuple(range(len(f.shape)))
    item = int(np.prod(f.element_shape, dtype=np.int64)) * f.dtype.np.itemsize
    ctx = current()
    if ctx is None:
        linear = 0
        for a in order:
            linear = linear * f.shape[a] + (operator.index(indices[a]) - offset[a])
        return int(f.handle) + linear * item
    linear = 0
    for a in order:
        idx = ctx.cast(ctx.binary("sub", ctx.cast(indices[a], T.i64), offset[a]), T.i64)
        linear = ctx.binary("add", ctx.binary("mul", linear, f.shape[a]), idx)
    byte = ctx.cast(ctx.binary("mul", linear, item), T.u64)
    return ctx.binary("add", ctx.const(int(f.handle), T.u64), byte)


_LOOP_OPTIONS = ("serialize", "block_dim", "parallelize", "name")


@builtin
def loop_config(**options):
    """Configures the next for loop: serialize=True runs it serially; block_dim=N sets the chunk / block
    size; name="..." names the loop (a label for the user: it is checked and a name on a loop nested in
    another loop is warned about, as Quadrants does, but this compiler does not yet show it in the IR,
    the artefacts or the compiled task names)."""
    ctx = require("qd.loop_config")
    bad = set(options) - set(_LOOP_OPTIONS)
    if bad:
        ctx.syntax_error(f"qd.loop_config: unknown option(s) {sorted(bad)}; valid: {list(_LOOP_OPTIONS)}")
    name = options.get("name")
    if name is not None and (not isinstance(name, str) or not name):
        ctx.syntax_error(f"qd.loop_config(name=...) takes a non-empty string, got {name!r}")
    ctx.loop_config = dict(options)


# --- atomics -----------------------------------------------------------------------------------
MemoryOrder = _core.MemoryOrder  # Relaxed | Acquire | Release | AcqRel
MemScope = _core.MemScope  # Block | Device | System
RELAXED, DEVICE = MemoryOrder.Relaxed, MemScope.Device


def _make_atomic(row):
    name = row["name"]
    params = row["params"]
    if row["num_operands"] == 2:
        def op(x, expected, desired, *, memory_order=RELAXED, memory_scope=DEVICE):
            return require(f"qd.atomic_{name}").atomic(name, x, expected, desired, memory_order, memory_scope)
    elif params == "bound":
        def op(x, bound, *, memory_order=RELAXED, memory_scope=DEVICE):
            return require(f"qd.atomic_{name}").atomic(name, x, bound, None, memory_order, memory_scope)
    else:
        def op(x, y, *, memory_order=RELAXED, memory_scope=DEVICE):
            return require(f"qd.atomic_{name}").atomic(name, x, y, None, memory_order, memory_scope)
    op.__name__ = op.__qualname__ = f"atomic_{name}"
    dtypes = ("u8/u16/u32/u64" if row["unsigned_only"] else "integer dtypes (i8/u8/i16/u16/i32/u32/i64/u64)"
              if row["int_only"] else "i8/u8/i16/u16/i32/u32/i64/u64/f16/f32/f64")
    op.__doc__ = (f"qd.atomic_{name}(x, {params}, *, memory_order=qd.MemoryOrder.Relaxed, "
                  f"memory_scope=qd.MemScope.Device): atomically {row['effect']}; returns the old value of x.\n\n"
                  f"x must be a field/ndarray element, a vector/matrix slot (fans out per component) or a "
                  f"variable. Takes {dtypes}. memory_order / memory_scope: how the atomic orders other memory "
                  f"accesses, and for which threads. Per-backend lowering: docs/atomics.md.")
    return builtin(op)


ATOMIC_OPS = {row["name"]: _make_atomic(row) for row in _core.atomic_ops()}
globals().update({f"atomic_{name}": fn for name, fn in ATOMIC_OPS.items()})


@builtin
def atomic_load(x, *, memory_order=RELAXED, memory_scope=DEVICE):
    """Atomically reads a field/ndarray element; memory_order Relaxed or Acquire (pairs with a Release store)."""
    return require("qd.atomic_load").atomic_load(x, memory_order, memory_scope)


@builtin
def atomic_store(x, value, *, memory_order=RELAXED, memory_scope=DEVICE):
    """Atomically writes a field/ndarray element; memory_order Relaxed or Release (publishes earlier writes)."""
    return require("qd.atomic_store").atomic_store(x, value, memory_order, memory_scope)


@builtin
def atomic_fence(*, memory_order=MemoryOrder.AcqRel, memory_scope=DEVICE):
    """A memory fence: orders this thread's memory accesses before / after it (Acquire, Release or AcqRel)."""
    return require("qd.atomic_fence").atomic_fence(memory_order, memory_scope)


@builtin
def volatile_load(x):
    """Reads a field/ndarray element from memory on every call: never cached, merged or hoisted."""
    return require("qd.volatile_load").volatile_load(x)


# --- compile-time checks and random numbers ------------------------------------------------------
@builtin
def static_assert(cond, msg=None):
    """Checks `cond` when the kernel compiles (no run-time cost); fails with QuadrantsStaticAssertionError,
    a compilation error and an assertion error."""

    ctx = current()
    if _is_runtime(cond):
        (ctx.type_error if ctx else _raise_type)("Static assert with non-static condition: qd.static_assert "
                                                 "needs a compile-time condition; use assert for run-time checks")
    if not cond:
        text = msg if msg is not None else "static assertion failed"
        raise QuadrantsStaticAssertionError(ctx.walker.located(text) if ctx and ctx.walker else text)


def _raise_type(msg):
    raise TypeError(msg)


_GOLDEN = 0x9E3779B9


def _mix32(ctx, h):
    """A 32-bit avalanche (murmur3's finalizer) on u32 values."""
    h = ctx.binary("bit_xor", h, ctx.binary("shr", h, 16))
    h = ctx.binary("mul", h, 0x85EBCA6B)
    h = ctx.binary("bit_xor", h, ctx.binary("shr", h, 13))
    h = ctx.binary("mul", h, 0xC2B2AE35)
    return ctx.binary("bit_xor", h, ctx.binary("shr", h, 16))


def _next_u32(ctx):
    """The next 32 random bits of this thread: a hash of (seed, launch, thread index, per-thread counter)."""

    rng = ctx.rng_stream()
    counter, thread, launch = rng
    c = ctx.rvalue(counter)
    ctx.store(counter, ctx.binary("add", c, 1))
    seed = int(ctx.config.random_seed) & 0xFFFFFFFF
    u = lambda v: ctx.cast(v, T.u32)  # noqa: E731
    h = _mix32(ctx, ctx.binary("bit_xor", u(thread), ctx.const((seed * 0x27D4EB2F + 0x165667B1) & 0xFFFFFFFF, T.u32)))
    h = _mix32(ctx, ctx.binary("add", h, ctx.binary("mul", u(launch), 0x7FEB352D)))
    h = _mix32(ctx, ctx.binary("add", h, ctx.binary("mul", u(c), _GOLDEN)))
    return _mix32(ctx, ctx.binary("add", h, 0x68E31DA4))


@builtin
def randn(dt=None):
    """A standard normal random float (mean 0, variance 1) of dtype `dt` (default_fp): Box-Muller on
    two qd.random() draws, so it is the same on every backend as qd.random is."""

    ctx = require("qd.randn")
    dt = T.to_dtype(dt) if dt is not None else ctx.config.default_fp
    if not dt.is_real:
        type_error(f"qd.randn(): needs a float dtype, got {dt}")
    u1 = ctx.binary("sub", ctx.const(1.0, dt), random(dt))  # in (0, 1]: its log is finite
    u2 = random(dt)
    radius = ctx.unary("sqrt", ctx.binary("mul", ctx.const(-2.0, dt), ctx.unary("log", u1)))
    return ctx.binary("mul", radius, ctx.unary("cos", ctx.binary("mul", ctx.const(2 * math.pi, dt), u2)))


@builtin
def random(dtype=float):
    """A random value: floats uniform in [0, 1); integers uniform over all values of their type.

    Counter-based: each thread hashes (qd.init(random_seed=), the launch number, its loop index, how
    many numbers it drew), so a program gives the same numbers on every backend."""

    ctx = require("qd.random")
    dtype = T.to_dtype(dtype)
    if dtype.is_real:
        if dtype is T.f64:
            hi = ctx.cast(ctx.binary("shr", _next_u32(ctx), 5), T.f64)   # 27 bits
            lo = ctx.cast(ctx.binary("shr", _next_u32(ctx), 6), T.f64)   # 26 bits
            return ctx.binary("mul", ctx.binary("add", ctx.binary("mul", hi, float(1 << 26)), lo), 2.0 ** -53)
        x = ctx.cast(ctx.binary("shr", _next_u32(ctx), 8), T.f32)        # 24 bits: exact in f32
        return ctx.cast(ctx.binary("mul", x, 2.0 ** -24), dtype) if dtype is not T.f32 else \
            ctx.binary("mul", x, ctx.const(2.0 ** -24, T.f32))
    if dtype.bits == 64:
        hi = ctx.cast(_next_u32(ctx), T.u64)
        lo = ctx.cast(_next_u32(ctx), T.u64)
        return ctx.expr(ctx.b.bitcast(ctx.binary("bit_or", ctx.binary("shl", hi, 32), lo).stmt, dtype.core)) \
            if dtype is not T.u64 else ctx.binary("bit_or", ctx.binary("shl", hi, 32), lo)
    bits = _next_u32(ctx)
    if dtype.bits == 32:
        return bits if dtype is T.u32 else ctx.expr(ctx.b.bitcast(bits.stmt, dtype.core))
    return ctx.cast(bits, dtype)


# --- the operators as functions: qd.lang.ops.add(a, b), and Python's operator module in kernels ---
def _operator(name, pyop):
    @builtin
    def f(a, b):
        ctx = current()
        if ctx is None:
            return pyop(a, b)
        return ctx.binary(name, a, b, user_code=True)

    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"a {name} b (operator.{pyop.__name__}), in kernels and Python scope."
    return f


add = _operator("add", operator.add)
sub = _operator("sub", operator.sub)
mul = _operator("mul", operator.mul)
truediv = _operator("div", operator.truediv)
floordiv = _operator("floordiv", operator.floordiv)
mod = _operator("mod", operator.mod)
bit_and = _operator("bit_and", operator.and_)
bit_or = _operator("bit_or", operator.or_)
bit_xor = _operator("bit_xor", operator.xor)
bit_shl = _operator("shl", operator.lshift)
bit_sar = _operator("shr", operator.rshift)  # arithmetic on signed values, as `>>`


def _c_remainder_py(a, c):
    """C's remainder in Python scope: the sign of the dividend (math.fmod on floats, exact on ints)."""
    if isinstance(a, (int, np.integer)) and isinstance(c, (int, np.integer)) and not isinstance(a, bool) | isinstance(c, bool):
        if c == 0:
            raise ZeroDivisionError("qd.raw_mod(): integer modulo by zero")
        r = builtins.abs(int(a)) % builtins.abs(int(c))
        return -r if a < 0 else r
    if np.ndim(a) or np.ndim(c):
        return np.fmod(a, c)
    return math.fmod(a, c)


def _c_quotient_py(a, c):
    """C's division in Python scope: integers truncate toward zero, anything else divides."""
    if isinstance(a, (int, np.integer)) and isinstance(c, (int, np.integer)) and not isinstance(a, bool) | isinstance(c, bool):
        if c == 0:
            raise ZeroDivisionError("qd.raw_div(): integer division by zero")
        q = builtins.abs(int(a)) // builtins.abs(int(c))
        return -q if (a < 0) != (c < 0) else q
    if np.ndim(a) or np.ndim(c):
        a, c = np.asarray(a), np.asarray(c)
        if a.dtype.kind in "iu" and c.dtype.kind in "iu":
            return (np.sign(a) * np.sign(c) * (np.abs(a) // np.abs(c))).astype(np.result_type(a, c))
        return a / c
    return a / c


def _is_int_expr(x):
    return isinstance(x, Expr) and not x.dtype.is_real or is_py_scalar(x) and isinstance(x, (int, np.integer))


def _raw(ctx, name, a, c):
    """raw_mod / raw_div of two kernel scalars (a Python number among them), elementwise on vectors."""
    a, c = ctx.rvalue(a), ctx.rvalue(c)
    if isinstance(a, MatrixValue) or isinstance(c, MatrixValue):
        return ctx.elementwise(lambda x, y: _raw(ctx, name, x, y), a, c)
    if not isinstance(a, Expr) and not isinstance(c, Expr):
        return (_c_remainder_py if name == "raw_mod" else _c_quotient_py)(a, c)
    integers = _is_int_expr(a) and _is_int_expr(c)
    if name == "raw_div" and not integers:
        return ctx.binary("div", a, c)
    if integers:
        # Python's % has the divisor's sign; C's has the dividend's. They differ exactly when the
        # remainder is nonzero and the operands' signs differ: then C's is r - c and its quotient q + 1.
        r = ctx.binary("mod", a, c)
        signs_differ = ctx.binary("lt", ctx.binary("bit_xor", a, c), 0)
        step = ctx.binary("and_", ctx.binary("ne", r, 0), signs_differ)
        if name == "raw_mod":
            return ctx.expr(ctx.b.select(ctx.scalar(step).stmt, ctx.scalar(ctx.binary("sub", r, c)).stmt,
                                         ctx.scalar(r).stmt))
        q = ctx.binary("floordiv", a, c)
        return ctx.expr(ctx.b.select(ctx.scalar(step).stmt, ctx.scalar(ctx.binary("add", q, 1)).stmt,
                                     ctx.scalar(q).stmt))
    # floats: fmod(a, c) = sign(a) * (|a| % |c|), exact (Python's % of two non-negative numbers is fmod)
    a = ctx.scalar(a if isinstance(a, Expr) else ctx.const(float(a), c.dtype))
    c = ctx.scalar(c if isinstance(c, Expr) else ctx.const(float(c), a.dtype))
    r = ctx.binary("mod", ctx.unary("abs", a), ctx.unary("abs", c))
    return ctx.expr(ctx.b.select(ctx.scalar(ctx.binary("lt", a, 0)).stmt, ctx.scalar(ctx.unary("neg", r)).stmt,
                                 ctx.scalar(r).stmt))


@builtin
def raw_mod(a, b):
    """C's remainder: a - b * trunc(a / b), the sign of a (Python's `a % b` has the sign of b).
    qd.raw_mod(-4, 3) is -1 where -4 % 3 is 2; floats are fmod. Elementwise on vectors and matrices."""
    check_numeric("qd.raw_mod()", a, b)
    ctx = current()
    if ctx is None:
        return _c_remainder_py(a, b)
    return _raw(ctx, "raw_mod", a, b)


@builtin
def raw_div(a, b):
    """C's division: two integers give the quotient truncated toward zero (qd.raw_div(-7, 2) is -3
    where -7 // 2 is -4); a float operand gives a / b. Elementwise on vectors and matrices."""
    check_numeric("qd.raw_div()", a, b)
    ctx = current()
    if ctx is None:
        return _c_quotient_py(a, b)
    return _raw(ctx, "raw_div", a, b)


@builtin
def bit_shr(a, b):
    """Logical shift right: the bits of a shifted in as unsigned (zeros enter from the top)."""
    ctx = current()
    if ctx is None:
        import numpy as np
        a = np.asarray(a)
        return (a.view(a.dtype.str.replace("i", "u")) >> b).view(a.dtype) if a.dtype.kind == "i" else a >> b
    a = ctx.rvalue(a)
    if isinstance(a, Expr) and a.dtype.is_signed and not a.dtype.is_real:
        unsigned = getattr(T, f"u{a.dtype.bits}")
        shifted = ctx.binary("shr", ctx.expr(ctx.b.bitcast(a.stmt, unsigned.core)), b)
        return ctx.expr(ctx.b.bitcast(ctx.scalar(shifted).stmt, a.dtype.core))
    return ctx.binary("shr", a, b)


# operator.X(a, b) called in a kernel: the same as the operator written out
PYTHON_OPERATORS = {operator.add: add, operator.sub: sub, operator.mul: mul, operator.truediv: truediv,
                    operator.floordiv: floordiv, operator.mod: mod, operator.and_: bit_and, operator.or_: bit_or,
                    operator.xor: bit_xor, operator.lshift: bit_shl, operator.rshift: bit_sar,
                    operator.lt: _operator("lt", operator.lt), operator.le: _operator("le", operator.le),
                    operator.gt: _operator("gt", operator.gt), operator.ge: _operator("ge", operator.ge),
                    operator.eq: _operator("eq", operator.eq), operator.ne: _operator("ne", operator.ne)}
