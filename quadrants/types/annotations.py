"""Kernel argument annotations and the vector / matrix dtypes: qd.types.ndarray, qd.template,
qd.types.vector, qd.types.matrix."""
from quadrants.types.exceptions import QuadrantsSyntaxError
from quadrants.types.primitive_types import DataType, f32, i32, to_dtype


class NdarrayType:
    """Annotation for an ndarray argument: qd.types.ndarray(dtype=qd.f32, ndim=1)."""

    def __init__(self, dtype=None, ndim=None, element_shape=(), needs_grad=None):
        self.dtype = dtype
        self.ndim = ndim
        self.needs_grad = needs_grad  # False: the adjoint kernel computes no gradient for this argument
        if not element_shape and isinstance(dtype, (VectorType, MatrixType)):
            element_shape = dtype.shape  # a numpy argument's trailing axes are the elements
        self.element_shape = tuple(element_shape)

    def __repr__(self):
        return f"ndarray(dtype={self.dtype!r}, ndim={self.ndim})"


class _NDArrayAlias(NdarrayType):
    """qd.types.NDArray[qd.f32, 1]; bare qd.types.NDArray takes any dtype and ndim."""

    def __init__(self):
        super().__init__()

    def __getitem__(self, item):
        dtype, ndim = item if isinstance(item, tuple) else (item, None)
        return NdarrayType(dtype, ndim)


class Template:
    """Annotation for a compile-time argument (fields, Python values): the kernel specialises on it."""

    def __repr__(self):
        return "template()"


def template():
    return Template()


class RefType:
    """qd.ref(qd.f32): a @qd.func / @qd.real_func parameter passed by reference: the func's stores to it
    (a = 7, a += a, qd.atomic_add(a, 1)) change the caller's variable or memory element."""

    def __init__(self, dtype):
        self.dtype = dtype

    def __repr__(self):
        return f"ref({self.dtype!r})"


def ref(dtype):
    return RefType(dtype)


def is_template(annotation):
    """qd.template(), qd.template or qd.Template."""
    return isinstance(annotation, Template) or annotation is template or annotation is Template


class _MatrixTypeBase:
    """What qd.types.vector / qd.types.matrix (and qd.math.vec3, mat3, ...) share: a dtype for fields,
    ndarrays and annotations, and a constructor inside and outside kernels."""

    @property
    def dtype(self):
        if isinstance(self._dtype, DataType):
            return self._dtype
        try:
            return to_dtype(self._dtype)  # Python float/int: the current qd.init()'s default_fp / default_ip
        except Exception:
            return f32 if self._dtype is float else i32

    unpacked = False

    def _refuse_unpacked(self, what):
        if self.unpacked:
            raise QuadrantsSyntaxError(f"{what}: {self!r} has unpacked=True, a storage layout that only means "
                                       f"something as the annotation of a @qd.dataclass member (r: "
                                       f"qd.types.vector({self.n}, {self.dtype!r}, unpacked=True)); use "
                                       f"qd.types.vector({self.n}, {self.dtype!r}) here")

    def __call__(self, *args):
        self._refuse_unpacked("constructing a value")
        from quadrants.lang import matrix  # reach up: constructing a vector / matrix value is the front end's

        return matrix.construct(self, args)

    def field(self, shape=None, name=None, needs_grad=False, needs_dual=False, **_ignored):
        self._refuse_unpacked(".field()")
        from quadrants.memory.field import field  # reach up: a dtype makes fields of itself (v3.field(...))

        return field(self.dtype, shape, name=name, needs_grad=needs_grad, needs_dual=needs_dual,
                     element_shape=self.shape)

    def ndarray(self, shape, **_ignored):
        self._refuse_unpacked(".ndarray()")
        from quadrants.memory.ndarray import new  # reach up: and ndarrays (v3.ndarray(...))

        return new(self.dtype, shape, element_shape=self.shape)


class VectorType(_MatrixTypeBase):
    """qd.types.vector(3, qd.f32): a vector dtype for fields and ndarrays, an annotation, a constructor.

    unpacked=True: only as a @qd.dataclass member's annotation, r: qd.types.vector(4, qd.f32,
    unpacked=True) stores the vector as the scalar members _r0 .. _r3, read and written in kernels as
    t.r[i] with a compile-time index i (a Python int or a qd.static loop variable)."""

    _qd_builtin = True

    def __init__(self, n, dtype=float, unpacked=False):
        self.n, self._dtype = n, dtype
        self.m = 1
        self.shape = (n,)
        self.unpacked = bool(unpacked)

    def __repr__(self):
        return f"vector({self.n}, {self.dtype!r}{', unpacked=True' if self.unpacked else ''})"

    def __eq__(self, other):
        return isinstance(other, VectorType) and (self.n, self.dtype, self.unpacked) == (other.n, other.dtype,
                                                                                          other.unpacked)

    def __hash__(self):
        return hash(("vector", self.n, repr(self.dtype), self.unpacked))


class MatrixType(_MatrixTypeBase):
    """qd.types.matrix(3, 3, qd.f32)."""

    _qd_builtin = True

    def __init__(self, n, m, dtype=float):
        self.n, self.m, self._dtype = n, m, dtype
        self.shape = (n, m)

    def __repr__(self):
        return f"matrix({self.n}, {self.m}, {self.dtype!r})"

    def __eq__(self, other):
        return isinstance(other, MatrixType) and (self.n, self.m, self.dtype) == (other.n, other.m, other.dtype)

    def __hash__(self):
        return hash(("matrix", self.n, self.m, repr(self.dtype)))
