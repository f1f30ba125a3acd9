"""Data types and kernel argument annotations."""
import numpy as np

from quadrants import _core


class DataType:
    """A primitive dtype such as qd.f32. Calling it inside a kernel casts: qd.f32(x)."""

    _qd_builtin = True  # the kernel front end calls it with kernel values

    def __init__(self, name, np_dtype):
        self.name = name
        self.core = getattr(_core.DataType, name)
        self.np = np.dtype(np_dtype)

    @property
    def is_real(self):
        return self.name.startswith("f")

    @property
    def is_signed(self):
        return not self.name.startswith("u")

    @property
    def bits(self):
        return self.np.itemsize * 8

    def range_text(self):
        """" (-2147483648..2147483647)" for an integer dtype, "" for the others."""
        if self.np.kind not in "iu":
            return ""
        info = np.iinfo(self.np)
        return f" ({info.min}..{info.max})"

    def __repr__(self):
        return self.name

    def __call__(self, value):
        from quadrants.lang import context

        ctx = context.current()
        if ctx is None:
            try:
                return self.np.type(value)
            except (TypeError, ValueError) as e:
                raise TypeError(f"qd.{self.name}({value!r}): {e}") from None
            except OverflowError:
                raise OverflowError(f"qd.{self.name}({value!r}): the value does not fit in {self.name}"
                                    f"{self.range_text()}") from None
        return ctx.cast(value, self)


i8, i16, i32, i64 = (DataType(n, n.replace("i", "int")) for n in ("i8", "i16", "i32", "i64"))
u8, u16, u32, u64 = (DataType(n, n.replace("u", "uint")) for n in ("u8", "u16", "u32", "u64"))
f16, f32, f64 = (DataType(n, n.replace("f", "float")) for n in ("f16", "f32", "f64"))
u1 = DataType("u1", "bool")

ALL = [i8, i16, i32, i64, u8, u16, u32, u64, f16, f32, f64]
_BY_CORE = {t.core: t for t in ALL + [u1]}
_BY_NP = {t.np: t for t in ALL}


def from_core(core_dtype):
    return _BY_CORE[core_dtype]


def from_numpy(np_dtype):
    try:
        dtype = np.dtype(np_dtype)
    except (TypeError, ValueError):
        raise TypeError(f"{np_dtype!r} is not a dtype (qd.i32, qd.f32, ... or a numpy dtype)") from None
    try:
        return _BY_NP[dtype]
    except KeyError:
        raise TypeError(f"numpy dtype {dtype} has no Quadrants counterpart") from None


def to_dtype(t):
    """Accepts qd dtypes, numpy dtypes and Python's int/float."""
    if isinstance(t, DataType):
        return t
    from quadrants.lang import runtime

    if t is int:
        return runtime.config().default_ip
    if t is float:
        return runtime.config().default_fp
    if isinstance(t, (VectorType, MatrixType)):
        raise TypeError(f"{t!r} is not a scalar dtype")
    try:
        return from_numpy(t)
    except (TypeError, ValueError):
        raise TypeError(f"{t!r} is not a dtype (use qd.i32, qd.f32, ... or a numpy dtype)") from None


class NdarrayType:
    """Annotation for an ndarray argument: qd.types.ndarray(dtype=qd.f32, ndim=1)."""

    def __init__(self, dtype=None, ndim=None, element_shape=()):
        self.dtype = dtype
        self.ndim = ndim
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

    def __call__(self, *args):
        from quadrants.lang import matrix

        return matrix.construct(self, args)

    def field(self, shape=None, name=None, **_ignored):
        from quadrants.lang.field import Field

        return Field(self.dtype, shape, element_shape=self.shape, name=name)

    def ndarray(self, shape, **_ignored):
        from quadrants.lang.ndarray import Ndarray

        return Ndarray(self.dtype, shape, element_shape=self.shape)


class VectorType(_MatrixTypeBase):
    """qd.types.vector(3, qd.f32): a vector dtype for fields and ndarrays, an annotation, a constructor."""

    _qd_builtin = True

    def __init__(self, n, dtype=float):
        self.n, self._dtype = n, dtype
        self.m = 1
        self.shape = (n,)

    def __repr__(self):
        return f"vector({self.n}, {self.dtype!r})"

    def __eq__(self, other):
        return isinstance(other, VectorType) and (self.n, self.dtype) == (other.n, other.dtype)

    def __hash__(self):
        return hash(("vector", self.n, repr(self.dtype)))


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


class _TypesNamespace:
    ndarray = NdarrayType
    NDArray = _NDArrayAlias()
    template = staticmethod(template)
    vector = VectorType
    matrix = MatrixType

    @staticmethod
    def struct(**members):
        from quadrants.lang.struct import StructType

        return StructType(members)


types = _TypesNamespace()
