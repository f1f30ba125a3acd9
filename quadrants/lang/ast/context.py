"""The state of one kernel being built: how front-end values become IR statements (constants,
loads, promotion of Python numbers, element-wise vectors), memory accesses and atomics. The AST
walker (builder.py) and the intrinsics (ops.py) both go through it.
"""
import operator

import numpy as np

from quadrants._lib import _core
from quadrants import types as T
from quadrants.types import scope
from quadrants.types.primitive_types import describe, is_py_scalar  # noqa: F401  (the front end's helpers)
from quadrants._lib import runtime
from quadrants.types.exceptions import QuadrantsSyntaxError, QuadrantsTypeError
from quadrants.memory.field import Field, program_field
from quadrants.memory.host import PyMatrix
from quadrants.lang.ast.values import DynIndex, Expr, MatrixValue, NdarrayArg, Ptr, Var, ViewValue
from quadrants.lang import printing
from quadrants.memory.struct import ANONYMOUS, StructField, StructValue

current = scope.current  # the kernel being built, or None outside kernels


def require(name):
    ctx = scope.current()
    if ctx is None:
        raise RuntimeError(f"{name} can only be used inside a @qd.kernel or @qd.func")
    return ctx


_PYOPS = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv,
          "floordiv": operator.floordiv, "mod": operator.mod, "pow": operator.pow, "bit_and": operator.and_,
          "bit_or": operator.or_, "bit_xor": operator.xor, "shl": operator.lshift, "shr": operator.rshift,
          "eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le, "gt": operator.gt,
          "ge": operator.ge, "min": min, "max": max, "and_": lambda a, b: int(bool(a and b)),
          "or_": lambda a, b: int(bool(a or b)), "atan2": __import__("math").atan2}


def _fits(v, dtype):
    info = np.iinfo(dtype.np)
    return int(info.min) <= v <= int(info.max)


def is_numeric(v):
    """Whether the math intrinsics take v: a number, a kernel value (scalar, vector, matrix), or a
    numpy array / PyMatrix / sequence of numbers (in Python scope)."""
    if is_py_scalar(v) or isinstance(v, (Expr, Var, Ptr, MatrixValue, DynIndex)):
        return True
    if not isinstance(v, (np.ndarray, list, tuple)):
        return False
    if scope.current() is not None and isinstance(v, (list, tuple)):
        return False  # in kernels a list is not a vector: qd.Vector([...]) is
    try:
        a = np.asarray(v)
    except (ValueError, TypeError):  # ragged
        return False
    return a.dtype.kind in "biuf" or a.dtype.kind == "O" and all(is_py_scalar(e) for e in a.flat)


_OVERFLOW_NAMES = {"add": "Addition", "sub": "Subtraction", "mul": "Multiplication", "shl": "Shift left"}


def type_error(msg):
    """Raises QuadrantsTypeError naming the kernel line while a kernel compiles, else TypeError."""
    if scope.current() is not None:
        scope.current().type_error(msg)
    raise TypeError(msg)


def _typed(v):
    """The dtype of a typed Python-scope scalar (a numpy scalar: what qd.i16(5) and a typed vector's
    entry are), None for a Python number (a literal) or a bool."""
    if isinstance(v, (np.integer, np.floating)):
        try:
            return T.from_numpy(v.dtype)
        except (TypeError, ValueError):  # a numpy type Quadrants has no dtype for (float128)
            return None
    return None


def check_numeric(what, *args):
    """The one argument check of the math intrinsics (qd.sqrt, abs, qd.min, qd.math.*), in both
    scopes: a function, a string, None, a field... is a TypeError naming the intrinsic, not an
    error from deep inside numpy or the IR builder."""
    for a in args:
        if not is_numeric(a):
            type_error(f"{what} takes numbers, vectors or matrices{'' if scope.current() else ' (or numpy arrays)'}, "
                       f"got {describe(a)}")


def _is_runtime(v):
    if isinstance(v, MatrixValue):
        return any(_is_runtime(e) for e in v.entries)
    return isinstance(v, (Expr, Var, Ptr))


def assert_word(prog):
    """A one-element i32 field where a failing kernel assert (debug=True) writes its number."""
    return program_field(prog, "assert", T.i32, (1,), "__qd_assert")


_BITWISE_SYMBOLS = {"bit_and": "&", "bit_or": "|", "bit_xor": "^", "shl": "<<", "shr": ">>"}


class KernelContext:
    """State shared by the kernel and every @qd.func inlined into it."""

    def __init__(self, name, config, tracker):
        self.b = _core.Builder(name, config.default_ip.core, config.default_fp.core)
        self.name = name  # the kernel's, for error messages
        self.config = config
        self.fields = {}  # buffer index -> Field
        self.stop_grad = set()  # fields qd.stop_grad(x) names: no adjoint flows into them
        self.reads_grad = False  # the kernel reads an ndarray's .grad
        self.captured = {}  # id(ndarray) -> (Ndarray, NdarrayArg): ndarrays reached other than as ndarray arguments
        self.loop_config = {}
        self.deterministic = False  # the kernel's deterministic mode (docs/atomics.md)
        self.walker = None  # the FunctionWalker currently emitting
        self.depth = 0      # nesting of if/loops in the kernel body; 0 is kernel scope
        self.in_parallel_loop = False
        self.arch = config.arch  # the arch the kernel is built for (qd.compile may pick another)
        self.shared_arrays = []  # qd.simt.block.SharedArray allocations, in order
        self.written = set()  # buffer indices the kernel stores to (read-only numpy inputs need not be)
        self.inlining = []    # (Func, compile-time key of its arguments) of the @qd.func calls being inlined
        self.real_functions = {}  # (RealFunc, key of its compile-time arguments) -> the core's function index
        self.in_real_function = 0  # nesting of real functions' code being built (kernel.RealFunc)
        self.tracker = tracker  # what the kernel reads from its plain-object template arguments
        self.print_formats = []       # per print() call: (pieces, layout) to format its records
        self.assert_messages = []     # the located message of each run-time assert, numbered from 1
        self.rng_launch_slot = None  # the hidden argument numbering launches, once qd.random is used
        self.rng_loops = []          # per enclosing parallel loop: {"anchor", "thread", "counter"}
        self.rng_kernel = None       # the same for kernel-scope code (thread 0)
        self.block_dim = 0  # the enclosing parallel loop's qd.loop_config(block_dim=...), 0: the default

    # --- random numbers ---------------------------------------------------------------------------
    def rng_stream(self):
        """(counter Var, thread index Expr, launch number Expr) for qd.random at this point."""
        if self.in_real_function:
            self.syntax_error("qd.random inside a recursive qd.real_func is not supported: pass random numbers "
                              "drawn by the caller as arguments")
        if self.rng_launch_slot is None:
            self.rng_launch_slot = self.b.add_scalar_arg("__qd_random_launch", T.u32.core)
        launch = self.expr(self.b.arg(self.rng_launch_slot, T.u32.core))
        if not self.rng_loops and self.rng_kernel is None:
            if self.depth != 0:
                self.syntax_error("qd.random in kernel-scope serial code (outside the parallel loop) inside a loop "
                                  "or branch, reached through a @qd.func: call qd.random once in the kernel first")
            zero = self.const(0, T.i32)
            self.rng_kernel = {"anchor": zero.stmt, "thread": zero, "counter": None}
        rec = self.rng_loops[-1] if self.rng_loops else self.rng_kernel
        if rec["counter"] is None:
            rec["counter"] = Var(self.b.alloca_before(rec["anchor"], T.u32.core), T.u32)
        return rec["counter"], rec["thread"], launch

    def kernel_print(self, args, kwargs):
        return printing.kernel_print(self, args, dict(kwargs))

    # --- run-time assertions (debug=True) ---------------------------------------------------------
    def kernel_assert(self, cond, message, exc=None):
        """if not cond: the first failing assert's number goes to the program's assertion word."""
        word = assert_word(runtime.program())
        self.assert_messages.append(message if exc is None else (exc, message))
        failed = self.binary("eq", cond, 0) if not isinstance(cond, bool) else None
        s = self.b.begin_if(failed.stmt) if failed is not None else None
        self.atomic("cas", self.element(word, [0]), 0, len(self.assert_messages))
        if s is not None:
            self.b.end_if(s)

    # --- errors ---------------------------------------------------------------------------------
    def syntax_error(self, msg):
        raise QuadrantsSyntaxError(self.walker.located(msg) if self.walker else msg)

    def type_error(self, msg):
        raise QuadrantsTypeError(self.walker.located(msg) if self.walker else msg)

    # --- values ---------------------------------------------------------------------------------
    def expr(self, stmt):
        return Expr(stmt, T.from_core(stmt.dtype))

    def const(self, v, dtype=None):
        """A constant of `dtype`; without one, a Python int on its own (`b = 0x80000000`) must fit
        `default_ip` (a QuadrantsTypeError naming the literal otherwise, as the reference says it), a
        numpy integer (a value qd.u64(x) made in Python scope) takes default_ip or the 64-bit type that
        holds it, and a float is `default_fp`. Next to a typed operand a literal is typed by `binary` instead."""
        if isinstance(v, (bool, np.bool_)):
            v = int(v)
        if isinstance(v, np.integer) and dtype is None:  # a numpy scalar (qd.u64(x) made in Python scope)
            dtype = self._int_literal_type(int(v))
        if isinstance(v, (int, np.integer)):
            if dtype is None and not _fits(int(v), self.config.default_ip):
                ip = self.config.default_ip
                self.type_error(f"Integer literal {int(v)} exceeded the range of default_ip: {ip}{ip.range_text()}, "
                                f"please specify the dtype via e.g. `qd.u64({int(v)})` or set a different "
                                f"`default_ip` in `qd.init()`")
            dtype = dtype or self.config.default_ip
            if dtype.is_real:
                return self.expr(self.b.const_float(dtype.core, float(v)))
            v = int(v)
            if v >= 1 << 63:
                v -= 1 << 64  # a u64 literal: the same 64 bits as a signed core constant
            return self.expr(self.b.const_int(dtype.core, v))
        if isinstance(v, (float, np.floating)):
            dtype = dtype or self.config.default_fp
            return self.expr(self.b.const_float(dtype.core, float(v)))
        self.type_error(f"expected a number, got {type(v).__name__}")

    def rvalue(self, v):
        """Loads variables and memory; leaves Python values and matrices of rvalues."""
        if isinstance(v, Var):
            return self.expr(self.b.local_load(v.stmt))
        if isinstance(v, Ptr):
            return self.expr(self.b.global_load(v.stmt, False))
        if isinstance(v, MatrixValue):
            return MatrixValue([self.rvalue(e) for e in v.entries], v.shape)
        if isinstance(v, DynIndex):
            vals = [self.scalar(e) for e in v.entries]
            dtype = vals[0].dtype
            for x in vals[1:]:
                dtype = T.from_core(_core.promoted_type(dtype.core, x.dtype.core)) if x.dtype is not dtype else dtype
            result = self.cast(vals[0], dtype) if vals[0].dtype is not dtype else vals[0]
            for k in range(1, len(vals)):
                hit = self.binary("eq", v.index, k)
                result = self.expr(self.b.select(hit.stmt, self.cast(vals[k], dtype).stmt, result.stmt))
            return result
        if isinstance(v, StructValue):
            return StructValue(v.type, {k: self.rvalue(m) for k, m in v.members.items()})
        if isinstance(v, np.ndarray) and v.ndim in (1, 2):  # qd.Vector / qd.Matrix made outside kernels
            mv = MatrixValue(v.reshape(-1).tolist(), v.shape)
            dtype = v.qd_dtype() if isinstance(v, PyMatrix) else None  # made with a dtype: it keeps it
            return self.cast(mv, dtype) if dtype is not None else mv
        return v

    def scalar(self, v, dtype=None):
        """An Expr for `v`; Python numbers become constants of `dtype` (default: their default type)."""
        v = self.rvalue(v)
        if isinstance(v, Expr):
            return v
        if is_py_scalar(v):
            return self.const(v, dtype or _typed(v))
        if isinstance(v, MatrixValue):
            self.type_error("expected a scalar, got a vector/matrix")
        self.type_error(f"expected a scalar value, got {type(v).__name__}")

    def cast(self, v, dtype):
        if not isinstance(dtype, T.DataType):  # v.cast(int), v.cast(float), numpy dtypes
            dtype = T.to_dtype(dtype)
        v = self.rvalue(v)
        if isinstance(v, MatrixValue):
            return MatrixValue([self.cast(e, dtype) for e in v.entries], v.shape)
        if is_py_scalar(v):
            return self.const(v, dtype) if not isinstance(v, float) or dtype.is_real else self.const(int(v), dtype)
        return self.expr(self.b.cast(self.scalar(v).stmt, dtype.core))

    def annotate(self, v, dtype):
        """qd.f32(x) / qd.u16(x) in a kernel: a Python number must be of the dtype's kind and fit it
        (qd.f32(0), qd.i32(0.0), qd.u16(-1) are QuadrantsTypeErrors: qd.cast converts); a kernel
        scalar is cast; a vector or matrix is a QuadrantsSyntaxError (qd.cast / .cast() convert those)."""
        v = self.rvalue(v)
        if isinstance(v, MatrixValue) or isinstance(v, (list, tuple)):
            self.syntax_error(f"A primitive type cannot decorate an expression with a compound type. qd.{dtype}(x) "
                              f"takes a scalar; use qd.cast(x, qd.{dtype}) or x.cast(qd.{dtype}) on a vector or matrix")
        if is_py_scalar(v) and not isinstance(v, (bool, np.bool_)):
            if isinstance(v, (float, np.floating)) and not dtype.is_real:
                self.type_error(f"Floating-point literals must be annotated with a floating-point type. For type "
                                f"casting, use `qd.cast`. (qd.{dtype}({v!r}))")
            if isinstance(v, (int, np.integer)):
                if dtype.is_real:
                    self.type_error(f"Integer literals must be annotated with a integer type. For type casting, use "
                                    f"`qd.cast`. (qd.{dtype}({int(v)}))")
                if not _fits(int(v), dtype):
                    self.type_error(f"Integer literal {int(v)} exceeded the range of specified dtype: {dtype}"
                                    f"{dtype.range_text()}")
        return self.cast(v, dtype)

    def binary(self, op, a, c, user_code=False):
        """a op c. user_code: an operator written in the kernel (its integer overflow is reported
        under debug=True); the library's own arithmetic (hashes, bit tricks) wraps silently."""
        a, c = self.rvalue(a), self.rvalue(c)
        if isinstance(a, MatrixValue) and isinstance(c, (list, tuple)):  # v == [1, 2, 3]
            c = self._sequence_as(c, a.shape)
        elif isinstance(c, MatrixValue) and isinstance(a, (list, tuple)):
            a = self._sequence_as(a, c.shape)
        if isinstance(a, MatrixValue) or isinstance(c, MatrixValue):
            return self.elementwise(lambda x, y: self.binary(op, x, y, user_code), a, c)
        if not isinstance(a, Expr) and not isinstance(c, Expr):
            return _PYOPS[op](a, c)  # compile-time values: Python computes it
        if op in ("and_", "or_"):  # on truth values (x != 0; NaN is true), not on operands cast to i32
            a, c = (self.binary("ne", x, 0) if isinstance(x, Expr) else int(bool(x)) for x in (a, c))
        if op == "pow" and isinstance(a, Expr) and a.dtype.is_real and (
                isinstance(c, (int, np.integer)) and not isinstance(c, bool) or isinstance(c, Expr) and not c.dtype.is_real):
            return self._float_int_pow(a, c)
        # A Python number takes the dtype of the other operand when that loses nothing; a typed
        # Python-scope scalar (qd.i16(5), a numpy scalar, G[1] of a typed vector) keeps its own.
        if is_py_scalar(a):
            a = self.const(a, _typed(a) or self._literal_type(a, c.dtype))
        if is_py_scalar(c):
            c = self.const(c, _typed(c) or self._literal_type(c, a.dtype))
        if not isinstance(a, Expr) or not isinstance(c, Expr):
            self.type_error(f"unsupported operand type(s) for operator '{op}': {type(a).__name__} and "
                            f"{type(c).__name__}")
        if op in _BITWISE_SYMBOLS and (a.dtype.is_real or c.dtype.is_real):  # as the core says, in Python's words too
            self.type_error(f"unsupported operand type(s) for '{_BITWISE_SYMBOLS[op]}': operator '{op}' takes integer "
                            f"operands, got {a.dtype} and {c.dtype}")
        r = self.expr(self.b.binary(getattr(_core.BinaryOp, op.rstrip("_")), a.stmt, c.stmt))
        if user_code and op in _OVERFLOW_NAMES and self.config.debug and not r.dtype.is_real and r.dtype is not T.u1:
            self._check_overflow(op, a, c, r)
        if user_code and op == "pow" and self.config.debug and not r.dtype.is_real and c.dtype.is_signed:
            # integer ** with a negative exponent: 1 / x**-y truncated (0 unless |x| is 1) runs
            # without debug; under debug it is an error naming the line
            msg = "integer ** with a negative exponent"
            self.kernel_assert(self.binary("ge", c, 0), self.walker.located(msg) if self.walker else msg)
        return r

    def _float_int_pow(self, x, n):
        """float ** integer by repeated squaring, as the reference computes it: the same on every
        backend, within a few ulps (a driver's pow(x, float(n)) was off by 1e-6 on lavapipe);
        x ** -n is 1 / x ** n. A compile-time n is unrolled."""
        t = x.dtype
        if not isinstance(n, Expr):
            k, result, base = abs(int(n)), None, x
            while k:
                if k & 1:
                    result = base if result is None else self.binary("mul", result, base)
                k >>= 1
                if k:
                    base = self.binary("mul", base, base)
            result = self.const(1.0, t) if result is None else result
            return self.binary("div", self.const(1.0, t), result) if n < 0 else result
        unsigned = getattr(T, f"u{n.dtype.bits}")
        negative = self.binary("lt", n, 0) if n.dtype.is_signed else None
        magnitude = self.cast(self.expr(self.b.select(negative.stmt, self.unary("neg", n).stmt, n.stmt))
                              if negative is not None else n, unsigned)  # -INT_MIN wraps to 2**(bits-1): right
        r, b, e = self.new_var(self.const(1.0, t)), self.new_var(x), self.new_var(magnitude)
        loop = self.b.begin_while()
        done = self.b.begin_if(self.binary("eq", e, 0).stmt)
        self.b.break_()
        self.b.end_if(done)
        odd = self.b.begin_if(self.binary("ne", self.binary("bit_and", e, 1), 0).stmt)
        self.store(r, self.binary("mul", r, b))
        self.b.end_if(odd)
        self.store(b, self.binary("mul", b, b))
        self.store(e, self.binary("shr", e, 1))
        self.b.end_while(loop)
        result = self.rvalue(r)
        if negative is None:
            return result
        return self.expr(self.b.select(negative.stmt, self.binary("div", self.const(1.0, t), result).stmt, result.stmt))

    def _check_overflow(self, op, a, c, r):
        """debug=True: integer + - * << whose exact result does not fit prints "<Op> overflow
        detected" with the kernel line (the wrapped result is kept), as the reference does."""
        t = r.dtype
        a = self.cast(a, t) if a.dtype is not t else a
        if op != "shl":
            c = self.cast(c, t) if c.dtype is not t else c
        if op == "add":  # signed: both operands' signs differ from the result's; unsigned: a carry
            bad = self.binary("lt", self.binary("bit_and", self.binary("bit_xor", a, r), self.binary("bit_xor", c, r)), 0) \
                if t.is_signed else self.binary("lt", r, a)
        elif op == "sub":
            bad = self.binary("lt", self.binary("bit_and", self.binary("bit_xor", a, c), self.binary("bit_xor", a, r)), 0) \
                if t.is_signed else self.binary("lt", a, c)
        elif op == "mul":  # r // a == c exactly when nothing wrapped (a not 0; -1 * MIN apart)
            minimum = -(1 << (t.bits - 1)) if t.is_signed else 0
            minus_one = self.binary("eq", a, -1) if t.is_signed else 0
            trivial = self.binary("or_", self.binary("eq", a, 0), minus_one) if t.is_signed else self.binary("eq", a, 0)
            divisor = self.expr(self.b.select(trivial.stmt, self.const(1, t).stmt, a.stmt))
            bad = self.binary("and_", self.binary("eq", trivial, 0), self.binary("ne", self.binary("floordiv", r, divisor), c))
            if t.is_signed:
                bad = self.binary("or_", bad, self.binary("and_", minus_one, self.binary("eq", c, minimum)))
        else:  # shl: shifting the result back does not give a (bits, or the sign, were lost)
            bad = self.binary("ne", self.binary("shr", r, c), a)
        s = self.b.begin_if(self.scalar(bad).stmt)
        msg = f"{_OVERFLOW_NAMES[op]} overflow detected"
        self.kernel_print([self.walker.located(msg) if self.walker else msg], {})
        self.b.end_if(s)

    def _literal_type(self, lit, other):
        if isinstance(lit, (float, np.floating)) and not other.is_real:
            return self.config.default_fp
        if not other.is_real and not _fits(int(lit), other):
            return self._int_literal_type(int(lit))  # promotion then widens the other operand
        return other

    def _int_literal_type(self, v):
        for t in (self.config.default_ip, T.i64, T.u64):
            if _fits(v, t):
                return t
        self.type_error(f"integer {v} does not fit in 64 bits")

    def unary(self, op, v):
        v = self.rvalue(v)
        if isinstance(v, MatrixValue):
            return MatrixValue([self.unary(op, e) for e in v.entries], v.shape)
        return self.expr(self.b.unary(getattr(_core.UnaryOp, op.rstrip("_")), self.scalar(v).stmt))

    def elementwise(self, f, a, c):
        shape = a.shape if isinstance(a, MatrixValue) else c.shape
        if isinstance(a, MatrixValue) and isinstance(c, MatrixValue) and a.shape != c.shape:
            self.type_error(f"Cannot broadcast tensor to tensor: shape mismatch: {a.shape} vs {c.shape}")
        ea = a.entries if isinstance(a, MatrixValue) else [a] * len(c.entries)
        ec = c.entries if isinstance(c, MatrixValue) else [c] * len(a.entries)
        return MatrixValue([f(x, y) for x, y in zip(ea, ec)], shape)

    def truth(self, v):
        """An Expr usable as a condition, or a Python bool for compile-time conditions."""
        v = self.rvalue(v)
        if is_py_scalar(v) or v is None or isinstance(v, (str, tuple, list)):
            return bool(v)
        if isinstance(v, MatrixValue):
            self.type_error("a vector/matrix cannot be used as a condition")
        return self.scalar(v)

    # --- memory ---------------------------------------------------------------------------------
    def field_buffer(self, f):
        f._check()
        idx = self.b.add_field(f.id, f.dtype.core, list(f._storage_shape), f.name)
        self.fields[idx] = f
        return idx

    def element(self, base, indices):
        """base[indices] for a field or an ndarray argument: a Ptr, or a MatrixValue of Ptrs."""
        if isinstance(base, StructField):
            return StructValue(base.type, {k: self.element(f, indices) for k, f in base.fields.items()})
        if isinstance(base, Field):
            buf, dtype, elem, name, nd = self.field_buffer(base), base.dtype, base.element_shape, base.name, len(base.shape)
            if base.offset and len(indices) == nd:  # qd.field(..., offset=): x[offset] is element 0
                indices = [self.binary("sub", i, o) for i, o in zip(indices, base.offset)]
        elif not isinstance(base, NdarrayArg):  # a qd.simt.block.SharedArray
            buf, dtype, elem, name, nd = base.buffer, base.dtype, base.element_shape, base.name, len(base.shape)
        else:
            buf, dtype, elem, name = base.buffer, base.dtype, base.element_shape, base.name
            nd = base.ndim - len(elem)
        if len(indices) != nd:
            self.syntax_error(f"'{name}' has {nd} dimension(s) but is indexed with {len(indices)} index(es)")
        layout = getattr(base, "_qd_layout", None)
        if layout:  # canonical indices, stored in the layout's axis order
            indices = [indices[a] for a in layout]
        idx = [self.scalar(i).stmt for i in indices]
        if not elem:
            return Ptr(self.b.global_ptr(buf, idx), dtype, buf)
        ptrs = []
        for e in np.ndindex(*elem):
            tail = [self.b.const_int(_core.DataType.i32, int(k)) for k in e]
            ptrs.append(Ptr(self.b.global_ptr(buf, idx + tail), dtype, buf))
        return MatrixValue(ptrs, elem)

    def captured_ndarray(self, a):
        """A qd.ndarray met as a Python value (a member of a template argument, a global) as an ndarray
        argument the launch fills in; the specialisation holds while the same ndarray is met there."""
        got = self.captured.get(id(a))
        if got is not None and got[0] is a:
            return got[1]
        a._check()
        nd, elem = len(a.full_shape), tuple(a.element_shape)
        name = f"ndarray{len(self.captured)}"
        grad = None
        if a.grad is not None:
            gbuf = self.b.add_ndarray_arg(f"{name}.grad", a.dtype.core, nd, list(elem))
            grad = NdarrayArg(gbuf, a.dtype, nd, elem, f"{name}.grad", a._qd_layout)
        buf = self.b.add_ndarray_arg(name, a.dtype.core, nd, list(elem))
        arg = NdarrayArg(buf, a.dtype, nd, elem, name, a._qd_layout, grad)
        self.captured[id(a)] = (a, arg)
        return arg

    def buffer_view(self, array, offset=0, size=None):
        """qd.BufferView(a, offset, size) in a kernel: a view of 1-D ndarray argument `a`."""
        if not isinstance(array, NdarrayArg) or array.ndim - len(array.element_shape) != 1:
            self.type_error(f"qd.BufferView(...) in a kernel takes a 1D ndarray argument, got {type(array).__name__}")
        offset = self.cast(self.rvalue(offset), T.i32)
        length = self.ndarray_sizes(array)[0]
        size = self.binary("sub", length, offset) if size is None else self.cast(self.rvalue(size), T.i32)
        self._check_range(offset, size, length, "BufferView construction out of range: offset and size outside the ndarray")
        return ViewValue(array, offset, size)

    def subview(self, view, offset, size):
        """view.subview(offset, size) / view[lo:hi] in a kernel."""
        offset, size = self.cast(self.rvalue(offset), T.i32), self.cast(self.rvalue(size), T.i32)
        self._check_range(offset, size, view.size, "BufferView subview Out Of Range: offset and size outside the view")
        return ViewValue(view.array, self.binary("add", view.offset, offset), size)

    def _check_range(self, offset, size, length, message):
        """debug=True: 0 <= offset, 0 <= size, offset + size <= length, checked at run time."""
        if not self.config.debug:
            return
        ok = self.binary("and", self.binary("ge", offset, 0), self.binary("ge", size, 0))
        ok = self.binary("and", ok, self.binary("le", self.binary("add", offset, size), length))
        self.kernel_assert(ok, self.walker.located(message) if self.walker else message)

    def ndarray_sizes(self, arg):
        """The canonical shape of an ndarray argument, as run-time values (the launch passes the stored shape)."""
        n = arg.ndim - len(arg.element_shape)
        stored = [self.expr(self.b.ndarray_shape(arg.buffer, k)) for k in range(n)]
        layout = arg._qd_layout
        return [stored[layout.index(i)] for i in range(n)] if layout else stored

    def fill(self, target, value):
        """`x.fill(v)` inside a kernel: a loop storing v to every element (parallel at kernel scope)."""
        if isinstance(target, Field):
            sizes = list(target.shape)
        else:
            sizes = self.ndarray_sizes(target)
        value = self.rvalue(value)
        if _is_runtime(value):
            value = self.new_var(value)  # computed once, before the loop
        walker = self.walker
        parallel = walker.is_kernel and walker.depth == 0 and not self.loop_config.get("serialize", False)
        self.loop_config = {}
        total = 1
        for n in sizes:
            total = self.binary("mul", total, n)
        loop = self.b.begin_range_for(self.const(0).stmt, self.scalar(total).stmt, not parallel, 0)
        flat = self.expr(self.b.loop_index(loop))
        coords = []
        for n in reversed(sizes[1:]):
            coords.append(self.binary("mod", flat, n))
            flat = self.binary("floordiv", flat, n)
        coords = ([flat] if sizes else []) + coords[::-1]
        self.depth += 1
        try:
            self.store(self.element(target, coords), value)
        finally:
            self.depth -= 1
        self.b.end_range_for(loop)

    def store(self, target, value):
        if isinstance(target, StructValue):
            value = self.rvalue(value)
            if isinstance(value, StructValue) and value.type is ANONYMOUS:  # qd.Struct(...): by member name
                unknown = set(value.members) - set(target.members)
                if unknown:
                    self.type_error(f"struct {target.type.name} has no member {sorted(unknown)[0]!r}")
                for k, v in value.members.items():
                    self.store(target.members[k], v)
                return
            if not isinstance(value, StructValue) or value.type is not target.type:
                self.type_error(f"cannot assign {type(value).__name__} to a struct {target.type.name}")
            for k, t in target.members.items():
                self.store(t, value.members[k])
            return
        if isinstance(target, DynIndex):
            value = self.rvalue(value)
            for k, t in enumerate(target.entries):
                s = self.b.begin_if(self.binary("eq", target.index, k).stmt)
                self.store(t, value)
                self.b.end_if(s)
            return
        if isinstance(target, MatrixValue):
            if isinstance(value, (list, tuple)):  # x[i] = [a, b], v[i] = 0, 0, m[i] = [[..], [..]]
                value = self._sequence_as(value, target.shape, target.entries)
            value = self.rvalue(value)
            if isinstance(value, MatrixValue):
                if value.shape != target.shape:
                    self.type_error(f"cannot assign '{self._tensor_text(value.entries, value.shape)}' to "
                                    f"'{self._tensor_text(target.entries, target.shape)}': a {value.shape} value "
                                    f"to a {target.shape} target")
                for t, v in zip(target.entries, value.entries):
                    self.store(t, v)
            else:
                for t in target.entries:
                    self.store(t, value)
            return
        if isinstance(target, Ptr):
            self.written.add(target.buffer)
            self.b.global_store(target.stmt, self.scalar(value, target.dtype).stmt)
        elif isinstance(target, Var):
            self.b.local_store(target.stmt, self.scalar(value, target.dtype).stmt)
        else:
            self.syntax_error("cannot assign to this expression: the target is not a variable or memory element")

    def _sequence_as(self, seq, shape, like=None):
        """A (nested) list / tuple of values as a MatrixValue of `shape`, row by row."""
        rows = [list(r) if isinstance(r, (list, tuple)) else [r] for r in seq]
        flat = [e for r in rows for e in r]
        want = shape[0] * (shape[1] if len(shape) > 1 else 1)
        nested_ok = len(shape) == 1 or all(len(r) == shape[1] for r in rows) or all(len(r) == 1 for r in rows)
        if len(flat) != want or not nested_ok or any(isinstance(e, (list, tuple)) for e in flat):
            self.type_error(f"cannot assign '{self._tensor_text(flat, (len(seq),))}' to "
                            f"'{self._tensor_text(like, shape)}': a sequence of {len(seq)} items to a {shape} target")
        return MatrixValue(flat, shape)

    def _tensor_text(self, entries, shape):
        """How Quadrants names a vector / matrix value in errors: '[Tensor (3) i32]'."""
        dtypes = [getattr(e, "dtype", None) for e in entries or []]
        dtype = next((d for d in dtypes if d is not None), None)
        if dtype is None and entries:
            dtype = self.config.default_fp if any(isinstance(e, float) for e in entries) else self.config.default_ip
        dims = ", ".join(str(n) for n in shape)
        return f"[Tensor ({dims}){'' if dtype is None else ' ' + str(dtype)}]"

    def new_var(self, value, dtype=None):
        value = self.rvalue(value)
        if isinstance(value, StructValue):
            return StructValue(value.type, {k: self.new_var(m) for k, m in value.members.items()})
        if isinstance(value, MatrixValue):
            return MatrixValue([self.new_var(e, dtype) for e in value.entries], value.shape)
        v = self.scalar(value, dtype)
        var = Var(self.b.alloca((dtype or v.dtype).core), dtype or v.dtype)
        var.kernel_scope = self.depth == 0  # shared by all iterations of the parallel loops
        self.b.local_store(var.stmt, v.stmt)
        return var

    # --- atomics --------------------------------------------------------------------------------
    def memory_model(self, what, order, scope):
        """The (order, scope) keywords of an atomic, checked: anything else is a QuadrantsTypeError."""
        if not isinstance(order, _core.MemoryOrder):
            self.type_error(f"{what}: memory_order must be a qd.MemoryOrder (Relaxed, Acquire, Release, AcqRel), "
                            f"got {order!r}")
        if not isinstance(scope, _core.MemScope):
            self.type_error(f"{what}: memory_scope must be a qd.MemScope (Block, Device, System), got {scope!r}")
        return order, scope

    def atomic(self, op, target, value, desired=None, order=_core.MemoryOrder.Relaxed, scope=_core.MemScope.Device):
        order, scope = self.memory_model(f"qd.atomic_{op}", order, scope)
        if isinstance(target, DynIndex):  # one guarded atomic per entry; the old value of the one taken
            old = self.new_var(0, target.dtype)
            for k, t in enumerate(target.entries):
                s = self.b.begin_if(self.binary("eq", target.index, k).stmt)
                self.store(old, self.atomic(op, t, value, desired, order, scope))
                self.b.end_if(s)
            return self.rvalue(old)
        if isinstance(target, MatrixValue):
            # Fan-out: one scalar atomic per component, a scalar operand broadcast.
            value = self.rvalue(value)
            vals = value.entries if isinstance(value, MatrixValue) else [value] * len(target.entries)
            if isinstance(value, MatrixValue) and value.shape != target.shape:
                self.type_error(f"qd.atomic_{op}: operand shape {value.shape} does not match target {target.shape}")
            return MatrixValue([self.atomic(op, t, v, desired, order, scope) for t, v in zip(target.entries, vals)],
                               target.shape)
        if not isinstance(target, (Ptr, Var)):
            what = "a whole field" if isinstance(target, (Field, NdarrayArg)) else \
                "a constant" if is_py_scalar(target) else "an expression"
            self.syntax_error(f"cannot use a non-writable target as the first operand of qd.atomic_{op}: it must be "
                              f"a writable lvalue (a field or ndarray element, a vector/matrix slot, or a variable), "
                              f"got {what}")
        if isinstance(target, Ptr):
            self.written.add(target.buffer)
        if op == "cas" and (desired is None or value is None):
            self.type_error(f"qd.atomic_cas(x, expected, desired): the {'desired' if desired is None else 'expected'} "
                            f"value is None; it must be a number or a scalar kernel value")
        v = self.scalar(value, target.dtype)
        d = self.scalar(desired, target.dtype).stmt if op == "cas" else None
        return self.expr(self.b.atomic(op, target.stmt, v.stmt, d, order, scope))

    def _atomic_target(self, what, target):
        if isinstance(target, Ptr):
            return target
        if isinstance(target, Var):
            self.type_error(f"{what} needs a global lvalue (a field or ndarray element): a local variable is not "
                            f"shared with other threads")
        if isinstance(target, (Field, NdarrayArg)):
            self.syntax_error(f"{what} takes one element, e.g. {what}(x[i]), not a whole field or ndarray")
        self.syntax_error(f"{what} needs a global lvalue (a field or ndarray element), got "
                          + ("a constant" if is_py_scalar(target) else "an expression"))

    def atomic_load(self, target, order, scope):
        order, scope = self.memory_model("qd.atomic_load", order, scope)
        if isinstance(target, MatrixValue):
            return MatrixValue([self.atomic_load(t, order, scope) for t in target.entries], target.shape)
        target = self._atomic_target("qd.atomic_load", target)
        return self.expr(self.b.atomic_load(target.stmt, order, scope))

    def atomic_store(self, target, value, order, scope):
        order, scope = self.memory_model("qd.atomic_store", order, scope)
        if isinstance(target, MatrixValue):
            value = self.rvalue(value)
            vals = value.entries if isinstance(value, MatrixValue) else [value] * len(target.entries)
            for t, v in zip(target.entries, vals):
                self.atomic_store(t, v, order, scope)
            return
        target = self._atomic_target("qd.atomic_store", target)
        self.written.add(target.buffer)
        self.b.atomic_store(target.stmt, self.scalar(value, target.dtype).stmt, order, scope)

    def atomic_fence(self, order, scope):
        order, scope = self.memory_model("qd.atomic_fence", order, scope)
        self.b.fence(order, scope)

    def volatile_load(self, target):
        if isinstance(target, MatrixValue):
            return MatrixValue([self.volatile_load(t) for t in target.entries], target.shape)
        if isinstance(target, Ptr):
            return self.expr(self.b.global_load(target.stmt, True))
        if isinstance(target, Var):
            self.type_error("qd.volatile_load needs a global lvalue (a field or ndarray element): a local variable "
                            "or local array cannot be observed by another thread")
        if isinstance(target, (Field, NdarrayArg)):
            self.syntax_error("qd.volatile_load cannot take a Field directly (or a whole ndarray): pass one element, "
                              "e.g. qd.volatile_load(x[i])")
        self.syntax_error("qd.volatile_load needs a global lvalue (a field or ndarray element), got "
                          + ("a constant" if is_py_scalar(target) else "an expression"))
