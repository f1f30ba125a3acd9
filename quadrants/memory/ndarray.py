"""qd.ndarray: an array allocated by the runtime and passed to kernels as an argument."""
import numpy as np

from quadrants._lib import runtime
from quadrants import types as T
from quadrants.types.exceptions import QuadrantsIndexError, QuadrantsRuntimeError
from quadrants.memory.field import as_shape, check_size
from quadrants.memory.array import RuntimeArray, host_array, python_scope
from quadrants.memory.buffer_view import BufferView, slice_bounds


class Ndarray(RuntimeArray):
    """qd.ndarray(dtype, shape): a dense array in device memory, passed to kernels by reference. Made
    as Ndarray(...), it is a ScalarNdarray, a VectorNdarray or a MatrixNdarray by its element shape
    (the reference's classes)."""

    def __new__(cls, *args, **kwargs):
        if cls is Ndarray:
            dtype = kwargs.get("dtype", args[0] if args else None)
            element_shape = dtype.shape if isinstance(dtype, (T.VectorType, T.MatrixType)) else \
                kwargs.get("element_shape", args[2] if len(args) > 2 else ())
            cls = (ScalarNdarray, VectorNdarray, MatrixNdarray)[min(len(as_shape(element_shape)), 2)]
        return super().__new__(cls)

    def __init__(self, dtype, shape, element_shape=()):
        if isinstance(dtype, (T.VectorType, T.MatrixType)):
            element_shape, dtype = dtype.shape, dtype.dtype
        python_scope("creating an ndarray")
        self.dtype = T.to_dtype(dtype)
        self._stored_shape = as_shape(shape)  # the storage's shape; .shape is canonical (see _qd_layout)
        self.element_shape = as_shape(element_shape, "the vector/matrix size")
        check_size(self.full_shape, "an ndarray")
        self._program = runtime.program()
        self.nbytes = int(np.prod(self.full_shape, dtype=np.int64)) * self.dtype.np.itemsize
        self.handle = self._program.runtime.allocate(self.nbytes)

    @property
    def shape(self):
        """The canonical shape: the stored one with its axes put back in canonical order."""
        layout = self._qd_layout
        if not layout:
            return self._stored_shape
        canonical = [0] * len(layout)
        for k, axis in enumerate(layout):
            canonical[axis] = self._stored_shape[k]
        return tuple(canonical)

    @property
    def _physical_shape(self):
        return self._stored_shape

    @property
    def full_shape(self):
        return self.shape + self.element_shape

    def __reduce__(self):
        """Pickling: the dtype, shapes, layout and a copy of the contents (and of the gradient
        companion). Unpickling allocates a new ndarray in the current qd.init()'s runtime."""
        self._check()
        grad = self.grad.__reduce__()[1] if self.grad is not None else None
        return _unpickle, (self.dtype, self._stored_shape, self.element_shape, self._qd_layout, self._raw(), grad)

    def _raw(self):
        """The storage, in storage order, as a numpy array."""
        out = np.empty(self._storage_shape, dtype=self.dtype.np)
        if out.size:
            self._program.runtime.read(self.handle, 0, out)
        return out

    def __repr__(self):
        return f"<qd.ndarray {self.dtype} shape={self.shape} element={self.element_shape}>"

    def _is_element(self, key):
        """Whether `key` names one element (a non-negative integer per dimension): read or written
        alone. Anything else (negative indices, slices, index arrays) keeps numpy's indexing."""
        key = () if key is None else key if isinstance(key, tuple) else (key,)
        return len(key) == len(self.shape) and all(
            isinstance(k, (int, np.integer)) and not isinstance(k, bool) and k >= 0 for k in key)

    def _check_index_count(self, key):
        """Integer indices must be one per dimension (x[0] of a 2-D ndarray is not a row, as in Quadrants)."""
        items = key if isinstance(key, tuple) else (key,)
        if all(isinstance(k, (int, np.integer)) and not isinstance(k, bool) for k in items) and \
                len(items) != len(self.shape):
            raise QuadrantsIndexError(f"{self!r}[{key!r}]: {len(self.shape)}d ndarray indexed with {len(items)}d "
                                      f"indices; give one integer per dimension")

    def __getitem__(self, key):
        self._check()
        if isinstance(key, slice):  # a[lo:hi]: a qd.BufferView of a 1-D ndarray
            lo, hi = slice_bounds(key, self.shape[0]) if len(self.shape) == 1 else (0, 0)
            return BufferView(self, lo, hi - lo)
        if self._is_element(key):
            return self._read_element(key)
        self._check_index_count(key)
        a = self.to_numpy()  # slices, masks, fancy indices: numpy's indexing of a copy
        try:
            return a[key]
        except (IndexError, TypeError, ValueError) as e:
            raise type(e)(f"{self!r}[{key!r}]: {e}") from None

    def __setitem__(self, key, value):
        self._check()
        if self._is_element(key):
            return self._write_element(key, value)
        self._check_index_count(key)
        a = self.to_numpy()
        what = f"{self!r}[{key!r}] = ..."
        value = host_array(value, self.dtype, what)
        try:
            a[key] = value
        except (IndexError, TypeError, ValueError) as e:
            raise type(e)(f"{what}: {e}") from None
        self.from_numpy(a)


class ScalarNdarray(Ndarray):
    """An ndarray of scalars."""


class VectorNdarray(Ndarray):
    """An ndarray of vectors (qd.Vector.ndarray, qd.types.vector(n, t) elements)."""


class MatrixNdarray(Ndarray):
    """An ndarray of matrices (qd.Matrix.ndarray, qd.types.matrix(n, m, t) elements)."""


def _unpickle(dtype, stored_shape, element_shape, layout, raw, grad=None):
    a = Ndarray(dtype, stored_shape, element_shape=element_shape)
    a._qd_layout = layout
    if raw.size:
        a._program.runtime.write(a.handle, 0, np.ascontiguousarray(raw).reshape(-1))
    if grad is not None:
        a.grad = _unpickle(*grad)
    return a


class _InvalidShapeError(QuadrantsRuntimeError, TypeError, ValueError):
    """A shape qd.ndarray refuses (as Quadrants, a QuadrantsRuntimeError; a TypeError / ValueError too)."""


def new(dtype, shape, element_shape=()):
    """An ndarray made by the user (qd.ndarray, qd.Vector.ndarray, vec3.ndarray, ...): every dimension
    a positive int, and fewer than 2**31 elements."""
    elem = dtype.shape if isinstance(dtype, (T.VectorType, T.MatrixType)) else as_shape(element_shape)
    try:
        dims = as_shape(shape)
        if 0 in dims:
            raise ValueError("every dimension must be positive")
        check_size(dims + tuple(elem), "an ndarray")
    except (TypeError, ValueError) as e:
        raise _InvalidShapeError(f"{shape!r} is not a valid shape for ndarray: {e}") from None
    return Ndarray(dtype, dims, element_shape=element_shape)


def ndarray(dtype, shape, needs_grad=False):
    """qd.ndarray(dtype, shape); needs_grad=: a real ndarray gets a gradient companion, a.grad."""
    a = new(dtype, shape)
    if needs_grad:
        if not a.dtype.is_real:
            raise QuadrantsRuntimeError(f"{a.dtype} is not supported for ndarray with needs_grad=True: gradients need "
                                        f"a real dtype")
        a.grad = Ndarray(dtype, a.shape)
    return a
