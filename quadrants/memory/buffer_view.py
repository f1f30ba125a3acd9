"""qd.BufferView: a sub-range [offset, offset + size) of a 1-D ndarray, passed to kernels and funcs
as one argument (the ndarray, the offset and the size), indexed from 0 there."""
import operator

from quadrants import types as T
from quadrants.types import scope


def _as_int(v, what):
    if isinstance(v, bool) or not hasattr(v, "__index__"):
        raise TypeError(f"BufferView: {what} must be an int, got {type(v).__name__}")
    return operator.index(v)


class BufferViewType:
    """The annotation BufferView[dtype]: a BufferView whose elements are `dtype`."""

    def __init__(self, dtype):
        self.dtype = dtype

    def __repr__(self):
        return f"BufferView[{self.dtype!r}]"


class BufferView:
    """BufferView(ndarray, offset, size), or `a[lo:hi]` of a 1-D ndarray. In a kernel or func the
    same call takes an ndarray argument and run-time offset / size."""

    _qd_builtin = True  # callable in kernels: the front end builds the view there

    def __new__(cls, ndarray, offset=0, size=None):
        ctx = scope.current()
        if ctx is not None:
            return ctx.buffer_view(ndarray, offset, size)
        return super().__new__(cls)

    def __init__(self, ndarray, offset=0, size=None):
        if isinstance(ndarray, BufferView):
            raise TypeError("BufferView(...) takes an ndarray; use view.subview(offset, size) for a view of a view")
        shape = getattr(ndarray, "shape", None)
        if not hasattr(ndarray, "element_shape") or not hasattr(ndarray, "_stored_shape"):
            raise TypeError(f"BufferView needs a 1D qd.ndarray, got {type(ndarray).__name__}")
        if len(shape) != 1:
            raise TypeError(f"BufferView needs a 1D ndarray, got one of shape {tuple(shape)}")
        if ndarray.grad is not None:
            raise TypeError("BufferView does not support ndarrays with needs_grad=True")
        offset = _as_int(offset, "offset")
        size = shape[0] - offset if size is None else _as_int(size, "size")
        if offset < 0 or size < 0 or offset + size > shape[0]:
            raise ValueError(f"BufferView out of range: offset={offset}, size={size} for an ndarray of length "
                             f"{shape[0]}")
        self._ndarray, self.offset, self.size = ndarray, offset, size

    def __class_getitem__(cls, dtype):
        return BufferViewType(dtype)

    @property
    def shape(self):
        return (self.size,)

    @property
    def dtype(self):
        return self._ndarray.dtype

    def get_ndarray(self):
        """The ndarray the view is of."""
        return self._ndarray

    def subview(self, offset, size):
        """The view of [offset, offset + size) of this view."""
        offset, size = _as_int(offset, "offset"), _as_int(size, "size")
        if offset < 0 or size < 0 or offset + size > self.size:
            raise ValueError(f"BufferView subview out of range: offset={offset}, size={size} for a view of size "
                             f"{self.size}")
        return BufferView(self._ndarray, self.offset + offset, size)

    def __getitem__(self, key):
        if not isinstance(key, slice):
            raise TypeError(f"BufferView[{key!r}]: index a view in a kernel; in Python it takes a slice "
                            f"(view[lo:hi])")
        lo, hi = slice_bounds(key, self.size)
        return self.subview(lo, hi - lo)

    def __repr__(self):
        return f"BufferView({self._ndarray!r}, offset={self.offset}, size={self.size})"


def slice_bounds(key, n):
    """(lo, hi) of slice `key` over n elements (negative bounds from the end, clamped); a step other
    than 1 is a ValueError."""
    if key.step not in (None, 1):
        raise ValueError(f"a BufferView slice needs step=1, got step={key.step!r}")
    lo, hi, _ = key.indices(n)
    return lo, max(lo, hi)


def is_annotation(annotation):
    return annotation is BufferView or isinstance(annotation, BufferViewType)


def annotation_dtype(annotation):
    return T.to_dtype(annotation.dtype) if isinstance(annotation, BufferViewType) else None
