"""qd.math: GLSL-style vector/matrix types, the math intrinsics, constants, and vector functions.

The types (vec2..4 of floats, ivec2..4 of ints, uvec2..4 of u32, mat2..4 of floats) are dtypes for
fields and ndarrays, annotations, and constructors in and out of kernels. The functions work on
scalars and, element-wise, on vectors/matrices; they follow GLSL where GLSL has the function.
"""
import math as _math

import numpy as _np

from quadrants.lang.ast import context as _context
from quadrants import types as _T
from quadrants.kernels.kernel import Func as _Func
from quadrants.lang.matrix import Matrix as _Matrix
from quadrants.lang.ops import (  # noqa: F401
    acos, asin, atan, atan2, ceil, cos, exp, floor, log, max, min, pow, round, sin, sqrt, tan, tanh,
)
from quadrants.lang.ast.values import MatrixValue as _MV
from quadrants.lang import ops

# Python floats: in a kernel they are compile-time constants of the default float type, or of the
# type they are cast to (qd.cast(qd.math.nan, qd.f64)).
nan, inf, pi, e = _math.nan, _math.inf, _math.pi, _math.e

vec2, vec3, vec4 = (_T.VectorType(n, float) for n in (2, 3, 4))
ivec2, ivec3, ivec4 = (_T.VectorType(n, int) for n in (2, 3, 4))
uvec2, uvec3, uvec4 = (_T.VectorType(n, _T.u32) for n in (2, 3, 4))
mat2, mat3, mat4 = (_T.MatrixType(n, n, float) for n in (2, 3, 4))


class _MathFunc(_Func):
    """A qd.math function: inlined in kernels; in Python scope it runs on numbers and numpy arrays."""

    def __call__(self, *args, **kwargs):  # Python scope
        _context.check_numeric(f"qd.math.{self.func.__name__}()", *args, *kwargs.values())
        return self.func(*args, **kwargs)

    def inline(self, ctx, args, kwargs, self_lvalue=False):  # in kernels
        _context.check_numeric(f"qd.math.{self.func.__name__}()", *args, *kwargs.values())
        return super().inline(ctx, args, kwargs, self_lvalue)


def _func(f):
    return _MathFunc(f)


def _builtin(f):
    f._qd_builtin = True
    return f


@_func
def mix(x, y, a):
    """x * (1 - a) + y * a."""
    return x * (1.0 - a) + y * a


@_func
def clamp(x, xmin, xmax):
    """min(max(x, xmin), xmax), element-wise."""
    return min(max(x, xmin), xmax)


@_func
def step(edge, x):
    """0.0 where x < edge, else 1.0 (element-wise, in the default float type)."""
    return _cast_fp(x >= edge)


@_func
def fract(x):
    """x - floor(x)."""
    return x - floor(x)


@_func
def smoothstep(edge0, edge1, x):
    """Hermite interpolation: 0 below edge0, 1 above edge1, t*t*(3 - 2t) between."""
    t = clamp((x - edge0) / (edge1 - edge0), 0.0, 1.0)
    return t * t * (3.0 - 2.0 * t)


@_func
def sign(x):
    """-1.0, 0.0 or 1.0 (in the default float type); 0.0 for NaN."""
    return _cast_fp(x >= 0) - _cast_fp(x <= 0)


@_func
def normalize(v):
    """v / |v|."""
    return v / v.norm()


@_func
def length(x):
    """The Euclidean norm of a vector."""
    return x.norm()


@_func
def distance(x, y):
    """|x - y|."""
    return (x - y).norm()


@_func
def dot(x, y):
    return x.dot(y)


@_func
def cross(x, y):
    """The cross product of two 3-vectors (a scalar for two 2-vectors)."""
    return x.cross(y)


@_func
def log2(x):
    return log(x) * (1.0 / _math.log(2.0))


@_func
def exp2(x):
    return exp(x * _math.log(2.0))


@_func
def degrees(x):
    return x * (180.0 / _math.pi)


@_func
def radians(x):
    return x * (_math.pi / 180.0)


@_func
def reflect(x, n):
    """x - 2 dot(x, n) n (n normalized)."""
    return x - 2.0 * x.dot(n) * n


@_func
def refract(x, n, eta):
    """GLSL refract: the zero vector on total internal reflection."""
    d = x.dot(n)
    k = 1.0 - eta * eta * (1.0 - d * d)
    r = x * 0.0
    if k >= 0.0:
        r = eta * x - (eta * d + sqrt(k)) * n
    return r


@_func
def mod(x, y):
    """GLSL mod: x - y * floor(x / y)."""
    return x - y * floor(x / y)


@_func
def translate(dx, dy, dz):
    """The 4x4 homogeneous translation matrix."""
    return mat4([[1.0, 0.0, 0.0, dx], [0.0, 1.0, 0.0, dy], [0.0, 0.0, 1.0, dz], [0.0, 0.0, 0.0, 1.0]])


@_func
def scale(sx, sy, sz):
    """The 4x4 homogeneous scaling matrix."""
    return mat4([[sx, 0.0, 0.0, 0.0], [0.0, sy, 0.0, 0.0], [0.0, 0.0, sz, 0.0], [0.0, 0.0, 0.0, 1.0]])


@_func
def rotation2d(ang):
    """The 2x2 counter-clockwise rotation by `ang` radians."""
    c = cos(ang)
    s = sin(ang)
    return mat2([[c, -s], [s, c]])


@_func
def rot_by_axis(axis, ang):
    """The 4x4 homogeneous rotation by `ang` radians about `axis` (normalized here)."""
    c = cos(ang)
    s = sin(ang)
    u = normalize(axis)
    t = (1.0 - c) * u
    return mat4([[c + t[0] * u[0], t[0] * u[1] + s * u[2], t[0] * u[2] - s * u[1], 0.0],
                 [t[1] * u[0] - s * u[2], c + t[1] * u[1], t[1] * u[2] + s * u[0], 0.0],
                 [t[2] * u[0] + s * u[1], t[2] * u[1] - s * u[0], c + t[2] * u[2], 0.0],
                 [0.0, 0.0, 0.0, 1.0]])


@_func
def rot_yaw_pitch_roll(yaw, pitch, roll):
    """The 4x4 homogeneous rotation by Euler angles: about Y (yaw), then X (pitch), then Z (roll)."""
    cy = cos(yaw)
    sy = sin(yaw)
    cp = cos(pitch)
    sp = sin(pitch)
    cr = cos(roll)
    sr = sin(roll)
    return mat4([[cy * cr + sy * sp * sr, sr * cp, -sy * cr + cy * sp * sr, 0.0],
                 [-cy * sr + sy * sp * cr, cr * cp, sr * sy + cy * sp * cr, 0.0],
                 [sy * cp, -sp, cy * cp, 0.0],
                 [0.0, 0.0, 0.0, 1.0]])


@_func
def rotation3d(ang_x, ang_y, ang_z):
    """rot_yaw_pitch_roll(ang_z, ang_x, ang_y), as Quadrants defines it."""
    return rot_yaw_pitch_roll(ang_z, ang_x, ang_y)


@_func
def vdir(ang):
    """The unit 2-vector at angle `ang`."""
    return vec2(cos(ang), sin(ang))


@_func
def determinant(m):
    return m.determinant()


@_func
def inverse(m):
    """The inverse of a 2x2, 3x3 or 4x4 matrix."""
    return m.inverse()


@_builtin
def eye(n):
    """The n x n identity matrix of the default float type."""
    return _Matrix.identity(float, n)


# --- complex numbers as 2-vectors (re, im) -----------------------------------------------------
@_func
def cmul(z1, z2):
    return vec2(z1[0] * z2[0] - z1[1] * z2[1], z1[0] * z2[1] + z1[1] * z2[0])


@_func
def cconj(z):
    return vec2(z[0], -z[1])


@_func
def cdiv(z1, z2):
    return vec2(z1[0] * z2[0] + z1[1] * z2[1], z1[1] * z2[0] - z1[0] * z2[1]) / z2.dot(z2)


@_func
def cinv(z):
    return cconj(z) / z.dot(z)


@_func
def csqrt(z):
    """The square root with a non-negative real part (the zero vector for zero)."""
    r = vec2(0.0)
    if z[0] != 0 or z[1] != 0:
        a = atan2(z[1], z[0]) * 0.5
        r = sqrt(z.norm()) * vec2(cos(a), sin(a))
    return r


@_func
def cpow(z, n):
    """z ** n for a real n (the zero vector for z = 0)."""
    r = vec2(0.0)
    if z[0] != 0 or z[1] != 0:
        a = atan2(z[1], z[0]) * n
        r = pow(z.dot(z), n * 0.5) * vec2(cos(a), sin(a))
    return r


@_func
def cexp(z):
    m = exp(z[0])
    return vec2(m * cos(z[1]), m * sin(z[1]))


@_func
def clog(z):
    """The principal logarithm: argument in (-pi, pi]."""
    return vec2(log(z.dot(z)) * 0.5, atan2(z[1], z[0]))


# --- classification: exact bit tests (fast-math cannot fold them away) -----------------------
def _classify(x, test):
    ctx = _context.current()
    if ctx is None:
        return test(None, x)
    x = ctx.rvalue(x)
    if isinstance(x, _MV):
        return _MV([_classify(e, test) for e in x.entries], x.shape)
    if _context.is_py_scalar(x):
        return int(test(None, float(x)))
    return test(ctx, x)


def _bits_test(ctx, x, kind):

    if not x.dtype.is_real:
        return ctx.const(0, _T.i32)
    if x.dtype is _T.f64:
        bits = ctx.binary("bit_and", ops.bit_cast(x, _T.u64), 0x7FFFFFFFFFFFFFFF)
        inf_bits = 0x7FF0000000000000
    else:
        bits = ctx.binary("bit_and", ops.bit_cast(ctx.cast(x, _T.f32), _T.u32), 0x7FFFFFFF)
        inf_bits = 0x7F800000
    return ctx.binary("gt" if kind == "nan" else "eq", bits, inf_bits)


@_builtin
def isnan(x):
    """1 where x is a NaN, else 0 (element-wise; integers are never NaN)."""
    _context.check_numeric("qd.math.isnan()", x)
    return _classify(x, lambda ctx, v: _np.isnan(v) if ctx is None else _bits_test(ctx, v, "nan"))


@_builtin
def isinf(x):
    """1 where x is +inf or -inf, else 0 (element-wise)."""
    _context.check_numeric("qd.math.isinf()", x)
    return _classify(x, lambda ctx, v: _np.isinf(v) if ctx is None else _bits_test(ctx, v, "inf"))


# --- bit counting: the IR's PopCount / Clz / Ctz on the unsigned bits, in the type's own width -------
# (llvm.ctpop / ctlz / cttz: PTX popc / clz, AMDGPU v_bcnt / v_ffbh / v_ffbl; SPIR-V OpBitCount,
# FindUMsb, FindILsb, on 32-bit words: legalization widens or splits other widths there)
def _bit_count(name, x):
    _context.check_numeric(f"qd.math.{name}()", x)
    ctx = _context.current()
    if ctx is None:
        return _py_bits(name, x)
    x = ctx.rvalue(x)
    if isinstance(x, _MV):
        return _MV([_bit_count(name, e) for e in x.entries], x.shape)
    x = ctx.scalar(x)
    if x.dtype.is_real:
        ctx.type_error(f"qd.math.{name} takes integral inputs only, got {x.dtype}")
    if x.dtype is _T.u1:
        x = ctx.cast(x, _T.i32)
    u = ctx.expr(ctx.b.bitcast(x.stmt, getattr(_T, f"u{x.dtype.bits}").core))
    op = {"popcnt": "popcnt", "clz": "clz", "ffs": "ctz"}[name]
    n = ctx.cast(ctx.unary(op, u), _T.i32)
    if name != "ffs":
        return n
    return ops.select(ctx.binary("eq", u, 0), ctx.const(0, _T.i32), ctx.binary("add", n, 1))


def _py_bits(name, x):
    arr = _np.asarray(x)
    bits = arr.dtype.itemsize * 8
    u = arr.astype(_np.uint64) & ((1 << bits) - 1) if arr.dtype.kind == "i" else arr.astype(_np.uint64)

    def one(v):
        v = int(v)
        if name == "popcnt":
            return bin(v).count("1")
        if name == "clz":
            return bits - v.bit_length()
        return (v & -v).bit_length()
    out = _np.vectorize(one, otypes=[_np.int32])(u)
    return out if out.ndim else int(out)


@_builtin
def popcnt(x):
    """The number of set bits of an integer (element-wise), as i32."""
    return _bit_count("popcnt", x)


@_builtin
def clz(x):
    """The number of leading zero bits in the integer's own width (the width for 0), as i32."""
    return _bit_count("clz", x)


@_builtin
def ffs(x):
    """The 1-based position of the lowest set bit (0 for 0), as i32."""
    return _bit_count("ffs", x)


@_builtin
def fns(mask, base, offset):
    """CUDA's __fns: the position of the |offset|-th set bit of `mask` (u32), scanning up from bit
    `base` (u32; offset > 0) or down from it (offset < 0), both inclusive; offset 0 gives `base` if
    that bit is set. 0xFFFFFFFF when there is no such bit. PTX fns.b32 on CUDA, a 32-step loop
    elsewhere."""
    ctx = _context.current()
    if ctx is None:
        return _py_fns(int(mask), int(base), int(offset))
    m, b, o = (ctx.scalar(ctx.rvalue(v)) for v in (mask, base, offset))
    return ctx.expr(ctx.b.fns(m.stmt, b.stmt, o.stmt))


def _py_fns(mask, base, offset):
    mask &= 0xFFFFFFFF
    if offset == 0:
        return base if base < 32 and (mask >> base) & 1 else 0xFFFFFFFF
    order = range(base, 32) if offset > 0 else range(min(base, 31), -1, -1)
    hits = [p for p in order if (mask >> p) & 1]
    return hits[abs(offset) - 1] if len(hits) >= abs(offset) else 0xFFFFFFFF


@_builtin
def _cast_fp(x):
    ctx = _context.current()
    if ctx is None:
        return _np.asarray(x, dtype=_np.float32) if _np.ndim(x) else float(x)
    return ctx.cast(x, ctx.config.default_fp)


__all__ = [
    "acos", "asin", "atan", "atan2", "cconj", "cdiv", "ceil", "cexp", "cinv", "clamp", "clog", "cmul", "cos",
    "clz", "cpow", "cross", "csqrt", "degrees", "determinant", "distance", "dot", "e", "exp", "exp2", "eye", "ffs", "floor", "fns",
    "fract", "inf", "inverse", "isinf", "isnan", "ivec2", "ivec3", "ivec4", "length", "log", "log2", "mat2",
    "mat3", "mat4", "max", "min", "mix", "mod", "nan", "normalize", "pi", "popcnt", "pow", "radians", "reflect", "refract",
    "rot_by_axis", "rot_yaw_pitch_roll", "rotation2d", "rotation3d", "round", "scale", "sign", "sin",
    "smoothstep", "sqrt", "step", "tan", "tanh", "translate", "uvec2", "uvec3", "uvec4", "vdir", "vec2", "vec3",
    "vec4",
]
