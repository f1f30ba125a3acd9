# The public namespace `import quadrants as qd`, for type checkers (the package ships py.typed).
#
# Kernel parameter annotations (qd.i32, qd.types.ndarray(dtype=qd.f32, ndim=1), qd.template()) are
# values that tell the compiler how an argument is passed; checkers reject them as annotations
# (mypy: valid-type, pyright: reportInvalidTypeForm) and then treat the parameter as Any. Turn that
# one rule off for kernel code (docs/getting_started.md, "Type checking"). Everything else here is
# checked: the arity of kernels and atomics, qd.init's options, field / ndarray constructors.
# tests/python/test_typing.py keeps this file in step with the runtime namespace: a public name added
# to quadrants/__init__.py needs a line here.
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar, overload

import numpy as np
from typing_extensions import ParamSpec, TypeAlias

from quadrants import ad as ad
from quadrants import algorithms as algorithms
from quadrants import lang as lang
from quadrants import math as math
from quadrants.lang import simt as simt
from quadrants.lang import graph as graph
from quadrants.types.exceptions import QuadrantsAssertionError as QuadrantsAssertionError
from quadrants.types.exceptions import QuadrantsCompilationError as QuadrantsCompilationError
from quadrants.types.exceptions import QuadrantsIndexError as QuadrantsIndexError
from quadrants.types.exceptions import QuadrantsNameError as QuadrantsNameError
from quadrants.types.exceptions import QuadrantsOutOfBoundsError as QuadrantsOutOfBoundsError
from quadrants.types.exceptions import QuadrantsRuntimeError as QuadrantsRuntimeError
from quadrants.types.exceptions import QuadrantsRuntimeTypeError as QuadrantsRuntimeTypeError
from quadrants.types.exceptions import QuadrantsSyntaxError as QuadrantsSyntaxError
from quadrants.types.exceptions import QuadrantsTypeError as QuadrantsTypeError
from quadrants.memory.field import Axis, Field as Field, MatrixField as MatrixField, ScalarField as ScalarField, SNode as SNode
from quadrants.kernels.kernel import Artifacts
from quadrants.lang.matrix import Matrix as Matrix, Vector as Vector
from quadrants.memory.ndarray import MatrixNdarray as MatrixNdarray, Ndarray as Ndarray, ScalarNdarray as ScalarNdarray, VectorNdarray as VectorNdarray
from quadrants.memory.buffer_view import BufferView as BufferView
from quadrants.memory.tensor import Backend as Backend, MatrixTensor as MatrixTensor, Tensor as Tensor, VectorTensor as VectorTensor
from quadrants.memory.struct import Struct as Struct, StructField as StructField, StructType
from quadrants._lib.arch import Arch
from quadrants import types as types
from quadrants.types import DataType, MatrixType, Template as Template, VectorType

__version__: tuple[int, ...]  # (major, minor, patch)
__version_str__: str
cfg: Any  # the current qd.init()'s options (qd._lib.runtime.Config), None before qd.init()

_P = ParamSpec("_P")
_R = TypeVar("_R")
_F = TypeVar("_F", bound=Callable[..., Any])

# --- dtypes ------------------------------------------------------------------------------------
i8: DataType
i16: DataType
i32: DataType
i64: DataType
u1: DataType
u8: DataType
u16: DataType
u32: DataType
u64: DataType
f16: DataType
f32: DataType
f64: DataType
int8: DataType
int16: DataType
int32: DataType
int64: DataType
uint8: DataType
uint16: DataType
uint32: DataType
uint64: DataType
float16: DataType
float32: DataType
float64: DataType
half: DataType

_DTypeLike: TypeAlias = DataType | type[int] | type[float] | np.dtype[Any] | type[np.generic]
_ElementDType: TypeAlias = _DTypeLike | VectorType | MatrixType
_Shape: TypeAlias = int | Sequence[int]



def template() -> Template: ...
def ref(dtype: Any) -> Any: ...  # a @qd.func parameter by reference

# --- start-up ----------------------------------------------------------------------------------
cpu: Arch
cuda: Arch
amdgpu: Arch
vulkan: Arch
metal: Arch
gpu: list[Arch]
x64: Arch  # = cpu
x86_64: Arch
arm64: Arch  # = cpu
extension: Any  # qd._lib.core.Extension
def is_extension_enabled(ext: Any) -> bool: ...
def clock_freq_hz() -> float: ...

# --- logging (quadrants/_lib/log.py) -------------------------------------------------------------
TRACE: str
DEBUG: str
INFO: str
WARN: str
ERROR: str
CRITICAL: str
def set_logging_level(level: str) -> None: ...

# Every option of quadrants/_lib/options.py (docs/getting_started.md); an unknown one raises KeyError.
def init(
    arch: Arch | str | Sequence[Arch | str] | None = None,
    default_fp: _DTypeLike | None = None,
    default_ip: _DTypeLike | None = None,
    enable_fallback: bool = True,
    require_version: str | None = None,
    _test_mode: bool = False,
    *,
    debug: bool = ...,
    check_out_of_bound: bool = ...,
    print_ir: bool = ...,
    cpu_max_num_threads: int = ...,
    vulkan_disable_caps: Sequence[str] = ...,
    device: str = ...,
    fast_math: bool = ...,
    subgroup_aggregation: bool = ...,
    constant_folding: bool = ...,
    interleave_iterations: bool = ...,
    deterministic: bool = ...,
    offline_cache: bool = ...,
    offline_cache_file_path: str = ...,
    log_level: str = ...,
    raise_on_templated_floats: bool = ...,
    short_circuit_operators: bool = ...,
    src_ll_cache: bool = ...,
    advanced_optimization: bool = ...,
    ad_stack_size: int = ...,
    ad_stack_experimental_enabled: bool = ...,
    random_seed: int = ...,
    print_full_traceback: bool = ...,
    device_memory_GB: float = ...,
    device_memory_fraction: float = ...,
    kernel_profiler: bool = ...,
    cuda_stack_limit: int = ...,
    verbose: bool = ...,
    debug_dump_path: str = ...,
    print_kernel_llvm_ir: bool = ...,
    num_compile_threads: int = ...,
    real_matrix_scalarize: bool = ...,
    print_non_pure: bool = ...,
    gdb_trigger: bool = ...,
    unrolling_limit: int = ...,
    opt_level: int = ...,
    external_optimization_level: int = ...,
    max_vector_width: int = ...,
    cfg_optimization: bool = ...,
    use_llvm: bool = ...,
    print_preprocessed_ir: bool = ...,
    print_ir_dbg_info: bool = ...,
    print_accessor_ir: bool = ...,
    print_struct_llvm_ir: bool = ...,
    print_kernel_llvm_ir_optimized: bool = ...,
    print_kernel_asm: bool = ...,
    print_kernel_amdgcn: bool = ...,
    simplify_before_lower_access: bool = ...,
    lower_access: bool = ...,
    simplify_after_lower_access: bool = ...,
    move_loop_invariant_outside_if: bool = ...,
    cache_loop_invariant_global_vars: bool = ...,
    default_cpu_block_dim: int = ...,
    cpu_block_dim_adaptive: bool = ...,
    default_gpu_block_dim: int = ...,
    gpu_max_reg: int = ...,
    saturating_grid_dim: int = ...,
    max_block_dim: int = ...,
    verbose_kernel_launches: bool = ...,
    demote_dense_struct_fors: bool = ...,
    timeline: bool = ...,
    ad_stack_sparse_threshold_bytes: int = ...,
    flatten_if: bool = ...,
    make_thread_local: bool = ...,
    make_block_local: bool = ...,
    detect_read_only: bool = ...,
    force_scalarize_matrix: bool = ...,
    half2_vectorization: bool = ...,
    make_cpu_multithreading_loop: bool = ...,
    quant_opt_store_fusion: bool = ...,
    quant_opt_atomic_demotion: bool = ...,
    make_mesh_block_local: bool = ...,
    optimize_mesh_reordered_mapping: bool = ...,
    mesh_localize_to_end_mapping: bool = ...,
    mesh_localize_from_end_mapping: bool = ...,
    mesh_localize_all_attr_mappings: bool = ...,
    demote_no_access_mesh_fors: bool = ...,
    experimental_auto_mesh_local: bool = ...,
    auto_mesh_local_default_occupacy: int = ...,
    vk_api_version: str = ...,
    external_metal_command_queue: int = ...,
    external_metal_command_queue_is_torch_queue: bool = ...,
    offline_cache_cleaning_policy: str = ...,
    offline_cache_max_size_of_files: int = ...,
    offline_cache_cleaning_factor: float = ...,
) -> Any: ...
def reset() -> None: ...
def sync() -> None: ...
def is_arch_available(arch: Arch) -> bool: ...
def vulkan_caps() -> dict[str, Any]: ...
@overload
def atomic_support(op: str, dtype: _DTypeLike | str, arch: Arch | str | None = None) -> str: ...
@overload
def atomic_support(op: str | None = None, dtype: None = None, arch: Arch | str | None = None) -> dict[str, dict[str, str]]: ...
@overload
def atomic_support(op: None = None, *, dtype: _DTypeLike | str, arch: Arch | str | None = None) -> dict[str, dict[str, str]]: ...

# --- data --------------------------------------------------------------------------------------
class SNodeTree:
    def destroy(self) -> None: ...
class FieldsBuilder:
    """qd.FieldsBuilder(): fb.dense(qd.i, n).place(x); tree = fb.finalize(); tree.destroy() frees them."""
    def dense(self, axes: Any, dimensions: int | Sequence[int]) -> Any: ...
    def place(self, *fields: Field) -> Any: ...
    def finalize(self, raise_warning: bool = True) -> SNodeTree: ...
    @property
    def finalized(self) -> bool: ...
def field(dtype: _ElementDType, shape: _Shape | None = None, name: str | None = None,
          offset: int | Sequence[int] | None = None, order: str | None = None, needs_grad: bool = False,
          needs_dual: bool = False) -> Field: ...
def ndarray(dtype: _ElementDType, shape: _Shape, needs_grad: bool = False) -> Ndarray: ...
def tensor(dtype: _ElementDType, shape: _Shape, *, backend: Backend | int = ..., layout: tuple[int, ...] | None = None,
           needs_grad: bool = False) -> Tensor: ...
def wrap(impl: Field | Ndarray | Tensor) -> Tensor: ...

root: Any
i: Axis
j: Axis
k: Axis
l: Axis
ij: Axis
ijk: Axis
ijkl: Axis

# --- kernels -----------------------------------------------------------------------------------
class _Kernel(Generic[_P, _R]):
    """A @qd.kernel: called like the function it decorates, compiled on the first call."""

    num_compilations: int
    fastcache: bool
    def __call__(self, *args: _P.args, **kwargs: _P.kwargs) -> _R: ...

@overload
def kernel(fn: Callable[_P, _R]) -> _Kernel[_P, _R]: ...
@overload
def kernel(fn: None = None, *, fastcache: bool = False, pure: bool | None = None, deterministic: bool | None = None, graph: bool = False) -> Callable[[Callable[_P, _R]], _Kernel[_P, _R]]: ...
@overload
def func(fn: _F) -> _F: ...
@overload
def func(fn: None = None, *, requires_top_level: bool = False) -> Callable[[_F], _F]: ...
def real_func(fn: _F) -> _F: ...
@overload
def pure(fn: _Kernel[_P, _R]) -> _Kernel[_P, _R]: ...
@overload
def pure(fn: Callable[_P, _R]) -> _Kernel[_P, _R]: ...
def compile(
    kernel: _Kernel[..., Any], *args: Any, arch: Arch | str | None = None, features: Sequence[str] | None = None,
    **kwargs: Any
) -> Artifacts: ...

# --- inside kernels (also callable from Python on Python numbers where noted in their docs) --------
def static(x: Any, *more: Any) -> Any: ...
def static_assert(cond: Any, msg: str | None = ...) -> None: ...
def random(dtype: Any = ...) -> Any: ...
def randn(dt: Any = ...) -> Any: ...
def dataclass(cls: type) -> StructType: ...
_C = TypeVar("_C", bound=type)
@overload
def data_oriented(cls: _C) -> _C: ...
@overload
def data_oriented(cls: None = None, *, template_primitives: bool = True) -> Callable[[_C], _C]: ...
def ndrange(*dims: int | tuple[int, int] | Any) -> Any: ...
def get_addr(f: Any, indices: Any) -> Any: ...
def grouped(x: Any) -> Any: ...
def loop_config(*, serialize: bool = ..., block_dim: int = ..., parallelize: int = ...) -> None: ...
def cast(x: Any, dtype: _DTypeLike) -> Any: ...
def bit_cast(x: Any, dtype: _DTypeLike) -> Any: ...
def bit_shr(a: Any, b: Any) -> Any: ...
def raw_mod(a: Any, b: Any) -> Any: ...
def raw_div(a: Any, b: Any) -> Any: ...
def select(cond: Any, a: Any, b: Any) -> Any: ...
def outer(a: Any, b: Any) -> Any: ...  # tile -= qd.outer(u, v) (qd.simt.Tile16x16 / Tile32x32)
def zero(x: Any) -> Any: ...
def one(x: Any) -> Any: ...
def abs(x: Any) -> Any: ...
def min(*xs: Any) -> Any: ...
def max(*xs: Any) -> Any: ...
def sqrt(x: Any) -> Any: ...
def rsqrt(x: Any) -> Any: ...
def stop_grad(x: Field) -> None: ...
def block_local(*fields: Field) -> None: ...
def sin(x: Any) -> Any: ...
def cos(x: Any) -> Any: ...
def tan(x: Any) -> Any: ...
def asin(x: Any) -> Any: ...
def acos(x: Any) -> Any: ...
def atan(x: Any) -> Any: ...
def atan2(y: Any, x: Any) -> Any: ...
def exp(x: Any) -> Any: ...
def log(x: Any) -> Any: ...
def tanh(x: Any) -> Any: ...
def floor(x: Any) -> Any: ...
def ceil(x: Any) -> Any: ...
def round(x: Any) -> Any: ...
def pow(x: Any, y: Any) -> Any: ...

# Per-thread linear algebra (docs/linalg.md): each thread decomposes / solves its own small matrix.
# Inside kernels only; dt (qd.f32 or qd.f64) defaults to qd.init()'s default_fp.
def svd(A: Any, dt: _DTypeLike | None = None) -> tuple[Any, Any, Any]: ...
def polar_decompose(A: Any, dt: _DTypeLike | None = None) -> tuple[Any, Any]: ...
def sym_eig(A: Any, dt: _DTypeLike | None = None) -> tuple[Any, Any]: ...
def make_spd(A: Any, dt: _DTypeLike | None = None) -> Any: ...
def eig(A: Any, dt: _DTypeLike | None = None) -> tuple[Any, Any]: ...
def solve(A: Any, b: Any, dt: _DTypeLike | None = None) -> Any: ...

# Memory order and scope of atomics (docs/atomics.md, "Memory order and scope").
class MemoryOrder:
    Relaxed: MemoryOrder
    Acquire: MemoryOrder
    Release: MemoryOrder
    AcqRel: MemoryOrder
    @property
    def name(self) -> str: ...
    @property
    def value(self) -> int: ...

class MemScope:
    Block: MemScope
    Device: MemScope
    System: MemScope
    @property
    def name(self) -> str: ...
    @property
    def value(self) -> int: ...

# The atomic family (docs/atomics.md): each returns the old value of x; memory_order / memory_scope
# are keyword-only (default Relaxed at Device scope).
def atomic_add(x: Any, y: Any, *, memory_order: MemoryOrder = ..., memory_scope: MemScope = ...) -> Any: ...
def atomic_sub(x: Any, y: Any, *, memory_order: MemoryOrder = ..., memory_scope: MemScope = ...) -> Any: ...
def atomic_mul(x: Any, y: Any, *, memory_order: MemoryOrder = ..., memory_scope: MemScope = ...) -> Any: ...
def atomic_min(x: Any, y: Any, *, memory_order: MemoryOrder = ..., memory_scope: MemScope = ...) -> Any: ...
def atomic_max(x: Any, y: Any, *, memory_order: MemoryOrder = ..., memory_scope: MemScope = ...) -> Any: ...
def atomic_and(x: Any, y: Any, *, memory_order: MemoryOrder = ..., memory_scope: MemScope = ...) -> Any: ...
def atomic_or(x: Any, y: Any, *, memory_order: MemoryOrder = ..., memory_scope: MemScope = ...) -> Any: ...
def atomic_xor(x: Any, y: Any, *, memory_order: MemoryOrder = ..., memory_scope: MemScope = ...) -> Any: ...
def atomic_exchange(x: Any, y: Any, *, memory_order: MemoryOrder = ..., memory_scope: MemScope = ...) -> Any: ...
def atomic_cas(x: Any, expected: Any, desired: Any, *, memory_order: MemoryOrder = ..., memory_scope: MemScope = ...) -> Any: ...
def atomic_inc(x: Any, bound: Any, *, memory_order: MemoryOrder = ..., memory_scope: MemScope = ...) -> Any: ...
def atomic_dec(x: Any, bound: Any, *, memory_order: MemoryOrder = ..., memory_scope: MemScope = ...) -> Any: ...
def atomic_load(x: Any, *, memory_order: MemoryOrder = ..., memory_scope: MemScope = ...) -> Any: ...
def atomic_store(x: Any, value: Any, *, memory_order: MemoryOrder = ..., memory_scope: MemScope = ...) -> None: ...
def atomic_fence(*, memory_order: MemoryOrder = ..., memory_scope: MemScope = ...) -> None: ...
def volatile_load(x: Any) -> Any: ...
