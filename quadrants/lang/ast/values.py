"""Values the kernel front end manipulates while it walks a kernel's AST."""
import itertools

import numpy as np

from quadrants.types import scope


def _binary(op, swap=False):
    def method(self, other):
        a, b = (other, self) if swap else (self, other)
        return scope.current().binary(op, a, b, user_code=True)
    return method


class _Operators:
    """Python's arithmetic and ordering operators on kernel values, for the plain Python functions
    a kernel calls with them (`lambda x: x * x - 3`, run while the kernel compiles). == and != stay
    identity (the values are dict keys); inside kernel source the walker builds every operator itself."""

    __add__, __radd__ = _binary("add"), _binary("add", True)
    __sub__, __rsub__ = _binary("sub"), _binary("sub", True)
    __mul__, __rmul__ = _binary("mul"), _binary("mul", True)
    __truediv__, __rtruediv__ = _binary("div"), _binary("div", True)
    __floordiv__, __rfloordiv__ = _binary("floordiv"), _binary("floordiv", True)
    __mod__, __rmod__ = _binary("mod"), _binary("mod", True)
    __pow__, __rpow__ = _binary("pow"), _binary("pow", True)
    __lt__, __le__, __gt__, __ge__ = _binary("lt"), _binary("le"), _binary("gt"), _binary("ge")
    __hash__ = object.__hash__

    def __neg__(self):
        return scope.current().unary("neg", scope.current().rvalue(self))

    def __pos__(self):
        return self

    def __abs__(self):
        return scope.current().unary("abs", scope.current().rvalue(self))


class Expr(_Operators):
    """An rvalue: one IR statement with a dtype."""

    def __init__(self, stmt, dtype):
        self.stmt, self.dtype = stmt, dtype


class Var(_Operators):
    """A kernel local variable (an IR alloca)."""

    kernel_scope = False  # defined outside every loop and branch of the kernel

    def __init__(self, stmt, dtype):
        self.stmt, self.dtype = stmt, dtype


class Ptr(_Operators):
    """A global-memory lvalue: a field or ndarray element (an IR global pointer) of kernel buffer `buffer`."""

    def __init__(self, stmt, dtype, buffer=None):
        self.stmt, self.dtype, self.buffer = stmt, dtype, buffer


class MatrixValue:
    """A vector or matrix inside a kernel: entries are Expr / Var / Ptr / Python numbers, row-major."""

    def __init__(self, entries, shape):
        self.entries = list(entries)
        self.shape = tuple(shape)
        assert len(self.entries) == _prod(self.shape)

    @property
    def n(self):
        return self.shape[0]

    def entry(self, *idx):
        flat = 0
        for i, n in zip(idx, self.shape):
            flat = flat * n + i
        return self.entries[flat]


class DynIndex:
    """entries[index] with `index` known only at run time (a local vector indexed by a loop variable).

    Read: a chain of selects; written: one guarded store per entry. Entries may be lvalues."""

    def __init__(self, entries, index):
        self.entries, self.index = list(entries), index

    @property
    def dtype(self):
        return self.entries[0].dtype

    kernel_scope = False


class NdarrayArg:
    """An ndarray kernel argument: a buffer whose shape comes with the launch."""

    def __init__(self, buffer, dtype, ndim, element_shape, name, layout=None, grad=None):
        self.buffer, self.dtype, self.ndim, self.element_shape, self.name = buffer, dtype, ndim, element_shape, name
        self._qd_layout = layout  # canonical axis per stored axis (qd.tensor(..., layout=)), or None
        self.grad = grad  # the gradient companion's NdarrayArg, or None


class LoopGroup:
    """What qd.ndrange(...) / qd.grouped(...) describe: a multi-dimensional iteration space."""

    def __init__(self, bounds, grouped=False, axes=None, from_ndrange=False):
        self.from_ndrange = from_ndrange  # qd.ndrange(...) itself (not a field's or ndarray's index space)
        self.bounds = bounds  # list of (begin, end) pairs; values may be Python ints or Exprs
        self.grouped = grouped
        self.axes = axes  # the axis at each nesting level, outermost first (qd.ndrange(axes=)); None: in order

    def static_points(self):
        """Every index tuple (Python ints), in iteration order: the last of `axes` varies fastest."""
        order = self.axes or tuple(range(len(self.bounds)))
        ranges = [range(*self.bounds[a]) for a in order]
        for p in itertools.product(*ranges):
            point = [0] * len(order)
            for a, v in zip(order, p):
                point[a] = v
            yield tuple(point)

    def __iter__(self):  # Python scope: for i, j in qd.ndrange(...)
        if any(not isinstance(v, (int, np.integer)) for b in self.bounds for v in b):
            raise TypeError("iterating a qd.ndrange in Python needs int bounds")
        return self.static_points()


def _prod(shape):
    p = 1
    for s in shape:
        p *= s
    return p


class ViewValue:
    """A qd.BufferView in a kernel: elements [offset, offset + size) of a 1-D ndarray argument."""

    def __init__(self, array, offset, size):
        self.array, self.offset, self.size = array, offset, size  # NdarrayArg, i32 values
