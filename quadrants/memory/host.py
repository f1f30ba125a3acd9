"""Host values: a vector or matrix in Python scope (what x[i] of a vector field returns, and
qd.Vector / qd.Matrix outside kernels)."""
import numpy as np

from quadrants._lib import runtime
from quadrants.types.exceptions import QuadrantsTypeError

_SWIZZLE_GROUPS = ("xyzw", "rgba", "stpq")


class PyMatrix(np.ndarray):
    """A vector or matrix in Python scope: a numpy array with the methods kernels have (.n, .m, .norm(),
    .dot(), .cross(), .inverse(), .determinant(), .to_numpy(), ...) and the swizzles of vectors (v.x,
    v.xy, v.rgb = ...).

    One element of a field or ndarray (x[i]) is a copy that writes back: x[i][0, 1] = 2.0 and
    x[i].y = 3 store into x, as in Quadrants (while x's qd.init() lasts; a view of it, x[i][0], or
    an array computed from it is a plain copy)."""

    def __array_finalize__(self, obj):
        dtype = getattr(obj, "__dict__", {}).get("_qd_dtype")
        if dtype is not None:  # a reshape or view of a typed vector is typed too
            self._qd_dtype = dtype

    def qd_dtype(self):
        """The Quadrants dtype this value was made with (qd.Vector(..., dt=qd.i8), x[i] of a field),
        while numpy's dtype still is its counterpart; None otherwise (a kernel then takes Python's
        int / float rules: the default dtypes)."""
        dtype = self.__dict__.get("_qd_dtype")
        return dtype if dtype is not None and dtype.np == self.dtype else None

    def __setitem__(self, index, value):
        super().__setitem__(index, value)
        source = self.__dict__.get("_qd_source")
        if source is not None:
            array, key = source
            if array._program is runtime._program:
                array._write_element(key, np.asarray(self))

    def _swizzle_index(self, name):
        """The indices of swizzle `name` (x, xy, zyx, rgba, stpq) of a vector, or None."""
        if self.ndim != 1 or not name or len(name) > 4:
            return None
        for group in _SWIZZLE_GROUPS:
            if all(c in group for c in name):
                idx = [group.index(c) for c in name]
                if max(idx) < self.shape[0]:
                    return idx[0] if len(idx) == 1 else idx
        return None

    def __getattr__(self, name):
        idx = self._swizzle_index(name) if not name.startswith("_") else None
        if idx is None:
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
        return self[idx]

    def __setattr__(self, name, value):
        idx = self._swizzle_index(name) if not name.startswith("_") and not hasattr(type(self), name) else None
        if idx is None:
            return super().__setattr__(name, value)
        self[idx] = value

    @property
    def n(self):
        return self.shape[0]

    @property
    def m(self):
        return self.shape[1] if self.ndim == 2 else 1

    def to_numpy(self):
        return np.array(self)

    def to_list(self):
        return self.tolist()

    def norm(self, eps=0):
        return float(np.sqrt(np.sum(np.asarray(self) ** 2) + eps))

    def norm_sqr(self):
        return np.sum(np.asarray(self) ** 2)

    def normalized(self, eps=0):
        return self / np.sqrt(np.sum(np.asarray(self) ** 2) + eps)

    def cross(self, other):
        r = np.cross(np.asarray(self), np.asarray(other))
        return r.view(PyMatrix) if np.ndim(r) else r

    def outer_product(self, other):
        return np.outer(np.asarray(self), np.asarray(other)).view(PyMatrix)

    def inverse(self):
        return np.linalg.inv(np.asarray(self)).view(PyMatrix)

    def determinant(self):
        return np.linalg.det(np.asarray(self))

    def trace(self, *args, **kwargs):
        if self.ndim != 2 or self.shape[0] != self.shape[1]:
            raise QuadrantsTypeError(f".trace(): expected a square matrix, got shape {self.shape}")
        return np.asarray(self).trace(*args, **kwargs)

    @property
    def entries(self):
        """The components as a numpy array (of this value's dtype)."""
        return np.asarray(self)

    def __iter__(self):  # a vector's components as numbers, a matrix's rows as lists (list(m) == rows)
        for row in np.asarray(self):
            yield row.tolist() if isinstance(row, np.ndarray) else row.item()

    def __bool__(self):  # `assert u == v`, `if v:`: every component nonzero (numpy raises for two or more)
        return bool(np.all(np.asarray(self)))

    def transpose(self, *axes):
        return np.asarray(self).transpose(*axes).view(PyMatrix)

    @property
    def T(self):
        return self.transpose()
