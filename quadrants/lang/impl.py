"""Introspection under the names Quadrants code uses: qd.lang.impl.current_cfg(),
qd.lang.impl.get_runtime().prog.get_device_caps(), get_max_shared_memory_bytes(), ..."""
import ctypes

from quadrants._lib import runtime
from quadrants.lang import ops
from quadrants.lang.ast.values import MatrixValue
from quadrants.memory import field as _field
from quadrants.memory.field import Field
from quadrants.types import scope
from quadrants import types as T
from quadrants.types.exceptions import QuadrantsRuntimeError, QuadrantsSyntaxError, QuadrantsTypeError


class _RuntimeHandle:
    """What get_runtime() returns: .prog is the current program (qd.init() first)."""

    @property
    def _prog(self):
        return runtime._program

    @property
    def prog(self):
        if runtime._program is None:
            raise QuadrantsRuntimeError("Quadrants is not initialized: call qd.init() first")
        return runtime._program

    @property
    def compiling_callable(self):
        """The kernel being compiled (None in Python scope); .ast_builder() is its builder state, which
        subscript() takes."""
        ctx = scope.current()
        return None if ctx is None else _Compiling(ctx)

    def materialize_root_fb(self, is_first_call=False):
        """Nothing to do here: qd.root's fields are allocated when placed."""

    def materialize(self):
        """Checks the layout as a kernel launch does: every field declared without a shape is placed,
        with the grad / dual companions it needs, and a matrix field placed component by component has
        one shape (RuntimeError otherwise). Nothing is materialised: fields are allocated when placed."""
        _field.check_placed(self.prog)

    @property
    def default_fp(self):
        """The dtype Python's float stands for in kernels (qd.init(default_fp=...)): the qd.f32 / qd.f64 object itself."""
        return runtime.config().default_fp

    @property
    def default_ip(self):
        """The dtype Python's int stands for in kernels (qd.init(default_ip=...))."""
        return runtime.config().default_ip

    def set_default_fp(self, dtype):
        """Makes `dtype` (a float type) what Python's float stands for from now on, as
        qd.init(default_fp=dtype) would; kernels compile anew (a new program generation)."""
        self._set_default("fp", dtype, T.is_real)

    def set_default_ip(self, dtype):
        """Makes `dtype` (an integer type) what Python's int stands for from now on."""
        self._set_default("ip", dtype, T.is_integral)

    def _set_default(self, kind, dtype, ok):
        dtype = T.to_dtype(dtype)
        if not ok(dtype):
            raise QuadrantsTypeError(f"set_default_{kind} takes a {'float' if kind == 'fp' else 'integer'} type, got {dtype}")
        prog = self.prog
        setattr(prog.config, f"default_{kind}", dtype)
        T.primitive_types.defaults[kind] = dtype
        prog.generation, runtime.Program.next_generation = runtime.Program.next_generation, runtime.Program.next_generation + 1


class _Compiling:
    def __init__(self, ctx):
        self._ctx = ctx

    def ast_builder(self):
        return self._ctx


_handle = _RuntimeHandle()


@ops.builtin
def qd_float(x):
    """x as default_fp (a kernel value in kernels; a number in Python scope)."""
    return ops.cast(x, float)


@ops.builtin
def qd_int(x):
    """x as default_ip."""
    return ops.cast(x, int)


@ops.builtin
def subscript(ast_builder, value, *indices):
    """value[indices] from Python code a kernel calls while it compiles (ast_builder: see
    get_runtime().compiling_callable): an entry of a vector / matrix (compile-time indices) or an
    element of a field. subscript(b, x, None) is x[None], the element of a 0-d field."""
    ctx = ast_builder
    value = ctx.rvalue(value)
    if indices == (None,):
        indices = ()
    if isinstance(value, MatrixValue):
        if len(indices) != len(value.shape) or not all(isinstance(i, int) for i in indices):
            raise QuadrantsSyntaxError(f"subscript: a vector / matrix of shape {value.shape} takes "
                                       f"{len(value.shape)} compile-time int indices, got {indices!r}")
        return value.entry(*indices)
    if isinstance(value, Field):
        return ctx.element(value, list(indices))
    return value[indices if len(indices) != 1 else indices[0]]


def get_runtime():
    return _handle


def current_cfg():
    """The configuration of the current qd.init() (the same object as qd.cfg)."""
    return get_runtime().prog.config


def default_cfg():
    """A configuration with every option at its default."""
    return runtime.Config(_use_env=False)


def get_max_shared_memory_bytes(*, is_lowerbound_ok):
    """The most shared (workgroup) memory one block can use, in bytes, on the current arch.

    Exact on cuda and vulkan. Elsewhere, with is_lowerbound_ok=True, a value every device of the
    arch provides (64 KiB on cpu, where a block's shared arrays are on its worker's stack); with
    False, RuntimeError.
    """
    prog = get_runtime().prog
    arch = prog.config.arch
    if arch is runtime.vulkan:
        return int(prog.runtime.vulkan_caps["max_shared_memory_bytes"])
    if arch is runtime.cuda:
        return _cuda_attribute(_CU_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
    if is_lowerbound_ok:
        return {runtime.cpu: 64 * 1024, runtime.amdgpu: 64 * 1024, runtime.metal: 32 * 1024}[arch]
    raise RuntimeError(f"get_max_shared_memory_bytes: the exact value is not known on arch {arch.name}; "
                       f"pass is_lowerbound_ok=True for a lower bound")


def get_cuda_compute_capability():
    """The CUDA device's compute capability as major * 10 + minor (90 for sm_90). Needs a CUDA driver."""
    return (_cuda_attribute(_CU_COMPUTE_CAPABILITY_MAJOR) * 10 + _cuda_attribute(_CU_COMPUTE_CAPABILITY_MINOR))


def clock_freq_hz():
    """The compute device's nominal clock rate in Hz (cuda only; NotImplementedError on other arches)."""
    arch = get_runtime().prog.config.arch
    if arch is runtime.cuda:
        return float(_cuda_attribute(_CU_CLOCK_RATE) * 1000)  # the driver reports kHz
    raise NotImplementedError(f"clock_freq_hz not implemented for arch {arch.name}")


_CU_CLOCK_RATE = 13
_CU_COMPUTE_CAPABILITY_MAJOR = 75
_CU_COMPUTE_CAPABILITY_MINOR = 76
_CU_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97


def _cuda_attribute(attribute):
    """cuDeviceGetAttribute on the device qd.init(device=...) chose (default 0), through the driver API."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        raise RuntimeError(f"CUDA unavailable: cannot load libcuda.so.1 ({e})") from None
    cfg = runtime.config()
    ordinal = int(cfg.device) if cfg.arch is runtime.cuda and cfg.device.isdigit() else 0
    device, value = ctypes.c_int(), ctypes.c_int()
    for call, args in (("cuInit", (0,)), ("cuDeviceGet", (ctypes.byref(device), ordinal)),
                       ("cuDeviceGetAttribute", (ctypes.byref(value), attribute, device))):
        code = getattr(lib, call)(*args)
        if code != 0:
            raise RuntimeError(f"CUDA unavailable: {call} failed with error {code}")
    return value.value
