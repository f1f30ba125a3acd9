"""The primitive dtypes: qd.i8 ... qd.u64, qd.f16, qd.f32, qd.f64 and qd.u1."""
import numpy as np

from quadrants.types import scope
from quadrants.types.exceptions import QuadrantsSyntaxError


class DataType:
    """A primitive dtype such as qd.f32. Calling it inside a kernel casts: qd.f32(x)."""

    _qd_builtin = True  # the kernel front end calls it with kernel values

    def __init__(self, name, np_dtype):
        self.name = name
        self.core = None  # the core's DataType; quadrants._lib binds it (bind_core)
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

    def __reduce__(self):
        return self.name  # pickled by name: unpickling gives back the same dtype object

    def to_string(self):
        """The dtype's name, as str() gives it: "f32"."""
        return self.name

    def __call__(self, *args, **kwargs):
        if len(args) != 1 or kwargs:
            given = ", ".join([repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()])
            raise QuadrantsSyntaxError(f"A primitive type can only decorate a single expression: qd.{self.name}(x) "
                                       f"takes one value, got qd.{self.name}({given})")
        value = args[0]
        ctx = scope.current()
        if ctx is None:
            try:
                return self.np.type(value)
            except (TypeError, ValueError) as e:
                raise TypeError(f"qd.{self.name}({value!r}): {e}") from None
            except OverflowError:
                raise OverflowError(f"qd.{self.name}({value!r}): the value does not fit in {self.name}"
                                    f"{self.range_text()}") from None
        return ctx.annotate(value, self)


i8, i16, i32, i64 = (DataType(n, n.replace("i", "int")) for n in ("i8", "i16", "i32", "i64"))
u8, u16, u32, u64 = (DataType(n, n.replace("u", "uint")) for n in ("u8", "u16", "u32", "u64"))
f16, f32, f64 = (DataType(n, n.replace("f", "float")) for n in ("f16", "f32", "f64"))
u1 = DataType("u1", "bool")

ALL = [i8, i16, i32, i64, u8, u16, u32, u64, f16, f32, f64]

# The long names, and the dtype sets Quadrants code checks membership in (Python's int, float and
# bool stand for the default dtypes, so they belong to the sets too).
int8, int16, int32, int64 = i8, i16, i32, i64
uint1, uint8, uint16, uint32, uint64 = u1, u8, u16, u32, u64
float16, float32, float64 = f16, f32, f64
real_types = {f16, f32, f64, float}
integer_types = {i8, i16, i32, i64, u1, u8, u16, u32, u64, int, bool}
all_types = real_types | integer_types
real_type_ids = {id(t) for t in real_types}
integer_type_ids = {id(t) for t in integer_types}
type_ids = {id(t) for t in all_types}
_BY_NP = {t.np: t for t in ALL}
_BY_CORE = {}
defaults = {"ip": i32, "fp": f32}  # Python's int and float as dtypes: qd.init(default_ip=, default_fp=) sets them


def bind_core(core_data_type):
    """Gives every dtype its core counterpart (called once by quadrants._lib, the core binding)."""
    for t in ALL + [u1]:
        t.core = getattr(core_data_type, t.name)
        _BY_CORE[t.core] = t


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
    if t is int:
        return defaults["ip"]
    if t is float:
        return defaults["fp"]
    if t is bool:
        return u1
    if hasattr(t, "shape"):  # qd.types.vector / matrix
        raise TypeError(f"{t!r} is not a scalar dtype")
    try:
        return from_numpy(t)
    except (TypeError, ValueError):
        raise TypeError(f"{t!r} is not a dtype (use qd.i32, qd.f32, ... or a numpy dtype)") from None


def is_py_scalar(v):
    return isinstance(v, (bool, int, float, np.integer, np.floating, np.bool_))


def describe(v):
    """A short description of a Python object for error messages: "function 'f'", "str 'a'"."""
    if isinstance(v, type):
        return f"class '{v.__name__}'"
    name = getattr(v, "__name__", None)
    if callable(v) and isinstance(name, str):
        return f"{'function' if not hasattr(v, '_qd_builtin') else 'the Quadrants function'} '{name}'"
    text = repr(v)
    return f"{type(v).__name__} {text if len(text) <= 60 else text[:57] + '...'}"
