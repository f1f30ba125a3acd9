"""Quadrants: a Python-embedded JIT compiler for parallel kernels.

    import quadrants as qd
    qd.init(arch=qd.cpu)
"""
import os as _os

if _os.environ.get("QD_CORE_DIR"):  # development: a _core built elsewhere
    __path__.insert(0, _os.environ["QD_CORE_DIR"])

from quadrants._version import __version__ as __version_str__  # noqa: E402

__version__ = tuple(int(p) for p in __version_str__.split("."))  # (major, minor, patch), as Quadrants has it
from quadrants.lang import math  # noqa: E402
from quadrants.lang.exception import (  # noqa: E402
    QuadrantsAssertionError, QuadrantsCompilationError, QuadrantsIndexError, QuadrantsNameError,
    QuadrantsOutOfBoundsError, QuadrantsRuntimeError, QuadrantsRuntimeTypeError, QuadrantsSyntaxError,
    QuadrantsTypeError,
)
from quadrants.lang.field import Field, field, i, ij, ijk, ijkl, j, k, l, root  # noqa: E402
from quadrants.lang.kernel import compile, func, kernel, real_func  # noqa: E402
from quadrants.lang.linalg import eig, make_spd, polar_decompose, solve, svd, sym_eig  # noqa: E402
from quadrants.lang.matrix import Matrix, Vector  # noqa: E402
from quadrants.lang.ndarray import Ndarray, ndarray  # noqa: E402
from quadrants.lang.ops import (  # noqa: E402
    abs, acos, asin, atan, atan2, bit_cast, bit_shr, cast, ceil, cos, exp, floor, grouped, log, loop_config, max, min,
    ndrange, pow, randn, random, round, select, sin, sqrt, static, static_assert, tan, tanh, volatile_load,
)
from quadrants.lang.struct import Struct, StructField, data_oriented, dataclass  # noqa: E402
from quadrants.lang.ops import ATOMIC_OPS as _ATOMIC_OPS  # noqa: E402
from quadrants.lang.ops import MemoryOrder, MemScope, atomic_fence, atomic_load, atomic_store  # noqa: E402
from quadrants.lang.runtime import amdgpu, cpu, cuda, gpu, init, is_arch_available, metal, reset, sync, vulkan  # noqa
from quadrants.lang.runtime import vulkan_caps  # noqa: E402
from quadrants.lang.support import atomic_support  # noqa: E402
from quadrants.lang.types import (  # noqa: E402
    Template, f16, f32, f64, i8, i16, i32, i64, template, types, u1, u8, u16, u32, u64,
)
from quadrants import _lib  # noqa: E402
from quadrants.lang import exception, impl  # noqa: E402,F401  (qd.lang.impl, qd.lang.exception)
from quadrants.lang import simt  # noqa: E402  (qd.simt.block, qd.simt.grid)
from quadrants import algorithms  # noqa: E402  (qd.algorithms: device-wide reduce, scan, select, sort)
import sys as _sys  # noqa: E402

_sys.modules.setdefault("quadrants.math", math)  # `from quadrants.math import vec4`

globals().update({f"atomic_{_name}": _fn for _name, _fn in _ATOMIC_OPS.items()})

int8, int16, int32, int64 = i8, i16, i32, i64
uint8, uint16, uint32, uint64 = u8, u16, u32, u64
float16, float32, float64 = f16, f32, f64
half = f16
x64 = x86_64 = cpu
extension = _lib.core.Extension


def __getattr__(name):
    if name == "cfg":  # the current qd.init()'s configuration, None before qd.init()
        from quadrants.lang import runtime as _runtime

        return _runtime._program.config if _runtime._program is not None else None
    raise AttributeError(f"module 'quadrants' has no attribute '{name}'")
