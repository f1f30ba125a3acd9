"""@qd.kernel and @qd.func: argument binding, specialisation key, cache, launch, qd.compile."""
import functools
import inspect
import struct

import numpy as np

from quadrants import _core
from quadrants.lang import ast_builder, context, runtime
from quadrants.lang import types as T
from quadrants.lang.exception import (QuadrantsOutOfBoundsError, QuadrantsRuntimeTypeError, QuadrantsSyntaxError,
                                      QuadrantsTypeError)
from quadrants.lang.ndarray import Ndarray
from quadrants.lang.runtime_array import external_array
from quadrants.lang.values import NdarrayArg


class _Param:
    """How one kernel parameter is passed: 'scalar', 'ndarray' or 'template'."""

    def __init__(self, name, annotation, kernel_name):
        self.name = name
        if annotation is inspect.Parameter.empty:
            raise QuadrantsSyntaxError(f"kernel '{kernel_name}': argument '{name}' needs a type annotation "
                                       f"(e.g. qd.i32, qd.types.ndarray(), qd.template())")
        if T.is_template(annotation):
            self.kind = "template"
        elif isinstance(annotation, T.NdarrayType):
            self.kind = "ndarray"
        elif isinstance(annotation, T.DataType) or annotation in (int, float):
            self.kind = "scalar"
        else:
            raise QuadrantsTypeError(f"kernel '{kernel_name}': argument '{name}' has an unsupported annotation "
                                     f"{annotation!r}; use a dtype, qd.types.ndarray(...) or qd.template()")
        self.annotation = annotation

    def dtype(self):
        return T.to_dtype(self.annotation)


def _ndarray_parts(value, param, kernel_name):
    """(dtype, shape, element_shape) of an ndarray argument (a qd.ndarray or a numpy array)."""
    ann = param.annotation
    if isinstance(value, Ndarray):
        dtype, shape, elem = value.dtype, value.shape, value.element_shape
        if ann.element_shape and tuple(elem) != tuple(ann.element_shape):
            raise QuadrantsTypeError(f"kernel '{kernel_name}': argument '{param.name}' expects elements of shape "
                                     f"{tuple(ann.element_shape)}, got {tuple(elem)}")
    elif isinstance(value, np.ndarray):
        dtype, elem = T.from_numpy(value.dtype), tuple(ann.element_shape)
        if value.ndim < len(elem) or tuple(value.shape[value.ndim - len(elem):]) != elem:
            raise QuadrantsTypeError(f"kernel '{kernel_name}': argument '{param.name}' expects elements of shape "
                                     f"{elem} (the trailing axes), got an array of shape {value.shape}")
        shape = value.shape[:value.ndim - len(elem)]
    else:
        raise QuadrantsTypeError(f"kernel '{kernel_name}': argument '{param.name}' expects an ndarray "
                                 f"(qd.ndarray or numpy array), got {type(value).__name__}")
    if ann.dtype is not None:
        want = ann.dtype.dtype if isinstance(ann.dtype, (T.VectorType, T.MatrixType)) else T.to_dtype(ann.dtype)
        if want is not dtype:
            raise QuadrantsTypeError(f"kernel '{kernel_name}': argument '{param.name}' expects dtype {want}, "
                                     f"got {dtype}")
    if ann.ndim is not None and ann.ndim != len(shape):
        raise QuadrantsTypeError(f"kernel '{kernel_name}': argument '{param.name}' expects ndim={ann.ndim}, "
                                 f"got {len(shape)}")
    return dtype, tuple(shape), tuple(elem)


def _template_key(v):
    if isinstance(v, (int, float, bool, str, type(None))):
        return ("v", type(v).__name__, v)
    if isinstance(v, tuple):
        return ("t",) + tuple(_template_key(e) for e in v)
    return ("id", id(v))


_STRUCT = {"i8": "b", "i16": "h", "i32": "i", "i64": "q", "u8": "B", "u16": "H", "u32": "I", "u64": "Q",
           "f16": "e", "f32": "f", "f64": "d"}


def _to_slot(value, dtype):
    """The 8-byte argument slot holding `value` as `dtype` (low bytes, little-endian)."""
    if dtype.is_real:
        raw = struct.pack("<" + _STRUCT[dtype.name], value)
    else:
        raw = (int(value) & ((1 << dtype.bits) - 1)).to_bytes(dtype.bits // 8, "little")  # wraps like C
    return struct.unpack("<q", raw.ljust(8, b"\0"))[0]


def _from_slot(slot, dtype):
    raw = np.array([slot], dtype=np.uint64).view(np.uint8)[:dtype.np.itemsize]
    return raw.view(dtype.np)[0].item()


class _Compiled:
    def __init__(self, compiled, fields, num_slots, plan):
        self.compiled = compiled
        self.fields = fields      # buffer index -> Field
        self.num_slots = num_slots
        self.plan = plan          # per parameter: ("scalar", slot, dtype) / ("ndarray", buffer) / ("template",)
        self.returns = [T.from_core(d) for d in compiled.returns]
        self.error_slot = compiled.error_slot
        if self.error_slot >= 0:
            self.returns = self.returns[:self.error_slot]
            self.error_messages = list(compiled.error_messages)


class Kernel:
    def __init__(self, func):
        functools.update_wrapper(self, func)
        self.func = func
        self.signature = inspect.signature(func)
        self.params = [_Param(n, p.annotation, func.__name__) for n, p in self.signature.parameters.items()]
        ret = self.signature.return_annotation
        self.returns = [] if ret in (inspect.Signature.empty, None) else [T.to_dtype(r) for r in
                                                                          (ret if isinstance(ret, tuple) else (ret,))]
        self.ndarray_params = [i for i, p in enumerate(self.params) if p.kind == "ndarray"]
        self.cache = {}
        self.num_compilations = 0

    def _key(self, values):
        key = []
        for p, v in zip(self.params, values):
            if p.kind == "template":
                key.append(_template_key(v))
            elif p.kind == "ndarray":
                dtype, shape, elem = _ndarray_parts(v, p, self.__name__)
                key.append(("nd", dtype.name, len(shape), elem))
            else:
                key.append("s")
        return tuple(key)

    def _bind(self, args, kwargs):
        if not kwargs and len(args) == len(self.params):
            values = args  # the common case, without inspect's binding
        else:
            try:
                bound = self.signature.bind(*args, **kwargs)
            except TypeError as e:
                raise TypeError(f"kernel '{self.__name__}': {e}") from None
            bound.apply_defaults()
            values = list(bound.arguments.values())
        for i in self.ndarray_params:  # torch tensors and other DLPack arrays: numpy views
            if not isinstance(values[i], (Ndarray, np.ndarray)) and hasattr(values[i], "__dlpack__"):
                values = list(values)
                values[i] = external_array(values[i], self.__name__, self.params[i].name)
        return values

    def build(self, values, config):
        """Walks the kernel's AST into a core Builder. Returns (builder, fields, num_slots, plan)."""
        ctx = context.KernelContext(self.__name__, config)
        plan, bound = [], {}
        for p, v in zip(self.params, values):
            if p.kind == "scalar":
                dtype = p.dtype()
                slot = ctx.b.add_scalar_arg(p.name, dtype.core)
                plan.append(("scalar", slot, dtype))
                bound[p.name] = ("scalar", slot, dtype)
            elif p.kind == "ndarray":
                dtype, shape, elem = _ndarray_parts(v, p, self.__name__)
                buf = ctx.b.add_ndarray_arg(p.name, dtype.core, len(shape) + len(elem), list(elem))
                plan.append(("ndarray", buf, len(shape), elem))
                bound[p.name] = NdarrayArg(buf, dtype, len(shape) + len(elem), elem, p.name)
            else:
                plan.append(("template",))
                bound[p.name] = v
        num_slots = ctx.b.num_arg_slots()
        ctx.b.set_returns([r.core for r in self.returns])
        ctx.b.set_debug(config.bounds_checks)  # the core's debug flag means index checks
        prev, context._current = context._current, ctx
        try:
            walker = ast_builder.FunctionWalker(ctx, self.func, is_kernel=True)
            walker.set_loc(walker.fdef)
            # Scalar arguments are read where the kernel starts.
            args = {n: (ctx.expr(ctx.b.arg(v[1], v[2].core)) if isinstance(v, tuple) else v) for n, v in bound.items()}
            walker.emit(args)
        finally:
            context._current = prev
        return ctx.b, ctx.fields, num_slots, plan

    def __call__(self, *args, **kwargs):
        prog = runtime.program()
        values = self._bind(args, kwargs)
        # The runtime is not re-entrant (a kernel's scratch buffers, the JIT): one call at a time,
        # even when Python threads call kernels concurrently (launches release the GIL).
        with prog.lock:
            return self._call(prog, values)

    def _call(self, prog, values):
        key = (prog.generation, self._key(values))
        entry = self.cache.get(key)
        if entry is None:
            builder, fields, num_slots, plan = self.build(values, prog.config)
            compiled = prog.runtime.compile(builder)
            self.num_compilations += 1
            prog.compile_count += 1
            if prog.config.print_ir:
                print(compiled.artifacts["ir"])
            entry = self.cache[key] = _Compiled(compiled, fields, num_slots, plan)
        return self._launch(prog, entry, values)

    def _launch(self, prog, entry, values):
        num_buffers = entry.compiled.num_buffers
        buffers = [0] * num_buffers
        slots = [0] * max(entry.num_slots, 1)
        for idx, f in entry.fields.items():
            f._check()
            buffers[idx] = f.handle
        copies = []  # (numpy array, staging buffer) to copy back after the launch
        for param, step, v in zip(self.params, entry.plan, values):
            if step[0] == "scalar":
                try:
                    slots[step[1]] = _to_slot(v, step[2])
                except (TypeError, ValueError, OverflowError, struct.error):
                    raise QuadrantsRuntimeTypeError(f"kernel '{self.__name__}': argument '{param.name}' expects a number "
                                             f"({step[2]}), got {type(v).__name__} {v!r}") from None
            elif step[0] == "ndarray":
                _, buf, ndim, elem = step
                buffers[buf] = self._ndarray_handle(prog, v, copies)
                shape = v.shape if isinstance(v, Ndarray) else v.shape[:ndim]
                first = entry.compiled.shape_slot(buf)
                for k, n in enumerate(tuple(shape) + tuple(elem)):
                    slots[first + k] = int(n)
        ret = prog.runtime.launch(entry.compiled, buffers, slots)
        for target, staged, handle in copies:
            if staged.size:
                prog.runtime.read(handle, 0, staged)
            target[...] = staged
            prog.runtime.deallocate(handle)
        if entry.error_slot >= 0 and ret[entry.error_slot]:
            index = _from_slot(ret[entry.error_slot + 1], T.i64)
            raise QuadrantsOutOfBoundsError(entry.error_messages[ret[entry.error_slot] - 1].replace("{}", str(index)))
        if entry.returns:
            out = [_from_slot(r, t) for r, t in zip(ret, entry.returns)]
            return out[0] if len(out) == 1 else tuple(out)
        return None

    @staticmethod
    def _ndarray_handle(prog, v, copies):
        if isinstance(v, Ndarray):
            return v.handle
        if prog.config.arch is runtime.cpu and v.flags.c_contiguous and v.flags.writeable:
            return v.ctypes.data  # zero-copy
        # Other archs (or non-contiguous arrays): stage through runtime memory and copy back.
        if not v.flags.writeable:
            raise ValueError("ndarray arguments must be writeable numpy arrays")
        staged = np.ascontiguousarray(v)
        handle = prog.runtime.allocate(max(staged.nbytes, 1))
        if staged.size:
            prog.runtime.write(handle, 0, staged)
        copies.append((v, staged, handle))
        return handle


class Func:
    """@qd.func: inlined into the calling kernel."""

    def __init__(self, func):
        functools.update_wrapper(self, func)
        self.func = func
        self.signature = inspect.signature(func)

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"@qd.func '{self.__name__}' can only be called from a kernel or another @qd.func")

    def inline(self, ctx, args, kwargs):
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as e:
            ctx.syntax_error(f"@qd.func '{self.__name__}': {e}")
        bound.apply_defaults()
        walker = ast_builder.FunctionWalker(ctx, self.func, is_kernel=False)
        values = {}
        for name, v in bound.arguments.items():
            ann = self.signature.parameters[name].annotation
            values[name] = v if T.is_template(ann) else ctx.rvalue(v)
        return walker.emit(values)


def kernel(func):
    return Kernel(func)


def func(f):
    return Func(f)


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
    builder, _, _, _ = kernel.build(values, prog.config)
    if features is None:
        features = prog.runtime.features if arch is prog.config.arch else _core.compile_features(arch.name)
    return Artifacts(arch, _core.compile_artifacts(builder, arch.name, list(features)))
