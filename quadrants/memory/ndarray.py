"""qd.ndarray: an array allocated by the runtime and passed to kernels as an argument."""
import numpy as np

from quadrants._lib import runtime
from quadrants import types as T
from quadrants.types.exceptions import QuadrantsRuntimeError
from quadrants.memory.field import as_shape, check_size
from quadrants.memory.array import RuntimeArray, host_array, python_scope
from quadrants.memory.buffer_view import BufferView, slice_bounds


class Ndarray(RuntimeArray):
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

    def __repr__(self):
        return f"<qd.ndarray {self.dtype} shape={self.shape} element={self.element_shape}>"

    def _is_element(self, key):
        """Whether `key` names one element (a non-negative integer per dimension): read or written
        alone. Anything else (negative indices, slices, index arrays) keeps numpy's indexing."""
        key = () if key is None else key if isinstance(key, tuple) else (key,)
        return len(key) == len(self.shape) and all(
            isinstance(k, (int, np.integer)) and not isinstance(k, bool) and k >= 0 for k in key)

    def __getitem__(self, key):
        self._check()
        if isinstance(key, slice):  # a[lo:hi]: a qd.BufferView of a 1-D ndarray
            lo, hi = slice_bounds(key, self.shape[0]) if len(self.shape) == 1 else (0, 0)
            return BufferView(self, lo, hi - lo)
        if self._is_element(key):
            return self._read_element(key)
        a = self.to_numpy()  # slices, masks, fancy indices: numpy's indexing of a copy
        try:
            return a[key]
        except (IndexError, TypeError, ValueError) as e:
            raise type(e)(f"{self!r}[{key!r}]: {e}") from None

    def __setitem__(self, key, value):
        self._check()
        if self._is_element(key):
            return self._write_element(key, value)
        a = self.to_numpy()
        what = f"{self!r}[{key!r}] = ..."
        value = host_array(value, self.dtype, what)
        try:
            a[key] = value
        except (IndexError, TypeError, ValueError) as e:
            raise type(e)(f"{what}: {e}") from None
        self.from_numpy(a)


def ndarray(dtype, shape, needs_grad=False):
    """qd.ndarray(dtype, shape); needs_grad=: a real ndarray gets a gradient companion, a.grad."""
    a = Ndarray(dtype, shape)
    if needs_grad:
        if not a.dtype.is_real:
            raise QuadrantsRuntimeError(f"{a.dtype} is not supported for ndarray with needs_grad=True: gradients need "
                                        f"a real dtype")
        a.grad = Ndarray(dtype, shape)
    return a
