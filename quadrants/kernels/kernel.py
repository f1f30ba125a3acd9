"""@qd.kernel and @qd.func: argument binding, specialisation key, cache, launch, qd.compile."""
import ast
import dataclasses
import functools
import inspect
import math
import operator
import struct
import textwrap
import typing
import weakref

import numpy as np

from quadrants._lib import _core
from quadrants.lang.ast import builder as ast_builder
from quadrants.lang.ast import context
from quadrants._lib import runtime
from quadrants.kernels import template_key
from quadrants._lib import breadcrumb as _crumb
from quadrants.memory import struct as _struct
from quadrants import types as T
from quadrants.types import scope
from quadrants.types.exceptions import out_of_bound_text
from quadrants.types.exceptions import (QuadrantsArgumentError, QuadrantsAssertionError, QuadrantsCompilationError, QuadrantsOutOfBoundsError, QuadrantsRuntimeError, QuadrantsRuntimeTypeError, QuadrantsSyntaxError,
                                      QuadrantsTypeError, source_location)
from quadrants.memory.ndarray import Ndarray
from quadrants.memory.array import external_array
from quadrants.memory.field import Field
from quadrants.types.enums import AutodiffMode
from quadrants.memory import field as _field
from quadrants.memory import buffer_view as _bv
from quadrants.memory.tensor import Tensor
from quadrants.lang.ast.values import Expr, MatrixValue, NdarrayArg, Ptr, Var, ViewValue
from quadrants.lang import printing
from quadrants.memory.host import PyMatrix
from quadrants.memory.struct import StructType, StructValue


def _def_site(func, param=None):
    """Where a kernel's signature is, for errors about it: the location block of its def line, with
    carets under parameter `param` (a name) when given."""
    code = func.__code__
    try:
        lines, first = inspect.getsourcelines(func)
        source = textwrap.dedent("".join(lines))
        indent = len(lines[0].rstrip("\r\n")) - len(source.splitlines()[0])
        fdef = ast.parse(source).body[0]
        node = next((a for a in ast.walk(fdef.args) if isinstance(a, ast.arg) and a.arg == param), fdef)
        line = lines[node.lineno - 1].rstrip("\r\n")
        one_line = node is not fdef and node.end_lineno == node.lineno
        return source_location(code.co_filename, first + node.lineno - 1, func.__name__, [line],
                               indent + node.col_offset, indent + node.end_col_offset if one_line else None)
    except (OSError, TypeError, SyntaxError, IndexError):
        return f'File "{code.co_filename}", line {code.co_firstlineno}, in {func.__name__}:\n'


def _python_function(f, decorator):
    """The function under @qd.kernel / @qd.func, or a QuadrantsSyntaxError."""
    if isinstance(f, (Kernel, Func)):
        raise QuadrantsSyntaxError(f"{_def_site(f.func)}@{decorator} cannot decorate the "
                                   f"{'@qd.kernel' if isinstance(f, Kernel) else '@qd.func'} '{f.__name__}': use one "
                                   f"of @qd.kernel and @qd.func")
    if not inspect.isfunction(f):  # a TypeError: inside a kernel, the walker reports it at its line
        raise TypeError(f"@{decorator} decorates a Python function, got {type(f).__name__} {f!r}")
    return f


def _data_oriented_member(cls, prefix=""):
    """The dotted name of a member of dataclass `cls` (nested dataclasses too) declared as a
    @qd.data_oriented class, or None."""
    for f in dataclasses.fields(cls):
        t = f.type
        if getattr(t, "_qd_data_oriented", False):
            return prefix + f.name
        if isinstance(t, type) and dataclasses.is_dataclass(t):
            found = _data_oriented_member(t, prefix + f.name + ".")
            if found:
                return found
    return None


class _NdimError(QuadrantsTypeError, ValueError):
    """An ndarray argument of another ndim than its annotation's (a ValueError, as Quadrants raises)."""


class _NdarrayValueError(QuadrantsTypeError, ValueError):
    """An ndarray argument whose dtype or element shape is not its annotation's: a QuadrantsTypeError
    and, as Quadrants raises for these, a ValueError."""


class _Param:
    """How one kernel parameter is passed: 'scalar', 'ndarray' or 'template'."""

    data_oriented_member = None  # a typed dataclass parameter's @qd.data_oriented member (refused at the call)

    def __init__(self, name, annotation, func, first=False):
        self.name = name
        kernel_name = func.__name__
        if annotation is inspect.Parameter.empty and first and name == "self":
            annotation = T.template()  # a kernel written as a method: the instance is compile-time
        if annotation is inspect.Parameter.empty:
            raise QuadrantsSyntaxError(f"{_def_site(func, name)}kernel '{kernel_name}': argument '{name}' needs a "
                                       f"type annotation (e.g. qd.i32, qd.types.ndarray(), qd.template())")
        if annotation is T.NdarrayType:
            annotation = T.NdarrayType()  # `x: qd.types.ndarray` (not called): any dtype and ndim
        if annotation is Tensor:
            self.kind = "tensor"  # a field (compile-time, as qd.template()), an ndarray (run-time) or None
        elif T.is_template(annotation):
            self.kind = "template"
        elif _bv.is_annotation(annotation):
            self.kind = "buffer_view"  # the ndarray, its offset and its size
        elif isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
            self.kind = "template"  # a dataclass of tensors and values: keyed by what the kernel reads of it
            self.data_oriented_member = _data_oriented_member(annotation)
        elif isinstance(annotation, T.NdarrayType):
            self.kind = "ndarray"
            bad = _bad_ndarray_annotation(annotation)
            if bad:
                raise QuadrantsArgumentError(f"{_def_site(func, name)}Invalid type annotation of argument '{name}' of "
                                             f"kernel '{kernel_name}': {bad}")
        elif isinstance(annotation, T.DataType) or annotation in (int, float):
            self.kind = "scalar"
        elif isinstance(annotation, (T.VectorType, T.MatrixType)):
            self.kind = "matrix"  # one scalar slot per entry
        elif isinstance(annotation, _struct.StructType):
            self.kind = "struct"  # one scalar slot per entry of each member
        else:
            raise QuadrantsArgumentError(f"{_def_site(func, name)}Invalid type annotation of argument '{name}' of "
                                         f"kernel '{kernel_name}': {annotation!r} is not a dtype, qd.types.ndarray(...), "
                                         f"qd.types.vector / matrix / struct(...) or qd.template()")
        self.annotation = annotation

    def dtype(self):
        return T.to_dtype(self.annotation)


_ANY_NDARRAY = T.NdarrayType()


def _view_array(value, param, kernel_name):
    """The ndarray of a BufferView argument (checked against BufferView[dtype])."""
    if not isinstance(value, _bv.BufferView):
        raise QuadrantsRuntimeTypeError(f"kernel '{kernel_name}': argument '{param.name}' expects a qd.BufferView "
                                        f"(a[lo:hi] of a 1-D ndarray), got {type(value).__name__}")
    want = _bv.annotation_dtype(param.annotation)
    if want is not None and want is not value.dtype:
        raise QuadrantsRuntimeTypeError(f"kernel '{kernel_name}': argument '{param.name}' expects a "
                                        f"BufferView[{want}], got one of {value.dtype}")
    return value.get_ndarray()


def _tensor_kind(param, value):
    """How a value is passed: a qd.Tensor parameter takes a field as qd.template() does (and None,
    compile-time), an ndarray or numpy / DLPack array as qd.types.ndarray() does."""
    if param.kind != "tensor":
        return param.kind
    if value is None or isinstance(value, Field):
        return "template"
    return "ndarray"


def bind_arguments(what, signature, args, kwargs):
    """signature.bind(*args, **kwargs) with defaults applied; a QuadrantsArgumentError in Quadrants' words
    ("Missing argument 'b'", "Unexpected argument 'c'", "Too many arguments", "Multiple values for
    argument 'a'") for a call the signature does not take. what: "kernel 'foo'" or "@qd.func 'foo'"."""
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError:
        raise QuadrantsArgumentError(_binding_error(what, signature, args, kwargs)) from None
    bound.apply_defaults()
    return bound


def _binding_error(what, signature, args, kwargs):
    P = inspect.Parameter
    params = list(signature.parameters.values())
    takes = f"it takes ({', '.join(p.name for p in params)})"
    positional = [p for p in params if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)]
    if len(args) > len(positional) and not any(p.kind is P.VAR_POSITIONAL for p in params):
        return f"Too many arguments in the call of {what}: {len(args)} given, {takes}"
    by_position = {p.name for p in positional[:len(args)]}
    for name in kwargs:
        if name in by_position:
            return f"Multiple values for argument '{name}' in the call of {what}: given by position and by keyword"
        p = signature.parameters.get(name)
        if (p is None or p.kind in (P.POSITIONAL_ONLY, P.VAR_POSITIONAL, P.VAR_KEYWORD)) \
                and not any(q.kind is P.VAR_KEYWORD for q in params):
            return f"Unexpected argument '{name}' in the call of {what}; {takes}"
    for p in params:
        if p.default is P.empty and p.kind not in (P.VAR_POSITIONAL, P.VAR_KEYWORD) \
                and p.name not in by_position and p.name not in kwargs:
            return f"Missing argument '{p.name}' in the call of {what}; {takes}"
    return f"the call of {what} does not match its signature {signature}"


def _bad_ndarray_annotation(ann):
    """What is wrong with a qd.types.ndarray(dtype=, ndim=) annotation, or None."""
    if ann.dtype is not None and not isinstance(ann.dtype, (T.VectorType, T.MatrixType)):
        try:
            T.to_dtype(ann.dtype)
        except (TypeError, ValueError):
            return f"qd.types.ndarray(dtype={ann.dtype!r}) is not a dtype (qd.f32, qd.types.vector(3, qd.f32), ...)"
    if ann.ndim is not None and (not isinstance(ann.ndim, int) or isinstance(ann.ndim, bool) or ann.ndim < 0):
        return f"qd.types.ndarray(ndim={ann.ndim!r}) is not a number of dimensions (an int >= 0)"
    return None


def _ndarray_parts(value, param, kernel_name):
    """(dtype, shape, element_shape) of an ndarray argument (a qd.ndarray or a numpy array)."""
    ann = param.annotation if param.kind != "tensor" else _ANY_NDARRAY
    if isinstance(value, Ndarray):
        dtype, shape, elem = value.dtype, value.shape, value.element_shape
        if ann.element_shape and tuple(elem) != tuple(ann.element_shape):
            raise QuadrantsTypeError(f"kernel '{kernel_name}': argument '{param.name}' expects elements of shape "
                                     f"{tuple(ann.element_shape)}, got {tuple(elem)}")
    elif isinstance(value, np.ndarray):
        dtype, elem = T.from_numpy(value.dtype), tuple(ann.element_shape)
        if ann.ndim is not None and value.ndim != ann.ndim + len(elem):
            dims = f"ndim={ann.ndim}" + (f" element_dim={len(elem)}" if elem else "")
            raise _NdimError(f"kernel '{kernel_name}': argument '{param.name}' expects ndim={ann.ndim}"
                             + (f" (then the element axes {elem})" if elem else "")
                             + f", got a numpy array of shape {value.shape}: Invalid value for argument "
                             f"{param.name} - required array has {dims}, array with {value.ndim} dimensions "
                             f"is provided")
        if value.ndim < len(elem) or tuple(value.shape[value.ndim - len(elem):]) != elem:
            raise _NdarrayValueError(f"kernel '{kernel_name}': argument '{param.name}' expects elements of shape "
                                     f"{elem} (the trailing axes), got an array of shape {value.shape}: Invalid "
                                     f"value for argument {param.name} - required element_shape={elem}, array "
                                     f"with element shape of {tuple(value.shape[value.ndim - len(elem):])}")
        shape = value.shape[:value.ndim - len(elem)]
    else:
        raise QuadrantsRuntimeTypeError(f"Invalid type for argument {param.name}, got {_short_repr(value)}: kernel "
                                        f"'{kernel_name}' expects an ndarray (qd.ndarray or numpy array) there, not "
                                        f"{type(value).__name__}")
    # A numpy array for a vector / matrix dtype annotation: its element shape is checked above, its
    # dtype is the array's own (the kernel specialises on it), as Quadrants does; a scalar dtype and
    # a qd.ndarray are checked.
    elementwise = isinstance(ann.dtype, (T.VectorType, T.MatrixType))
    if ann.dtype is not None and not (elementwise and isinstance(value, np.ndarray)):
        want = ann.dtype.dtype if elementwise else T.to_dtype(ann.dtype)
        if want is not dtype:
            got = f"{dtype}, elements of shape {tuple(elem)}: get [Tensor ({', '.join(map(str, elem))}) {dtype}]" \
                if elem else f"{dtype}"
            raise _NdarrayValueError(f"kernel '{kernel_name}': argument '{param.name}' expects dtype {want}, "
                                     f"got {got}: Invalid value for argument {param.name} - required array has "
                                     f"dtype={want}, array with dtype={dtype} is provided")
    if ann.ndim is not None and ann.ndim != len(shape):
        raise _NdimError(f"kernel '{kernel_name}': argument '{param.name}' expects ndim={ann.ndim}, got "
                         f"{len(shape)}: required ndim={ann.ndim}, but {len(shape)}d ndarray with shape "
                         f"{tuple(shape)} is provided")
    return dtype, tuple(shape), tuple(elem)


def _bad_ndarray_value(v, ann):
    """What keeps `v` (an ndarray argument of the kernel) from being a @qd.func's qd.types.ndarray(dtype, ndim)
    argument, or None."""
    elem = tuple(v.element_shape)
    if ann.dtype is not None:
        want_elem = tuple(ann.dtype.shape) if isinstance(ann.dtype, (T.VectorType, T.MatrixType)) else ()
        want = ann.dtype.dtype if want_elem else T.to_dtype(ann.dtype)
        if want_elem != elem or want is not v.dtype:
            got = f"{v.dtype} elements of shape {elem}" if elem else f"{v.dtype} elements"
            return f"expects {ann.dtype!r} elements, got {got}"
    if ann.ndim is not None and ann.ndim != v.ndim - len(elem):
        return f"expects ndim={ann.ndim}, got {v.ndim - len(elem)}"
    return None


def _drop_entry(kernel_ref, key, entry_id, _dead):
    k = kernel_ref()
    if k is None:
        return
    bucket = k.cache.get(key, [])
    bucket[:] = [e for e in bucket if id(e) != entry_id]
    if not bucket:
        k.cache.pop(key, None)


_STRUCT = {"i8": "b", "i16": "h", "i32": "i", "i64": "q", "u8": "B", "u16": "H", "u32": "I", "u64": "Q",
           "f16": "e", "f32": "f", "f64": "d"}


def _to_slot(value, dtype):
    """The 8-byte argument slot holding `value` as `dtype` (low bytes, little-endian).

    Raises TypeError for a value that is not a number (or a non-integral float for an integer
    dtype). An integer keeps its low bits, as a C cast does and Quadrants does (255 for qd.i8 is
    -1, -1 for qd.u8 is 255); one that does not fit 64 bits, or a float beyond the range of an f16 /
    f32, raises OverflowError.
    """
    if isinstance(value, (np.ndarray, np.generic)) and np.ndim(value) == 0:
        value = value.item()
    if dtype.is_real:
        if not isinstance(value, (int, float)):
            raise TypeError("not a number")
        try:
            raw = struct.pack("<" + _STRUCT[dtype.name], value)
        except OverflowError:
            raise OverflowError(f"does not fit in {dtype}") from None
    else:
        if isinstance(value, float):
            if not value.is_integer():
                raise TypeError("not an integer")
            value = int(value)
        value = operator.index(value)
        if not -(1 << 63) <= value < (1 << 64):
            raise OverflowError(f"does not fit in 64 bits (an argument of type {dtype} keeps the low {dtype.bits} "
                                f"bits of an integer of -2**63..2**64-1)")
        raw = (value & ((1 << dtype.bits) - 1)).to_bytes(dtype.bits // 8, "little")
    return struct.unpack("<q", raw.ljust(8, b"\0"))[0]


def _from_slot(slot, dtype):
    raw = np.array([slot], dtype=np.uint64).view(np.uint8)[:dtype.np.itemsize]
    return raw.view(dtype.np)[0].item()


def _return_spec(annotation, func):
    """[(dtype, shape or None)] for a kernel's return annotation (a dtype, vector/matrix type, or a tuple)."""
    if annotation in (inspect.Signature.empty, None):
        return []
    if typing.get_origin(annotation) is tuple:  # tuple[qd.f32, s0] / typing.Tuple[...]
        annotation = typing.get_args(annotation)
    spec = []
    for r in annotation if isinstance(annotation, tuple) else (annotation,):
        try:
            if isinstance(r, _struct.StructType):
                spec.append((None, r))
            elif isinstance(r, (T.VectorType, T.MatrixType)):
                spec.append((T.to_dtype(r.dtype), r.shape))
            else:
                spec.append((T.to_dtype(r), None))
        except TypeError:
            raise QuadrantsTypeError(f"{_def_site(func)}kernel '{func.__name__}': unsupported return annotation {r!r}; "
                                     f"use a dtype, qd.types.vector(n, dtype), qd.types.matrix(n, m, dtype) or a "
                                     f"tuple of them") from None
    return spec


def _num_entries(shape):
    return math.prod(shape) if shape is not None else 1


def _return_dtypes(spec):
    """The scalar return slots of a return spec: vectors/matrices per entry, structs per member entry."""
    out = []
    for d, shape in spec:
        if d is None:
            out.extend(ld for _, ld, lshape in _struct.leaves(shape) for _ in range(_num_entries(lshape)))
        else:
            out.extend([d] * _num_entries(shape))
    return out


_MAX_ELEMENTS = (1 << 31) - 1  # loop and element indices are 32-bit


class _Compiled:
    def __init__(self, compiled, fields, num_slots, plan, written):
        self.compiled = compiled
        # buffer index -> weak reference to the Field: a compiled kernel does not keep fields alive
        # (the cache entry is dropped when one of them dies).
        self.fields = {idx: weakref.ref(f) for idx, f in fields.items()}
        self.num_slots = num_slots
        self.plan = plan          # per parameter: ("scalar", slot, dtype) / ("ndarray", buffer, ...) / ...
        self.written = written    # buffer indices the kernel stores to
        self.returns = [T.from_core(d) for d in compiled.returns]
        self.error_slot = compiled.error_slot
        self.watch = []           # weak references whose death drops this entry, or objects kept alive
        self.crumb = None         # the breadcrumb record of its launches (with QD_CRASH_BREADCRUMB)
        if self.error_slot >= 0:
            self.returns = self.returns[:self.error_slot]
            self.error_messages = list(compiled.error_messages)


class _Mapper:
    def __init__(self, mapping):
        self.mapping = mapping


class Kernel:
    _qd_kernel = True  # what the front end knows a kernel by (it does not import this layer)
    _qd_identity = True  # as a template argument, the kernel is the key, not its contents

    def __init__(self, func, mode=None, primal=None, deterministic=None):
        func = _python_function(func, "qd.kernel")
        self.deterministic = deterministic  # None: qd.init(deterministic=...)
        functools.update_wrapper(self, func)
        # Autodiff (docs/autodiff.md): None for the kernel itself, "reverse" for its adjoint
        # (kernel.grad) and "forward" for its dual (what runs inside qd.ad.FwdMode).
        self._mode, self._primal_kernel = mode, primal
        self._variants = {}
        # What a call runs (the reference's kernel.autodiff_mode): qd.ad.Tape(validation=True) sets
        # VALIDATION on the kernels it records, whose calls then check the global data access rule.
        self.autodiff_mode = {None: AutodiffMode.NONE, "reverse": AutodiffMode.REVERSE,
                              "forward": AutodiffMode.FORWARD, "validation": AutodiffMode.VALIDATION}[mode]
        self.func = func
        self.signature = ast_builder.signature(func)
        self.params = [_Param(n, p.annotation, func, first=(k == 0))
                       for k, (n, p) in enumerate(self.signature.parameters.items())]
        _return_spec(self.signature.return_annotation, func)  # a bad annotation: an error here
        self._returns, self._returns_key = None, None
        self.ndarray_params = [i for i, p in enumerate(self.params) if p.kind in ("ndarray", "tensor")]
        self._refused_params = [p for p in self.params if p.data_oriented_member]
        self.cache = {}
        self.generation = None
        self.num_compilations = 0
        self.fastcache = False  # @qd.kernel(fastcache=True) / @qd.pure: the kernel asserts it is pure
        self.use_graph = False  # @qd.kernel(graph=True): allows qd.graph.do_while; launches as any kernel
        self.src_ll_cache_observations = CacheObservations()

    @property
    def returns(self):
        """The return spec, for the current qd.init: `-> float` / `-> int` (and vectors of them) take
        its default_fp / default_ip, whenever the kernel was defined."""
        cfg = runtime.config()
        key = (cfg.default_ip, cfg.default_fp)
        if self._returns_key != key:
            self._returns, self._returns_key = _return_spec(self.signature.return_annotation, self.func), key
        return self._returns

    @property
    def _primal(self):  # the reference's name for the object owning the compiled specialisations
        return self._primal_kernel or self

    def _variant(self, mode):
        k = self._variants.get(mode)
        if k is None:
            k = self._variants[mode] = Kernel(self.func, mode=mode, primal=self, deterministic=self.deterministic)
        return k

    @property
    def grad(self):
        """The adjoint kernel: kernel.grad(*args) takes the kernel's arguments and adds d(loss) /
        d(input) into the inputs' .grad from the outputs' .grad (reverse-mode autodiff)."""
        if self._mode is not None:
            raise RuntimeError(f"kernel '{self.__name__}': the adjoint of an adjoint kernel is not supported")
        return self._variant("reverse")

    @property
    def materialized_kernels(self):
        """The compiled specialisations (one per argument key)."""
        return self.cache

    @property
    def mapper(self):  # the reference's view of the same: .mapping, one entry per argument key
        return _Mapper(self.cache)

    def __get__(self, obj, objtype=None):
        """A kernel written as a method: `obj.step(dt)` passes `obj` as the first (template) argument."""
        if obj is None or not self.params or self.params[0].name != "self":
            return self
        return _BoundKernel(self, obj)

    def _key(self, values, idents):
        key = []
        for p, v in zip(self.params, values):
            kind = _tensor_kind(p, v)
            if kind == "template":
                key.append(template_key.argument_key(v, idents))
            elif kind == "ndarray":
                dtype, shape, elem = _ndarray_parts(v, p, self.__name__)
                # (element type, ndim, gradient companion, element shape, layout)
                key.append((dtype.name, len(shape), getattr(v, "grad", None) is not None, elem,
                            getattr(v, "_qd_layout", None)))
            elif kind == "buffer_view":
                a = _view_array(v, p, self.__name__)
                key.append(("view", a.dtype.name, tuple(a.element_shape)))
            else:
                key.append("s")
        return tuple(key)

    def _bind(self, args, kwargs):
        if not kwargs and len(args) == len(self.params):
            values = args  # the common case, without inspect's binding
        else:
            values = list(bind_arguments(f"kernel '{self.__name__}'", self.signature, args, kwargs).arguments.values())
        for p in self._refused_params:
            if p.data_oriented_member:
                raise QuadrantsArgumentError(
                    f"kernel '{self.__name__}': argument '{p.name}' is annotated with the dataclass "
                    f"{p.annotation.__name__}, whose member '{p.data_oriented_member}' is a @qd.data_oriented class: "
                    f"a typed dataclass parameter cannot hold data_oriented objects; annotate '{p.name}' with "
                    f"qd.template() instead")
        if any(isinstance(v, Tensor) for v in values):  # kernels see the bare field / ndarray
            values = [v._unwrap() if isinstance(v, Tensor) else v for v in values]
        for i in self.ndarray_params:  # torch tensors and other DLPack arrays: numpy views
            v = values[i]
            if isinstance(v, Field) and self.params[i].kind == "tensor":
                continue  # a qd.Tensor parameter takes fields as they are
            if not isinstance(v, (Ndarray, np.ndarray)) and hasattr(v, "__dlpack__"):
                values = list(values)
                values[i] = external_array(values[i], self.__name__, self.params[i].name)
        return values

    def build(self, values, config, arch=None):
        """Walks the kernel's AST into a core Builder for `arch` (default: the config's). Returns
        (builder, fields, num_slots, plan, written). Starts again each time a @qd.real_func turns out
        to be recursive (RealFunc.recursive, which then stays set)."""
        while True:
            try:
                return self._build_once(values, config, arch)
            except _RealCallNeeded:
                continue

    def _build_once(self, values, config, arch):
        if _lacks_its_return(self):
            raise QuadrantsSyntaxError(f"{_def_site(self.func)}Kernel has a return type but does not have a return "
                                       f"statement: kernel '{self.__name__}' is annotated "
                                       f"-> {self.signature.return_annotation!r}")
        ctx = context.KernelContext(self.__name__, config, template_key.Tracker())
        ctx.arch = arch or config.arch
        plan, bound = [], {}
        for index, (p, v) in enumerate(zip(self.params, values)):
            if p.kind == "scalar":
                dtype = p.dtype()
                slot = ctx.b.add_scalar_arg(p.name, dtype.core)
                plan.append(("scalar", slot, dtype))
                bound[p.name] = ("scalar", slot, dtype)
            elif p.kind == "matrix":
                ann = p.annotation
                dtype = T.to_dtype(ann.dtype)
                slots = [ctx.b.add_scalar_arg(f"{p.name}{list(e)}", dtype.core) for e in np.ndindex(*ann.shape)]
                plan.append(("matrix", slots, dtype, ann.shape))
                bound[p.name] = ("matrix", slots, dtype, ann.shape)
            elif p.kind == "struct":
                leaf_slots = []
                for path, ld, lshape in _struct.leaves(p.annotation):
                    n = ".".join(path)
                    slots = [ctx.b.add_scalar_arg(f"{p.name}.{n}{list(e) if lshape else ''}", ld.core)
                             for e in (np.ndindex(*lshape) if lshape else [()])]
                    leaf_slots.append((path, slots, ld, lshape))
                plan.append(("struct", leaf_slots))
                bound[p.name] = ("struct", leaf_slots, p.annotation)
            elif p.kind == "buffer_view":
                a = _view_array(v, p, self.__name__)
                elem = tuple(a.element_shape)
                buf = ctx.b.add_ndarray_arg(p.name, a.dtype.core, 1 + len(elem), list(elem))
                off = ctx.b.add_scalar_arg(f"{p.name}.offset", T.i32.core)
                size = ctx.b.add_scalar_arg(f"{p.name}.size", T.i32.core)
                plan.append(("buffer_view", buf, off, size))
                bound[p.name] = ("buffer_view", NdarrayArg(buf, a.dtype, 1 + len(elem), elem, p.name), off, size)
            elif _tensor_kind(p, v) == "ndarray":
                dtype, shape, elem = _ndarray_parts(v, p, self.__name__)
                nd, layout = len(shape) + len(elem), getattr(v, "_qd_layout", None)
                buf = ctx.b.add_ndarray_arg(p.name, dtype.core, nd, list(elem))
                grad = None
                if getattr(v, "grad", None) is not None:  # x.grad[i] in the kernel: a second buffer
                    gbuf = ctx.b.add_ndarray_arg(f"{p.name}.grad", dtype.core, nd, list(elem))
                    grad = NdarrayArg(gbuf, dtype, nd, elem, f"{p.name}.grad", layout)
                plan.append(("ndarray", buf, len(shape), elem, grad and grad.buffer))
                bound[p.name] = NdarrayArg(buf, dtype, nd, elem, p.name, layout, grad)
            else:
                plan.append(("template",))
                bound[p.name] = v
                if template_key.is_plain_object(v):
                    ctx.tracker.root(v, index)
        ctx.b.set_returns([d.core for d in _return_dtypes(self.returns)])
        ctx.b.set_debug(config.bounds_checks)  # the core's debug flag means index checks
        ctx.deterministic = bool(config.deterministic if self.deterministic is None else self.deterministic)
        ctx.b.set_deterministic(ctx.deterministic)
        prev = scope.swap(ctx)
        try:
            walker = ast_builder.FunctionWalker(ctx, self.func, is_kernel=True)
            walker.set_loc(walker.fdef)
            if "random" in walker.source:  # where kernel-scope qd.random's counter is declared
                zero = ctx.const(0, T.i32)
                ctx.rng_kernel = {"anchor": zero.stmt, "thread": zero, "counter": None}
            # Scalar arguments are read where the kernel starts.
            args = {}
            for n, v in bound.items():
                if isinstance(v, tuple) and v[0] == "scalar":
                    v = ctx.expr(ctx.b.arg(v[1], v[2].core))
                elif isinstance(v, tuple) and v[0] == "buffer_view":
                    v = ViewValue(v[1], ctx.expr(ctx.b.arg(v[2], T.i32.core)), ctx.expr(ctx.b.arg(v[3], T.i32.core)))
                elif isinstance(v, tuple) and v[0] == "matrix":
                    v = MatrixValue([ctx.expr(ctx.b.arg(slot, v[2].core)) for slot in v[1]], v[3])
                elif isinstance(v, tuple) and v[0] == "struct":
                    vals = {}
                    for path, slots, ld, lshape in v[1]:
                        es = [ctx.expr(ctx.b.arg(slot, ld.core)) for slot in slots]
                        vals[path] = es[0] if lshape is None else MatrixValue(es, lshape)
                    v = _struct.value_from_leaves(v[2], vals)
                args[n] = v
            walker.use_graph = self.use_graph
            walker.identity_args = {p.name: args[p.name] for p in self.params if p.kind in ("template", "tensor")}
            walker.emit(args)
        except RecursionError:
            raise QuadrantsSyntaxError(f"kernel '{self.__name__}' nests too deeply to compile (recursion is not "
                                       f"supported in kernels and @qd.func)") from None
        finally:
            scope.swap(prev)
        num_slots = ctx.b.num_arg_slots()
        if ctx.rng_launch_slot is not None:
            plan.append(("random", ctx.rng_launch_slot))
        if self._mode is not None:
            self._bind_companions(ctx, plan)
        ctx.tracker.captured = [(weakref.ref(a), arg) for a, arg in ctx.captured.values()]
        ctx.tracker.assert_messages = ctx.assert_messages
        ctx.tracker.print_formats = ctx.print_formats
        return ctx.b, ctx.fields, num_slots, plan, ctx.written, ctx.tracker

    def _bind_companions(self, ctx, plan):
        """The adjoint / dual kernel: each buffer's gradient (.grad) or tangent (.dual) buffer."""
        if self._mode == "validation":
            word = ctx.field_buffer(context.assert_word(runtime.program()))
            for idx, f in list(ctx.fields.items()):
                if isinstance(f, Field) and f._placed_companion("grad") is not None:
                    ctx.assert_messages.append(f"kernel '{self.__name__}' breaks the global data access rule: an "
                                               f"element of field {f.name} is written after being read in the tape "
                                               f"(the gradients would read the new value; docs/autodiff.md)")
                    ctx.b.set_companion(idx, ctx.field_buffer(f._checkbits()))
                    ctx.b.set_access_check(idx, len(ctx.assert_messages), word)
            ctx.b.set_autodiff(3)
            return
        kind = "grad" if self._mode == "reverse" else "dual"
        if kind == "grad" and ctx.rng_launch_slot is not None:
            raise QuadrantsRuntimeError(f"kernel '{self.__name__}': qd.random() cannot be differentiated (RandStmt not "
                                        f"supported in reverse mode: the adjoint's replay would draw other numbers)")
        if kind == "grad" and (ctx.reads_grad or any(getattr(f, "_kind", None) == "grad" for f in ctx.fields.values())):
            raise QuadrantsRuntimeError(f"kernel '{self.__name__}' reads a gradient (x.grad): Cannot automatically "
                                        f"differentiate through a grad tensor")
        for idx, f in list(ctx.fields.items()):
            c = f._placed_companion(kind) if isinstance(f, Field) else None
            if c is not None and f not in ctx.stop_grad:
                ctx.b.set_companion(idx, ctx.field_buffer(c))
        if kind == "grad":
            for p, step in zip(self.params, plan):
                if step[0] == "ndarray" and step[4] is not None and getattr(p.annotation, "needs_grad", None) is not False:
                    ctx.b.set_companion(step[1], step[4])
            for _, arg in ctx.captured.values():
                if arg.grad is not None:
                    ctx.b.set_companion(arg.buffer, arg.grad.buffer)
        if self._mode == "reverse" and ctx.config.ad_stack_size > 0:
            ctx.b.set_ad_stack_size(ctx.config.ad_stack_size)
        ctx.b.set_autodiff(1 if self._mode == "reverse" else 2)

    def __call__(self, *args, **kwargs):
        prog = runtime.program()
        _field.check_placed(prog)
        recorder = getattr(prog, "autodiff", None)  # a qd.ad.Tape or qd.ad.FwdMode being recorded
        if recorder is not None and self._mode is None:
            if recorder.kind == "forward":
                return self._variant("forward")(*args, **kwargs)
            recorder.insert(self, args, kwargs)
            if self.autodiff_mode == AutodiffMode.VALIDATION:
                return self._variant("validation")(*args, **kwargs)
        values = self._bind(args, kwargs)
        # The runtime is not re-entrant (a kernel's scratch buffers, the JIT): one call at a time,
        # even when Python threads call kernels concurrently (launches release the GIL).
        with prog.lock:
            return self._call(prog, values)

    def _call(self, prog, values):
        if self.generation != prog.generation:  # a new qd.init(): everything recompiles
            self.cache.clear()
            self.generation = prog.generation
        idents = []
        key = self._key(values, idents)
        bucket = self.cache.get(key)
        entry = next((e for e in bucket if template_key.guards_hold(e.guards, values)), None) if bucket else None
        if entry is None:
            if _crumb.on:
                _crumb.begin(_crumb.record(f"compiling {self._crumb_text(prog)}"))
            try:
                builder, fields, num_slots, plan, written, tracker = self.build(values, prog.config)
                before = prog.runtime.offline_cache_stats() if prog.offline_cache_path else None
                compiled = prog.runtime.compile(builder)
                self._observe(prog, before, fields)
            finally:
                if _crumb.on:
                    _crumb.end()
            self.num_compilations += 1
            prog.compile_count += 1
            if prog.config.print_ir:
                print(compiled.artifacts["ir"])
            entry = _Compiled(compiled, fields, num_slots, plan, written)
            entry.guards = tracker.guards
            entry.assert_messages = getattr(tracker, "assert_messages", [])
            entry.print_formats = getattr(tracker, "print_formats", [])
            entry.captured = tracker.captured
            # The specialisation lives as long as every object it was compiled for: the objects
            # keyed by identity and the fields it reads. When one dies its entry goes (with the
            # compiled code); a new object at the same address compiles afresh.
            drop = functools.partial(_drop_entry, weakref.ref(self), key, id(entry))
            for obj in idents + tracker.idents + list(fields.values()) + [r() for r, _ in entry.captured]:
                try:
                    entry.watch.append(weakref.ref(obj, drop))
                except TypeError:
                    entry.watch.append(obj)  # not weakly referenceable: kept alive, so its id stays unique
            self.cache.setdefault(key, []).append(entry)
        return self._launch(prog, entry, values)

    def _observe(self, prog, before, fields):
        """src_ll_cache_observations of this compilation: a pure (fastcache) kernel touching no field
        gets a key; loaded / stored: whether the on-disk cache gave or took its code."""
        obs = self.src_ll_cache_observations = CacheObservations()
        obs.cache_key_generated = bool(self.fastcache and prog.config.src_ll_cache and not fields)
        if obs.cache_key_generated and before is not None:
            after = prog.runtime.offline_cache_stats()
            obs.cache_loaded = obs.cache_validated = after["hits"] > before["hits"]
            obs.cache_stored = after["writes"] > before["writes"]

    def _crumb_text(self, prog):
        """'kernel NAME (FILE:LINE) for ARCH device DEVICE', for the crash breadcrumb."""
        return f"kernel {self.__name__} ({_crumb.where(self.func)}) for {_crumb.device_of(prog)}"

    def _launch(self, prog, entry, values):
        num_buffers = entry.compiled.num_buffers
        buffers = [0] * num_buffers
        slots = [0] * max(entry.num_slots, 1)
        for idx, ref in entry.fields.items():
            f = ref()
            if f is None:
                raise RuntimeError(f"kernel '{self.__name__}': a field it was compiled for no longer exists")
            f._check()
            buffers[idx] = f.handle
        for ref, arg in entry.captured:
            a = ref()
            if a is None:
                raise RuntimeError(f"kernel '{self.__name__}': an ndarray it was compiled for no longer exists")
            a._check()
            for b, array in ((arg.buffer, a), (arg.grad and arg.grad.buffer, a.grad)):
                if b is not None:
                    buffers[b] = array.handle
                    first = entry.compiled.shape_slot(b)
                    for k, n in enumerate(array._storage_shape):
                        slots[first + k] = int(n)
        staging = _Staging(self, prog, entry)
        try:
            for param, step, v in zip(self.params, entry.plan, values):
                if step[0] == "scalar":
                    slots[step[1]] = self._scalar_slot(param, v, step[2])
                elif step[0] == "matrix":
                    _, mslots, dtype, shape = step
                    flat = np.asarray(v, dtype=object).reshape(-1) if np.shape(v) == tuple(shape) else None
                    if flat is None:
                        raise QuadrantsRuntimeTypeError(f"kernel '{self.__name__}': argument '{param.name}' expects a "
                                                        f"{param.annotation!r}, got {type(v).__name__} of shape "
                                                        f"{np.shape(v)}")
                    for slot, e in zip(mslots, flat):
                        slots[slot] = self._scalar_slot(param, e, dtype)
                elif step[0] == "struct":
                    for path, lslots, ld, lshape in step[1]:
                        try:
                            member = _struct.get_path(v, path)
                        except (KeyError, AttributeError, TypeError):
                            raise QuadrantsRuntimeTypeError(f"kernel '{self.__name__}': argument '{param.name}' "
                                                            f"lacks member '{'.'.join(path)}'") from None
                        flat = np.asarray(member, dtype=object).reshape(-1) if lshape else [member]
                        if lshape and np.shape(member) != tuple(lshape):
                            raise QuadrantsRuntimeTypeError(f"kernel '{self.__name__}': argument '{param.name}' "
                                                            f"member '{'.'.join(path)}' expects shape {lshape}, got "
                                                            f"{np.shape(member)}")
                        for slot, e in zip(lslots, flat):
                            slots[slot] = self._scalar_slot(param, e, ld)
                elif step[0] == "buffer_view":
                    _, buf, off, size = step
                    a = v.get_ndarray()
                    a._check()
                    buffers[buf] = a.handle
                    first = entry.compiled.shape_slot(buf)
                    for k, n in enumerate(a._storage_shape):
                        slots[first + k] = int(n)
                    slots[off], slots[size] = v.offset, v.size
                elif step[0] == "ndarray":
                    _, buf, ndim, elem, gbuf = step
                    shape = tuple(v._physical_shape if isinstance(v, Ndarray) else v.shape[:ndim])
                    if math.prod(shape + tuple(elem)) > _MAX_ELEMENTS or any(n > _MAX_ELEMENTS for n in shape):
                        raise ValueError(f"kernel '{self.__name__}': argument '{param.name}' has "
                                         f"{math.prod(shape + tuple(elem))} elements (shape {shape}); ndarray "
                                         f"arguments hold at most 2**31 - 1 elements (indices are 32-bit)")
                    for b, array in ((buf, v), (gbuf, getattr(v, "grad", None))):
                        if b is None:
                            continue
                        buffers[b] = staging.handle(param, b, array)
                        first = entry.compiled.shape_slot(b)
                        for k, n in enumerate(shape + tuple(elem)):
                            slots[first + k] = int(n)
            if entry.plan and entry.plan[-1][0] == "random":  # the launch number of qd.random's streams
                prog.random_launches = getattr(prog, "random_launches", 0) + 1
                slots[entry.plan[-1][1]] = prog.random_launches & 0xFFFFFFFF
            if _crumb.on:
                if entry.crumb is None:
                    entry.crumb = _crumb.record(f"launching {self._crumb_text(prog)}")
                _crumb.begin(entry.crumb)
            ret = prog.runtime.launch(entry.compiled, buffers, slots)
            staging.copy_back()
        finally:
            if _crumb.on:
                _crumb.end()
            staging.release()
        failed = 0  # the first failing assert (debug=True), reset for the next launch
        if getattr(entry, "assert_messages", None):
            word = context.assert_word(prog)
            failed, word[0] = int(word[0]), 0
        if getattr(entry, "print_formats", None):  # what the kernel printed, whatever failed
            printing.flush(prog, entry.print_formats)
        # A failed assert is reported before an out-of-bounds access: a BufferView's own range check
        # (an assert) precedes the access into its ndarray that the bounds check also catches.
        if failed:
            what = entry.assert_messages[failed - 1]
            exc, message = what if isinstance(what, tuple) else (QuadrantsAssertionError, what)
            raise exc(message)
        if entry.error_slot >= 0 and ret[entry.error_slot]:
            index = _from_slot(ret[entry.error_slot + 1], T.i64)
            raise QuadrantsOutOfBoundsError(
                out_of_bound_text(entry.error_messages[ret[entry.error_slot] - 1].replace("{}", str(index))))
        if entry.returns:
            out = [_from_slot(r, t) for r, t in zip(ret, entry.returns)]
            result, k = [], 0
            for dtype, shape in self.returns:
                if dtype is None:  # a struct: its members' entries in order
                    leaf_values = {}
                    for path, ld, lshape in _struct.leaves(shape):
                        n = _num_entries(lshape)
                        leaf_values[path] = out[k] if lshape is None else \
                            np.array(out[k:k + n], dtype=ld.np).reshape(lshape)
                        k += n
                    result.append(_struct.py_from_leaves(shape, leaf_values))
                    continue
                if shape is None:
                    result.append(out[k])
                else:  # a vector / matrix: a Python-scope one (.to_numpy(), .norm(), swizzles), of its dtype
                    value = np.array(out[k:k + _num_entries(shape)], dtype=dtype.np).reshape(shape).view(PyMatrix)
                    value._qd_dtype = dtype
                    result.append(value)
                k += _num_entries(shape)
            return result[0] if len(result) == 1 else tuple(result)
        return None

    def _scalar_slot(self, param, v, dtype):
        try:
            return _to_slot(v, dtype)
        except OverflowError as e:
            raise OverflowError(f"kernel '{self.__name__}': argument '{param.name}' = {v!r} {e}") from None
        except (TypeError, ValueError, struct.error):
            fractional = isinstance(v, (float, np.floating)) and not dtype.is_real
            raise QuadrantsRuntimeTypeError(f"Argument ({self.params.index(param)},) (type={type(v)}) cannot be converted "
                                            f"into required type {dtype}: kernel '{self.__name__}' argument "
                                            f"'{param.name}' expects a number ({dtype}"
                                            f"{', an integer' if fractional else ''}), got {_short_repr(v)}") from None


def _short_repr(v, width=80):
    text = repr(v)
    return text if len(text) <= width else text[:width - 3] + "..."


def _array_key(a):
    """Identifies a numpy view: two arguments with the same key are the same memory, element for element."""
    return a.__array_interface__["data"][0], a.shape, a.strides, a.dtype.str


class _Staging:
    """The memory a launch gives its numpy arguments.

    cpu: a C-contiguous array starting on a 4-byte boundary is used in place (zero-copy). Otherwise
    the array is copied to a runtime buffer and, if the kernel writes to it, copied back after the
    launch. The same array (or identical views) passed twice gets one buffer, so neither argument's
    writes are lost; arrays that overlap otherwise are refused when the kernel writes to either of
    them.
    """

    def __init__(self, kernel, prog, entry):
        self.kernel, self.prog, self.entry = kernel, prog, entry
        self.seen = []       # (numpy array, param name, written?) of this launch
        self.by_view = {}    # _array_key -> handle
        self.copies = []     # (numpy array, staged copy, handle, written?)

    def handle(self, param, buf, v):
        if isinstance(v, Ndarray):
            return v.handle
        written = buf in self.entry.written
        name = self.kernel.__name__
        if written and not v.flags.writeable:
            raise ValueError(f"kernel '{name}' writes to argument '{param.name}', a read-only numpy array; pass a "
                             f"writeable array (e.g. a copy)")
        key = _array_key(v)
        for other, other_name, other_written in self.seen:
            if _array_key(other) == key or not (written or other_written):
                continue
            if np.may_share_memory(v, other) and np.shares_memory(v, other):
                raise ValueError(f"kernel '{name}': arguments '{other_name}' and '{param.name}' are different "
                                 f"numpy views of overlapping memory and the kernel writes to one of them; pass "
                                 f"the same array (or view) twice, or non-overlapping arrays")
        self.seen.append((v, param.name, written))
        if key in self.by_view:
            handle, copy = self.by_view[key]
            if written and copy is not None:
                copy[3] = True
            return handle
        # In place only from a 4-byte aligned start: the atomics on 8 / 16-bit elements work on the
        # aligned 32-bit word holding the element, found from the element's index.
        if self.prog.config.arch is runtime.cpu and v.flags.c_contiguous and v.ctypes.data % 4 == 0:
            self.by_view[key] = (v.ctypes.data, None)  # zero-copy
            return v.ctypes.data
        staged = np.ascontiguousarray(v)
        handle = self.prog.runtime.allocate(max(staged.nbytes, 1))
        copy = [v, staged, handle, written]
        self.copies.append(copy)
        self.by_view[key] = (handle, copy)
        if staged.size:
            self.prog.runtime.write(handle, 0, staged)
        return handle

    def copy_back(self):
        for target, staged, handle, written in self.copies:
            if written and staged.size:
                self.prog.runtime.read(handle, 0, staged)
                target[...] = staged

    def release(self):
        for _, _, handle, _ in self.copies:
            self.prog.runtime.deallocate(handle)
        self.copies = []


class Func:
    """@qd.func: inlined into the calling kernel."""

    _qd_func = True  # what the front end knows a func by: it calls .inline(ctx, args, kwargs)
    _qd_identity = True

    def bind(self, obj):
        """obj.method where method is this func: inlined with obj as its first argument."""
        return _BoundFunc(self, obj)

    def __init__(self, func, requires_top_level=False):
        func = _python_function(func, "qd.func")
        functools.update_wrapper(self, func)
        self.func = func
        self.signature = ast_builder.signature(func)
        # requires_top_level: callable only at a kernel's top level (no run-time if / loop around the
        # call); its own top-level loops are then parallel loops, each its own task (qd.algorithms).
        self.requires_top_level = requires_top_level
        for name, p in self.signature.parameters.items():
            if isinstance(p.annotation, str):  # `x: "foo"` (or postponed annotations): not a type here
                raise QuadrantsArgumentError(f"{_def_site(func, name)}Invalid type annotation of argument '{name}' "
                                             f"of @qd.func '{func.__name__}': the string {p.annotation!r}; annotate "
                                             f"with a dtype, a qd.types type or qd.template(), or leave it out")

    def __call__(self, *args, **kwargs):
        ctx = context.current()
        if ctx is None:
            raise RuntimeError(f"@qd.func '{self.__name__}' can only be called from a kernel or another @qd.func")
        return self.inline(ctx, list(args), kwargs)  # from Python code a kernel calls while it compiles

    def __get__(self, obj, objtype=None):
        """A func written as a method (of a @qd.data_oriented class or a @qd.dataclass): `self.f(x)`."""
        if obj is None:
            return self
        return _BoundFunc(self, obj)

    def _inline_key(self, bound):
        """What tells two nested inlinings of this func apart: its compile-time arguments."""
        try:
            return (self, template_key.value_key([v if not isinstance(v, _RUNTIME) else None
                                                  for v in bound.arguments.values()], []))
        except Exception:
            return (self, None)

    def inline(self, ctx, args, kwargs, self_lvalue=False):
        try:
            bound = bind_arguments(f"@qd.func '{self.__name__}'", self.signature, args, kwargs)
        except QuadrantsArgumentError as e:
            raise QuadrantsArgumentError(ctx.walker.located(str(e)) if ctx.walker else str(e)) from None
        if _lacks_its_return(self):
            ctx.syntax_error(f"Function has a return type but does not have a return statement: @qd.func "
                             f"'{self.__name__}' is annotated -> {self.signature.return_annotation!r}")
        if self.requires_top_level and (ctx.depth != 0 or ctx.in_parallel_loop):
            ctx.syntax_error(f"@qd.func '{self.__name__}' is decorated with requires_top_level=True and must be called "
                             f"at the top level of a kernel (not inside a run-time if, for or while): its own "
                             f"parallel loops are separate tasks, run one after another")
        # Inlining a call to a func already being inlined, with the same compile-time arguments,
        # would never end: run-time recursion cannot be inlined.
        key = self._inline_key(bound)
        depth = sum(1 for f, _ in ctx.inlining if f is self)
        if key in ctx.inlining:
            # A cycle of inlinings through @qd.real_funcs: they are compiled as real functions from
            # now on, and the kernel is built again.
            last = len(ctx.inlining) - 1 - ctx.inlining[::-1].index(key)
            reals = [f for f, _ in ctx.inlining[last:] if isinstance(f, RealFunc) and not f.recursive]
            for f in reals:
                f.recursive = True
            if reals:
                raise _RealCallNeeded()
        if key in ctx.inlining or depth >= _MAX_INLINE_DEPTH:
            ctx.syntax_error(f"recursion is not supported: @qd.func '{self.__name__}' calls itself"
                             f"{' (' + str(depth) + ' deep)' if depth >= _MAX_INLINE_DEPTH else ''}; a @qd.func is "
                             f"inlined into its caller, so recursion must end at compile time (qd.static "
                             f"conditions on compile-time arguments)")
        ctx.inlining.append(key)
        try:
            walker = ast_builder.FunctionWalker(ctx, self.func, is_kernel=False)
            walker.top_level = self.requires_top_level
            values = {}
            for k, (name, v) in enumerate(bound.arguments.items()):
                ann = self.signature.parameters[name].annotation
                if isinstance(ann, T.RefType):
                    values[name] = _ref_argument(ctx, self, name, v, ann)
                    continue
                values[name] = v if T.is_template(ann) or (k == 0 and self_lvalue) else _func_argument(ctx, self, name, ctx.rvalue(v), ann)
            names = list(self.signature.parameters)
            templates = [n for n in names if T.is_template(self.signature.parameters[n].annotation)
                         or isinstance(self.signature.parameters[n].annotation, T.RefType)]
            if self_lvalue and names:  # a method's self: p.advance(dt) changes p
                templates.append(names[0])
            result = walker.emit(values, by_reference=templates)
            ret = self.signature.return_annotation
            if result is not None and (isinstance(ret, (T.DataType, T.VectorType, T.MatrixType)) or ret in (int, float)):
                result = ctx.cast(result, T.to_dtype(ret) if not isinstance(ret, (T.VectorType, T.MatrixType))
                                  else ret.dtype)
            return result
        finally:
            ctx.inlining.pop()


_RUNTIME = (Expr, Var, Ptr, MatrixValue)


class _RealCallNeeded(BaseException):
    """Raised while a kernel is built when a @qd.real_func turns out to be recursive: the build
    starts again with that func compiled as a real function (Kernel.build). A BaseException, so
    that no handler of the front end's reports it as an error."""


class RealFunc(Func):
    """@qd.real_func: a func whose every parameter is annotated (arguments are converted to those
    types and passed by value; qd.template() ones at compile time) and whose return value, if any,
    is annotated. It is inlined as a @qd.func is, unless it is recursive (it is called while it is
    being inlined with the same compile-time arguments): then it is compiled as a real function per
    specialization of its qd.template() arguments, called by a call statement (docs/language.md)."""

    def __init__(self, func):
        super().__init__(func)
        self.recursive = False  # set by the first build that finds it calling itself
        site = _def_site(self.func)
        for name, p in self.signature.parameters.items():
            if p.annotation is inspect.Parameter.empty:
                raise QuadrantsSyntaxError(f"{site}@qd.real_func '{self.__name__}': argument '{name}' must be type "
                                           f"annotated (e.g. qd.i32, qd.template())")
        if self.signature.return_annotation is inspect.Signature.empty and _returns_a_value(self.func):
            raise QuadrantsCompilationError(f"{site}@qd.real_func '{self.__name__}': its return value must be "
                                            f"annotated (-> qd.i32, ...)")

    def _inline_key(self, bound):
        """Its qd.template() arguments: every other one is a run-time value of its annotated type."""
        statics = [v for n, v in bound.arguments.items() if T.is_template(self.signature.parameters[n].annotation)]
        try:
            return (self, template_key.value_key(statics, []))
        except Exception:
            return (self, ("id",) + tuple(id(v) for v in statics))

    def inline(self, ctx, args, kwargs, self_lvalue=False):
        if not self.recursive:
            return super().inline(ctx, args, kwargs, self_lvalue)
        what = f"@qd.real_func '{self.__name__}'"
        try:
            bound = bind_arguments(what, self.signature, args, kwargs)
        except QuadrantsArgumentError as e:
            raise QuadrantsArgumentError(ctx.walker.located(str(e)) if ctx.walker else str(e)) from None
        params = self.signature.parameters
        flat = []
        for name, v in bound.arguments.items():
            ann = params[name].annotation
            if T.is_template(ann):
                continue
            if isinstance(ann, T.RefType):
                ctx.syntax_error(f"{what} is recursive, so it is compiled as a real function, whose arguments are "
                                 f"passed by value: its qd.ref parameter '{name}' is not supported; return the value")
            if _leaf_dtypes(ann) is None:
                ctx.type_error(f"{what} is recursive, so it is compiled as a real function: its parameter '{name}' "
                               f"must be a scalar, vector, matrix or struct type, or qd.template(); got {ann!r}")
            flat += _flatten(ctx, _func_argument(ctx, self, name, ctx.rvalue(v), ann), ann)
        key = self._inline_key(bound)
        index = ctx.real_functions.get(key)
        if index is None:
            index = self._define(ctx, key, bound)
        results = [ctx.expr(r) for r in ctx.b.call(index, [e.stmt for e in flat])]
        ret = self.signature.return_annotation
        return _assemble(ctx, results, ret) if _leaf_dtypes(ret) else None

    def _define(self, ctx, key, bound):
        """Builds this specialization's code as a new function of the kernel; returns its index."""
        what = f"@qd.real_func '{self.__name__}'"
        if _lacks_its_return(self):
            ctx.syntax_error(f"Function has a return type but does not have a return statement: {what} is "
                             f"annotated -> {self.signature.return_annotation!r}")
        ret = self.signature.return_annotation
        returns = _leaf_dtypes(ret)
        if returns is None:
            ctx.type_error(f"{what} is recursive, so it is compiled as a real function: its return type must be a "
                           f"scalar, vector, matrix or struct type; got {ret!r}")
        params = self.signature.parameters
        param_dtypes = [d for n in bound.arguments if not T.is_template(params[n].annotation)
                        for d in _leaf_dtypes(params[n].annotation)]
        index = ctx.b.begin_function(self.__name__, [d.core for d in param_dtypes], [d.core for d in returns])
        ctx.real_functions[key] = index  # before the body: its own calls find it
        caller = ctx.walker
        saved = (ctx.depth, ctx.in_parallel_loop, ctx.rng_loops, ctx.rng_kernel, ctx.block_dim)
        # Its code is serial, called from anywhere: not at kernel scope, not a parallel loop.
        ctx.depth, ctx.in_parallel_loop, ctx.rng_loops, ctx.rng_kernel, ctx.block_dim = 1, False, [], None, 0
        ctx.in_real_function += 1
        # Inlining starts afresh in its code: a func it inlines that calls it again calls it.
        caller_inlining, ctx.inlining = ctx.inlining, [key]
        try:
            values, k = {}, 0
            for name, v in bound.arguments.items():
                ann = params[name].annotation
                if T.is_template(ann):
                    values[name] = v
                    continue
                n = len(_leaf_dtypes(ann))
                values[name] = _assemble(ctx, [ctx.expr(ctx.b.param(k + i)) for i in range(n)], ann)
                k += n
            templates = [n for n in params if T.is_template(params[n].annotation)]
            walker = ast_builder.FunctionWalker(ctx, self.func, is_kernel=False)
            result = walker.emit(values, by_reference=templates)
            flat = _flatten(ctx, ctx.rvalue(result), ret) if returns and result is not None else []
            ctx.b.return_([e.stmt for e in flat])
        finally:  # (an error leaves the function open: the build stops)
            ctx.inlining = caller_inlining
            ctx.in_real_function -= 1
            ctx.depth, ctx.in_parallel_loop, ctx.rng_loops, ctx.rng_kernel, ctx.block_dim = saved
        ctx.b.end_function()
        if caller is not None and caller.node is not None:
            caller.set_loc(caller.node)  # the call is the caller's statement
        return index


def _leaf_dtypes(ann):
    """The scalar dtypes a real function passes a value of type `ann` as (vectors, matrices and
    structs entry by entry); [] for no value; None for a type it cannot pass."""
    if ann in (None, inspect.Signature.empty):
        return []
    if isinstance(ann, T.DataType) or ann in (int, float):
        return [T.to_dtype(ann)]
    if isinstance(ann, (T.VectorType, T.MatrixType)):
        return [T.to_dtype(ann.dtype)] * math.prod(ann.shape)
    if isinstance(ann, StructType):
        return [ld for _, ld, lshape in _struct.leaves(ann) for _ in range(math.prod(lshape) if lshape else 1)]
    return None


def _flatten(ctx, v, ann):
    """A value of type `ann` as its scalar entries (Exprs of _leaf_dtypes(ann))."""
    if isinstance(ann, StructType):
        if not isinstance(v, StructValue) or v.type is not ann:
            ctx.type_error(f"expected a value of {ann!r}, got {type(v).__name__}")
        out = []
        for path, ld, lshape in _struct.leaves(ann):
            m = v
            for p in path:
                m = m.members[p]
            m = ctx.cast(ctx.rvalue(m), ld)
            out += [ctx.scalar(e) for e in m.entries] if lshape else [ctx.scalar(m)]
        return out
    v = ctx.cast(v, _leaf_dtypes(ann)[0])
    if isinstance(ann, (T.VectorType, T.MatrixType)):
        if not isinstance(v, MatrixValue) or v.shape != ann.shape:
            ctx.type_error(f"expected a value of {ann!r}, got {type(v).__name__}")
        return [ctx.scalar(e) for e in v.entries]
    return [ctx.scalar(v)]


def _assemble(ctx, exprs, ann):
    """The inverse of _flatten: a value of type `ann` from its scalar entries."""
    if isinstance(ann, StructType):
        vals, k = {}, 0
        for path, ld, lshape in _struct.leaves(ann):
            n = math.prod(lshape) if lshape else 1
            vals[path] = MatrixValue(exprs[k:k + n], lshape) if lshape else exprs[k]
            k += n
        return _struct.value_from_leaves(ann, vals)
    if isinstance(ann, (T.VectorType, T.MatrixType)):
        return MatrixValue(list(exprs), ann.shape)
    return exprs[0]


def _lacks_its_return(k):
    """Whether a kernel or func annotated with a return type has no `return <value>` (checked once)."""
    if not hasattr(k, "_lacks_return"):
        try:
            k._lacks_return = k.signature.return_annotation not in (inspect.Signature.empty, None) and \
                not _returns_a_value(k.func)
        except (OSError, TypeError, SyntaxError):
            k._lacks_return = False  # no source: the walker reports that
    return k._lacks_return


def _returns_a_value(f):
    """Whether f's own body (not nested functions) has a `return <value>`."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(f)))
    todo = list(tree.body[0].body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Return) and node.value is not None:
            return True
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            todo.extend(ast.iter_child_nodes(node))
    return False


class _BoundKernel(functools.partial):
    """A kernel written as a method, bound to its object: obj.step(dt), obj.step.grad(dt)."""

    @property
    def grad(self):
        return functools.partial(self.func.grad, *self.args)


class _BoundFunc:
    """obj.method where method is a @qd.func: inlined with obj as its first argument."""

    _qd_builtin = True
    _qd_bound = True  # template keys take it as its func: what it reads of obj is guarded as read

    def __init__(self, func, obj):
        self.func, self.obj = func, obj
        self.__name__ = func.__name__

    def __call__(self, *args, **kwargs):
        ctx = context.current()
        if ctx is None:
            raise RuntimeError(f"@qd.func '{self.__name__}' can only be called from a kernel or another @qd.func")
        return self.func.inline(ctx, [self.obj] + list(args), kwargs, self_lvalue=True)


def _ref_argument(ctx, func, name, v, ann):
    """A qd.ref(dtype) parameter: the caller's variable or memory element itself, of that dtype."""
    if not isinstance(v, (Var, Ptr)):
        ctx.type_error(f"@qd.func '{func.__name__}': argument '{name}' is annotated {ann!r}: it must be a variable "
                       f"or a memory element, got {type(v).__name__}")
    if v.dtype is not T.to_dtype(ann.dtype):
        ctx.type_error(f"@qd.func '{func.__name__}': argument '{name}' is annotated {ann!r} but is {v.dtype}")
    return v


def _func_argument(ctx, func, name, v, ann):
    """A @qd.func argument converted to its annotation, as a kernel argument is: qd.i32 truncates 3.7 to 3."""
    if ann is inspect.Parameter.empty or ann is None:
        return v
    if isinstance(ann, T.DataType) or ann in (int, float):
        if isinstance(v, MatrixValue):
            ctx.type_error(f"@qd.func '{func.__name__}': argument '{name}' is annotated {ann!r} (a scalar) but got "
                           f"a vector/matrix of shape {v.shape}")
        if isinstance(v, (Expr, Var, Ptr)) or context.is_py_scalar(v):
            return ctx.cast(v, T.to_dtype(ann))
        ctx.type_error(f"@qd.func '{func.__name__}': argument '{name}' is annotated {ann!r} but got "
                       f"{type(v).__name__}")
    if isinstance(ann, (T.VectorType, T.MatrixType)):
        if not isinstance(v, MatrixValue) or v.shape != ann.shape:
            got = f"shape {v.shape}" if isinstance(v, MatrixValue) else type(v).__name__
            what = f"@qd.func '{func.__name__}': argument '{name}' is annotated {ann!r} but got {got}"
            if isinstance(v, MatrixValue):  # in Quadrants' words too
                n, m = (v.shape + (1,))[:2]
                what += (f": it is expected to be a Matrix with n {ann.n}, but got {n}" if n != ann.n else
                         f": it is expected to be a Matrix with m {ann.m}, but got {m}")
            raise QuadrantsArgumentError(ctx.walker.located(what) if ctx.walker else what)
        return ctx.cast(v, ann.dtype)
    if isinstance(ann, T.NdarrayType):
        if not isinstance(v, NdarrayArg):
            ctx.type_error(f"Expected ndarray in the kernel argument for argument {name}: @qd.func '{func.__name__}' "
                           f"takes an ndarray argument of the kernel there, got {type(v).__name__}")
        bad = _bad_ndarray_value(v, ann)
        if bad:
            ctx.type_error(f"Invalid value for argument {name} of @qd.func '{func.__name__}': {bad}")
        return v
    if isinstance(ann, StructType):
        if not isinstance(v, StructValue) or v.type is not ann:
            ctx.type_error(f"@qd.func '{func.__name__}': argument '{name}' is annotated {ann!r} but got "
                           f"{type(v).__name__}")
    return v
_MAX_INLINE_DEPTH = 24


def _users_function(f, decorator):
    """@qd.kernel / @qd.func of a function of Quadrants' own (`@qd.kernel(qd.kernel)`, `qd.func(qd.sqrt)`):
    a TypeError here, not an error about that function's source inside the package."""
    if inspect.isfunction(f) and (getattr(f, "__module__", None) or "").split(".")[0] == "quadrants":
        raise TypeError(f"@{decorator} decorates a Python function of yours, got Quadrants' own function "
                        f"'{f.__name__}'")
    return f


class CacheObservations:
    """kernel._primal.src_ll_cache_observations: what the last compilation of the kernel did with the
    fast cache (Quadrants' names)."""

    def __init__(self):
        self.cache_key_generated = False
        self.cache_validated = False
        self.cache_loaded = False
        self.cache_stored = False

    def __repr__(self):
        return ("CacheObservations(" + ", ".join(f"{k}={v}" for k, v in vars(self).items()) + ")")


def kernel(func=None, *, fastcache=False, pure=None, deterministic=None, graph=False):
    """@qd.kernel, or @qd.kernel(fastcache=True) (pure= is its older name): the kernel asserts it is
    pure, reading only its arguments. Compiled kernels are always kept in memory and, with
    qd.init(offline_cache=True), on disk, keyed by everything they depend on; the flag shows in
    src_ll_cache_observations (a key for a kernel that touches no field).
    deterministic=True / False: this kernel's atomics in deterministic mode or not, whatever
    qd.init(deterministic=...) says (None: as qd.init says; docs/atomics.md).
    graph=True: the reference's CUDA-graph capture; here it launches as any kernel does, and allows
    `while qd.graph.do_while(flag):` in the body. A graph kernel returns nothing (as in the reference)."""
    if deterministic is not None and not isinstance(deterministic, bool):
        raise TypeError(f"@qd.kernel(deterministic=...) takes True, False or None, got {deterministic!r}")

    def make(f):
        k = Kernel(_users_function(f, "qd.kernel"), deterministic=deterministic)
        k.fastcache = bool(fastcache or pure)
        k.use_graph = bool(graph)
        if k.use_graph and k.signature.return_annotation not in (inspect.Signature.empty, None):
            raise QuadrantsSyntaxError(f"@qd.kernel(graph=True) '{k.__name__}' cannot return a value: graph kernels "
                                       f"return nothing (write results to a field or ndarray)")
        return k
    return make if func is None else make(func)


def pure(fn):
    """@qd.pure (above @qd.kernel, or on the function): the kernel is pure, as fastcache=True says."""
    k = fn if isinstance(fn, Kernel) else kernel(fn)
    k.fastcache = True
    return k


def func(f=None, *, requires_top_level=False):
    """@qd.func, or @qd.func(requires_top_level=True): a func called only at a kernel's top level, whose
    top-level loops are parallel loops (a compile error naming the line when called elsewhere)."""
    if f is None:
        return lambda g: Func(_users_function(g, "qd.func"), requires_top_level=requires_top_level)
    return Func(_users_function(f, "qd.func"), requires_top_level=requires_top_level)


def real_func(f):
    return RealFunc(_users_function(f, "qd.real_func"))


class Artifacts:
    """What qd.compile returns: .ir, .llvm_ir (LLVM backends), and per-backend artefacts."""

    def __init__(self, arch, artifacts):
        self.arch = arch
        self._artifacts = dict(artifacts)

    def __getattr__(self, name):
        try:
            return self.__dict__["_artifacts"][name]
        except KeyError:
            raise AttributeError(f"no '{name}' artefact for arch {self.arch}; have {sorted(self._artifacts)}") from None

    def __dir__(self):
        return sorted(self._artifacts)


def compile(kernel, *args, arch=None, features=None, **kwargs):
    """Compiles `kernel` for `arch` with these example arguments, without launching it."""
    if not isinstance(kernel, Kernel):
        raise TypeError("qd.compile takes a @qd.kernel")
    prog = runtime.program()
    arch = arch or prog.config.arch
    if isinstance(arch, str):
        arch = runtime.arch_from_name(arch)
    values = kernel._bind(args, kwargs)
    builder = kernel.build(values, prog.config, arch)[0]
    if features is None:
        features = prog.runtime.features if arch is prog.config.arch else _core.compile_features(arch.name)
    features = list(features)
    if not prog.config.subgroup_aggregation and "no_subgroup_aggregation" not in features:
        features.append("no_subgroup_aggregation")
    if not prog.config.constant_folding and "no_constant_folding" not in features:
        features.append("no_constant_folding")
    if not prog.config.interleave_iterations and "no_interleave_iterations" not in features:
        features.append("no_interleave_iterations")
    if _crumb.on:
        _crumb.begin(_crumb.record(f"compiling kernel {kernel.__name__} ({_crumb.where(kernel.func)}) for {arch.name} "
                                   f"(qd.compile: code only, no device)"))
    try:
        return Artifacts(arch, _core.compile_artifacts(builder, arch.name, list(features),
                                                       bool(prog.config.fast_math)))
    finally:
        if _crumb.on:
            _crumb.end()
