"""qd.ndarray: an array allocated by the runtime and passed to kernels as an argument."""
import numpy as np

from quadrants.lang import runtime
from quadrants.lang import types as T


class Ndarray:
    def __init__(self, dtype, shape, element_shape=()):
        if isinstance(dtype, (T.VectorType, T.MatrixType)):
            element_shape, dtype = dtype.shape, dtype.dtype
        self.dtype = T.to_dtype(dtype)
        self.shape = (shape,) if isinstance(shape, int) else tuple(shape)
        self.element_shape = tuple(element_shape)
        self._program = runtime.program()
        self.nbytes = int(np.prod(self.full_shape, dtype=np.int64)) * self.dtype.np.itemsize
        self.handle = self._program.runtime.allocate(self.nbytes)

    @property
    def full_shape(self):
        return self.shape + self.element_shape

    def __del__(self):
        try:
            if self._program is runtime._program:
                self._program.runtime.deallocate(self.handle)
        except Exception:
            pass

    def to_numpy(self):
        out = np.empty(self.full_shape, dtype=self.dtype.np)
        if out.size:
            self._program.runtime.read(self.handle, 0, out)
        return out

    def from_numpy(self, arr):
        arr = np.ascontiguousarray(arr, dtype=self.dtype.np)
        if arr.shape != self.full_shape:
            raise ValueError(f"from_numpy: shape {arr.shape} does not match {self.full_shape}")
        if arr.size:
            self._program.runtime.write(self.handle, 0, arr)

    def fill(self, value):
        self.from_numpy(np.full(self.full_shape, value, dtype=self.dtype.np))

    def __getitem__(self, key):
        return self.to_numpy()[key]

    def __setitem__(self, key, value):
        a = self.to_numpy()
        a[key] = value
        self.from_numpy(a)


def ndarray(dtype, shape):
    return Ndarray(dtype, shape)
