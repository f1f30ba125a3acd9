"""Kernel intrinsics: thin wrappers, each mapping to one core operation.

The atomic family is generated from the core's single table of atomic ops (csrc/atomics).
"""
import builtins
import itertools

from quadrants import _core
from quadrants.lang.context import current, is_py_scalar, require
from quadrants.lang.field import Field
from quadrants.lang.values import Expr, LoopGroup, MatrixValue, NdarrayArg, Ptr, Var


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
        ctx.syntax_error("qd.static() needs a compile-time value (Python values, template arguments)")
    if isinstance(x, range):
        return StaticIterable(x)
    if isinstance(x, LoopGroup):
        if any(not isinstance(v, int) for b in x.bounds for v in b):
            ctx.syntax_error("qd.static(qd.ndrange(...)) needs compile-time bounds")
        ranges = [range(b, e) for b, e in x.bounds]
        return StaticIterable(itertools.product(*ranges))
    return x


def _unary(name, doc):
    @builtin
    def f(x):
        return require(f"qd.{name}").unary(name, x)
    f.__name__, f.__doc__ = name, doc
    return f


sqrt = _unary("sqrt", "Square root.")
sin, cos, tan = _unary("sin", "Sine."), _unary("cos", "Cosine."), _unary("tan", "Tangent.")
asin, acos, atan = _unary("asin", "Arc sine."), _unary("acos", "Arc cosine."), _unary("atan", "Arc tangent.")
exp, log, tanh = _unary("exp", "e**x."), _unary("log", "Natural log."), _unary("tanh", "Hyperbolic tangent.")
floor, ceil, round = _unary("floor", "Floor."), _unary("ceil", "Ceiling."), _unary("round", "Round half to even.")


@builtin
def abs(x):
    ctx = current()
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
        if ctx is None:
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
    return require("qd.atan2").binary("atan2", y, x)


@builtin
def pow(x, y):
    return require("qd.pow").binary("pow", x, y)


@builtin
def cast(x, dtype):
    """Converts `x` to `dtype` (value conversion)."""
    ctx = current()
    if ctx is None:
        return dtype.np.type(x)
    return ctx.cast(x, dtype)


@builtin
def bit_cast(x, dtype):
    """Reinterprets the bits of `x` as `dtype` (same width)."""
    ctx = require("qd.bit_cast")
    return ctx.expr(ctx.b.bitcast(ctx.scalar(x).stmt, dtype.core))


@builtin
def select(cond, a, b):
    ctx = require("qd.select")
    c = ctx.truth(cond)
    if isinstance(c, bool):
        return a if c else b
    return ctx.expr(ctx.b.select(c.stmt, ctx.scalar(a).stmt, ctx.scalar(b).stmt))


# --- loops -------------------------------------------------------------------------------------
@builtin
def ndrange(*dims):
    """The iteration space of `for i, j in qd.ndrange(n, (a, b))`."""
    bounds = [(d[0], d[1]) if isinstance(d, (tuple, list)) else (0, d) for d in dims]
    return LoopGroup(bounds)


def grouped_impl(ctx, x, grouped=True):
    if isinstance(x, LoopGroup):
        return LoopGroup(x.bounds, grouped=grouped)
    if isinstance(x, Field):
        bounds = [(0, n) for n in x.shape]
    elif isinstance(x, NdarrayArg):
        n = x.ndim - len(x.element_shape)
        bounds = [(0, ctx.expr(ctx.b.ndarray_shape(x.buffer, k))) for k in range(n)]
    else:
        ctx.syntax_error(f"cannot iterate over {type(x).__name__}")
    return LoopGroup(bounds, grouped=grouped)


@builtin
def grouped(x):
    """`for I in qd.grouped(qd.ndrange(n, m))`: I is a vector of the indices."""
    return grouped_impl(require("qd.grouped"), x)


_LOOP_OPTIONS = ("serialize", "block_dim", "parallelize")


@builtin
def loop_config(**options):
    """Configures the next for loop: serialize=True runs it serially; block_dim=N sets the chunk / block size."""
    ctx = require("qd.loop_config")
    bad = set(options) - set(_LOOP_OPTIONS)
    if bad:
        ctx.syntax_error(f"qd.loop_config: unknown option(s) {sorted(bad)}; valid: {list(_LOOP_OPTIONS)}")
    ctx.loop_config = dict(options)


# --- atomics -----------------------------------------------------------------------------------
def _make_atomic(row):
    name = row["name"]
    if row["num_operands"] == 2:
        def op(x, expected, desired):
            return require(f"qd.atomic_{name}").atomic(name, x, expected, desired)
        signature = "x, expected, desired"
    else:
        def op(x, y):
            return require(f"qd.atomic_{name}").atomic(name, x, y)
        signature = "x, y"
    op.__name__ = op.__qualname__ = f"atomic_{name}"
    dtypes = "integer dtypes (i32/u32/i64/u64)" if row["int_only"] else "i32/u32/i64/u64/f16/f32/f64"
    op.__doc__ = (f"qd.atomic_{name}({signature}): atomically {row['effect']}; returns the old value of x.\n\n"
                  f"x must be a field/ndarray element, a vector/matrix slot (fans out per component) or a "
                  f"variable. Takes {dtypes}. Per-backend lowering: docs/atomics.md.")
    return builtin(op)


ATOMIC_OPS = {row["name"]: _make_atomic(row) for row in _core.atomic_ops()}
globals().update({f"atomic_{name}": fn for name, fn in ATOMIC_OPS.items()})


@builtin
def volatile_load(x):
    """Reads a field/ndarray element from memory on every call: never cached, merged or hoisted."""
    return require("qd.volatile_load").volatile_load(x)


def fill_in_kernel(ctx, target, value):
    """`x.fill(v)` inside a kernel: a loop storing v to every element (parallel at kernel scope)."""
    if isinstance(target, Field):
        sizes = list(target.shape)
    else:
        sizes = [ctx.expr(ctx.b.ndarray_shape(target.buffer, k)) for k in range(target.ndim - len(target.element_shape))]
    value = ctx.rvalue(value)
    if _is_runtime(value):
        value = ctx.new_var(value)  # computed once, before the loop
    walker = ctx.walker
    parallel = walker.is_kernel and walker.depth == 0 and not ctx.loop_config.get("serialize", False)
    ctx.loop_config = {}
    total = 1
    for n in sizes:
        total = ctx.binary("mul", total, n)
    loop = ctx.b.begin_range_for(ctx.const(0).stmt, ctx.scalar(total).stmt, not parallel, 0)
    flat = ctx.expr(ctx.b.loop_index(loop))
    coords = []
    for n in reversed(sizes[1:]):
        coords.append(ctx.binary("mod", flat, n))
        flat = ctx.binary("floordiv", flat, n)
    coords = ([flat] if sizes else []) + coords[::-1]
    ctx.depth += 1
    try:
        ctx.store(ctx.element(target, coords), value)
    finally:
        ctx.depth -= 1
    ctx.b.end_range_for(loop)
