"""What fields and ndarrays share: memory owned by the runtime of one qd.init(), copied to and
from numpy."""
import numpy as np

from quadrants.lang import runtime


class RuntimeArray:
    """Subclasses set dtype, full_shape, handle and _program."""

    handle = None
    _program = None

    def _check(self):
        if self._program is not runtime._program:
            raise RuntimeError(f"{self!r} belongs to an earlier qd.init(); create it again")

    def _release(self):
        try:
            if self.handle is not None and self._program is runtime._program:
                self._program.runtime.deallocate(self.handle)
        except Exception:
            pass  # interpreter shutdown

    def __del__(self):
        self._release()

    def to_numpy(self):
        self._check()
        out = np.empty(self.full_shape, dtype=self.dtype.np)
        if out.size:
            self._program.runtime.read(self.handle, 0, out)
        return out

    def from_numpy(self, arr):
        self._check()
        arr = np.ascontiguousarray(arr, dtype=self.dtype.np)
        if arr.shape != self.full_shape:
            raise ValueError(f"from_numpy: shape {arr.shape} does not match {self.full_shape}")
        if arr.size:
            self._program.runtime.write(self.handle, 0, arr)

    def fill(self, value):
        self.from_numpy(np.full(self.full_shape, value, dtype=self.dtype.np))
