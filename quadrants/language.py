"""The kernel language as one namespace: what `qd.` offers below the libraries written in it.

quadrants.math, quadrants.linalg and quadrants.algorithms are written in the kernel language
(@qd.func, qd.cast, qd.static, fields, ...) and import this module as `qd`; the public namespace
(quadrants/__init__.py) is this module plus those libraries.
"""
from quadrants import _lib, types  # noqa: F401  (qd._lib.core, qd.types.ndarray, qd.types.vector, ...)
from quadrants._lib import runtime as _runtime
from quadrants._lib.runtime import (  # noqa: F401
    amdgpu, cpu, cuda, gpu, init, is_arch_available, metal, reset, sync, vulkan, vulkan_caps,
)
from quadrants._lib.support import atomic_support  # noqa: F401
from quadrants._lib import log as _logging  # noqa: F401  (qd._logging.is_logging_effective, as Quadrants has it)
from quadrants._lib.log import CRITICAL, DEBUG, ERROR, INFO, TRACE, WARN, set_logging_level  # noqa: F401
from quadrants.kernels.classes import data_oriented, dataclass  # noqa: F401
from quadrants.kernels.kernel import compile, func, kernel, pure, real_func  # noqa: F401
from quadrants.lang import exception, graph, impl, simt  # noqa: F401  (qd.lang.impl, qd.lang.exception, qd.graph, qd.simt)
from quadrants.lang.matrix import Matrix, Vector  # noqa: F401
from quadrants.lang import misc, ops, util  # noqa: F401  (qd.lang.misc, qd.lang.ops, qd.lang.util)
from quadrants.lang.misc import block_local, is_extension_enabled  # noqa: F401
from quadrants.lang.impl import clock_freq_hz  # noqa: F401
from quadrants.lang.ops import ATOMIC_OPS as _ATOMIC_OPS
from quadrants.lang.ops import (  # noqa: F401
    MemoryOrder, MemScope, abs, acos, asin, atan, atan2, atomic_fence, atomic_load, atomic_store, bit_cast, bit_shr,
    cast, ceil, cos, exp, floor, get_addr, grouped, log, loop_config, max, min, ndrange, pow, randn, random, raw_div,
    raw_mod, round, rsqrt, select, sin, sqrt, static, static_assert, tan, tanh, volatile_load,
)
from quadrants.lang.ops import one, stop_grad, zero  # noqa: F401
from quadrants.lang.simt._tile import outer  # noqa: F401  (tile -= qd.outer(u, v))
from quadrants.memory.field import Field, MatrixField, ScalarField, SNode, field, i, ij, ijk, ijkl, j, k, l, root  # noqa: F401
from quadrants.memory.ndarray import MatrixNdarray, Ndarray, ScalarNdarray, VectorNdarray, ndarray  # noqa: F401
from quadrants.memory.field import FieldsBuilder, SNodeTree  # noqa: F401
from quadrants.memory.struct import Struct, StructField  # noqa: F401
from quadrants.memory.buffer_view import BufferView  # noqa: F401
from quadrants.memory.tensor import Backend, MatrixTensor, Tensor, VectorTensor, tensor, wrap  # noqa: F401
from quadrants.types import Template, f16, f32, f64, i8, i16, i32, i64, template, u1, u8, u16, u32, u64  # noqa: F401
from quadrants.types import ref  # noqa: F401  (qd.ref(qd.f32): a func parameter by reference)
from quadrants.types.exceptions import (  # noqa: F401
    QuadrantsAssertionError, QuadrantsCompilationError, QuadrantsIndexError, QuadrantsNameError,
    QuadrantsOutOfBoundsError, QuadrantsRuntimeError, QuadrantsRuntimeTypeError, QuadrantsSyntaxError,
    QuadrantsTypeError,
)

globals().update({f"atomic_{_name}": _fn for _name, _fn in _ATOMIC_OPS.items()})

int8, int16, int32, int64 = i8, i16, i32, i64
uint8, uint16, uint32, uint64 = u8, u16, u32, u64
float16, float32, float64 = f16, f32, f64
half = f16
x64 = x86_64 = cpu
arm64 = cpu  # the cpu arch on an arm64 host: the same LLVM cpu backend (qd.cpu)
extension = _lib.core.Extension


def _current_config():
    """The current qd.init()'s configuration (qd.cfg), None before qd.init()."""
    return _runtime._program.config if _runtime._program is not None else None
