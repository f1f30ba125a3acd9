"""qd.Vector / qd.Matrix: small vectors and matrices, element-wise in kernels; fields of them."""
import numpy as np

from quadrants.lang.context import current
from quadrants.lang.field import Field
from quadrants.lang.ndarray import Ndarray
from quadrants.lang.values import MatrixValue


def _flatten(rows):
    if rows and isinstance(rows[0], (list, tuple)):
        if any(not isinstance(r, (list, tuple)) or len(r) != len(rows[0]) for r in rows):
            raise ValueError(f"qd.Matrix takes rows of equal length, got rows {rows!r}")
        return [e for r in rows for e in r], (len(rows), len(rows[0]))
    return list(rows), (len(rows),)


class Matrix:
    """qd.Matrix([[a, b], [c, d]]). In kernels a value; in Python scope a numpy array."""

    _qd_builtin = True

    def __new__(cls, entries, dt=None):
        ctx = current()
        if ctx is None:
            return np.array(entries, dtype=dt.np if dt else None)
        if isinstance(entries, MatrixValue):
            return entries
        flat, shape = _flatten(list(entries))
        mv = MatrixValue([ctx.rvalue(e) for e in flat], shape)
        return ctx.cast(mv, dt) if dt else mv

    @staticmethod
    def field(n, m, dtype, shape=None, name=None):
        return Field(dtype, shape, element_shape=(n, m), name=name)

    @staticmethod
    def ndarray(n, m, dtype, shape):
        return Ndarray(dtype, shape, element_shape=(n, m))


class Vector(Matrix):
    """qd.Vector([x, y, z])."""

    _qd_builtin = True

    def __new__(cls, entries, dt=None):
        return Matrix.__new__(cls, list(entries), dt)

    @staticmethod
    def field(n, dtype, shape=None, name=None):
        return Field(dtype, shape, element_shape=(n,), name=name)

    @staticmethod
    def ndarray(n, dtype, shape):
        return Ndarray(dtype, shape, element_shape=(n,))


def _vec(n):
    def make(*xs):
        if len(xs) == 1 and not isinstance(xs[0], (list, tuple)) and not isinstance(xs[0], MatrixValue):
            xs = xs * n
        elif len(xs) == 1:
            xs = tuple(xs[0].entries if isinstance(xs[0], MatrixValue) else xs[0])
        if len(xs) != n:
            raise TypeError(f"vec{n} takes {n} components, got {len(xs)}")
        return Vector(list(xs))
    make._qd_builtin = True
    make.__name__ = f"vec{n}"
    return make


vec2, vec3, vec4 = _vec(2), _vec(3), _vec(4)


# --- in-kernel operations on MatrixValue -------------------------------------------------------
def matmul(ctx, a, b):
    if not isinstance(a, MatrixValue) or not isinstance(b, MatrixValue):
        ctx.type_error("'@' needs two vectors/matrices")
    ash = a.shape if len(a.shape) == 2 else (1, a.shape[0])
    bsh = b.shape if len(b.shape) == 2 else (b.shape[0], 1)
    if ash[1] != bsh[0]:
        ctx.type_error(f"'@' shape mismatch: {a.shape} @ {b.shape}")
    out = []
    for i in range(ash[0]):
        for j in range(bsh[1]):
            acc = None
            for k in range(ash[1]):
                term = ctx.binary("mul", a.entries[i * ash[1] + k], b.entries[k * bsh[1] + j])
                acc = term if acc is None else ctx.binary("add", acc, term)
            out.append(acc)
    shape = (ash[0], bsh[1]) if len(a.shape) == 2 and len(b.shape) == 2 else (len(out),)
    return MatrixValue(out, shape)


def _sum(ctx, m):
    acc = m.entries[0]
    for e in m.entries[1:]:
        acc = ctx.binary("add", acc, e)
    return acc


def _builtin(f):
    f._qd_builtin = True
    return f


def attribute(ctx, m, attr):
    from quadrants.lang import ops

    swizzle = {"x": 0, "y": 1, "z": 2, "w": 3, "r": 0, "g": 1, "b": 2, "a": 3}
    if attr in swizzle and len(m.shape) == 1:
        return m.entries[swizzle[attr]]
    if attr == "n":
        return m.shape[0]
    if attr == "m":
        return m.shape[1] if len(m.shape) == 2 else 1
    r = ctx.rvalue(m)
    methods = {
        "sum": lambda: _sum(ctx, r),
        "dot": lambda o: _sum(ctx, ctx.binary("mul", r, ctx.rvalue(o))),
        "norm_sqr": lambda: _sum(ctx, ctx.binary("mul", r, r)),
        "norm": lambda: ops.sqrt(_sum(ctx, ctx.binary("mul", r, r))),
        "normalized": lambda: ctx.binary("div", r, ops.sqrt(_sum(ctx, ctx.binary("mul", r, r)))),
        "transpose": lambda: MatrixValue([r.entry(j, i) for i in range(r.shape[1]) for j in range(r.shape[0])],
                                         (r.shape[1], r.shape[0])),
        "cross": lambda o: _cross(ctx, r, ctx.rvalue(o)),
        "max": lambda: ops.max(*r.entries),
        "min": lambda: ops.min(*r.entries),
    }
    if attr not in methods:
        ctx.syntax_error(f"vectors/matrices have no attribute '{attr}'")
    return _builtin(methods[attr])


def _cross(ctx, a, b):
    if not isinstance(b, MatrixValue) or a.shape != b.shape or a.shape not in ((2,), (3,)):
        ctx.type_error(f".cross() takes two 2-vectors (giving a scalar) or two 3-vectors, got shapes {a.shape} and "
                       f"{b.shape if isinstance(b, MatrixValue) else type(b).__name__}")
    if a.shape == (2,):  # the z component of the 3-D cross product
        return ctx.binary("sub", ctx.binary("mul", a.entries[0], b.entries[1]), ctx.binary("mul", a.entries[1], b.entries[0]))
    x = lambda i: a.entries[i]
    y = lambda i: b.entries[i]
    c = lambda i, j: ctx.binary("sub", ctx.binary("mul", x(i), y(j)), ctx.binary("mul", x(j), y(i)))
    return MatrixValue([c(1, 2), c(2, 0), c(0, 1)], (3,))
