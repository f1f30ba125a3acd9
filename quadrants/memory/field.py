"""Fields: global arrays owned by the runtime, read and written by kernels and from Python."""
import itertools
import math
import operator
import os
import sys
import weakref

import numpy as np

from quadrants._lib import runtime
from quadrants import types as T
from quadrants.types import scope
from quadrants.types.enums import SNodeGradType
from quadrants.types.exceptions import QuadrantsCompilationError, QuadrantsRuntimeError
from quadrants.memory.array import RuntimeArray, python_scope

_ids = itertools.count()


MAX_ELEMENTS = (1 << 31) - 1  # element and loop indices are 32-bit


def as_shape(shape, what="shape"):
    """A tuple of non-negative ints from an int (numpy integers too) or a sequence of them."""
    if shape is None:
        return None
    if isinstance(shape, np.ndarray):
        shape = shape.tolist()
    items = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    out = []
    for n in items:
        if isinstance(n, (bool, np.bool_)):
            raise TypeError(f"{what} must be an int or a tuple of ints, got {shape!r}")
        try:
            n = operator.index(n)
        except TypeError:
            raise TypeError(f"{what} must be an int or a tuple of ints, got {shape!r}") from None
        if n < 0:
            raise ValueError(f"{what} must not be negative, got {shape!r}")
        out.append(n)
    return tuple(out)


def check_size(full_shape, what):
    n = math.prod(full_shape)
    if n > MAX_ELEMENTS:
        raise ValueError(f"{what} of shape {full_shape} has {n} elements; at most 2**31 - 1 are supported "
                         f"(indices are 32-bit)")


_as_shape = as_shape


class Field(RuntimeArray):
    """qd.field(dtype, shape): a dense array of `dtype`, with an element shape for vector/matrix fields.
    Made as Field(...), it is a ScalarField or, with an element shape, a MatrixField (the reference's
    classes: vector fields are MatrixFields too)."""

    def __new__(cls, *args, **kwargs):
        if cls is Field:
            element_shape = kwargs.get("element_shape", args[2] if len(args) > 2 else ())
            cls = MatrixField if as_shape(element_shape, "the vector/matrix size") else ScalarField
        return super().__new__(cls)

    def __init__(self, dtype, shape=None, element_shape=(), name=None, offset=None):
        self.dtype = T.to_dtype(dtype)
        self.element_shape = as_shape(element_shape, "the vector/matrix size")
        self.id = next(_ids)
        self.name = name or f"field{self.id}"
        self._shape = None
        self._program = None
        self.handle = None
        self.offset = None  # per axis, the index of the first element (qd.field(..., offset=)); None: zeros
        # Autodiff companions of a real field (made when first asked for): "grad" (x.grad, reverse
        # mode) and "dual" (x.dual, forward mode), fields of the same shape; _needs: those asked for
        # (needs_grad= / needs_dual=, lazy_grad()).
        self._companions, self._needs = {}, set()
        self._primal = None  # a companion: the field it belongs to
        self._kind = None  # a companion: "grad" or "dual"
        self._snode_node = None  # the place node (x.snode); made on first use for a field made with shape=
        self._component_shapes = {}  # components placed one by one (get_scalar_field): index -> shape
        if shape is not None:
            self._place(_as_shape(shape))
        if offset is not None:
            self.offset = _as_offset(offset, self._shape)

    def _place(self, shape):
        python_scope("creating a field")
        if self._shape is not None:
            raise RuntimeError(f"field {self.name} is already placed")
        check_size(shape + self.element_shape, "a field")
        self._shape = shape
        self._program = runtime.program()
        nbytes = int(np.prod(self.full_shape, dtype=np.int64)) * self.dtype.np.itemsize
        self.handle = self._program.runtime.allocate(nbytes)
        if self._primal is None:
            _placed.add(self)

    # --- autodiff companions (docs/autodiff.md) ---
    @property
    def grad(self):
        """The gradient (adjoint) of a real field: a field of the same shape, placed with
        needs_grad=True, qd.root.lazy_grad() or qd.root...place(x.grad); None for integer fields."""
        return self._companion("grad")

    @grad.setter
    def grad(self, value):
        self._adopt(value, "grad")

    @property
    def dual(self):
        """The tangent of a real field for forward-mode autodiff (needs_dual=True / lazy_dual())."""
        return self._companion("dual")

    @dual.setter
    def dual(self, value):
        self._adopt(value, "dual")

    def _adopt(self, c, kind):
        """A field made elsewhere as this one's companion (a tensor's gradient)."""
        if isinstance(c, Field):
            c._primal, c._kind = self, kind
            _placed.discard(c)
        self._companions[kind] = c

    def _companion(self, kind):
        if not self.dtype.is_real or self._primal is not None:
            return self._companions.get(kind)
        c = self._companions.get(kind)
        if c is None:
            c = Field(self.dtype, None, element_shape=self.element_shape, name=f"{self.name}.{kind}")
            c._primal, c._kind = self, kind
            self._companions[kind] = c
        return c

    def _checkbits(self):
        """The check bits of Tape(validation=True): an i32 field of the same shape, placed on first use."""
        c = self._companions.get("checkbit")
        if c is None:
            c = self._companions["checkbit"] = Field(T.i32, self._shape, element_shape=self.element_shape,
                                                     name=f"{self.name}.checkbit")
            c._primal, c._kind = self, "checkbit"
        return c

    def _placed_companion(self, kind):
        """The companion when it has memory, else None."""
        c = self._companions.get(kind)
        return c if c is not None and c._shape is not None else None

    def _place_companion(self, kind):
        c = self._companion(kind)
        if c is not None and c._shape is None:
            c._place(self._shape)
            c.offset, c._qd_layout = self.offset, self._qd_layout
            if self._snode_node is not None:
                c.snode = SNode(self._snode_node.sizes, None, self._snode_node._parent, "place")
                c._snode_node._name = c.name

    @property
    def snode(self):
        """The layout node holding the field (x.snode.parent(), x.snode.ptr.get_snode_grad_type())."""
        if self._snode_node is None:  # a field made with shape= (or a companion): one dense node under qd.root
            dense = SNode(self.snode_sizes())
            dense._parent = root
            self.snode = SNode(dense.sizes, None, dense, "place")
            self._snode_node._name = self.name
        return self._snode_node

    @snode.setter
    def snode(self, node):
        self._snode_node = node
        node._field = self

    @property
    def _snode(self):
        """The place node of a placed field (as x.snode), None while it has no shape."""
        return self.snode if self._shape is not None else self._snode_node

    def snode_sizes(self):
        """(axis, size) pairs of the one dense node of a field made with shape=: its axes in memory
        order, outermost first (order="ji": j's first)."""
        shape = self._shape or ()
        layout = getattr(self, "_qd_layout", None) or tuple(range(len(shape)))
        return tuple((a, shape[a]) for a in layout)

    def _destroy(self):
        self._release()
        self.handle, self._destroyed = None, True
        for c in self._companions.values():
            if c is not None and c._shape is not None and not getattr(c, "_destroyed", False):
                c._destroy()

    def _check(self):
        if getattr(self, "_destroyed", False):
            raise QuadrantsRuntimeError(f"field {self.name} was freed with its SNodeTree (tree.destroy())")
        if self._shape is None:
            raise RuntimeError(f"field {self.name} has no shape yet: give shape= or place it with qd.root")
        super()._check()

    @property
    def shape(self):
        return self._shape

    @property
    def full_shape(self):
        return self._shape + self.element_shape

    def _label(self):
        return self.name

    @property
    def _name(self):
        return self.name

    def __iter__(self):
        raise NotImplementedError(f"Struct for is only available in Quadrants scope: `for i in {self.name}` loops "
                                  f"over the field's indices inside a kernel; in Python use to_numpy()")

    @property
    def _n_components(self):
        return int(np.prod(self.element_shape, dtype=np.int64))

    def _get_dynamic_index_stride(self):
        """The bytes between consecutive components of one element, which a kernel's run-time component
        index (v[i][k], k computed) steps by: the element's components lie together, so the component
        size for a vector / matrix field placed whole (shape=, or place(v)); None for one placed
        component by component (get_scalar_field), whose layout, built by the user, promises no
        stride, and for a scalar field."""
        if not self.element_shape or self._shape is None or self._component_shapes:
            return None
        return self.dtype.np.itemsize

    def get_scalar_field(self, *index):
        """The component at `index` ((i,) of a vector field, (i, j) of a matrix field) of a field
        declared without a shape, to place on its own."""
        if len(index) != len(self.element_shape) or not all(0 <= i < n for i, n in zip(index, self.element_shape)):
            raise IndexError(f"get_scalar_field{index}: field {self.name} has components of shape {self.element_shape}")
        if self._shape is not None:
            raise RuntimeError(f"get_scalar_field: field {self.name} is already placed (its components share one "
                               f"layout)")
        return _ScalarComponent(self, tuple(int(i) for i in index))

    def __getitem__(self, key):
        self._check()
        return self._read_element(self._unoffset(key))

    def __setitem__(self, key, value):
        self._check()
        self._write_element(self._unoffset(key), value)

    def _unoffset(self, key):
        """A Python-scope index of a field with an offset, as the position in its buffer."""
        if not self.offset:
            return key
        items = key if isinstance(key, tuple) else (key,)
        if len(items) != len(self.offset) or not all(hasattr(k, "__index__") and not isinstance(k, bool)
                                                     for k in items):
            return key  # the usual errors
        return tuple(operator.index(k) - o for k, o in zip(items, self.offset))

    def __repr__(self):
        return f"<qd.field {self.name} {self.dtype} shape={self._shape} element={self.element_shape}>"


class ScalarField(Field):
    """A field of scalars (qd.field(dtype, shape))."""


class MatrixField(Field):
    """A field of vectors or matrices (qd.Vector.field, qd.Matrix.field)."""


class OffsetError(QuadrantsCompilationError, ValueError):
    """A bad offset= of a field constructor or place() (a QuadrantsCompilationError, as Quadrants raises,
    and a ValueError)."""


def _as_offset(offset, shape):
    """offset= of qd.field / place(): an int (1-D) or a tuple of ints, one per axis."""
    if shape is None:
        raise OffsetError("qd.field: offset= needs shape= (shape cannot be None when offset is set)")
    items = tuple(offset) if isinstance(offset, (tuple, list)) else (offset,)
    if any(isinstance(o, (bool, np.bool_)) or not hasattr(o, "__index__") for o in items):
        raise OffsetError(f"qd.field: offset must be {len(shape)} int(s), one per axis of shape {shape}, got "
                          f"{offset!r}")
    if len(items) != len(shape):
        raise OffsetError(f"qd.field: offset {offset!r} has {len(items)} int(s) but shape {shape} has {len(shape)} "
                          f"axes: The dimensionality of shape and offset must be the same")
    items = tuple(operator.index(o) for o in items)
    return items if any(items) else None


def with_companions(f, needs_grad=False, needs_dual=False):
    """needs_grad= / needs_dual= of the field constructors: a field with a shape gets its companions
    placed now; one declared without is to have them placed with it (qd.root...place(x, x.grad),
    or lazy_grad()), which check_placed verifies at the next launch. Returns f."""
    if not f.dtype.is_real:
        return f
    for kind, wanted in (("grad", needs_grad), ("dual", needs_dual)):
        if wanted:
            f._needs.add(kind)
            if f.shape is not None:
                f._place_companion(kind)
    return f


_placed = weakref.WeakSet()  # the placed fields (not companions), for lazy_grad and clear_all_gradients


def placed_fields():
    """The placed fields of the current qd.init (not the companions)."""
    prog = runtime._program
    return [f for f in list(_placed) if f._program is prog and not getattr(f, "_destroyed", False)]


def lazy_place(kind):
    """qd.root.lazy_grad() / lazy_dual(): places the companion of every placed real field lacking one."""
    for f in placed_fields():
        if f.dtype.is_real:
            f._needs.add(kind)
            f._place_companion(kind)


def field(dtype, shape=None, name=None, offset=None, order=None, needs_grad=False, needs_dual=False, *,
          element_shape=()):
    """qd.field(qd.f32, shape), or of a vector / matrix dtype: qd.field(qd.types.vector(3, qd.f32), shape).
    offset=: the index of the first element per axis (x[offset] is the first; `for i in x` runs
    offset .. offset + shape - 1). order=: the axes outermost first in memory ("ji": j outer, i
    inner), indices staying canonical. needs_grad= / needs_dual=: a real field gets a gradient
    companion, x.grad / x.dual, of the same shape. Without shape= the field (and its companions) are
    placed later with qd.root.dense(...).place(x, x.grad); a kernel launched while one is still
    unplaced raises RuntimeError (see check_placed)."""
    if isinstance(dtype, (T.VectorType, T.MatrixType)):
        element_shape, dtype = dtype.shape, dtype.dtype
    if (needs_grad or needs_dual) and not T.to_dtype(dtype).is_real:
        raise QuadrantsRuntimeError(f"{T.to_dtype(dtype)} is not supported for field with `needs_grad=True` or "
                                    f"`needs_dual=True`.")
    if shape is not None and 0 in as_shape(shape):
        raise QuadrantsRuntimeError(f"Every dimension of a Quadrants field should be positive, got shape "
                                    f"{as_shape(shape)}")
    f = with_order(Field(dtype, shape, element_shape=element_shape, name=name, offset=offset), order)
    with_companions(f, needs_grad, needs_dual)
    if shape is None:
        declared(f)
    return f


def _declaring_line():
    """'FILE:LINE' of the first caller outside the package: where the user declared a field."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back
    return f"{frame.f_code.co_filename}:{frame.f_lineno}" if frame is not None else "?"


_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def declared(f):
    """Records a field made without shape=, to be placed later (checked by check_placed)."""
    f._declared_at = _declaring_line()
    runtime.program().resources.setdefault("unplaced_fields", []).append(weakref.ref(f))


def _is_placed(f):
    return f._shape is not None or getattr(f, "_destroyed", False)


def _describe(f):
    return f"field '{f.name}' declared at {getattr(f, '_declared_at', '?')}\n"


def check_placed(prog):
    """Before a kernel runs: every field declared without a shape is placed (with its grad / dual
    companions), and the components of a matrix field placed one by one have one shape. RuntimeError otherwise."""
    pending = prog.resources.get("unplaced_fields")
    if not pending:
        return
    pending[:] = [r for r in pending if r() is not None]
    fields = [r() for r in pending]
    bar = "=" * 44 + "\n"
    unplaced = [f for f in fields if not _is_placed(f)]
    mixed = [f for f in unplaced if f._component_shapes and len(f._component_shapes) == f._n_components]
    for f in mixed:
        shapes = [f._component_shapes[c] for c in sorted(f._component_shapes)]
        raise RuntimeError(f"Members of the following field have different shapes {shapes}:\n{_describe(f)}"
                           f"place every component (get_scalar_field(i, j)) with the same shape")
    if unplaced:
        raise RuntimeError("These field(s) are not placed:\n" + bar + bar.join(_describe(f) for f in unplaced) + bar +
                           "Please consider specifying a shape for them. E.g.,\n\n  x = qd.field(float, shape=(2, 3))")
    for kind in ("grad", "dual"):
        missing = [f for f in fields if kind in f._needs and f._placed_companion(kind) is None]
        if missing:
            raise RuntimeError(f"These field(s) requrie `needs_{kind}=True`, however their {kind} field(s) are not "
                               f"placed:\n" + bar + bar.join(_describe(f) for f in missing) + bar +
                               f"Please consider place the {kind} field(s). E.g.,\n\n  qd.root.dense(qd.i, 1).place("
                               f"x.{kind})\n\n Or specify a shape for the field(s). E.g.,\n\n  x = qd.field(float, "
                               f"shape=(2, 3), needs_{kind}=True)")
    pending.clear()


class _ScalarComponent:
    """x.get_scalar_field(i, j) of a vector / matrix field declared without a shape: one component,
    placed on its own (qd.root.dense(qd.i, n).place(x.get_scalar_field(0, 0))). The field is placed
    once every component is, all with one shape; with different shapes a kernel launch raises."""

    def __init__(self, owner, index):
        self.owner, self.index = owner, index
        self.name = f"{owner.name}{list(index)}"

    def _place(self, shape):
        owner = self.owner
        owner._component_shapes[self.index] = shape
        shapes = set(owner._component_shapes.values())
        if len(owner._component_shapes) == owner._n_components and len(shapes) == 1:
            owner._place(shape)

    @property
    def shape(self):
        return self.owner._component_shapes.get(self.index, self.owner.shape)


_AXES = "ijklmnopqrst"  # up to 12 axes


class OrderError(QuadrantsCompilationError, ValueError):
    """A bad order= of a field constructor (a QuadrantsCompilationError, as Quadrants raises, and a ValueError)."""


def with_order(f, order):
    """Stores field `f` with its axes in `order` (qd.field(..., order="ji")); returns f."""
    if order is None:
        return f
    if f.shape is None:
        raise OrderError("qd.field: order= needs shape= (shape cannot be None when order is set)")
    nd = len(f.shape)
    if not isinstance(order, str):
        raise OrderError(f"qd.field: order={order!r} must be a string of axis letters ('ji'), outermost first")
    if len(order) != nd:
        raise OrderError(f"qd.field: order={order!r} names {len(order)} axes but shape {f.shape} has {nd}: The "
                         f"dimensionality of shape and order must be the same")
    if len(set(order)) != nd:
        raise OrderError(f"qd.field: order={order!r} names an axis twice: The axes in order must be different")
    bad = [c for c in order if c not in _AXES[:nd]]
    if bad:
        raise OrderError(f"qd.field: order={order!r}: Invalid axis {bad[0]!r}; the axes of shape {f.shape} are "
                         f"{_AXES[:nd]!r}")
    layout = tuple(_AXES.index(c) for c in order)
    f._qd_layout = None if layout == tuple(range(nd)) else layout
    return f


# Axes for qd.root.dense(qd.i, n), qd.root.dense(qd.ij, (n, m)).
class Axis:
    def __init__(self, *dims):
        self.dims = dims


i, j, k, l = Axis(0), Axis(1), Axis(2), Axis(3)
ij, ijk, ijkl = Axis(0, 1), Axis(0, 1, 2), Axis(0, 1, 2, 3)


class SNode:
    """A layout node: qd.root.dense(...).place(a, b). Every placed field gets its own dense buffer.

    A field's indices are the axes used on the way down, in axis order (i, j, k, l), whatever the
    order of the dense() calls: after qd.root.dense(qd.k, n).dense(qd.i, m), x[i, k] with i < m and
    k < n. An axis used twice has the product of its sizes."""

    def __init__(self, sizes=(), placed=None, parent=None, kind="dense"):
        self.sizes = tuple(sizes)  # (axis, size) pairs, outermost first
        self._placed = placed      # the list a qd.FieldsBuilder collects its fields in (None: qd.root)
        self._parent, self._kind, self._children = parent, kind, []
        self._name = ""  # a place node: the field's name
        if parent is not None:
            parent._children.append(self)

    # Reflection, as Quadrants has it: x.snode.parent(n), node._get_children(), str(x.snode).
    def parent(self, n=1):
        """The node n levels up (0: this one; qd.root at the top, None above it)."""
        node = self
        for _ in range(n):
            if node is None:
                return None
            node = node._parent
        return node

    def _get_children(self):
        return list(self._children)

    @property
    def ptr(self):
        return _SNodePtr(getattr(self, "_field", None))

    def _path_from_root(self):
        path, node = [], self
        while node is not None:
            path.append(node)
            node = node._parent
        return path[::-1]

    def __str__(self):
        return " => ".join("qd.root" if isinstance(n, _Root) else f"{n._kind} {list(n.shape)}"
                           for n in self._path_from_root())

    @property
    def shape(self):
        axes = sorted({a for a, _ in self.sizes})
        return tuple(int(np.prod([n for a2, n in self.sizes if a2 == a])) for a in axes)

    def dense(self, axes, dimensions):
        axis_ids = axes.dims if isinstance(axes, Axis) else (0,)
        dims = _as_shape(dimensions)
        if len(dims) == 1 and len(axis_ids) > 1:  # qd.root.dense(qd.ij, n): n along every axis
            dims = dims * len(axis_ids)
        if len(dims) != len(axis_ids):
            raise ValueError(f"dense(): {len(axis_ids)} axes but {len(dims)} dimension sizes")
        return SNode(self.sizes + tuple(zip(axis_ids, dims)), self._placed, self)

    def place(self, *fields, offset=None):
        """Places `fields` here (each gets this node's shape); offset=: the index of their first element
        per axis, as qd.field(..., offset=)."""
        if offset is not None:
            _as_offset(offset, self.shape)  # checked before anything is placed
        for f in fields:
            f._place(self.shape)
            if offset is not None:
                if isinstance(f, Field):
                    f.offset = _as_offset(offset, self.shape)
                else:  # a component (get_scalar_field): the field it belongs to
                    f.owner.offset = _as_offset(offset, self.shape)
            f.snode = SNode(self.sizes, None, self, "place")
            f.snode._name = f.name
            if self._placed is not None:
                self._placed.append(f)
        return self


class _SNodePtr:
    """node.ptr, as the reference's programs read a placed field's node."""

    def __init__(self, f):
        self._f = f

    def has_adjoint(self):
        return self._f is not None and self._f._placed_companion("grad") is not None

    def has_dual(self):
        return self._f is not None and self._f._placed_companion("dual") is not None

    def has_adjoint_checkbit(self):
        return self._f is not None and self._f._placed_companion("checkbit") is not None

    def get_snode_grad_type(self):
        kind = self._f._kind if self._f is not None else None
        return {None: SNodeGradType.PRIMAL, "grad": SNodeGradType.ADJOINT, "dual": SNodeGradType.DUAL,
                "checkbit": SNodeGradType.ADJOINT_CHECKBIT}[kind]


class _Root(SNode):
    """qd.root: the top of the layout tree of the current qd.init (its children are those of that init)."""

    def __init__(self):
        super().__init__()
        self._program = None

    def _get_children(self):
        if self._program is not runtime._program:  # a new qd.init: the old tree is gone
            self._program, self._children = runtime._program, []
        return list(self._children)

    def dense(self, axes, dimensions):
        self._get_children()
        return super().dense(axes, dimensions)

    def place(self, *fields, offset=None):
        self._get_children()
        return super().place(*fields, offset=offset)

    def lazy_grad(self):
        """Places x.grad for every placed real field that has none (reverse-mode autodiff)."""
        lazy_place("grad")

    def lazy_dual(self):
        """Places x.dual for every placed real field that has none (forward-mode autodiff)."""
        lazy_place("dual")


root = _Root()


class FieldsBuilder:
    """qd.FieldsBuilder(): a layout built like qd.root (fb.dense(qd.i, n).place(x)) whose fields can be
    freed together: fb.finalize() returns an SNodeTree; tree.destroy() frees them (using one after
    that is a QuadrantsRuntimeError). Fields are allocated (zeroed) when placed, as with qd.root."""

    def __init__(self):
        self._fields = []
        self._finalized = False
        self._root = SNode((), self._fields)

    def dense(self, axes, dimensions):
        self._check_open()
        return self._root.dense(axes, dimensions)

    def place(self, *fields, offset=None):
        self._check_open()
        return self._root.place(*fields, offset=offset)

    def _get_children(self):
        return self._root._get_children()

    @staticmethod
    def _finalized_roots():
        """The layout trees of the current qd.init: qd.root's first."""
        return [root]

    def _check_open(self):
        if self._finalized:
            raise QuadrantsRuntimeError("this FieldsBuilder is finalized: create a new one to place more fields")

    def finalize(self, raise_warning=True):
        self._check_open()
        self._finalized = True
        return SNodeTree(self._fields)

    @property
    def finalized(self):
        return self._finalized


class SNodeTree:
    """The fields of a finalized qd.FieldsBuilder; destroy() frees them."""

    def __init__(self, fields):
        self._fields = list(fields)
        self._destroyed = False

    def destroy(self):
        if self._destroyed:
            raise QuadrantsRuntimeError("this SNodeTree is already destroyed")
        self._destroyed = True
        for f in self._fields:
            f._destroy()


def program_field(prog, key, dtype, shape, name):
    """A field the runtime itself needs (the print buffer, the assert word), made once per program,
    also while a kernel compiles."""
    if key not in prog.resources:
        prev = scope.swap(None)  # Python scope: the field is allocated, not built into the kernel
        try:
            prog.resources[key] = Field(dtype, shape, name=name)
        finally:
            scope.swap(prev)
    return prog.resources[key]
