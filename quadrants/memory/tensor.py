"""The unified tensor API: qd.tensor / qd.Vector.tensor / qd.Matrix.tensor allocate a field or an
ndarray (qd.Backend), optionally stored in a permuted axis order (layout=), and return a qd.Tensor
wrapper with the same surface on both. Kernels see the bare field or ndarray."""
import enum
import functools
import operator

import numpy as np

from quadrants import types as T
from quadrants.memory.array import RuntimeArray
from quadrants.memory.field import Field, as_shape
from quadrants.memory.ndarray import Ndarray

MAX_RANK = 12  # quadrants_max_num_indices


class Backend(enum.IntEnum):
    """Which allocator a tensor wraps: FIELD (qd.field: fast, shape compiled in) or NDARRAY
    (qd.ndarray: shape passed at launch, no recompilation when it changes)."""

    FIELD = 0
    NDARRAY = 1


_SCALAR_KWARGS = frozenset({"backend", "needs_grad", "layout"})
_COMPOUND_KWARGS = frozenset({"backend", "needs_grad"})


def _check_kwargs(kwargs, factory, accepted):
    if "order" in kwargs:
        if "layout" in accepted:
            raise TypeError(f"{factory}(...) does not accept order=; pass layout=(...) instead")
        raise TypeError(f"{factory}(...) does not accept order= (nor layout=): call qd.field / qd.ndarray directly")
    extra = set(kwargs) - accepted
    if extra:
        raise TypeError(f"{factory}() got unexpected keyword argument(s) {sorted(extra)!r}; accepted: "
                        f"{', '.join(sorted(accepted | {'dtype', 'shape'}))}")


def _as_backend(backend):
    try:
        if isinstance(backend, (bool, np.bool_)) or not isinstance(backend, (int, np.integer)):
            raise ValueError
        return Backend(int(backend))
    except ValueError:
        raise ValueError(f"backend={backend!r} is not a valid qd.Backend; expected one of "
                         f"{[str(b) for b in Backend]}") from None


def _as_layout(layout, ndim, keep_identity=False):
    """A validated permutation, or None for None (and the identity unless keep_identity)."""
    if layout is None:
        return None
    try:
        layout = tuple(operator.index(a) for a in layout)
    except TypeError:
        raise TypeError(f"layout must be a tuple of ints, got {layout!r}") from None
    if len(layout) != ndim:
        raise ValueError(f"layout has {len(layout)} entries but shape has {ndim} dimensions; they must match")
    if sorted(layout) != list(range(ndim)):
        raise ValueError(f"layout={layout!r} is not a permutation of range({ndim})")
    if ndim > MAX_RANK:
        raise ValueError(f"layout: at most {MAX_RANK} dimensions are supported, got {ndim}")
    return None if layout == tuple(range(ndim)) and not keep_identity else layout


def _with_layout(array, layout):
    """Tags an ndarray (or a Tensor around one) allocated at the stored shape with `layout`: its
    shape becomes the canonical one (canonical[layout[k]] = stored[k]); kernels, host indexing and
    numpy / torch / DLPack then use canonical indices. Returns the array."""
    impl = array._unwrap() if isinstance(array, Tensor) else array
    stored = impl._physical_shape
    layout = _as_layout(layout, len(stored), keep_identity=True)  # a tag, kept as given (a distinct cache key)
    canonical = [0] * len(stored)
    for k, axis in enumerate(layout or range(len(stored))):
        canonical[axis] = stored[k]
    for a in (impl,) + _companions(impl):
        if a is not None:
            if isinstance(a, Field):
                a._shape = tuple(canonical)  # a field keeps its canonical shape; an ndarray its stored one
            a._qd_layout = layout
    return array


def _is_real(dtype):
    return T.to_dtype(dtype).is_real


def _companion(impl, kind):
    """A field's placed .grad / .dual, an ndarray's .grad (ndarrays have no .dual), or None."""
    if isinstance(impl, Field):
        return impl._placed_companion(kind)
    return getattr(impl, kind, None) if kind == "grad" else None


def _companions(impl):
    return tuple(c for c in (_companion(impl, "grad"), _companion(impl, "dual")) if c is not None)


def _allocate(backend, dtype, shape, element_shape, layout, needs_grad):
    """The bare field / ndarray (and its gradient companion with needs_grad on a real dtype)."""
    canonical = as_shape(shape)
    layout = _as_layout(layout, len(canonical))
    stored = tuple(canonical[a] for a in layout) if layout else canonical

    def one():
        if backend is Backend.FIELD:
            a = Field(dtype, canonical, element_shape=element_shape)
            a._qd_layout = layout  # the same number of bytes, stored in the layout's axis order
            return a
        a = Ndarray(dtype, stored, element_shape=element_shape)
        return _with_layout(a, layout) if layout else a

    impl = one()
    if needs_grad and _is_real(dtype):
        impl.grad = one()
    return impl


def tensor(dtype, shape, *, backend=Backend.NDARRAY, layout=None, **kwargs):
    """A tensor of `dtype` (a scalar dtype, or a vector / matrix dtype) with canonical `shape`.
    backend: qd.Backend.NDARRAY (default) or FIELD. layout: the canonical axis at each memory level,
    outermost first (scalar dtypes only). needs_grad=: a gradient companion (real dtypes)."""
    if isinstance(dtype, (RuntimeArray, Tensor)):
        raise TypeError(f"qd.tensor() allocates a new tensor; to wrap an existing {type(dtype).__name__}, use "
                        f"qd.wrap(impl) instead")
    if layout is not None and isinstance(dtype, (T.VectorType, T.MatrixType)):
        raise TypeError("layout= is not supported with compound dtypes (vector/matrix). Use qd.Vector.tensor(...) or "
                        "qd.Matrix.tensor(...) without layout= instead.")
    _check_kwargs(kwargs, "qd.tensor", _SCALAR_KWARGS)
    backend = _as_backend(backend)
    element_shape = ()
    if isinstance(dtype, (T.VectorType, T.MatrixType)):
        element_shape, dtype = dtype.shape, dtype.dtype
    return wrap(_allocate(backend, dtype, shape, element_shape, layout, kwargs.get("needs_grad", False)))


def vector_tensor(n, dtype, shape, *, backend=Backend.NDARRAY, **kwargs):
    """qd.Vector.tensor(n, dtype, shape, backend=..., needs_grad=...)."""
    _check_kwargs(kwargs, "qd.Vector.tensor", _COMPOUND_KWARGS)
    return VectorTensor(_allocate(_as_backend(backend), dtype, shape, (n,), None, kwargs.get("needs_grad", False)))


def matrix_tensor(n, m, dtype, shape, *, backend=Backend.NDARRAY, **kwargs):
    """qd.Matrix.tensor(n, m, dtype, shape, backend=..., needs_grad=...)."""
    _check_kwargs(kwargs, "qd.Matrix.tensor", _COMPOUND_KWARGS)
    return MatrixTensor(_allocate(_as_backend(backend), dtype, shape, (n, m), None, kwargs.get("needs_grad", False)))


def _is_impl(impl):
    return isinstance(impl, (Field, Ndarray))


class Tensor:
    """A field or ndarray behind one surface; also the kernel / func annotation taking either (or
    None). Kernels receive the bare field or ndarray."""

    _qd_tensor = True  # what the kernel layer unwraps

    def __init__(self, impl):
        if not _is_impl(impl):
            raise TypeError(f"Tensor(impl) requires an Ndarray or Field; got {type(impl).__name__}")
        self._impl = impl

    def _unwrap(self):
        """The bare qd.ndarray / qd.field."""
        return self._impl

    @property
    def _backend(self):
        return Backend.NDARRAY if isinstance(self._impl, Ndarray) else Backend.FIELD

    def __repr__(self):
        layout = "" if self.layout is None else f", layout={self.layout!r}"
        return f"{type(self).__name__}(shape={self.shape!r}, dtype={self.dtype!r}, backend={self._backend.name}{layout})"

    @property
    def shape(self):
        return tuple(self._impl.shape)

    @property
    def dtype(self):
        return self._impl.dtype

    @property
    def layout(self):
        return self._impl._qd_layout

    def __getitem__(self, key):
        return self._impl[key]

    def __setitem__(self, key, value):
        self._impl[key] = value

    def to_numpy(self, dtype=None, *, copy=True):
        return self._impl.to_numpy(dtype, copy=copy)

    def from_numpy(self, arr):
        self._impl.from_numpy(arr)

    def to_torch(self, device=None, *, copy=True):
        return self._impl.to_torch(device, copy=copy)

    def from_torch(self, arr):
        self._impl.from_torch(arr)

    def to_dlpack(self, versioned=False):
        """A DLPack capsule of the canonical view (stored-order strides; zero-copy on arch=qd.cpu)."""
        return self._impl.__dlpack__(max_version=(1, 0) if versioned else None)

    def __dlpack__(self, **kwargs):
        return self._impl.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._impl.__dlpack_device__()

    def fill(self, value):
        self._impl.fill(value)

    def copy_from(self, other):
        """Copies another tensor (or a bare field / ndarray) of the same backend and shape."""
        other = other._impl if isinstance(other, Tensor) else other
        if _is_impl(other) and isinstance(other, Ndarray) != isinstance(self._impl, Ndarray):
            raise TypeError(f"copy_from: cross-backend copy is unsupported ({type(other).__name__} into "
                            f"{type(self._impl).__name__}); route it through a.from_torch(b.to_torch()) or "
                            f"a.from_numpy(b.to_numpy())")
        self._impl.copy_from(other)

    @functools.cached_property
    def grad(self):
        g = _companion(self._impl, "grad")
        return None if g is None else wrap(g)

    def has_grad(self):
        return _companion(self._impl, "grad") is not None

    def has_dual(self):
        return _companion(self._impl, "dual") is not None

    def __reduce__(self):
        impl = self._impl
        return (_rebuild, (type(self), self._backend, self.dtype.name, self.shape, tuple(impl.element_shape),
                           self.layout, self.to_numpy()))


class _CompoundTensor(Tensor):
    """What VectorTensor and MatrixTensor share: an impl whose elements have `_axes` axes."""

    _axes, _kind = None, None

    def __init__(self, impl):
        if not _is_impl(impl) or len(impl.element_shape) != self._axes:
            raise TypeError(f"{type(self).__name__} requires a {self._kind}-element impl; got {type(impl).__name__}")
        self._impl = impl

    @property
    def element_shape(self):
        return tuple(self._impl.element_shape)

    @property
    def n(self):
        return self._impl.element_shape[0]


class VectorTensor(_CompoundTensor):
    """A tensor of vectors (qd.Vector.tensor)."""

    _axes, _kind = 1, "vector"


class MatrixTensor(_CompoundTensor):
    """A tensor of matrices (qd.Matrix.tensor)."""

    _axes, _kind = 2, "matrix"

    @property
    def m(self):
        return self._impl.element_shape[1]


def wrap(impl):
    """The qd.Tensor (VectorTensor, MatrixTensor) around a bare field / ndarray; a Tensor is returned as is."""
    if isinstance(impl, Tensor):
        return impl
    if not _is_impl(impl):
        raise TypeError(f"qd.wrap(impl) requires an Ndarray or Field; got {type(impl).__name__}")
    cls = {1: VectorTensor, 2: MatrixTensor}.get(len(impl.element_shape), Tensor)
    return cls(impl)


def _rebuild(cls, backend, dtype_name, shape, element_shape, layout, data):
    impl = _allocate(Backend(backend), getattr(T, dtype_name), shape, element_shape, layout, False)
    impl.from_numpy(data)
    return cls(impl)


def unwrap(value):
    """A Tensor's bare field / ndarray; anything else as is."""
    return value._impl if isinstance(value, Tensor) else value
