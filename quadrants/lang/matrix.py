"""qd.Vector / qd.Matrix: small vectors and matrices, element-wise in kernels; fields of them."""
import numpy as np


from quadrants import types as T
from quadrants.memory.array import host_array
from quadrants.lang import ops
from quadrants.lang.ast.context import check_numeric, current, describe, type_error
from quadrants.memory.field import field
from quadrants.memory import ndarray as _ndarray
from quadrants.memory import tensor as _tensor
from quadrants.lang.ast.values import MatrixValue
from quadrants.memory.host import _SWIZZLE_GROUPS, PyMatrix


def _flatten(rows):
    if rows and isinstance(rows[0], (list, tuple)):
        if any(not isinstance(r, (list, tuple)) or len(r) != len(rows[0]) for r in rows):
            raise ValueError(f"qd.Matrix takes rows of equal length, got rows {rows!r}")
        return [e for r in rows for e in r], (len(rows), len(rows[0]))
    return list(rows), (len(rows),)


def _py(a, dt=None, what="qd.Matrix()"):
    """A PyMatrix of the numbers in `a` (dtype dt, or numpy's choice); a clear error for anything else."""

    out = np.array(host_array(a, None if dt is None else T.to_dtype(dt), what)).view(PyMatrix)
    if dt is not None:
        out._qd_dtype = T.to_dtype(dt)  # captured by a kernel, it keeps this dtype
    return out


def _flat_args(args):
    """The components of vec3(v2, z), mat2(1, 2, 3, 4), mat2([[1, 2], [3, 4]]): nested sequences
    and vectors are flattened, scalars kept."""
    out = []
    for a in args:
        if isinstance(a, MatrixValue):
            out.extend(a.entries)
        elif isinstance(a, np.ndarray):
            out.extend(a.reshape(-1).tolist())
        elif isinstance(a, (list, tuple)):
            out.extend(_flat_args(a))
        else:
            out.append(a)
    return out


def construct(mtype, args):
    """vec3(1, 2, 3), vec3(1) (every component), vec3(v.xy, 0), mat2([[1, 2], [3, 4]]), mat2(1, 2, 3, 4)."""
    n = int(np.prod(mtype.shape))
    ctx = current()
    if ctx is not None:
        args = [ctx.rvalue(a) for a in args]
    flat = _flat_args(args)
    if len(flat) == 1:
        flat = flat * n
    if len(flat) != n:
        raise TypeError(f"{mtype!r} takes {n} components (or one for all of them), got {len(flat)}")
    if ctx is None:
        return _py(flat, mtype.dtype, f"{mtype!r}").reshape(mtype.shape)
    return ctx.cast(MatrixValue(flat, mtype.shape), mtype.dtype)


def _make(rows, dt):
    """A matrix of Python numbers: a value in kernels (of dtype dt), a PyMatrix outside them."""
    ctx = current()
    if ctx is None:
        return _py(rows, dt)
    flat, shape = _flatten(list(rows))
    mv = MatrixValue(flat, shape)
    return ctx.cast(mv, _dt(dt))


def _dt(dt):

    return T.to_dtype(dt if dt is not None else float)


class _MatrixMeta(type):
    """isinstance(x, qd.Matrix) holds for every vector / matrix value: a PyMatrix in Python scope (what
    qd.Vector / qd.Matrix, x[i] of a vector field and arithmetic on them, numpy scalars included,
    give) and a vector / matrix value while a kernel is built, as in Quadrants. Subclasses (qd.Vector) keep the
    plain check."""

    def __instancecheck__(cls, obj):
        if cls is Matrix and isinstance(obj, (PyMatrix, MatrixValue)):
            return True
        return super().__instancecheck__(obj)


class Matrix(metaclass=_MatrixMeta):
    """qd.Matrix([[a, b], [c, d]]). In kernels a value; in Python scope a numpy array (PyMatrix)."""

    _qd_builtin = True

    def __new__(cls, entries, dt=None):
        what = f"qd.{cls.__name__}()"
        if dt is not None:
            try:
                dt = T.to_dtype(dt)
            except TypeError as e:
                type_error(f"{what}: {e}")
        ctx = current()
        if isinstance(entries, MatrixValue) and ctx is not None:
            return ctx.cast(entries, dt) if dt else entries
        if not isinstance(entries, (list, tuple, np.ndarray)):
            type_error(f"{what} takes a list of entries{' (or of rows)' if cls is Matrix else ''}, got "
                       f"{describe(entries)}")
        if ctx is None:
            return _py(entries, dt, what)
        flat, shape = _flatten(list(entries))
        check_numeric(what, *flat)
        mv = MatrixValue([ctx.rvalue(e) for e in flat], shape)
        return ctx.cast(mv, dt) if dt else mv

    @staticmethod
    def field(n, m, dtype, shape=None, order=None, needs_grad=False, needs_dual=False, name=None, offset=None,
              **_ignored):
        return field(dtype, shape, name=name, offset=offset, order=order, needs_grad=needs_grad,
                     needs_dual=needs_dual, element_shape=(n, m))

    @staticmethod
    def identity(dt, n):
        return _make([[1 if i == j else 0 for j in range(n)] for i in range(n)], dt)

    @staticmethod
    def zero(dt, n, m=None):
        return _make([0] * n if m is None else [[0] * m for _ in range(n)], dt)

    @staticmethod
    def one(dt, n, m=None):
        return _make([1] * n if m is None else [[1] * m for _ in range(n)], dt)

    @staticmethod
    def unit(n, i, dt=None):
        return _make([1 if k == i else 0 for k in range(n)], dt)

    @staticmethod
    def diag(dim, val):
        """A dim x dim matrix with `val` on the diagonal (val may be a kernel value)."""
        ctx = current()
        if ctx is None:
            return _py(np.diag([val] * dim))
        v = ctx.rvalue(val)
        zero = ctx.cast(0, v.dtype) if not isinstance(v, (int, float)) else 0
        return MatrixValue([v if i == j else zero for i in range(dim) for j in range(dim)], (dim, dim))

    @staticmethod
    def rows(rows):
        ctx = current()
        if ctx is None:
            return _py([np.asarray(r).reshape(-1) for r in rows])
        rs = [ctx.rvalue(r) for r in rows]
        return MatrixValue([e for r in rs for e in (r.entries if isinstance(r, MatrixValue) else r)],
                           (len(rs), len(_flat_args([rs[0]]))))

    @staticmethod
    def cols(cols):
        ctx = current()
        if ctx is None:
            return _py(np.array([np.asarray(c).reshape(-1) for c in cols]).T)
        m = Matrix.rows(cols)
        return MatrixValue([m.entry(j, i) for i in range(m.shape[1]) for j in range(m.shape[0])],
                           (m.shape[1], m.shape[0]))

    @staticmethod
    def ndarray(n, m, dtype, shape):
        return _ndarray.new(dtype, shape, element_shape=(n, m))

    tensor = staticmethod(_tensor.matrix_tensor)  # qd.Matrix.tensor(n, m, dtype, shape, backend=...)


class Vector(Matrix):
    """qd.Vector([x, y, z])."""

    _qd_builtin = True

    def __new__(cls, entries, dt=None):
        return Matrix.__new__(cls, entries, dt)

    @staticmethod
    def field(n, dtype, shape=None, order=None, needs_grad=False, needs_dual=False, name=None, offset=None,
              **_ignored):
        return field(dtype, shape, name=name, offset=offset, order=order, needs_grad=needs_grad,
                     needs_dual=needs_dual, element_shape=(n,))

    @staticmethod
    def ndarray(n, dtype, shape):
        return _ndarray.new(dtype, shape, element_shape=(n,))

    tensor = staticmethod(_tensor.vector_tensor)  # qd.Vector.tensor(n, dtype, shape, backend=...)


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




def _generate_swizzle_patterns(key_group, required_length=4):
    """Every swizzle name of 1 .. required_length letters from key_group ("xyzw", "rgba" or "stpq"),
    letters repeated and in any order: the attributes a vector of len(key_group) entries has."""
    import itertools
    return ["".join(p) for n in range(1, required_length + 1) for p in itertools.product(key_group, repeat=n)]


def _swizzle(m, attr):
    """v.x, v.xy, v.zyx, v.rgba: the entries (lvalues stay lvalues: `v.xy = ...` assigns)."""
    if len(m.shape) != 1:
        return None
    for group in _SWIZZLE_GROUPS:
        if all(c in group for c in attr):
            idx = [group.index(c) for c in attr]
            if any(i >= m.shape[0] for i in idx):
                return None
            if len(idx) == 1:
                return m.entries[idx[0]]
            return MatrixValue([m.entries[i] for i in idx], (len(idx),))
    return None


def _det(ctx, r):
    n = r.shape[0]
    if n == 1:
        return r.entries[0]
    if n == 2:
        return ctx.binary("sub", ctx.binary("mul", r.entry(0, 0), r.entry(1, 1)),
                          ctx.binary("mul", r.entry(0, 1), r.entry(1, 0)))
    acc = None
    for j in range(n):  # Laplace expansion along the first row
        term = ctx.binary("mul", r.entry(0, j), _det(ctx, _minor(r, 0, j)))
        acc = term if acc is None else ctx.binary("add" if j % 2 == 0 else "sub", acc, term)
    return acc


def _minor(r, i, j):
    n = r.shape[0]
    return MatrixValue([r.entry(a, b) for a in range(n) if a != i for b in range(n) if b != j], (n - 1, n - 1))


def _square(ctx, r, what, largest=4):
    if len(r.shape) != 2 or r.shape[0] != r.shape[1]:
        ctx.type_error(f".{what}(): expected a square matrix, got shape {r.shape}")
    if r.shape[0] > largest:
        ctx.type_error(f".{what}() needs a square matrix of size 1 to {largest}, got shape {r.shape}")


def _inverse(ctx, r):
    from quadrants import linalg  # reach up: .inverse() past 4x4 inlines qd.linalg's Gauss-Jordan func

    _square(ctx, r, "inverse", linalg.MAX_INVERSE_SIZE)
    n = r.shape[0]
    if n > 4:  # Gauss-Jordan with partial pivoting (the cofactor expansion grows as n!)
        return linalg.inverse(ctx, r)
    inv_det = ctx.binary("div", 1.0, _det(ctx, r))
    if n == 1:
        return MatrixValue([inv_det], (1, 1))
    out = []
    for i in range(n):
        for j in range(n):  # adjugate: the transposed cofactors
            c = _det(ctx, _minor(r, j, i))
            out.append(ctx.binary("mul", c if (i + j) % 2 == 0 else ctx.unary("neg", c), inv_det))
    return MatrixValue(out, (n, n))


def attribute(ctx, m, attr):

    sw = _swizzle(m, attr)
    if sw is not None:
        return sw
    if attr == "n":
        return m.shape[0]
    if attr == "m":
        return m.shape[1] if len(m.shape) == 2 else 1
    r = ctx.rvalue(m)

    def norm_sqr():
        return _sum(ctx, ctx.binary("mul", r, r))

    def determinant():
        _square(ctx, r, "determinant")
        return _det(ctx, r)

    def trace():
        _square(ctx, r, "trace")
        acc = r.entry(0, 0)
        for i in range(1, r.shape[0]):
            acc = ctx.binary("add", acc, r.entry(i, i))
        return acc

    def outer_product(o):
        o = ctx.rvalue(o)
        if len(r.shape) != 1 or not isinstance(o, MatrixValue) or len(o.shape) != 1:
            ctx.type_error(".outer_product() takes two vectors")
        return MatrixValue([ctx.binary("mul", a, c) for a in r.entries for c in o.entries], (r.shape[0], o.shape[0]))

    def any_():
        acc = ctx.binary("ne", r.entries[0], 0)
        for e in r.entries[1:]:
            acc = ctx.binary("or_", acc, ctx.binary("ne", e, 0))
        return acc

    def all_():
        acc = ctx.binary("ne", r.entries[0], 0)
        for e in r.entries[1:]:
            acc = ctx.binary("and_", acc, ctx.binary("ne", e, 0))
        return acc

    methods = {
        "sum": lambda: _sum(ctx, r),
        "dot": lambda o: _sum(ctx, ctx.binary("mul", r, ctx.rvalue(o))),
        "norm_sqr": norm_sqr,
        "norm": lambda eps=0: ops.sqrt(ctx.binary("add", norm_sqr(), eps) if eps else norm_sqr()),
        "norm_inv": lambda eps=0: ctx.binary("div", 1.0, ops.sqrt(ctx.binary("add", norm_sqr(), eps) if eps
                                                                   else norm_sqr())),
        "normalized": lambda eps=0: ctx.binary("div", r, ops.sqrt(ctx.binary("add", norm_sqr(), eps) if eps
                                                                   else norm_sqr())),
        "transpose": lambda: MatrixValue([r.entry(j, i) for i in range(r.shape[1]) for j in range(r.shape[0])],
                                         (r.shape[1], r.shape[0])) if len(r.shape) == 2 else ctx.type_error(
            "`transpose()` cannot apply to a vector. If you want something like `a @ b.transpose()`, write "
            "`a.outer_product(b)` instead."),
        "cross": lambda o: _cross(ctx, r, ctx.rvalue(o)),
        "max": lambda: ops.max(*r.entries),
        "min": lambda: ops.min(*r.entries),
        "determinant": determinant,
        "inverse": lambda: _inverse(ctx, r),
        "trace": trace,
        "outer_product": outer_product,
        "any": any_,
        "all": all_,
        "cast": lambda dt: ctx.cast(r, dt),
        "to_list": lambda: list(r.entries),
        "frobenius_inner": lambda o: _sum(ctx, ctx.binary("mul", r, ctx.rvalue(o))),
        "fill": lambda v: ctx.store(m, v),  # every entry of a variable or memory element
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
