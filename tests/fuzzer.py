"""Differential fuzzer: random kernels run on every available arch and compared with a reference.

A *case* is a small random program: typed constants, Python literals and input reads over every
dtype (special values included: NaN, +-inf, -0.0, INT_MIN, -1, 0, huge and tiny floats), unary and
binary arithmetic, casts, bit casts, comparisons (chains too), `and`/`or`/`not`, `select` /
`a if c else b`, locals (annotated or not, reassigned, augmented), `if`/`else`, serial
`for i in range(a, b, step)` loops with `break` / `continue`, `while` loops with `break`, atomics on
ndarray cells at random indices and on kernel variables whose old values are used, and augmented
assignments on memory (atomic or plain). Cases also read Python-scope values captured as globals
(Python numbers, typed scalars, `qd.Vector` / `qd.Matrix` with or without a dtype, struct values):
locals set from them are reassigned as a whole or per component in nested serial loops and
branches (conditions on run-time data), in the kernel and in @qd.func helpers, and their final
values are stored (`Capture`). Many cases are batched into one kernel (iteration i of one parallel
loop runs case i); a generated kernel that fails to compile is a failure too (the batch is split
to the case the error names). `Contended` adds kernels where many iterations update a few cells
(ndarrays, fields, kernel-scope variables): final values and returned old values are checked.
`Layout` adds fields laid out by nested `qd.root.dense()` calls over axes in random order (an axis
used twice, qd.ij-style calls), filled through struct-fors and read through explicit indices.

The reference (`Reference`) interprets the same program in CPython/numpy with the semantics of
docs/language.md and docs/atomics.md: wrap-around integers at the dtype width, Python `//` and `%`
(numpy's floor_divide / remainder, which follow CPython, computed in the operand dtype), shifts by
the width or more give 0 or the sign, minNum/maxNum for float min/max, IEEE arithmetic correctly
rounded in the operand's dtype (f32 in numpy float32, not float64), and the transcendental
functions within a tolerance (`math_ok`); a captured value behaves as the same value written in the
kernel; a field's indices are its axes in axis order, each the product of its sizes. Results the
docs leave unspecified (integer division by zero, a float that does not fit the integer it is
converted to, a NaN's bits, the sign of min(+0.0, -0.0)) are tracked (`Unspec`, `Alts`): such
values are not compared, and a case whose control flow would depend on one is regenerated; both
are counted.

Known limits (of drivers or of the language) are in ONE table, `LIMITS`: the generator steers
around those of the arch it generates for and counts every case where it did, per reason. Known
bugs being fixed are in `KNOWN_BUGS`: the reference tags each value with the bug classes it depends
on (a case that fails to compile: the classes of its constructs), so each mismatch is either
attributed to an open row or reported as new.

`benchmarks/fuzz.py` is the command line (long runs, shrinking to minimal kernels and layouts);
tests/python/test_fuzz_differential.py the bounded run in the test suite.
"""
import collections
import itertools
import linecache
import math
import random
import time

import numpy as np

import quadrants as qd

INTS = ["i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"]
FLOATS = ["f16", "f32", "f64"]
DTYPES = INTS + FLOATS
NP = {t: np.dtype(t.replace("i", "int").replace("u", "uint").replace("f", "float")) for t in DTYPES}
BITS = {t: NP[t].itemsize * 8 for t in DTYPES}
DEFAULT_FP, DEFAULT_IP = "f32", "i32"
ATOMIC_MEM_DTYPES = ["i32", "u32", "i64", "u64", "f16", "f32", "f64"]  # docs/atomics.md
ATOMIC_OPS = ["add", "sub", "mul", "min", "max", "and", "or", "xor", "exchange", "cas"]
INT_ONLY_ATOMICS = {"and", "or", "xor", "cas"}
AUG_ATOMIC = {"+": "add", "-": "sub", "&": "and", "|": "or", "^": "xor"}  # x[i] op= v on memory is atomic


def is_int(t):
    return t in INTS


def is_signed(t):
    return t[0] == "i"


def promoted(a, b):
    """docs/language.md 'Dtypes and promotion' (csrc/ir/types.cpp promoted_type)."""
    if a == b:
        return a
    if not is_int(a) or not is_int(b):
        if is_int(a):
            return b
        if is_int(b):
            return a
        return a if BITS[a] >= BITS[b] else b
    if BITS[a] != BITS[b]:
        return a if BITS[a] > BITS[b] else b
    return a if not is_signed(a) else b


def _int_range(t):
    info = np.iinfo(NP[t])
    return int(info.min), int(info.max)


def _fits(v, t):
    lo, hi = _int_range(t)
    return lo <= v <= hi


def literal_type(lit, other):
    """The dtype a Python number takes next to an operand of dtype `other` (docs/language.md)."""
    if isinstance(lit, float):
        return DEFAULT_FP if is_int(other) else other
    if is_int(other) and not _fits(lit, other):
        return next(t for t in (DEFAULT_IP, "i64", "u64") if _fits(lit, t))
    return other


# --- limits and known bugs --------------------------------------------------------------------------
# Every construct the fuzzer does not generate on some arch, and why. The generator is told the arch
# and steers around each row that applies (Generator.avoid); every case where it had to is counted
# under the row's name (Stats.avoided; `benchmarks/fuzz.py` prints the counts and the test bounds
# them), so nothing is skipped silently. Rows with `steer=False` need no steering per case: the
# generator never produces them at all, or the batching avoids them.
LIMITS = [
    dict(name="atomic_rejected", arches="all", steer=True,
         why="the atomic support table rejects this op/dtype on the arch (docs/atomics.md), a documented "
             "compile error: e.g. every f16 atomic on lavapipe (no float16 atomic add)"),
    dict(name="loop_over_65535_iterations", arches=["vulkan"], steer=False,
         why="lavapipe's loop limiter stops every loop after 65535 iterations per invocation "
             "(repros/wrong_vulkan_loops_capped_65535.py): loops are generated with at most a few "
             "hundred iterations per case (Reference checks the count)"),
    dict(name="storage_buffers_per_shader", arches=["vulkan"], steer=False,
         why="a Vulkan kernel binds at most maxPerStageDescriptorStorageBuffers storage buffers (32 on lavapipe: "
             "its ndarrays, the argument buffer, temporaries); more is a RuntimeError naming the kernel "
             "(docs/backends.md): cases are batched so that no kernel takes more than MAX_NDARRAY_ARGS"),
    dict(name="glsl_math_domain", arches=["vulkan", "metal"], steer=False,
         why="GLSL.std.450 (the f16/f32 sin, log, pow, ... of the SPIR-V backends) leaves the result "
             "undefined outside each function's domain (log(x <= 0), pow(x < 0, y), atan2(0, 0), "
             "asin(|x| > 1), inf/NaN arguments): such outputs are counted per value, not compared"),
    dict(name="u64_literal_over_2pow63", arches="all", steer=False,
         why="integer literals in [2**63, 2**64) are rejected by the front end (issue 9, "
             "repros/missing_api_u64_literals.py): such u64 constants are written "
             "qd.bit_cast(qd.i64(v - 2**64), qd.u64) instead"),
]

# Known bugs with a fix under way. The reference tags every value with the classes of operations
# it depends on (data or control flow; `op_tags`); a mismatch whose value carries the tag of a row
# open on that arch belongs to that row. test_fuzz_differential.py fails on any other mismatch and
# has one test per row, expected to fail on the row's arches (xfail, not strict) until the fix lands:
# then remove the arch from the row. `benchmarks/fuzz.py --shrink-known` prints a shrunk kernel for each.
ALL_ARCHES = ["cpu", "cuda", "amdgpu", "vulkan", "metal"]
# The last vulkan rows (float_special, float_rounding, int_float_rounding) were fixed in issue 8 (IEEE
# SPIR-V, SignedZeroInfNanPreserve on integer widths, llvmpipe's zero-operand folds: docs/backends.md);
# op_tags still tags those classes, for a row a new backend may need. The captured-value cases' row
# (captured_dtype: typed Python-scope scalars and typed components read as operands taken as
# literals) was fixed in issue 26; its tag stays for a row a regression may need. A row with `errors`
# also explains a generated kernel that fails to compile with a matching message when the case uses
# the row's constructs (construct_tags).
KNOWN_BUGS: dict = {
}


def known_classes(tags, arch, error=None):
    """The KNOWN_BUGS rows open on the arch that a value with these tags depends on (for a kernel that
    failed to compile, with the error text: the rows whose `errors` pattern it matches)."""
    import re
    return sorted(name for name in tags if name in KNOWN_BUGS and arch in KNOWN_BUGS[name]["arches"] and
                  (error is None or re.search(KNOWN_BUGS[name].get("errors", "(?!)"), error)))


def active_limits(arch):
    return {row["name"] for row in LIMITS if row["arches"] == "all" or arch in row["arches"]}


# --- reference values -------------------------------------------------------------------------------
class Unspec:
    """A value the docs leave unspecified; `why` says which rule."""

    def __init__(self, why):
        self.why = why

    def __repr__(self):
        return f"<unspecified: {self.why}>"


class Alts:
    """A value that may be any of a few (the sign of min(+0.0, -0.0), say)."""

    def __init__(self, vals):
        self.vals = tuple(vals)

    def __repr__(self):
        return "one of " + " / ".join(fmt(v) for v in self.vals)


class Approx:
    """The exact result of a transcendental function; the arch's result must be within tolerance."""

    def __init__(self, exact, dtype, fn, args):
        self.exact, self.dtype, self.fn, self.args = exact, dtype, fn, args

    def __repr__(self):
        return f"~{self.exact!r} ({self.fn})"


class CaseUnspecified(Exception):
    """Control flow, an index or a loop bound of the case depends on an unspecified value."""


_DT_BY_NP = {NP[t]: t for t in DTYPES}


def dt(v):
    return _DT_BY_NP[v.dtype]


def key(v):
    """Identity of a value for comparison: NaNs are all one value, -0.0 differs from 0.0."""
    if not is_int(dt(v)) and np.isnan(v):
        return "nan"
    return (dt(v), v.tobytes())


def make(t, v):
    """A numpy scalar of dtype t from an exact Python int (wrapping) or a numpy/float value."""
    if is_int(t) and isinstance(v, (int, np.integer)):
        b = BITS[t]
        v = int(v) & ((1 << b) - 1)
        if is_signed(t) and v >> (b - 1):
            v -= 1 << b
        return NP[t].type(v)
    with np.errstate(all="ignore"):
        return np.asarray(v).astype(NP[t])[()]


def alts(vals):
    uniq = {}
    for v in vals:
        uniq.setdefault(key(v), v)
    if len(uniq) == 1:
        return next(iter(uniq.values()))
    if len(uniq) > 8:
        return Unspec("too many possible values")
    return Alts(uniq.values())


def lift(f, *args):
    """Applies f to exact values; Unspec propagates; Alts are applied to every alternative."""
    for a in args:
        if isinstance(a, Unspec):
            return a
        if isinstance(a, Approx):
            raise AssertionError("an approximate value must not flow into other operations")
    if not any(isinstance(a, Alts) for a in args):
        return f(*args)
    out = []
    for combo in itertools.product(*[a.vals if isinstance(a, Alts) else (a,) for a in args]):
        r = f(*combo)
        if isinstance(r, Unspec):
            return r
        out.extend(r.vals if isinstance(r, Alts) else (r,))
    return alts(out)


def convert(v, t):
    """Value conversion (qd.cast, assignment, promotion): wraps integers; float -> int truncates."""
    s = dt(v)
    if s == t:
        return v
    if is_int(t):
        if is_int(s):
            return make(t, int(v))
        if not np.isfinite(v):
            return Unspec(f"{s} {v} converted to {t}")
        iv = math.trunc(float(v))
        if not _fits(iv, t):
            return Unspec(f"{s} {v} does not fit {t}")
        return make(t, iv)
    return make(t, v)  # numpy's int -> float and float -> float conversions round correctly


def truth(v):
    """A condition's value: nonzero (NaN is true, -0.0 false)."""
    return bool(v != 0) if is_int(dt(v)) else not (v == 0)


def fmt(v):
    if isinstance(v, (Unspec, Alts, Approx)):
        return repr(v)
    t = dt(v)
    if is_int(t):
        return f"{t}({int(v)})"
    return f"{t}({float(v)!r})"


# --- reference semantics of each operation ------------------------------------------------------------
def _int_binop(op, a, b, t):
    x, y = int(a), int(b)
    if op == "+": return make(t, x + y)
    if op == "-": return make(t, x - y)
    if op == "*": return make(t, x * y)
    if op in ("//", "%"):
        if y == 0:
            return Unspec(f"integer {op} by zero")
        return make(t, x // y if op == "//" else x % y)
    if op == "**":
        if y < 0:  # 1 / base**-y in integer division (commit 674508f)
            if x == 0:
                return Unspec("0 ** negative")
            return make(t, 1 if x == 1 else (-1 if y % 2 else 1) if x == -1 else 0)
        return make(t, pow(x, y, 1 << BITS[t]))
    if op == "&": return make(t, x & y)
    if op == "|": return make(t, x | y)
    if op == "^": return make(t, x ^ y)
    if op == "min": return make(t, min(x, y))
    if op == "max": return make(t, max(x, y))
    raise AssertionError(op)


def _min_max_float(op, a, b):
    if np.isnan(a):
        return b
    if np.isnan(b):
        return a
    if a == 0 and b == 0 and np.signbit(a) != np.signbit(b):
        return Alts([a, b])  # minNum/maxNum: either zero
    return (np.minimum if op == "min" else np.maximum)(a, b)


def _float_binop(op, a, b, t):
    with np.errstate(all="ignore"):
        if op == "+": return a + b
        if op == "-": return a - b
        if op == "*": return a * b
        if op == "/": return a / b
        if op == "//": return np.floor_divide(a, b)
        if op == "%": return np.remainder(a, b)
        if op in ("min", "max"): return _min_max_float(op, a, b)
    raise AssertionError(op)


def _shift(op, a, b):
    t, n = dt(a), int(b) & ((1 << BITS[dt(b)]) - 1)  # the amount keeps its own type, read unsigned
    x = int(a)
    if n >= BITS[t]:
        return make(t, (-1 if x < 0 else 0) if op == ">>" and is_signed(t) else 0)
    return make(t, x << n if op == "<<" else x >> n)


def _compare(op, a, b):
    with np.errstate(all="ignore"):
        r = {"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]
    return np.int32(bool(r))


MATH_FNS = ["sin", "cos", "tan", "exp", "log", "tanh", "asin", "acos", "atan"]
MATH_BINARY = ["atan2", "pow"]


def _math_exact(fn, args):
    x = [float(a) for a in args]
    with np.errstate(all="ignore"):
        if fn == "atan2":
            return np.arctan2(x[0], x[1])
        if fn == "pow":
            return np.power(np.float64(x[0]), np.float64(x[1]))
        return getattr(np, {"asin": "arcsin", "acos": "arccos", "atan": "arctan"}.get(fn, fn))(np.float64(x[0]))


def binary(op, a, b):
    """Result of `a op b` for two typed values (literals already typed)."""
    ta, tb = dt(a), dt(b)
    if op in ("<<", ">>"):
        return _shift(op, a, b)
    if op in ("and", "or"):
        ra, rb = truth(a), truth(b)
        return np.int32((ra and rb) if op == "and" else (ra or rb))
    t = promoted(ta, tb)
    if op == "/" and is_int(t):
        t = DEFAULT_FP
    if op == "atan2" and is_int(t):
        t = DEFAULT_FP
    a, b = convert(a, t), convert(b, t)
    if isinstance(a, Unspec) or isinstance(b, Unspec):
        return a if isinstance(a, Unspec) else b
    if op in ("==", "!=", "<", "<=", ">", ">="):
        return _compare(op, a, b)
    if op in MATH_BINARY:
        return Approx(_math_exact(op, (a, b)), t, op, (a, b))
    if is_int(t):
        return _int_binop(op, a, b, t)
    r = _float_binop(op, a, b, t)
    return r if isinstance(r, Alts) else make(t, r)


def unary(op, a):
    t = dt(a)
    if op == "not":
        return np.int32(not truth(a))
    if op == "-":
        return make(t, -int(a)) if is_int(t) else -a
    if op == "~":
        return make(t, ~int(a))
    if op == "abs":
        return make(t, abs(int(a))) if is_int(t) else np.abs(a)
    if is_int(t):  # float functions of an integer take default_fp
        a, t = convert(a, DEFAULT_FP), DEFAULT_FP
    with np.errstate(all="ignore"):
        if op == "sqrt": return np.sqrt(a)
        if op == "floor": return np.floor(a)
        if op == "ceil": return np.ceil(a)
        if op == "round": return np.rint(a)  # half to even
    if op in MATH_FNS:
        return Approx(_math_exact(op, (a,)), t, op, (a,))
    raise AssertionError(op)


def bit_cast(a, t):
    if not is_int(dt(a)) and np.isnan(a):
        return Unspec("the bits of a NaN")
    return np.asarray(a).view(NP[t])[()]


def atomic_result(op, old, val, desired):
    """(new, returned) of qd.atomic_<op> on a cell holding `old`; operands already of its dtype."""
    t = dt(old)
    if op == "exchange":
        return val, old
    if op == "cas":
        return (desired if int(old) == int(val) else old), old
    sym = {"add": "+", "sub": "-", "mul": "*", "and": "&", "or": "|", "xor": "^", "min": "min", "max": "max"}[op]
    if is_int(t):
        return _int_binop(sym, old, val, t), old
    r = _float_binop(sym, old, val, t)
    return (r if isinstance(r, Alts) else make(t, r)), old


# --- the program --------------------------------------------------------------------------------------
class E:
    """An expression node. kind: const lit in var load un bin cast bitcast select math."""

    __slots__ = ("kind", "op", "dtype", "args", "val", "name")

    def __init__(self, kind, dtype, op=None, args=(), val=None, name=None):
        self.kind, self.dtype, self.op, self.args, self.val, self.name = kind, dtype, op, list(args), val, name

    def copy(self):
        return E(self.kind, self.dtype, self.op, [a.copy() for a in self.args], self.val, self.name)


class S:
    """A statement. kind: let set aug store memaug atomic if for while break continue."""

    __slots__ = ("kind", "name", "dtype", "op", "exprs", "body", "orelse", "val")

    def __init__(self, kind, name=None, dtype=None, op=None, exprs=(), body=None, orelse=None, val=None):
        self.kind, self.name, self.dtype, self.op, self.exprs = kind, name, dtype, op, list(exprs)
        self.body, self.orelse, self.val = body, orelse, val

    def copy(self):
        return S(self.kind, self.name, self.dtype, self.op, [e.copy() for e in self.exprs],
                 [s.copy() for s in self.body] if self.body is not None else None,
                 [s.copy() for s in self.orelse] if self.orelse is not None else None, self.val)


SCRATCH = 4  # scratch cells per dtype per case (atomic targets)


class Case:
    def __init__(self, seed):
        self.seed = seed
        self.stmts = []
        self.inputs = {t: [] for t in DTYPES}     # values read by `in` leaves
        self.scratch = {t: [] for t in DTYPES}    # initial scratch cells
        self.nout = {t: 0 for t in DTYPES}        # output cells
        self.caps = {}                            # name -> Capture (Python-scope values the kernel reads)
        self.stypes = {}                          # struct type name -> (members, source line)
        self.nfuncs = 0                           # @qd.func helpers (statements `call`)
        self.traits = set()
        self.avoided = set()

    def copy(self):
        c = Case(self.seed)
        c.stmts = [s.copy() for s in self.stmts]
        c.inputs = {t: list(v) for t, v in self.inputs.items()}
        c.scratch = {t: list(v) for t, v in self.scratch.items()}
        c.nout = dict(self.nout)
        c.caps, c.stypes, c.nfuncs = dict(self.caps), dict(self.stypes), self.nfuncs
        c.traits = set(self.traits)
        c.avoided = set(self.avoided)
        return c


# --- Python-scope values captured by the kernel ----------------------------------------------------
# A case may read globals made outside any kernel: Python numbers and typed scalars (`qd.i16(-5)`),
# `qd.Vector` / `qd.Matrix` (untyped, `dt=`, or `qd.types.vector(n, t)(...)`), and struct values
# (`qd.types.struct(...)(...)`). Locals are set from them (`p = G1`, `q = G2.v`; statement `clet`),
# reassigned as a whole (`p = p + G1`, `p = G3`, `p *= s`, `p = p @ M`, `b = G2`; statement `cset`)
# or per component (`p[1] = ...`, `b.m += ...`: plain set / aug on the component's name), in serial
# loops and branches, in the kernel and in @qd.func helpers (statement `call`), and their final
# values are stored. The reference's rule: a captured value behaves as the same value written in
# the kernel: a Python number (and an untyped vector's element) is a literal (a local of its own
# takes default_ip / default_fp, next to an operand it takes that operand's type); a typed value
# keeps its dtype (tagged 'captured_dtype' where a literal's rule would change the operation's type).
class Capture:
    """One Python-scope value. comps: suffix ('', '[1]', '[0, 1]', '.m', '.v[0]') -> (declared dtype,
    or None for a Python number, value); groups: suffix -> shape of its vectors / matrices ('' the
    whole value; 'struct' for a whole struct)."""

    def __init__(self, name, kind, comps, groups, src, stype=None):
        self.name, self.kind, self.comps, self.groups, self.src, self.stype = name, kind, comps, groups, src, stype

    def group(self, gsuf):
        """The components of a group, as (suffix relative to the group, declared dtype, value)."""
        return [(suf[len(gsuf):], d, v) for suf, (d, v) in self.comps.items()
                if gsuf == "" or suf.startswith(gsuf + "[")]


def default_type(v):
    """The dtype a Python number takes as a local of its own (`x = 5`, `x = 2.5`)."""
    if isinstance(v, (float, np.floating)):
        return DEFAULT_FP
    return next(t for t in (DEFAULT_IP, "i64", "u64") if _fits(int(v), t))


def py_number(v):
    return float(v) if isinstance(v, (float, np.floating)) else int(v)


def result_dtype(op, ta, tb):
    t = promoted(ta, tb)
    return DEFAULT_FP if op == "/" and is_int(t) else t


def _suffix(ix):
    return "[" + ", ".join(str(i) for i in ix) + "]"


def _val_src(v):
    return str(int(v)) if isinstance(v, (int, np.integer)) else _float_src(v)


def case_tags(case):
    """KNOWN_BUGS rows (with `trait`) that explain every value of a case: its traits that name one."""
    return frozenset(t for t in case.traits if t in KNOWN_BUGS and KNOWN_BUGS[t].get("trait"))


def construct_tags(case):
    """KNOWN_BUGS classes a case's constructs touch (for a case that fails to compile)."""
    tags = set(case_tags(case))
    for s in walk_stmts(case.stmts):
        # a dtype the implementation gets wrong may make a later construct invalid (qd.bit_cast's widths)
        caps = [n for e in s.exprs + list(s.val[2] if s.kind == "cset" and s.val else []) for n in walk_exprs(e)
                if n.kind == "cap"]
        if any(n.op for n in caps) or (s.kind == "clet" and any(tag for _, _, tag in s.dtype)):
            tags.add("captured_dtype")
    return tags


def walk_exprs(e):
    yield e
    for a in e.args:
        yield from walk_exprs(a)


def walk_stmts(stmts):
    for s in stmts:
        yield s
        for blk in (s.body, s.orelse):
            if blk:
                yield from walk_stmts(blk)


# --- generation -------------------------------------------------------------------------------------
def special_values(t):
    if is_int(t):
        lo, hi = _int_range(t)
        return [0, 1, -1 if is_signed(t) else 2, lo, hi, lo + 1, hi - 1, 2, 3, 7, BITS[t] - 1, BITS[t],
                BITS[t] + 1, hi // 2 + 1, -2 if is_signed(t) else hi // 3, 100 % (hi + 1), 5]
    f = np.finfo(NP[t])
    return [0.0, -0.0, 1.0, -1.0, 0.5, 1.5, 2.5, -2.5, 3.0, 0.1, -7.25, math.inf, -math.inf, math.nan,
            float(f.max), -float(f.max), float(f.tiny), float(f.smallest_subnormal), float(f.eps),
            1e10 if t != "f16" else 1000.0, 16777217.0, 1e-30, 65504.0, 4096.5, -0.75]


def random_value(rng, t):
    if rng.random() < 0.45:
        return make(t, rng.choice(special_values(t)))
    if is_int(t):
        lo, hi = _int_range(t)
        if rng.random() < 0.5:
            return make(t, rng.randint(-20 if is_signed(t) else 0, 20))
        return make(t, rng.randint(lo, hi))
    if rng.random() < 0.4:
        return make(t, rng.choice([-1, 1]) * rng.randint(0, 1000) / rng.choice([1, 2, 4, 8, 3, 10]))
    bits = rng.getrandbits(BITS[t])
    v = np.asarray(bits, dtype=NP["u" + t[1:]]).view(NP[t])[()]
    return v


class Generator:
    """Random cases. `off`: features to leave out (names of KNOWN_BUGS rows)."""

    SIZES = {"small": (3, (2, 5)), "normal": (4, (3, 10))}  # expression depth, statements per case

    def __init__(self, seed, off=(), arch=None, size="normal"):
        self.max_depth, self.nstmts = self.SIZES[size]
        self.rng = random.Random(seed)
        self.off = set(off)
        self.arch = arch
        self.limits = active_limits(arch) if arch else set()
        self._verdicts = {}
        self.in_func = False   # generating a @qd.func body: no ndarrays in scope
        self.focus = None      # a compound local the statements being generated mostly reassign
        self.whole_only = False  # this case assigns vector / matrix / struct locals only as a whole
        self.caps_on = "captured" not in self.off

    def avoid(self, limit):
        """Whether to steer around LIMITS row `limit` on this arch (counted in the case)."""
        if limit in self.limits:
            self.case.avoided.add(limit)
            return True
        return False

    def atomic_rejected(self, op, t):
        if self.arch is None:
            return False
        if (op, t) not in self._verdicts:
            from quadrants import _core
            from quadrants._lib import runtime
            feats = list(runtime.program().runtime.features)
            kind, _ = _core.atomic_lowering(self.arch, op, getattr(_core.DataType, t), False, feats)
            self._verdicts[(op, t)] = kind == "rejected"
        return self._verdicts[(op, t)] and self.avoid("atomic_rejected")

    # expressions --------------------------------------------------------------------------------
    def pick_dtype(self, ints_only=False):
        if ints_only:
            return self.rng.choice(INTS)
        return self.rng.choice(DTYPES + ["i32", "f32", "i32", "f32", "f64", "i64"])

    def leaf(self, t):
        r = self.rng.random()
        vars_ = [n for n, vt in self.scope_vars() if vt == t]
        if vars_ and r < (0.5 if self.in_func else 0.3):
            return E("var", t, name=self.rng.choice(vars_))
        if self.in_func:  # no ndarrays in a func (nor in a layout kernel's values)
            return E("const", t, val=random_value(self.rng, t))
        if r < 0.55:
            idx = len(self.case.inputs[t])
            self.case.inputs[t].append(random_value(self.rng, t))
            return E("in", t, val=idx)
        if r < 0.65 and t in ATOMIC_MEM_DTYPES:
            return E("load", t, args=[self.index()])
        return E("const", t, val=random_value(self.rng, t))

    def exact(self, e, t):
        """e converted to dtype t where promotion gave it another dtype."""
        if e.dtype == t:
            return e
        if e.kind in ("lit", "cap"):  # a cast of a Python number is a compile-time conversion: use a typed leaf
            return self.leaf(t)
        return E("cast", t, args=[e])

    def index(self):
        """An index into the case's scratch cells: a constant, or (int expression) % SCRATCH."""
        if self.rng.random() < 0.5:
            return E("const", "i32", val=np.int32(self.rng.randrange(SCRATCH)))
        t = self.rng.choice(["i32", "i32", "i8", "u16", "i64"])
        return E("bin", t, "%", [self.exact(self.expr(t, 1), t), E("lit", t, val=SCRATCH)])

    def expr(self, t, depth):
        """A random expression, usually of dtype t (promotion may give a wider one: see .dtype)."""
        rng = self.rng
        depth = min(depth, self.max_depth)
        if depth <= 0 or rng.random() < 0.22:
            return self.leaf(t)
        r = rng.random()
        if r < 0.45:
            return self.binary_expr(t, depth)
        if r < 0.62:
            return self.unary_expr(t, depth)
        if r < 0.78:
            src = self.pick_dtype()
            return self.exact(self.expr(src, depth - 1), t) if src != t else self.leaf(t)
        if r < 0.84:
            partners = [u for u in DTYPES if BITS[u] == BITS[t] and u != t]
            if partners:
                p = rng.choice(partners)
                return E("bitcast", t, args=[self.exact(self.expr(p, depth - 1), p)])
            return self.leaf(t)
        if r < 0.92:
            return self.cond_expr_select(t, depth)
        return self.leaf(t)

    def cond_expr_select(self, t, depth):
        a, b = self.expr(t, depth - 1), self.expr(t, depth - 1)
        return E("select", promoted(a.dtype, b.dtype), op=self.rng.choice(["select", "ifexp"]),
                 args=[self.cond(depth - 1), a, b])

    def binary_expr(self, t, depth):
        rng = self.rng
        ops = ["+", "-", "*", "//", "%", "min", "max"]
        if is_int(t):
            ops += ["&", "|", "^", "<<", ">>", "**", "+", "-", "*"]
        else:
            ops += ["/", "+", "-", "*", "/"]
        if not is_int(t) and "float_floordiv_mod" in self.off:
            ops = [o for o in ops if o not in ("//", "%")]
        op = rng.choice(ops)
        if op in ("<<", ">>"):
            a = self.exact(self.expr(t, depth - 1), t)
            if rng.random() < 0.5:
                lit = rng.choice([0, 1, 3, 7, BITS[t] - 1, BITS[t], BITS[t] + 5, 63, 64])
                b = E("lit", literal_type(lit, t), val=lit)
            else:
                bt = rng.choice(INTS)
                b = self.exact(self.expr(bt, depth - 1), bt)
            return E("bin", t, op, [a, b])
        if op == "**":
            a = self.exact(self.expr(t, depth - 1), t)
            lit = rng.choice([0, 1, 2, 3, 5, 7, 13, 31, 64, -1, -2] if is_signed(t) else [0, 1, 2, 3, 5, 13, 64])
            b = E("lit", literal_type(lit, t), val=lit)
            return E("bin", promoted(t, b.dtype), op, [a, b])
        # operands: usually both of t; sometimes another dtype (promotion) or a Python literal
        a = self.expr(t, depth - 1)
        r = rng.random()
        if r < 0.2:
            v = random_value(rng, a.dtype)
            lit = int(v) if is_int(a.dtype) else float(v)
            if not is_int(a.dtype) and rng.random() < 0.3:
                lit = rng.choice([0, 1, -1, 2, 3, 1000, 2 ** 31, -(2 ** 40)])  # int literal, float operand
            b = E("lit", literal_type(lit, a.dtype), val=lit)
            if isinstance(lit, int) and lit >= 2 ** 63:  # LIMITS: u64_literal_over_2pow63
                b = E("const", a.dtype, val=v)
            if self.caps_on and rng.random() < 0.35:  # a captured number, or a captured value's element
                b = self.cap_read(a.dtype, op)
        elif r < 0.4:
            b = self.expr(self.pick_dtype(ints_only=op in ("&", "|", "^")), depth - 1)
        else:
            b = self.expr(t, depth - 1)
        if rng.random() < 0.5:
            a, b = b, a
        rt = promoted(a.dtype, b.dtype)
        if op in ("&", "|", "^") and not is_int(rt):
            a, b, rt = self.exact(a, t), self.exact(b, t), t
        if not is_int(rt) and "float_floordiv_mod" in self.off and op in ("//", "%"):
            op = "+"
        if op == "/" and is_int(rt):
            rt = DEFAULT_FP
        return E("bin", rt, op, [a, b])

    def unary_expr(self, t, depth):
        rng = self.rng
        x = self.expr(t, depth - 1)
        ops = ["-", "abs"] + (["~"] if is_int(x.dtype) else []) + ["sqrt", "floor", "ceil", "round"]
        if x.dtype in ("f64",) and "f64_round" in self.off:
            ops.remove("round")
        op = rng.choice(ops)
        rt = DEFAULT_FP if is_int(x.dtype) and op in ("sqrt", "floor", "ceil", "round") else x.dtype
        if rt == "f64" and op == "round" and "f64_round" in self.off:
            op = "floor"
        return E("un", rt, op, [x])

    def cond(self, depth):
        rng = self.rng
        r = rng.random()
        if r < 0.6 or depth <= 0:
            t1 = self.pick_dtype()
            t2 = t1 if rng.random() < 0.6 else self.pick_dtype()
            a, b = self.expr(t1, max(depth - 1, 0)), self.expr(t2, max(depth - 1, 0))
            ops = ["==", "!=", "<", "<=", ">", ">="]
            if rng.random() < 0.15:  # a < b <= c: b is evaluated once
                c = self.exact(self.expr(b.dtype, max(depth - 1, 0)), b.dtype)
                return E("chain", "i32", (rng.choice(ops), rng.choice(ops)), [a, b, c])
            return E("bin", "i32", rng.choice(ops), [a, b])
        if r < 0.75:
            return E("bin", "i32", rng.choice(["and", "or"]), [self.cond(depth - 1), self.cond(depth - 1)])
        if r < 0.85:
            return E("un", "i32", "not", [self.cond(depth - 1)])
        return self.expr(self.pick_dtype(), depth - 1)  # truthiness of any value

    # statements ---------------------------------------------------------------------------------
    def scope_vars(self, writable=False):
        return [(n, t) for scope in self.scopes for n, t in scope.items()
                if not n.startswith("@") and not (writable and (n in self.readonly or self.frozen(n)))]

    def frozen(self, name):
        """A component of a compound local in a case whose compounds are assigned only as a whole."""
        return self.whole_only and ("[" in name or "." in name)

    def new_name(self):
        self.nvars += 1
        return f"v{self.nvars}"

    def stmt(self, depth, in_loop):
        """One statement, or (captured values, funcs) a short list of them."""
        rng = self.rng
        if self.caps_on:
            focus = self.focus if self.focus and ("@" + self.focus) in self.scope_names() else None
            if focus and rng.random() < 0.4:
                return self.cset_stmt(focus)
            r = rng.random()
            if r < 0.045:
                return self.capture_scenario(depth, in_loop)
            if r < 0.07 and self.scope_compounds():
                return self.cset_stmt()
            if r < 0.085 and depth > 0 and not self.in_func:
                return self.call_stmt(depth)
        r = rng.random()
        vars_ = self.scope_vars(writable=True)
        if r < 0.25 or not vars_:
            if self.caps_on and rng.random() < 0.08:  # a local from a captured number or element
                return self.cap_let()
            t = self.pick_dtype()
            e = self.expr(t, 3)
            name = self.new_name()
            annot = self.pick_dtype() if rng.random() < 0.2 else None
            self.scopes[-1][name] = annot or e.dtype
            return S("let", name=name, dtype=annot, exprs=[e])
        if r < 0.33:
            name, t = rng.choice(vars_)
            e = self.expr(t if rng.random() < 0.7 else self.pick_dtype(), 3)
            return S("set", name=name, exprs=[e])
        if r < 0.43:
            return self.aug_stmt(*rng.choice(vars_))
        if r < 0.6:
            if self.in_func:
                return self.aug_stmt(*rng.choice(vars_))
            t = self.pick_dtype()
            e = self.expr(t, 4)
            st = t if rng.random() < 0.8 else self.pick_dtype()
            if rng.random() < 0.12:
                fn = rng.choice(MATH_FNS + MATH_BINARY)
                ft = rng.choice(FLOATS)
                args = [self.exact(self.expr(ft, 2), ft) for _ in range(2 if fn in MATH_BINARY else 1)]
                e, st = E("math", ft, fn, args), ft
            slot = self.case.nout[st]
            self.case.nout[st] += 1
            return S("store", dtype=st, val=slot, exprs=[e])
        if r < 0.75:
            if self.in_func and rng.random() < 0.5:
                return self.aug_stmt(*rng.choice(vars_))
            return self.atomic_stmt(vars_)
        if r < 0.82 and in_loop:
            return S("if", exprs=[self.cond(2)], body=[S(rng.choice(["break", "continue"]))], orelse=[])
        if depth <= 0:
            if rng.random() < 0.5 or self.in_func:
                return self.stmt(0, in_loop)
            return S("store", dtype="i32", val=self._slot("i32"), exprs=[self.expr("i32", 2)])
        if r < 0.88:
            return self.if_stmt(depth, in_loop)
        if r < 0.95:
            return self.for_stmt(depth)
        return self.while_stmt(depth)

    def aug_stmt(self, name, t):
        rng = self.rng
        ops = ["+", "-", "*", "//", "%", "min", "max"] + (["&", "|", "^", "<<", ">>"] if is_int(t) else ["/"])
        op = rng.choice(ops)
        if op in ("&", "|", "^", "<<", ">>"):
            et = t if op in ("&", "|", "^") or rng.random() < 0.5 else rng.choice(INTS)
            e = self.exact(self.expr(et, 2), et)
        else:
            e = self.expr(t if rng.random() < 0.7 else self.pick_dtype(), 2)
            if "float_floordiv_mod" in self.off and op in ("//", "%") and not is_int(promoted(t, e.dtype)):
                op = "+"
        return S("aug", name=name, op=op, exprs=[e])

    def if_stmt(self, depth, in_loop):
        c = self.cond(2)
        body = self.block(depth - 1, in_loop, self.rng.randint(1, 4))
        orelse = self.block(depth - 1, in_loop, self.rng.randint(0, 3))
        return S("if", exprs=[c], body=body, orelse=orelse)

    def for_stmt(self, depth):
        rng = self.rng
        name = self.new_name()

        def bound():
            if rng.random() < 0.6:
                return E("const", "i32", val=np.int32(rng.randint(-3, 5)))
            return E("bin", "i32", "%", [self.exact(self.expr("i32", 1), "i32"), E("lit", "i32", val=6)])
        r2 = rng.random()
        bounds = [bound()] if r2 < 0.5 else [bound(), bound()]
        step = rng.choice([1, 2, 3, -1, -2]) if r2 > 0.75 else None  # range(a, b, step): a constant step
        self.scopes.append({name: "i32"})
        self.readonly.add(name)
        body = self.block(depth - 1, "for", rng.randint(1, 4), new_scope=False)
        self.scopes.pop()
        return S("for", name=name, exprs=bounds, body=body, val=step)

    def while_stmt(self, depth):
        name = self.new_name()
        limit = self.rng.randint(1, 6)
        self.scopes.append({})
        self.readonly.add(name)
        body = self.block(depth - 1, "while", self.rng.randint(1, 3), new_scope=False)
        self.scopes.pop()
        return S("while", name=name, val=limit, exprs=[self.cond(2)], body=body)

    # captured Python-scope values ----------------------------------------------------------------
    def scope_names(self):
        return {n for scope in self.scopes for n in scope}

    def scope_compounds(self):
        """(name, layout) of the vector / matrix / struct locals in scope."""
        return [(n[1:], lay) for scope in self.scopes for n, lay in scope.items() if n.startswith("@")]

    def bind_compound(self, name, lay):
        for suf, t in lay["comps"]:
            self.scopes[-1][name + suf] = t
        self.scopes[-1]["@" + name] = lay

    def cap_value(self, decl, cls):
        """A component's value: of dtype decl, or (decl None) a Python number of class cls."""
        rng = self.rng
        if decl is not None:
            return random_value(rng, decl)
        if cls == "int":
            return int(random_value(rng, "i32"))
        return float(random_value(rng, rng.choice(["f32", "f32", "f64", "f16"])))

    def new_capture(self, kind=None, shape=None, cls=None, stype=None):
        """A new Python-scope value of the case (a global of the kernel's module)."""
        rng, case = self.rng, self.case
        kind = kind or rng.choice(["scalar", "vector", "vector", "matrix", "struct", "struct"])
        name = f"G{len(case.caps) + 1}"
        comps, groups = {}, {}
        if kind == "scalar":
            decl = self.pick_dtype() if rng.random() < 0.4 else None
            v = self.cap_value(decl, cls or rng.choice(["int", "float"]))
            comps[""] = (decl, v)
            src = f"qd.{decl}({_val_src(v)})" if decl else _val_src(v)
        elif kind in ("vector", "matrix"):
            shape = shape or ((rng.choice([2, 2, 3, 3, 4]),) if kind == "vector" else
                              rng.choice([(2, 2), (2, 2), (2, 3), (3, 2), (3, 3)]))
            kind = "vector" if len(shape) == 1 else "matrix"
            decl = None
            if rng.random() < 0.4:
                decl = self.pick_dtype()
                if cls and (cls == "int") != is_int(decl):
                    decl = rng.choice(INTS if cls == "int" else FLOATS)
            c = cls or (("int" if is_int(decl) else "float") if decl else rng.choice(["int", "float"]))
            vals = {ix: self.cap_value(decl, c) for ix in np.ndindex(*shape)}
            comps = {_suffix(ix): (decl, v) for ix, v in vals.items()}
            groups[""] = shape
            if len(shape) == 1:
                items = ", ".join(_val_src(v) for v in vals.values())
                src = f"qd.Vector([{items}])" if not decl else rng.choice(
                    [f"qd.Vector([{items}], dt=qd.{decl})", f"qd.types.vector({shape[0]}, qd.{decl})({items})"])
            else:
                rows = ", ".join("[" + ", ".join(_val_src(vals[(i, j)]) for j in range(shape[1])) + "]"
                                 for i in range(shape[0]))
                src = rng.choice([f"qd.Matrix([{rows}], dt=qd.{decl})",
                                  f"qd.types.matrix({shape[0]}, {shape[1]}, qd.{decl})([{rows}])"]) \
                    if decl else f"qd.Matrix([{rows}])"
        else:
            if stype is None and case.stypes and rng.random() < 0.4:
                stype = rng.choice(sorted(case.stypes))
            if stype is None:
                stype = f"ST{len(case.stypes) + 1}"
                members = []
                for mname in rng.sample(["a", "m", "v", "w", "q"], rng.randint(1, 3)):
                    t = rng.choice(["i32", "f32", "i32", "f32"] + DTYPES)
                    members.append((mname, t, rng.choice([(), (), (), (2,), (2,), (3,), (2, 2)])))
                tsrc = ", ".join(f"{m}=qd.{t}" if not sh else f"{m}=qd.types.vector({sh[0]}, qd.{t})" if len(sh) == 1
                                 else f"{m}=qd.types.matrix({sh[0]}, {sh[1]}, qd.{t})" for m, t, sh in members)
                case.stypes[stype] = (members, f"{{p}}{stype} = qd.types.struct({tsrc})")
            members = case.stypes[stype][0]
            kw = []
            for m, t, sh in members:
                if not sh:
                    v = self.cap_value(t, None)
                    comps[f".{m}"] = (t, v)
                    kw.append(f"{m}={_val_src(v)}")
                    continue
                vals = {ix: self.cap_value(t, None) for ix in np.ndindex(*sh)}
                comps.update({f".{m}{_suffix(ix)}": (t, v) for ix, v in vals.items()})
                groups[f".{m}"] = sh
                if len(sh) == 1:
                    kw.append(f"{m}=qd.Vector([{', '.join(_val_src(v) for v in vals.values())}], dt=qd.{t})")
                else:
                    rows = ", ".join("[" + ", ".join(_val_src(vals[(i, j)]) for j in range(sh[1])) + "]"
                                     for i in range(sh[0]))
                    kw.append(f"{m}=qd.Matrix([{rows}], dt=qd.{t})")
            groups[""] = "struct"
            src = f"{{p}}{stype}({', '.join(kw)})"
        cap = Capture(name, kind, comps, groups, f"{{p}}{name} = {src}", stype if kind == "struct" else None)
        case.caps[name] = cap
        return cap

    def cap_operand(self, cap, suf, other, op):
        """A captured number or element as the operand of `op` next to a value of dtype `other`:
        a Python number takes a literal's type; a typed one keeps its dtype (the implementation
        takes it as a literal: tagged where that changes the operation's type)."""
        decl, v = cap.comps[suf]
        lit_t = literal_type(py_number(v), other)
        if decl is None:
            return E("cap", lit_t, val=(cap.name, suf))
        tag = "captured_dtype" if result_dtype(op, other, decl) != result_dtype(op, other, lit_t) else None
        return E("cap", decl, op=tag, val=(cap.name, suf))

    def cap_read(self, other, op):
        rng = self.rng
        caps = list(self.case.caps.values())
        cap = rng.choice(caps) if caps and rng.random() < 0.6 else self.new_capture()
        suf = rng.choice(sorted(cap.comps))
        if isinstance(cap.comps[suf][1], (int, np.integer)) and abs(int(cap.comps[suf][1])) >= 2 ** 53 and \
                not is_int(other):
            return E("lit", literal_type(1, other), val=1)  # (kept exact: the front end goes through a double)
        return self.cap_operand(cap, suf, other, op)

    def cap_let(self):
        """v = G (a captured number) or v = G[i] / G.m (an element): a local of the literal's type, or of
        the typed value's dtype."""
        rng = self.rng
        caps = list(self.case.caps.values())
        cap = rng.choice(caps) if caps and rng.random() < 0.5 else self.new_capture("scalar")
        suf = rng.choice(sorted(cap.comps))
        decl, v = cap.comps[suf]
        t = decl or default_type(v)
        tag = "captured_dtype" if cap.kind == "scalar" and decl and decl != default_type(v) else None
        name = self.new_name()
        self.scopes[-1][name] = t
        return S("let", name=name, exprs=[E("cap", t, op=tag, val=(cap.name, suf))])

    def clet_stmt(self):
        """p = G (a vector, matrix or struct made outside the kernel), or q = G.v (a struct's member)."""
        rng = self.rng
        caps = [c for c in self.case.caps.values() if c.kind != "scalar"]
        cap = rng.choice(caps) if caps and rng.random() < 0.4 else \
            self.new_capture(rng.choice(["vector", "matrix", "struct", "struct"]))
        gsuf = ""
        if cap.kind == "struct" and len(cap.groups) > 1 and rng.random() < 0.3:
            gsuf = rng.choice(sorted(g for g in cap.groups if g))
        comps, lcomps = [], []
        for suf, decl, v in cap.group(gsuf):
            t = decl or default_type(v)
            comps.append((suf, t, None))  # vectors, matrices and structs keep their declared dtypes
            lcomps.append((suf, t))
        if gsuf:
            lay = {"comps": lcomps, "groups": {"": cap.groups[gsuf]}, "stype": None}
        else:
            lay = {"comps": lcomps, "groups": dict(cap.groups), "stype": cap.stype}
        name = self.new_name()
        self.bind_compound(name, lay)
        return S("clet", name=name, dtype=tuple(comps), val=(cap.name, gsuf))

    def cset_stmt(self, name=None):
        """A compound local (or one of its vectors / matrices) assigned as a whole, or one component."""
        rng = self.rng
        compounds = self.scope_compounds()
        if name is None:
            name, lay = rng.choice(compounds)
        else:
            lay = dict(compounds)[name]
        if rng.random() < 0.25 and not self.whole_only:  # one component: p[1] = e, b.m += e
            suf, t = rng.choice(lay["comps"])
            if rng.random() < 0.5:
                return S("set", name=name + suf, exprs=[self.expr(t if rng.random() < 0.7 else self.pick_dtype(), 3)])
            return self.aug_stmt(name + suf, t)
        gsuf, shape = rng.choice(sorted(lay["groups"].items()))
        if lay["groups"].get("") == "struct" and (shape == "struct" or self.whole_only) and rng.random() < 0.7:
            # b = G2 on a struct: less often than b.v = ... or b.m += ..., or
            # (components stored only as a whole in this case) some other statement
            members = sorted(g for g in lay["groups"] if g)
            if self.whole_only:
                prev, self.focus = self.focus, None
                out = self.stmt(0, None)
                self.focus = prev
                return out
            if not members:
                suf, t = rng.choice(lay["comps"])
                return self.aug_stmt(name + suf, t)
            gsuf = rng.choice(members)
            shape = lay["groups"][gsuf]
        elif lay["groups"].get("") == "struct" and self.whole_only:
            gsuf, shape = "", "struct"
        targets = tuple((name + suf, t) for suf, t in lay["comps"] if gsuf == "" or suf.startswith(gsuf + "["))
        tname = name + gsuf
        if shape == "struct":  # b = G: another value of the same struct type
            same = [c for c in self.case.caps.values() if c.stype == lay["stype"]]
            cap = rng.choice(same) if same and rng.random() < 0.5 else self.new_capture("struct", stype=lay["stype"])
            src = [E("cap", d, val=(cap.name, suf)) for suf, d, _ in cap.group("")]
            return S("cset", name=tname, dtype=targets, op=("cap", "struct"), val=(cap.name, "", src))
        tcls = "int" if is_int(targets[0][1]) else "float"
        same_shape = [(c, g) for c in self.case.caps.values() for g, sh in c.groups.items() if sh == shape]

        def pick_src(cls=None):
            ok = [(c, g) for c, g in same_shape if cls is None or
                  all(("int" if (d and is_int(d)) or (d is None and isinstance(v, int)) else "float") == cls
                      for _, d, v in c.group(g))]
            if ok and rng.random() < 0.6:
                return rng.choice(ok)
            return self.new_capture("vector" if len(shape) == 1 else "matrix", shape=shape, cls=cls), ""

        def operands(cap, g, op):
            return [self.cap_operand(cap, g + suf, t, op) for (suf, _, _), (_, t) in zip(cap.group(g), targets)]
        r = rng.random()
        square_int = len(shape) == 2 and shape[0] == shape[1] and tcls == "int"
        if square_int and r < 0.12:  # p = p @ G (integers: exact in any order)
            cap, g = pick_src("int")
            return S("cset", name=tname, dtype=targets, op=("matmul", rng.random() < 0.5, "cap"),
                     val=(cap.name, g, [self.cap_operand(cap, g + suf, targets[0][1], "*")
                                        for suf, _, _ in cap.group(g)]))
        if r < 0.3:  # p = G
            cap, g = pick_src(tcls)
            src = [E("cap", d or literal_type(py_number(v), t), val=(cap.name, g + suf))
                   for (suf, d, v), (_, t) in zip(cap.group(g), targets)]
            return S("cset", name=tname, dtype=targets, op=("cap",), val=(cap.name, g, src))
        srck = rng.choice(["cap", "cap", "scalar", "scalar", "self"])
        form = "aug" if srck != "self" and not self.whole_only and rng.random() < 0.3 else "bin"
        ops = ["+", "-", "*"] + (["min", "max"] if form == "bin" else [])
        exprs, val = [], None
        if srck == "scalar":
            st = targets[0][1] if rng.random() < 0.6 else self.pick_dtype()
            exprs = [self.expr(st, 2)]
            scls = "int" if is_int(exprs[0].dtype) else "float"
        elif srck == "cap":
            cap, g = pick_src(tcls if rng.random() < 0.7 else None)
            scls = "int" if all((d and is_int(d)) or (d is None and isinstance(v, int)) for _, d, v in cap.group(g)) \
                else "float"
        else:
            scls = tcls
        if tcls == "int" and scls == "int":
            ops += ["//", "%", "&", "|", "^"]
        elif "float_floordiv_mod" not in self.off:
            ops += ["//", "%", "/"]
        else:
            ops += ["/"]
        op = rng.choice(ops)
        if srck == "cap":
            val = (cap.name, g, operands(cap, g, op))
        fop = ("bin", op, rng.random() < 0.4, srck) if form == "bin" else ("aug", op, srck)
        return S("cset", name=tname, dtype=targets, op=fop, exprs=exprs, val=val)

    def sweep(self, name):
        """Stores of every component of a compound local (its final values)."""
        lay = dict(self.scope_compounds()).get(name)
        if lay is None or self.in_func:
            return []
        return [S("store", dtype=t, val=self._slot(t), exprs=[E("var", t, name=name + suf)]) for suf, t in lay["comps"]]

    def capture_scenario(self, depth, in_loop):
        """p = G, then a loop or branch that mostly reassigns p (nested loops and branches below it,
        conditions on run-time data), then p's final values stored."""
        out = [self.clet_stmt()]
        name = out[0].name
        prev, self.focus = self.focus, name
        kind = self.rng.choice(["for", "for", "while", "if"])
        d = max(depth, 1)
        out.append(self.for_stmt(d) if kind == "for" else self.while_stmt(d) if kind == "while" else
                   self.if_stmt(d, in_loop))
        if self.rng.random() < 0.3:
            out += self._as_list(self.cset_stmt(name))
        self.focus = prev
        return out + self.sweep(name)

    def call_stmt(self, depth):
        """r = f(args): a @qd.func whose body sets locals from captured values and reassigns them in
        loops and branches; it returns one of them (a vector, matrix or struct) or a scalar."""
        rng = self.rng
        args = [self.expr(self.pick_dtype(), 2) for _ in range(rng.randint(1, 3))]
        params = [self.new_name() for _ in args]
        cargs = []
        compounds = self.scope_compounds()
        if compounds and rng.random() < 0.4:
            cn, lay = rng.choice(compounds)
            cargs.append((self.new_name(), cn, lay))
        saved = self.scopes, self.in_func, self.focus
        self.scopes = [{p: a.dtype for p, a in zip(params, args)}]
        for pn, _, lay in cargs:
            self.bind_compound(pn, lay)
        self.in_func, self.focus = True, None
        body = []
        for _ in range(rng.randint(1, 2)):
            body += self.capture_scenario(depth - 1, None) if rng.random() < 0.6 else \
                self._as_list(self.stmt(depth - 1, None))
        fcomps = self.scope_compounds()
        if fcomps and rng.random() < 0.7:
            rn, rlay = rng.choice(fcomps)
            ret = S("return", name=rn, dtype=tuple(rlay["comps"]))
        else:
            rlay = None
            ret = S("return", exprs=[self.expr(self.pick_dtype(), 3)])
        body.append(ret)
        self.scopes, self.in_func, self.focus = saved
        name = self.new_name()
        if rlay is not None:
            self.bind_compound(name, {"comps": list(rlay["comps"]), "groups": dict(rlay["groups"]),
                                      "stype": rlay["stype"]})
            out = [S("call", name=name, dtype=tuple(rlay["comps"]), exprs=args, body=body, val=self.case.nfuncs,
                     op=(tuple(params), tuple((pn, cn, tuple(s for s, _ in lay["comps"])) for pn, cn, lay in cargs)))]
            out += self.sweep(name)
        else:
            t = ret.exprs[0].dtype
            self.scopes[-1][name] = t
            out = [S("call", name=name, dtype=None, exprs=args, body=body, val=self.case.nfuncs,
                     op=(tuple(params), tuple((pn, cn, tuple(s for s, _ in lay["comps"])) for pn, cn, lay in cargs))),
                   S("store", dtype=t, val=self._slot(t), exprs=[E("var", t, name=name)])]
        self.case.nfuncs += 1
        return out

    @staticmethod
    def _as_list(s):
        return s if isinstance(s, list) else [s]

    def _slot(self, t):
        self.case.nout[t] += 1
        return self.case.nout[t] - 1

    def atomic_stmt(self, vars_):
        rng = self.rng
        on_var = (rng.random() < 0.25 or self.in_func) and vars_
        if on_var:
            name, t = rng.choice(vars_)
            target = E("var", t, name=name)
        else:
            t = rng.choice(ATOMIC_MEM_DTYPES)
            target = E("load", t, args=[self.index()])
        ops = ATOMIC_OPS if is_int(t) else [o for o in ATOMIC_OPS if o not in INT_ONLY_ATOMICS]
        op = rng.choice(ops)
        if not on_var and self.atomic_rejected(op, t):
            target.dtype = t = rng.choice(["i32", "u32", "f32"])
            op = rng.choice(ATOMIC_OPS if is_int(t) else [o for o in ATOMIC_OPS if o not in INT_ONLY_ATOMICS])
        vt = t if rng.random() < 0.75 else self.pick_dtype()
        if op in INT_ONLY_ATOMICS and not is_int(vt):
            vt = t
        operands = [self.expr(vt, 2)]
        if op == "cas":
            operands = [E("load", t, args=[target.args[0].copy()]) if not on_var and rng.random() < 0.5
                        else self.expr(t, 1), self.expr(t, 2)]
        if not on_var and op in AUG_ATOMIC.values() and rng.random() < 0.3:
            sym = {v: k for k, v in AUG_ATOMIC.items()}[op]
            return S("memaug", dtype=t, op=sym, exprs=[target.args[0], operands[0]])
        if not on_var and rng.random() < 0.12:  # *= //= %= /= <<= >>= on memory: plain read-modify-writes
            sym = rng.choice(["*", "//", "%", "<<", ">>"] if is_int(t) else ["*", "/", "//", "%"])
            if sym in ("<<", ">>"):
                bt = rng.choice(INTS)
                operands[0] = self.exact(self.expr(bt, 1), bt)
            return S("memaug", dtype=t, op=sym, exprs=[target.args[0], operands[0]])
        result = None
        if rng.random() < 0.8:
            result = self.new_name()
            self.scopes[-1][result] = t
        return S("atomic", name=result, op=op, exprs=[target] + operands)

    def block(self, depth, in_loop, n, new_scope=True):
        if new_scope:
            self.scopes.append({})
        out = []
        for _ in range(n):
            out += self._as_list(self.stmt(depth, in_loop))
        if new_scope:
            self.scopes.pop()
        return out

    def case_(self, seed, size=None):
        self.rng = random.Random(seed)
        self.case = Case(seed)
        self.scopes, self.nvars, self.readonly = [{}], 0, set()
        for t in ATOMIC_MEM_DTYPES:
            self.case.scratch[t] = [random_value(self.rng, t) for _ in range(SCRATCH)]
        self.in_func, self.focus = False, None
        # half the cases assign their compound locals only as a whole (p = p + G, p = G3, b = G2), the
        # others per component too (p[1] = e, b.m += e, p += G, b.v = ...)
        self.whole_only = self.caps_on and self.rng.random() < 0.5
        if self.whole_only:
            self.case.traits.add("whole_only")
        n = size or self.rng.randint(*self.nstmts)
        self.case.stmts = self.block(2, False, n, new_scope=False)
        return self.case


# --- the reference interpreter ----------------------------------------------------------------------
class _Break(Exception):
    pass


class _Continue(Exception):
    pass


def _float_vals(v):
    vals = v.vals if isinstance(v, Alts) else (v,) if not isinstance(v, (Unspec, Approx)) else ()
    return [x for x in vals if not is_int(dt(x))]


def _special(x):
    f = float(x)
    return not math.isfinite(f) or (f == 0 and math.copysign(1, f) < 0) or \
        (f != 0 and abs(f) < float(np.finfo(x.dtype).tiny))


def _inexact(op, a, b, r):
    """Whether a float + - * / rounded (only then can contraction or reassociation change it)."""
    from fractions import Fraction
    try:
        fa, fb, fr = Fraction(float(a)), Fraction(float(b)), Fraction(float(r))
    except (ValueError, OverflowError):
        return False
    if op == "/":
        return fb == 0 or fa / fb != fr
    return {"+": fa + fb, "-": fa - fb, "*": fa * fb}[op] != fr


def _float_conversion(e):
    """The float dtype the integer operands of e are converted to, or None."""
    if e.kind in ("cast", "un", "math"):
        return None if is_int(e.dtype) else e.dtype
    if e.kind == "select":
        t = promoted(e.args[1].dtype, e.args[2].dtype)
        return None if is_int(t) else t
    if e.kind == "bin" and e.op not in ("<<", ">>", "and", "or"):
        t = promoted(e.args[0].dtype, e.args[1].dtype)
        return DEFAULT_FP if is_int(t) and e.op in ("/", "atan2") else None if is_int(t) else t
    return None


def op_tags(e, args, result):
    """The known-bug classes (KNOWN_BUGS tags) one operation touches, from its operand and result values."""
    tags = set()
    fl = [x for a in args for x in _float_vals(a)] + _float_vals(result)
    if e.kind == "bin" and e.op == "//" and not is_int(e.dtype):
        a, b = (_float_vals(lift(lambda x: convert(x, e.dtype), v)) for v in args)  # as converted to e.dtype
        if any(np.isinf(x) for x in a) and any(np.isfinite(y) for y in b):
            tags.add("float_floordiv_mod")
    if e.kind == "un" and e.op == "round" and e.dtype == "f64":
        tags.add("f64_round")
    if e.kind == "math" and e.op == "atan2" and e.dtype == "f16":
        tags.add("f16_atan2")
    if fl and any(_special(x) for x in fl):
        tags.add("float_special")
    ft = _float_conversion(e)
    if ft:  # an integer operand converted to a float: did it round?
        for a, node in zip(args, e.args):
            if is_int(node.dtype):
                for x in (a.vals if isinstance(a, Alts) else (a,) if not isinstance(a, (Unspec, Approx)) else ()):
                    f = make(ft, x)
                    if not np.isfinite(f) or int(f) != int(x):
                        tags.add("int_float_rounding")
    if e.kind == "bin" and e.op in ("+", "-", "*", "/") and not is_int(e.dtype):
        xs, ys, rs = _float_vals(args[0]), _float_vals(args[1]), _float_vals(result)
        if xs and ys and rs and any(_inexact(e.op, convert(x, e.dtype), convert(y, e.dtype), r)
                                    for x in xs for y in ys for r in rs[:1]):
            tags.add("float_rounding")
    return tags


class Reference:
    """Runs a case on its initial memory. `mem[(kind, dtype)]` are the final cells; `tags` the same
    cells' KNOWN_BUGS tags: the classes of operations the value depends on (data or control)."""

    def __init__(self, case):
        self.case = case
        self.mem, self.tags = {}, {}
        for t in DTYPES:
            self.mem[("out", t)] = [make(t, 0) for _ in range(case.nout[t])]
            self.mem[("sc", t)] = list(case.scratch[t])
            for kind in ("out", "sc"):
                self.tags[(kind, t)] = [frozenset()] * len(self.mem[(kind, t)])
        self.iters = 0
        self.ctl = [frozenset()]  # tags of the conditions the current statement depends on
        self.acc = []             # per enclosing loop: tags of every condition evaluated in it
        self.sticky = {}          # variable -> tags of its declaration (a dtype the implementation gets wrong)

    def run(self):
        self.case.traits -= {"loop_iters_65535"}  # recomputed (a shrunk copy may lose them)
        self.block(self.case.stmts, [{}])
        if self.iters > 65535:
            self.case.traits.add("loop_iters_65535")
        self.case.tags = self.tags
        return self.mem

    def lookup(self, env, name):
        for scope in reversed(env):
            if name in scope:
                return scope[name]
        raise AssertionError(f"undefined {name}")

    def assign(self, env, name, v, tags):
        for scope in reversed(env):
            if name in scope:
                t = scope[name][0]
                scope[name] = (t, self.conv(v, t), tags | self.ctl[-1] | self.sticky.get(name, frozenset()))
                return
        raise AssertionError(name)

    @staticmethod
    def conv(v, t):
        return lift(lambda x: convert(x, t), v)

    def index(self, env, e):
        i, tags = self.ev(env, e)
        if isinstance(i, (Unspec, Alts)):
            raise CaseUnspecified(f"index {i}")
        return int(i), tags

    def ev(self, env, e):
        """(value, tags) of an expression."""
        k = e.kind
        if k == "const":
            return e.val, frozenset()
        if k == "lit":
            return make(e.dtype, e.val), frozenset()
        if k == "in":
            return self.case.inputs[e.dtype][e.val], frozenset()
        if k == "var":
            _, v, tags = self.lookup(env, e.name)
            return v, tags | self.sticky.get(e.name, frozenset())
        if k == "cap":  # a captured number or element: of the node's dtype (a literal's, or its own)
            decl, v = self.case.caps[e.val[0]].comps[e.val[1]]
            return (make(e.dtype, v) if decl is None else convert(v, e.dtype)), \
                frozenset([e.op] if e.op else [])
        if k == "load":
            i, itags = self.index(env, e.args[0])
            return self.mem[("sc", e.dtype)][i], itags | self.tags[("sc", e.dtype)][i]
        evs = [self.ev(env, a) for a in e.args]
        args = [v for v, _ in evs]
        tags = frozenset().union(*[t for _, t in evs])
        if k == "un":
            r = lift(lambda x: unary(e.op, x), args[0])
        elif k == "bin":
            r = lift(lambda x, y: binary(e.op, x, y), args[0], args[1])
        elif k == "chain":
            r = lift(lambda x, y, z: binary("and", binary(e.op[0], x, y), binary(e.op[1], y, z)), *args)
        elif k == "cast":
            r = self.conv(args[0], e.dtype)
        elif k == "bitcast":
            r = lift(lambda x: bit_cast(x, e.dtype), args[0])
        elif k == "select":
            c, a, b = args
            t = promoted(e.args[1].dtype, e.args[2].dtype)
            a, b = self.conv(a, t), self.conv(b, t)
            if isinstance(c, Unspec):
                r = c
            else:
                cs = {truth(x) for x in (c.vals if isinstance(c, Alts) else (c,))}
                r = lift(lambda x, y: alts([x, y]), a, b) if len(cs) > 1 else a if cs.pop() else b
        elif k == "math":
            args = [self.conv(a, e.dtype) for a in args]
            bad = [a for a in args if isinstance(a, (Unspec, Alts))]
            r = Unspec(f"{e.op} of {bad[0]}") if bad else \
                Approx(_math_exact(e.op, args), e.dtype, e.op, tuple(args))
        else:
            raise AssertionError(k)
        return r, tags | op_tags(e, args, r)

    def cond(self, env, e):
        c, tags = self.ev(env, e)
        if isinstance(c, Unspec):
            raise CaseUnspecified(f"condition {c}")
        vals = {truth(x) for x in (c.vals if isinstance(c, Alts) else (c,))}
        if len(vals) > 1:
            raise CaseUnspecified("condition on an ambiguous value")
        for a in self.acc:
            a |= tags
        return vals.pop(), tags

    def taint(self, stmts, env, tags):
        """What a branch or loop may write depends on its conditions, taken or not (implicit flow)."""
        if not tags:
            return
        for s in walk_stmts(stmts):
            names = [s.name] if s.kind in ("set", "aug") else \
                [s.exprs[0].name] if s.kind == "atomic" and s.exprs[0].kind == "var" else \
                [n for n, _ in s.dtype] if s.kind == "cset" else []
            for n in names:
                for scope in reversed(env):
                    if n in scope:
                        t, v, old = scope[n]
                        scope[n] = (t, v, old | tags)
                        break
            if s.kind == "store":
                self.tags[("out", s.dtype)][s.val] |= tags
            mem = s.dtype if s.kind == "memaug" else s.exprs[0].dtype \
                if s.kind == "atomic" and s.exprs[0].kind == "load" else None
            if mem:
                self.tags[("sc", mem)] = [x | tags for x in self.tags[("sc", mem)]]

    def block(self, stmts, env, ctl=frozenset()):
        env = env + [{}]
        self.ctl.append(self.ctl[-1] | ctl)
        try:
            for s in stmts:
                self.stmt(s, env)
        finally:
            self.ctl.pop()

    def store(self, kind, t, i, v, tags, itags=frozenset()):
        self.mem[(kind, t)][i] = v
        self.tags[(kind, t)][i] = tags | self.ctl[-1]
        if itags:  # a write at an index that depends on a known bug may land on any cell
            self.tags[(kind, t)] = [x | itags for x in self.tags[(kind, t)]]

    def compound_set(self, s, env):
        """A vector / matrix / struct local (or a group of its components) assigned as a whole:
        every new component is computed from the old values, then all are assigned."""
        targets, form = s.dtype, s.op
        src = s.val[2] if s.val else None
        cur = [E("var", t, name=n) for n, t in targets]
        if form[0] == "matmul":
            n = math.isqrt(len(targets))
            a, b = (src, cur) if form[1] else (cur, src)
            exprs = []
            for i in range(n):
                for j in range(n):
                    acc = None
                    for k in range(n):
                        x, y = a[i * n + k], b[k * n + j]
                        term = E("bin", result_dtype("*", x.dtype, y.dtype), "*", [x, y])
                        acc = term if acc is None else \
                            E("bin", result_dtype("+", acc.dtype, term.dtype), "+", [acc, term])
                    exprs.append(acc)
        elif form[0] == "cap":
            exprs = src
        else:
            op, srck = form[1], form[-1]
            exprs = []
            for idx, c in enumerate(cur):
                other = src[idx] if srck == "cap" else s.exprs[0] if srck == "scalar" else c
                x, y = (other, c) if form[0] == "bin" and form[2] else (c, other)
                exprs.append(E("bin", result_dtype(op, x.dtype, y.dtype), op, [x, y]))
        vals = [self.ev(env, e) for e in exprs]
        for (n, _), (v, tags) in zip(targets, vals):
            self.assign(env, n, v, tags)

    def call(self, s, env):
        """r = f(args): the func's parameters are copies of the arguments; its body runs in its own
        scope; r is what it returns (a scalar, or every component of a compound local)."""
        params, cparams = s.op
        fenv = [{}]
        for p, e in zip(params, s.exprs):
            v, tags = self.ev(env, e)
            fenv[0][p] = (e.dtype, v, tags | self.ctl[-1])
        for p, cname, sufs in cparams:
            for suf in sufs:
                t, v, tags = self.lookup(env, cname + suf)
                fenv[0][p + suf] = (t, v, tags | self.ctl[-1])
                if cname + suf in self.sticky:
                    self.sticky[p + suf] = self.sticky[cname + suf]
        for st in s.body[:-1]:
            self.stmt(st, fenv)
        ret = s.body[-1]
        if ret.exprs:
            v, tags = self.ev(fenv, ret.exprs[0])
            env[-1][s.name] = (ret.exprs[0].dtype, v, tags | self.ctl[-1])
            return
        for suf, _ in ret.dtype:
            t, v, tags = self.lookup(fenv, ret.name + suf)
            env[-1][s.name + suf] = (t, v, tags | self.ctl[-1] | self.sticky.get(ret.name + suf, frozenset()))
            if ret.name + suf in self.sticky:
                self.sticky[s.name + suf] = self.sticky[ret.name + suf]

    def stmt(self, s, env):
        k = s.kind
        if k == "let":
            v, tags = self.ev(env, s.exprs[0])
            t = s.dtype or s.exprs[0].dtype
            env[-1][s.name] = (t, self.conv(v, t), tags | self.ctl[-1])
            if s.exprs[0].kind == "cap" and s.exprs[0].op:
                self.sticky[s.name] = frozenset([s.exprs[0].op])
        elif k == "clet":
            cap = self.case.caps[s.val[0]]
            for suf, t, tag in s.dtype:
                decl, v = cap.comps[s.val[1] + suf]
                env[-1][s.name + suf] = (t, make(t, v) if decl is None else v, self.ctl[-1])
                if tag:
                    self.sticky[s.name + suf] = frozenset([tag])
        elif k == "cset":
            self.compound_set(s, env)
        elif k == "call":
            self.call(s, env)
        elif k == "set":
            self.assign(env, s.name, *self.ev(env, s.exprs[0]))
        elif k == "aug":
            t, cur, ctags = self.lookup(env, s.name)
            v, tags = self.ev(env, s.exprs[0])
            e = E("bin", promoted(t, s.exprs[0].dtype), s.op, [E("var", t), s.exprs[0]])
            r = lift(lambda x, y: binary(s.op, x, y), cur, v)
            self.assign(env, s.name, r, ctags | tags | op_tags(e, [cur, v], r))
        elif k == "store":
            v, tags = self.ev(env, s.exprs[0])
            if not isinstance(v, Approx):
                v = self.conv(v, s.dtype)
            self.store("out", s.dtype, s.val, v, tags)
        elif k == "memaug":
            i, itags = self.index(env, s.exprs[0])
            v, tags = self.ev(env, s.exprs[1])
            cell = self.mem[("sc", s.dtype)]
            if s.op in AUG_ATOMIC:  # atomic: the operand is converted to the cell's dtype first
                v = self.conv(v, s.dtype)
                new = lift(lambda o, x: atomic_result(AUG_ATOMIC[s.op], o, x, None)[0], cell[i], v)
                e = E("bin", s.dtype, s.op, [E("var", s.dtype), E("var", s.dtype)])
            else:  # plain: x[i] = x[i] op v, converted on the store
                e = E("bin", promoted(s.dtype, s.exprs[1].dtype) if s.op not in ("<<", ">>") else s.dtype, s.op,
                      [E("var", s.dtype), s.exprs[1]])
                if s.op == "/" and is_int(e.dtype):
                    e.dtype = DEFAULT_FP
                new = self.conv(lift(lambda o, x: binary(s.op, o, x), cell[i], v), s.dtype)
            self.store("sc", s.dtype, i, new, itags | tags | self.tags[("sc", s.dtype)][i] |
                       op_tags(e, [cell[i], v], new), itags)
        elif k == "atomic":
            target = s.exprs[0]
            t = target.dtype
            evs = [self.ev(env, x) for x in s.exprs[1:]]
            vals = [self.conv(v, t) for v, _ in evs]
            tags = frozenset().union(*[tg for _, tg in evs])
            if target.kind == "var":
                _, old, otags = self.lookup(env, target.name)
            else:
                i, itags = self.index(env, target.args[0])
                old, otags = self.mem[("sc", t)][i], self.tags[("sc", t)][i] | itags
            if s.op == "cas":
                new = lift(lambda o, x, d: atomic_result("cas", o, x, d)[0], old, vals[0], vals[1])
            else:
                new = lift(lambda o, x: atomic_result(s.op, o, x, None)[0], old, vals[0])
                sym = {"add": "+", "sub": "-", "mul": "*"}.get(s.op)
                if sym:
                    tags |= op_tags(E("bin", t, sym, [E("var", t), E("var", t)]), [old, vals[0]], new)
            if target.kind == "var":
                self.assign(env, target.name, new, tags | otags)
            else:
                self.store("sc", t, i, new, tags | otags, itags)
            if s.name:
                env[-1][s.name] = (t, old, otags | self.ctl[-1])
        elif k == "if":
            c, tags = self.cond(env, s.exprs[0])
            self.block(s.body if c else (s.orelse or []), env, tags)
            self.taint(s.body + (s.orelse or []), env, tags)
        elif k == "for":
            evs = [self.ev(env, x) for x in s.exprs]
            if any(isinstance(n, (Unspec, Alts)) for n, _ in evs):
                raise CaseUnspecified("loop bound")
            if len(range(*[int(n) for n, _ in evs], *([s.val] if s.val else []))) > 10000:
                raise CaseUnspecified("a loop of more than 10000 iterations")  # (a shrunk bound: `x` for `x % 6`)
            tags = frozenset().union(*[tg for _, tg in evs])
            self.ctl.append(self.ctl[-1] | tags)
            self.acc.append(set(tags))
            try:
                for i in range(*[int(n) for n, _ in evs], *([s.val] if s.val else [])):
                    self.iters += 1
                    try:
                        self.block(s.body, env + [{s.name: ("i32", np.int32(i), frozenset())}])
                    except _Break:
                        break
                    except _Continue:
                        continue
            finally:
                self.ctl.pop()
                self.taint(s.body, env, frozenset(self.acc.pop()))
        elif k == "while":
            env2 = env + [{s.name: ("i32", np.int32(0), frozenset())}]
            self.acc.append(set())
            try:
                while int(self.lookup(env2, s.name)[1]) < s.val:
                    self.iters += 1
                    env2[-1][s.name] = ("i32", np.int32(int(env2[-1][s.name][1]) + 1), frozenset())
                    try:
                        self.block(s.body, env2, frozenset(self.acc[-1]))
                    except _Break:
                        break
                    except _Continue:
                        continue
                    if self.cond(env2, s.exprs[0])[0]:
                        break
            finally:
                self.taint(s.body, env, frozenset(self.acc.pop()))
        elif k == "break":
            raise _Break()
        elif k == "continue":
            raise _Continue()
        else:
            raise AssertionError(k)


# --- emitting kernels ----------------------------------------------------------------------------------
def _float_src(v):
    f = float(v)
    if math.isnan(f):
        return "NAN"
    if math.isinf(f):
        return "INF" if f > 0 else "(-INF)"
    return repr(f) if f >= 0 and not (f == 0 and math.copysign(1, f) < 0) else f"({f!r})"


def const_src(v, t):
    if is_int(t):
        iv = int(v)
        if t == "u64" and iv >= 2 ** 63:  # LIMITS: u64_literal_over_2pow63
            return f"qd.bit_cast(qd.i64({iv - 2 ** 64}), qd.u64)"
        return f"qd.{t}({iv})" if iv >= 0 else f"qd.{t}(({iv}))"
    return f"qd.{t}({_float_src(v)})"


def lit_src(v):
    if isinstance(v, float):
        return _float_src(v)
    return str(v) if v >= 0 else f"({v})"


def expr_src(e, base):
    k = e.kind
    if k == "const":
        return const_src(e.val, e.dtype)
    if k == "lit":
        return lit_src(e.val)
    if k == "in":
        return f"in_{e.dtype}[{e.val + base['in'][e.dtype]}]"
    if k == "var":
        return e.name
    if k == "cap":
        return f"{base['cap']}{e.val[0]}{e.val[1]}"
    if k == "load":
        return f"sc_{e.dtype}[{base['sc'][e.dtype]} + {expr_src(e.args[0], base)}]"
    a = [expr_src(x, base) for x in e.args]
    if k == "un":
        if e.op in ("-", "~"):
            return f"({e.op}{a[0]})"
        if e.op == "not":
            return f"(not {a[0]})"
        return f"qd.{e.op}({a[0]})"
    if k == "bin":
        if e.op in ("min", "max"):
            return f"qd.{e.op}({a[0]}, {a[1]})"
        return f"({a[0]} {e.op} {a[1]})"
    if k == "chain":
        return f"({a[0]} {e.op[0]} {a[1]} {e.op[1]} {a[2]})"
    if k == "cast":
        return f"qd.cast({a[0]}, qd.{e.dtype})"
    if k == "bitcast":
        return f"qd.bit_cast({a[0]}, qd.{e.dtype})"
    if k == "select":
        return f"qd.select({a[0]}, {a[1]}, {a[2]})" if e.op == "select" else f"({a[1]} if {a[0]} else {a[2]})"
    if k == "math":
        if e.op in MATH_BINARY:
            return f"qd.{e.op}({a[0]}, {a[1]})"
        return f"qd.{e.op}({a[0]})"
    raise AssertionError(k)


def stmts_src(stmts, base, indent, lines):
    pad = "    " * indent
    for s in stmts:
        k = s.kind
        if k == "let":
            annot = f": qd.{s.dtype}" if s.dtype else ""
            lines.append(f"{pad}{s.name}{annot} = {expr_src(s.exprs[0], base)}")
        elif k == "set":
            lines.append(f"{pad}{s.name} = {expr_src(s.exprs[0], base)}")
        elif k == "aug":
            v = expr_src(s.exprs[0], base)
            if s.op in ("min", "max"):
                lines.append(f"{pad}{s.name} = qd.{s.op}({s.name}, {v})")
            else:
                lines.append(f"{pad}{s.name} {s.op}= {v}")
        elif k == "store":
            lines.append(f"{pad}out_{s.dtype}[{s.val + base['out'][s.dtype]}] = {expr_src(s.exprs[0], base)}")
        elif k == "memaug":
            lines.append(f"{pad}sc_{s.dtype}[{base['sc'][s.dtype]} + {expr_src(s.exprs[0], base)}] {s.op}= "
                         f"{expr_src(s.exprs[1], base)}")
        elif k == "atomic":
            tgt = expr_src(s.exprs[0], base)
            ops = ", ".join(expr_src(x, base) for x in s.exprs[1:])
            lhs = f"{s.name} = " if s.name else ""
            lines.append(f"{pad}{lhs}qd.atomic_{s.op}({tgt}, {ops})")
        elif k == "if":
            lines.append(f"{pad}if {expr_src(s.exprs[0], base)}:")
            stmts_src(s.body, base, indent + 1, lines) if s.body else lines.append(pad + "    pass")
            if s.orelse:
                lines.append(f"{pad}else:")
                stmts_src(s.orelse, base, indent + 1, lines)
        elif k == "for":
            args = [expr_src(x, base) for x in s.exprs] + ([str(s.val)] if s.val else [])
            lines.append(f"{pad}for {s.name} in range({', '.join(args)}):")
            stmts_src(s.body, base, indent + 1, lines) if s.body else lines.append(pad + "    pass")
        elif k == "while":
            lines.append(f"{pad}{s.name} = 0")
            lines.append(f"{pad}while {s.name} < {s.val}:")
            lines.append(f"{pad}    {s.name} += 1")
            stmts_src(s.body, base, indent + 1, lines)
            lines.append(f"{pad}    if {expr_src(s.exprs[0], base)}:")
            lines.append(f"{pad}        break")
        elif k in ("break", "continue"):
            lines.append(f"{pad}{k}")
        elif k == "clet":
            lines.append(f"{pad}{s.name} = {base['cap']}{s.val[0]}{s.val[1]}")
        elif k == "cset":
            form = s.op
            src = f"{base['cap']}{s.val[0]}{s.val[1]}" if s.val else \
                expr_src(s.exprs[0], base) if form[-1] == "scalar" else s.name
            if form[0] == "cap":
                lines.append(f"{pad}{s.name} = {src}")
            elif form[0] == "aug":
                lines.append(f"{pad}{s.name} {form[1]}= {src}")
            else:
                a, b = (src, s.name) if form[1 if form[0] == "matmul" else 2] else (s.name, src)
                op = "@" if form[0] == "matmul" else form[1]
                rhs = f"qd.{op}({a}, {b})" if op in ("min", "max") else f"{a} {op} {b}"
                lines.append(f"{pad}{s.name} = {rhs}")
        elif k == "call":
            args = [expr_src(e, base) for e in s.exprs] + [cn for _, cn, _ in s.op[1]]
            lines.append(f"{pad}{s.name} = {base['cap']}f{s.val}({', '.join(args)})")
        elif k == "return":
            lines.append(f"{pad}return {expr_src(s.exprs[0], base) if s.exprs else s.name}")
        else:
            raise AssertionError(k)


def module_src(case, base):
    """The Python-scope values and @qd.func helpers a case's kernel code refers to."""
    p = base["cap"]
    lines = [src.format(p=p) for _, src in case.stypes.values()]
    lines += [c.src.format(p=p) for c in case.caps.values()]
    for s in walk_stmts(case.stmts):
        if s.kind == "call":
            params = list(s.op[0]) + [pn for pn, _, _ in s.op[1]]
            lines += ["", "", "@qd.func", f"def {p}f{s.val}({', '.join(params)}):"]
            stmts_src(s.body, base, 1, lines)
    return lines


class Batch:
    """Cases laid out in one kernel: each case's inputs, outputs and scratch cells at an offset."""

    def __init__(self, cases):
        self.cases = cases
        self.bases = []
        tot = {kind: {t: 0 for t in DTYPES} for kind in ("in", "out", "sc")}
        used = set()
        for i, c in enumerate(cases):
            self.bases.append({kind: dict(v) for kind, v in tot.items()})
            self.bases[-1]["cap"] = f"c{i}_"  # the case's globals: c3_G1, c3_f0, ...
            for t in DTYPES:
                tot["in"][t] += len(c.inputs[t])
                tot["out"][t] += c.nout[t]
                tot["sc"][t] += len(c.scratch[t])
            used |= arrays_used(c)
        self.sizes = tot
        self.params = [(kind, t) for t in DTYPES for kind in ("in", "out", "sc") if (kind, t) in used]

    def source(self, name="fuzz_kernel"):
        params = [f"{kind}_{t}: qd.types.ndarray(dtype=qd.{t}, ndim=1)" for kind, t in self.params]
        lines, self.owner = [], {}  # owner: line number -> index of the case it belongs to

        def own(i, start):
            self.owner.update({n + 1: i for n in range(start, len(lines))})
        for i, (c, base) in enumerate(zip(self.cases, self.bases)):
            start = len(lines)
            lines += module_src(c, base)
            own(i, start)
        if lines:
            lines += ["", ""]
        head = len(lines)
        lines += ["@qd.kernel", f"def {name}({', '.join(params)}):"]
        if len(self.cases) == 1:
            lines.append("    for _ in range(1):")
            start = len(lines)
            stmts_src(self.cases[0].stmts, self.bases[0], 2, lines)
            own(0, start)
        else:  # one parallel loop; iteration i runs case i
            lines.append(f"    for lane in range({len(self.cases)}):")
            for i, c in enumerate(self.cases):
                lines.append(f"        if lane == {i}:")
                before = len(lines)
                stmts_src(c.stmts, self.bases[i], 3, lines)
                if len(lines) == before:
                    lines.append("            pass")
                own(i, before)
        if len(lines) == head + 2:
            lines.append("    pass")
        return "\n".join(lines) + "\n"

    def case_of_error(self, e):
        """The case whose line a front-end error names, or None."""
        import re
        m = re.search(r"<qd-fuzz-\d+>:(\d+)", str(e))
        return self.owner.get(int(m.group(1))) if m and getattr(self, "owner", None) else None

    def arrays(self):
        arrs = {}
        for kind, t in self.params:
            if True:
                vals = []
                for c in self.cases:
                    vals += (c.inputs[t] if kind == "in" else c.scratch[t] if kind == "sc"
                             else [make(t, 0)] * c.nout[t])
                # a zero-length ndarray is awkward for some backends: keep one padding cell
                arrs[f"{kind}_{t}"] = np.array(vals + [make(t, 0)], dtype=NP[t])
        return arrs


def arrays_used(case):
    """The (kind, dtype) arrays a case reads or writes."""
    used = set()
    for s in walk_stmts(case.stmts):
        if s.kind == "store":
            used.add(("out", s.dtype))
        if s.kind == "memaug":
            used.add(("sc", s.dtype))
        for e in s.exprs:
            for n in walk_exprs(e):
                if n.kind in ("in", "load"):
                    used.add(("in" if n.kind == "in" else "sc", n.dtype))
    return used


_counter = itertools.count()


def build_kernel(src, extra=None, name=None):
    """Compiles generated source into a @qd.kernel (registered with linecache for the front end):
    the one called `name`, or the first thing the source defines."""
    fname = f"<qd-fuzz-{next(_counter)}>"
    linecache.cache[fname] = (len(src), None, src.splitlines(True), fname)
    g = {"qd": qd, "np": np, "INF": math.inf, "NAN": math.nan}
    g.update(extra or {})
    exec(compile(src, fname, "exec"), g)
    if name:
        return g[name]
    return next(v for k, v in g.items()
                if k not in ("qd", "np", "INF", "NAN", "__builtins__") and k not in (extra or {}))


# --- comparing ----------------------------------------------------------------------------------------
def ulp(x, t):
    x = abs(float(x))
    f = np.finfo(NP[t])
    if not math.isfinite(x):
        return 0.0
    return float(np.spacing(NP[t].type(max(x, float(f.tiny)))))


# Tolerance of the transcendental functions (their results are compared, never fed to other
# operations). Default (cpu, cuda, amdgpu, and f64 everywhere: Quadrants' or the C library's code,
# docs/backends.md "Math functions"): 4 ulps of the result's dtype. Vulkan f16/f32 use GLSL.std.450
# "at the driver's precision": the Vulkan spec's bounds, which are absolute for sin/cos (2^-11) and
# log near 1 (2^-21), 3 + 2|x| ulps for exp, inherited from exp2(y * log2(x)) for pow and 4096 ulps
# for the atan family.
MATH_ULPS = 4
SPIRV_DRIVER_MATH = {("vulkan", "f16"), ("vulkan", "f32"), ("metal", "f16"), ("metal", "f32")}


def glsl_undefined(fn, args):
    """GLSL.std.450 leaves these results undefined (LIMITS glsl_math_domain)."""
    x = [float(a) for a in args]
    if not all(math.isfinite(v) for v in x):
        return True
    if fn == "log":
        return x[0] <= 0
    if fn in ("asin", "acos"):
        return abs(x[0]) > 1
    if fn == "atan2":
        return x[0] == 0 and x[1] == 0
    if fn == "pow":
        return x[0] < 0 or (x[0] == 0 and x[1] <= 0)
    if fn in ("sin", "cos", "tan"):
        return abs(x[0]) > math.pi * 1024
    return False


def math_ok(ref, got, arch):
    """True / False, or why the result is not compared (a str)."""
    t, x, g = ref.dtype, float(ref.exact), float(got)
    driver = (arch, t) in SPIRV_DRIVER_MATH
    if driver and glsl_undefined(ref.fn, ref.args):
        return "LIMITS 'glsl_math_domain'"
    if ref.fn in ("sin", "cos", "tan") and abs(float(ref.args[0])) > 1e5:
        return "trig beyond |x| 1e5 (docs: accuracy lost gradually beyond ~1e6)"
    rounded = float(make(t, x))
    if math.isnan(x) or math.isnan(g):
        return math.isnan(x) and math.isnan(g)
    if math.isinf(rounded) or math.isinf(g):
        # overflow: the result may round either way at the top of the range
        big = float(np.finfo(NP[t]).max)
        return (g > 0) == (x > 0) and abs(g) >= big * (1 - 2 ** -8) and abs(x) >= big * (1 - 2 ** -8)
    if not driver:
        return abs(g - x) <= (MATH_ULPS + 0.5) * ulp(x, t)
    a = [float(v) for v in ref.args]
    growth = abs(a[0]) if ref.fn == "exp" else abs(a[1] * math.log2(abs(a[0]) or 1.0)) if ref.fn == "pow" else 0.0
    ulps = 4096 if ref.fn in ("asin", "acos", "atan", "atan2", "tanh") else 3 + 2 * growth
    return abs(g - x) <= (ulps + 1) * ulp(x, t) + 2 ** -11 * (1 + growth) * (ref.fn not in ("exp",))


def ulp(x, t):
    x = abs(float(x))
    if not math.isfinite(x):
        return 0.0
    return float(np.spacing(NP[t].type(max(x, float(np.finfo(NP[t]).tiny)))))


def same(ref, got, arch):
    """Whether the arch's value `got` (a numpy scalar) matches the reference value, or why it is not
    compared (a str: unspecified by the docs or outside a documented accuracy range)."""
    if isinstance(ref, Unspec):
        return "unspecified by the docs"
    if isinstance(ref, Alts):
        return any(same(r, got, arch) for r in ref.vals)
    if isinstance(ref, Approx):
        return math_ok(ref, got, arch)
    return key(ref) == key(got)


class Mismatch:
    def __init__(self, case, arch, cell, expected, got, known):
        self.case, self.arch, self.cell, self.expected, self.got = case, arch, cell, expected, got
        self.known = known  # the KNOWN_BUGS rows the value depends on ([]: a new bug)

    def __repr__(self):
        tail = f"  [known: {', '.join(self.known)}]" if self.known else "  [NEW]"
        if self.cell is None:  # the kernel did not compile or run
            return f"{self.arch}: error {self.got}{tail}"
        kind, t, i = self.cell
        return f"{self.arch}: {kind}_{t}[{i}] expected {fmt(self.expected)}, got {fmt(self.got)}{tail}"


def error_text(e):
    """An exception as one line: its type and the last line of its message (not the location)."""
    lines = [x for x in str(e).strip().splitlines() if x.strip()]
    return f"{type(e).__name__}: {lines[-1].strip() if lines else ''}"


def like(m):
    """A predicate accepting mismatches of the same kind as m (for shrinking): the same error, or a
    value mismatch explained by the same KNOWN_BUGS rows (none: a new one)."""
    if m.cell is None:
        return lambda x: x.cell is None and x.got == m.got
    return lambda x: x.cell is not None and bool(x.known) == bool(m.known) and set(x.known) >= set(m.known)


class Stats:
    def __init__(self):
        self.cases = collections.Counter()        # arch -> cases run
        self.excluded = collections.Counter()     # (arch, reason) -> cases not run
        self.avoided = collections.Counter()      # (arch, reason) -> cases the generator steered
        self.not_compared = collections.Counter()  # (arch, why) -> values
        self.regenerated = 0
        self.compared = collections.Counter()
        self.kernels = collections.Counter()
        self.contended = collections.Counter()    # arch -> contended-atomic kernels run
        self.layouts = collections.Counter()      # arch -> nested-dense layouts run
        self.seconds = collections.Counter()
        self.errors = []

    def report(self):
        out = []
        for arch in sorted(set(self.cases) | set(self.contended) | set(self.layouts)):
            out.append(f"{arch}: {self.cases[arch]} cases in {self.kernels[arch]} kernels, "
                       f"{self.compared[arch]} values compared, {self.contended[arch]} contended-atomic "
                       f"kernels, {self.layouts[arch]} nested-dense layouts, {self.seconds[arch]:.1f} s")
        for (arch, why), n in sorted(self.avoided.items()):
            out.append(f"  {arch}: {n} case(s) steered around LIMITS '{why}'")
        for (arch, why), n in sorted(self.not_compared.items()):
            out.append(f"  {arch}: {n} value(s) not compared: {why}")
        for (arch, why), n in sorted(self.excluded.items()):
            out.append(f"  {arch}: {n} case(s) excluded by LIMITS '{why}'")
        out.append(f"  regenerated (control flow on an unspecified value): {self.regenerated}")
        return "\n".join(out)


def generate(seed, n, off=(), arch=None, size="normal"):
    """n cases for the arch (steering around its LIMITS) whose control flow is fully specified
    (others are regenerated and counted). Call after qd.init(arch) when arch is given."""
    gen = Generator(seed, off, arch, size)
    rng = random.Random(seed)
    cases, regenerated = [], 0
    while len(cases) < n:
        c = gen.case_(rng.getrandbits(48))
        try:
            c.expected = Reference(c).run()
        except CaseUnspecified:
            regenerated += 1
            continue
        cases.append(c)
    return cases, regenerated


def run_cases(cases, arch, stats, batch=None):
    """Runs cases on the current arch (qd.init done by the caller); returns the mismatches."""
    mismatches = []
    runnable = []
    for c in cases:
        for why in c.avoided:
            stats.avoided[(arch, why)] += 1
        if "loop_iters_65535" in c.traits and "loop_over_65535_iterations" in active_limits(arch):
            stats.excluded[(arch, "loop_over_65535_iterations")] += 1
            continue
        runnable.append(c)
    t0 = time.time()
    for group in batches(runnable, batch or batch_size(arch)):
        mismatches += run_group(group, arch, stats)
    stats.seconds[arch] += time.time() - t0
    stats.cases[arch] += len(runnable)
    return mismatches


MAX_NDARRAY_ARGS = 30  # LIMITS: storage_buffers_per_shader (32 on lavapipe, less the argument and temps buffers)


def batch_size(arch):
    """Cases per kernel: lavapipe's shader compile grows faster than linearly with the shader, so
    SPIR-V kernels take fewer cases (cold, 10 small cases compile in ~0.6 s there)."""
    return 10 if arch in ("vulkan", "metal") else 40


def batches(cases, size):
    """Groups of at most `size` cases whose kernel takes at most MAX_NDARRAY_ARGS ndarrays."""
    group, used = [], set()
    for c in cases:
        u = arrays_used(c)
        if group and (len(group) >= size or len(used | u) > MAX_NDARRAY_ARGS):
            yield group
            group, used = [], set()
        group.append(c)
        used |= u
    if group:
        yield group


def run_batch(batch, arch, stats=None):
    src = batch.source()
    kern = build_kernel(src, name="fuzz_kernel")
    arrs = batch.arrays()
    kern(*[arrs[f"{kind}_{t}"] for kind, t in batch.params])
    if stats is not None:
        stats.kernels[arch] += 1
    out = []
    for ci, c in enumerate(batch.cases):
        base = batch.bases[ci]
        for (kind, t), vals in c.expected.items():
            if (kind, t) not in batch.params:
                continue
            for j, ref in enumerate(vals):
                got = arrs[f"{kind}_{t}"][base[kind][t] + j]
                ok = same(ref, got, arch)
                if stats is not None:
                    if isinstance(ok, str):
                        stats.not_compared[(arch, ok)] += 1
                    else:
                        stats.compared[arch] += 1
                if ok is False:
                    known = known_classes(c.tags[(kind, t)][j] | case_tags(c), arch)
                    out.append(Mismatch(c, arch, (kind, t, j), ref, got, known))
    return out


def crashes(case, arch, timeout=120):
    """Whether the case alone kills the process (a signal) or hangs, run in a child process."""
    import os
    import subprocess
    import sys
    import tempfile
    c = case.copy()
    try:
        c.expected = Reference(c).run()
    except (CaseUnspecified, AssertionError, KeyError, IndexError):
        return False
    root = os.path.dirname(os.path.dirname(os.path.abspath(qd.__file__)))
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(repro(c, arch))
    try:
        r = subprocess.run([sys.executable, f.name, arch], capture_output=True, timeout=timeout,
                           env=dict(os.environ, PYTHONPATH=root))
        return r.returncode < 0
    except subprocess.TimeoutExpired:
        return True
    finally:
        os.unlink(f.name)


def run_group(cases, arch, stats=None):
    """run_batch, and where the kernel fails to compile or run, halves the group until each case that
    fails alone is found: it gives one mismatch with cell None (the error), attributed to KNOWN_BUGS by
    the case's constructs."""
    out, cases = [], list(cases)
    while True:
        b = Batch(cases)
        try:
            return out + run_batch(b, arch, stats)
        except Exception as e:
            i = 0 if len(cases) == 1 else b.case_of_error(e)
            if i is None:  # no line named: halve
                mid = len(cases) // 2
                return out + run_group(cases[:mid], arch, stats) + run_group(cases[mid:], arch, stats)
            c, text = cases.pop(i), error_text(e)
            out.append(Mismatch(c, arch, None, "runs", text, known_classes(construct_tags(c), arch, text)))
            if not cases:
                return out


def fails(case, arch, want=None):
    """Whether the case alone mismatches on the arch (for shrinking): some mismatch `want` accepts
    (default: any value mismatch; a kernel that no longer compiles or runs counts only where `want`
    accepts its error)."""
    c = case.copy()
    try:
        c.expected = Reference(c).run()
    except (CaseUnspecified, AssertionError, KeyError, IndexError):
        return False
    try:
        return any((m.cell is not None) if want is None else want(m) for m in run_group([c], arch))
    except Exception:
        return False


# --- shrinking ----------------------------------------------------------------------------------------
def _blocks(stmts):
    yield stmts
    for s in stmts:
        for blk in (s.body, s.orelse):
            if blk:
                yield from _blocks(blk)


def _defined_ok(case):
    """Every variable read has a visible definition; break/continue are inside loops."""
    def expr_ok(e, scope):
        return all(n.name in scope for n in walk_exprs(e) if n.kind == "var")

    def block_ok(stmts, scope, loop):
        scope = set(scope)
        for s in stmts:
            if not all(expr_ok(e, scope) for e in s.exprs):
                return False
            if s.kind in ("set", "aug") and s.name not in scope:
                return False
            if s.kind == "cset" and not all(n in scope for n, _ in s.dtype):
                return False
            if s.kind == "return" and not s.exprs and not all(s.name + suf in scope for suf, _ in s.dtype):
                return False
            if s.kind == "call":
                if not all(cn + suf in scope for _, cn, sufs in s.op[1] for suf in sufs):
                    return False
                fscope = set(s.op[0]) | {p + suf for p, _, sufs in s.op[1] for suf in sufs}
                if not block_ok(s.body, fscope, None):
                    return False
                scope |= {s.name + suf for suf, _ in s.dtype} if s.dtype else {s.name}
            if s.kind == "clet":
                scope |= {s.name + suf for suf, _, _ in s.dtype}
            if s.kind in ("break", "continue") and not loop:
                return False
            if s.kind == "if":
                if not block_ok(s.body, scope, loop) or not block_ok(s.orelse or [], scope, loop):
                    return False
            if s.kind == "for" and not block_ok(s.body, scope | {s.name}, "for"):
                return False
            if s.kind == "while" and not block_ok(s.body, scope | {s.name}, "while"):
                return False
            if s.kind == "let" or (s.kind == "atomic" and s.name):
                scope.add(s.name)
        return True
    return block_ok(case.stmts, set(), None)


def _expr_slots(case):
    """(statement, index in exprs or a parent expression, position) for every expression node."""
    out = []

    def visit(holder, i, e):
        out.append((holder, i))
        for j, a in enumerate(e.args):
            visit(e.args, j, a)
    for s in walk_stmts(case.stmts):
        for i, e in enumerate(s.exprs):
            visit(s.exprs, i, e)
    return out


def shrink(case, arch, budget_s=60.0, pred=None):
    """Delta-debugs a failing case: drops statements, inlines blocks, replaces expressions by their
    operands or by constants, while the case still mismatches on the arch."""
    t_end = time.time() + budget_s
    pred = pred or fails
    cur = case.copy()
    progress = True
    while progress and time.time() < t_end:
        progress = False
        # 1. statements: remove, or replace a compound statement by its body
        for bi in range(len(list(_blocks(cur.stmts)))):
            blocks = list(_blocks(cur.stmts))
            if bi >= len(blocks):
                break
            i = 0
            while i < len(blocks[bi]) and time.time() < t_end:
                for repl in _stmt_replacements(blocks[bi][i]):
                    cand = cur.copy()
                    cblk = list(_blocks(cand.stmts))[bi]
                    cblk[i:i + 1] = repl
                    if _defined_ok(cand) and pred(cand, arch):
                        cur, progress = cand, True
                        blocks = list(_blocks(cur.stmts))
                        break
                else:
                    i += 1
                    continue
                if bi >= len(blocks):
                    break
        # 2. expressions: an operand of the same dtype, or a constant of the node's value
        slots = _expr_slots(cur)
        for si in range(len(slots)):
            if time.time() >= t_end:
                break
            slots = _expr_slots(cur)
            if si >= len(slots):
                break
            holder, i = slots[si]
            for repl in _expr_replacements(cur, holder[i]):
                cand = cur.copy()
                h2, i2 = _expr_slots(cand)[si]
                h2[i2] = repl
                if _defined_ok(cand) and pred(cand, arch):
                    cur, progress = cand, True
                    break
    _compact(cur)
    cur.expected = Reference(cur).run()
    return cur


def _stmt_replacements(s):
    if s.kind == "return":  # a func's last statement stays
        return
    yield []
    if s.kind == "if":
        yield list(s.body)
        if s.orelse:
            yield list(s.orelse)
            yield [S("if", exprs=s.exprs, body=s.body, orelse=[])]
    if s.kind in ("for", "while"):
        yield [x for x in s.body if x.kind not in ("break", "continue") and
               not (x.kind == "if" and x.body and x.body[0].kind in ("break", "continue"))]


def _expr_replacements(case, e):
    if e.kind in ("const", "lit", "cap"):
        return
    for a in e.args:
        if a.dtype == e.dtype and a.kind not in ("lit", "cap"):  # (a Python number alone is typed otherwise)
            yield a.copy()
    if e.kind == "in":
        yield E("const", e.dtype, val=case.inputs[e.dtype][e.val])
    if e.kind in ("un", "bin", "chain", "cast", "select", "bitcast", "load", "var"):
        for v in ([0, 1] if is_int(e.dtype) else [0.0, 1.0]):
            yield E("const", e.dtype, val=make(e.dtype, v))


def _compact(case):
    """Renumbers the inputs and outputs a shrunk case still uses; drops the captured values it no
    longer reads."""
    used = set()
    for s in walk_stmts(case.stmts):
        if s.kind in ("clet", "cset") and s.val:
            used.add(s.val[0])
        for e in s.exprs + list(s.val[2] if s.kind == "cset" and s.val else []):
            used |= {n.val[0] for n in walk_exprs(e) if n.kind == "cap"}
    case.caps = {n: c for n, c in case.caps.items() if n in used}
    stypes = {c.stype for c in case.caps.values()}
    case.stypes = {n: v for n, v in case.stypes.items() if n in stypes}
    for t in DTYPES:
        used = sorted({n.val for s in walk_stmts(case.stmts) for e in s.exprs for n in walk_exprs(e)
                       if n.kind == "in" and n.dtype == t})
        remap = {old: new for new, old in enumerate(used)}
        case.inputs[t] = [case.inputs[t][o] for o in used]
        for s in walk_stmts(case.stmts):
            for e in s.exprs:
                for n in walk_exprs(e):
                    if n.kind == "in" and n.dtype == t:
                        n.val = remap[n.val]
        outs = [s for s in walk_stmts(case.stmts) if s.kind == "store" and s.dtype == t]
        for k, s in enumerate(outs):
            s.val = k
        case.nout[t] = len(outs)


def _array_src(a, t):
    vals = ", ".join(str(int(x)) if is_int(t) else _float_src(x).replace("NAN", "np.nan").replace("INF", "np.inf")
                     for x in a)
    return f"np.array([{vals}], dtype=np.{NP[t].name})"


def repro(case, arch):
    """A standalone script reproducing a (shrunk) case; it prints OK or MISMATCH and exits 0 / 1."""
    b = Batch([case])
    arrs = b.arrays()
    lines = ["import math, sys, numpy as np, quadrants as qd",
             f"qd.init(arch=getattr(qd, sys.argv[1] if len(sys.argv) > 1 else '{arch}'))",
             "INF, NAN = math.inf, math.nan", ""]
    lines += b.source("k").rstrip("\n").split("\n")
    lines.append("")
    for kind, t in b.params:
        lines.append(f"{kind}_{t} = {_array_src(arrs[f'{kind}_{t}'], t)}")
    lines.append(f"k({', '.join(f'{kind}_{t}' for kind, t in b.params)})")
    for kind, t in b.params:
        if kind == "in":
            continue
        exp = [fmt(v) for v in case.expected[(kind, t)]]
        lines.append(f"print('{kind}_{t}:', {kind}_{t}[:-1].tolist())")
        lines.append(f"print('  expected:', {', '.join(repr(x) for x in exp) or repr('')})")
    return "\n".join(lines) + "\n"


def available_arches(wanted=None):
    names = wanted or ["cpu", "cuda", "amdgpu", "vulkan", "metal"]
    return [n for n in names if qd.is_arch_available(getattr(qd, n))]


# --- contended atomics ----------------------------------------------------------------------------------
# Many iterations of the parallel loop update a few cells: the final cell is the fold of every update
# for the commutative ops, and the returned old values must come from one serial order of them (a
# chain for add/sub, a permutation for exchange, values the cell held for min/max).
CONTENDED_OPS = ["add", "sub", "mul", "min", "max", "and", "or", "xor", "exchange"]


class Contended:
    def __init__(self, rng, arch, gen):
        self.op = op = rng.choice(CONTENDED_OPS)
        ok = [t for t in ATOMIC_MEM_DTYPES if (is_int(t) or op not in INT_ONLY_ATOMICS)]
        self.avoided = set()
        while True:
            t = rng.choice(ok)
            if not gen.atomic_rejected(op, t):
                break
            self.avoided.add("atomic_rejected")
        self.dtype, self.n, self.m = t, rng.choice([64, 256, 1000]), rng.choice([1, 2, 5])
        # old: old values stored; discard: not used; same_cell: one loop-invariant cell (reductions);
        # field_*: a qd.field target (the cpu privatizes small fields); kernel_var: a kernel-scope variable
        self.form = rng.choice(["old", "old", "discard", "same_cell", "field_hist", "field_same", "kernel_var"])
        if self.form in ("same_cell", "field_same", "kernel_var"):
            self.m = 1
        self.idx = np.array([rng.randrange(self.m) for _ in range(self.n)], np.int32)
        self.vals = np.array([self.value(rng) for _ in range(self.n)], NP[t])
        self.init = np.array([self.value(rng, initial=True) for _ in range(self.m)], NP[t])

    def value(self, rng, initial=False):
        t, op = self.dtype, self.op
        if is_int(t):
            if op == "mul" and not initial:
                return make(t, rng.choice([1, 1, 1, -1, 3, 2]))
            return random_value(rng, t)
        if op in ("add", "sub"):  # small integers (and -0.0): every order of the sums is exact
            return make(t, rng.randint(-8, 8) if rng.random() < 0.9 else -0.0)
        if op == "mul":
            return make(t, rng.choice([1.0, -1.0]) if not initial else rng.choice([1.5, -3.0, 0.0]))
        v = random_value(rng, t)
        return make(t, 0.0) if v == 0 else v  # no -0.0: min(+0, -0) may be either

    def source(self):
        t = self.dtype
        target = {"old": "cell[idx[i]]", "discard": "cell[idx[i]]", "same_cell": "cell[0]",
                  "field_hist": "FIELD[idx[i]]", "field_same": "FIELD[0]", "kernel_var": "acc"}[self.form]
        call = f"qd.atomic_{self.op}({target}, val[i])"
        body = f"old[i] = {call}" if self.form == "old" else call
        pre, post = ("    acc = cell[0]\n", "    cell[0] = acc\n") if self.form == "kernel_var" else ("", "")
        return (f"@qd.kernel\ndef contended(idx: qd.types.ndarray(dtype=qd.i32, ndim=1), "
                f"val: qd.types.ndarray(dtype=qd.{t}, ndim=1), cell: qd.types.ndarray(dtype=qd.{t}, ndim=1), "
                f"old: qd.types.ndarray(dtype=qd.{t}, ndim=1)):\n{pre}    for i in range({self.n}):\n"
                f"        {body}\n{post}")

    def check(self, cell, old):
        """Problems found (strings); the reference of each cell is the fold of its updates."""
        problems = []
        idx = self.idx if self.m > 1 else np.zeros(self.n, np.int32)
        for c in range(self.m):
            mine = [i for i in range(self.n) if idx[i] == c]
            vals = [self.vals[i] for i in mine]
            start = self.init[c]
            if self.op == "exchange":
                olds = [old[i] for i in mine] if self.form == "old" else None
                if olds is not None and sorted(map(repr, map(key, olds + [cell[c]]))) != \
                        sorted(map(repr, map(key, [start] + vals))):
                    problems.append(f"cell {c}: old values + final are not a permutation of initial + written")
                elif olds is None and key(cell[c]) not in {key(v) for v in vals}:
                    problems.append(f"cell {c}: final {fmt(cell[c])} was never written")
                continue
            acc = start
            for v in vals:
                acc = atomic_result(self.op, acc, v, None)[0]
            if key(acc) != key(cell[c]):
                problems.append(f"cell {c}: final {fmt(cell[c])}, expected {fmt(acc)} "
                                f"({len(vals)} x atomic_{self.op} on {fmt(start)})")
            if self.form != "old" or not mine:
                continue
            pairs = [(old[i], self.vals[i]) for i in mine]
            if self.op in ("add", "sub"):
                why = self.no_serial_order(start, acc, pairs)
                if why:
                    problems.append(f"cell {c}: no serial order explains the old values ({why})")
            elif self.op in ("min", "max"):
                held = {key(start)} | {key(atomic_result(self.op, start, v, None)[0]) for v in vals} | \
                    {key(v) for v in vals}
                bad = [o for o, _ in pairs if key(o) not in held]
                if bad:
                    problems.append(f"cell {c}: old value {fmt(bad[0])} was never in the cell")
        return problems


    def no_serial_order(self, start, final, pairs):
        """Why no order of the updates (old, value) makes a chain from `start`, each update's old the
        cell's value before it; None when one exists. Each update is an edge from its old to the
        cell after it (values keyed by their bits: -0.0 is not 0.0); a serial order is a path over
        every edge from `start` (an Eulerian path: the cell may come back to a value, so following
        the edges greedily can wrongly get stuck): every value enters as often as it leaves except
        `start` (one more leaving) and `final` (one more entering), and every edge is reached from
        `start`."""
        edges = collections.defaultdict(list)
        balance = collections.Counter()
        for o, v in pairs:
            after = atomic_result(self.op, o, v, None)[0]
            edges[key(o)].append(key(after))
            balance[key(o)] += 1
            balance[key(after)] -= 1
        for node, d in balance.items():
            want = (node == key(start)) - (node == key(final))
            if d != want:
                return f"value {node} is left {d} times more than entered, not {want}"
        seen, todo = {key(start)}, [key(start)]
        while todo:
            for nxt in edges[todo.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        unreached = [node for node in edges if node not in seen]
        return f"no update leads to the value {unreached[0]}" if unreached else None


def run_contended(arch, seed, n, stats):
    """n contended-atomic kernels on the current arch; returns [(Contended, problems)] that failed."""
    rng = random.Random(seed)
    gen = Generator(seed, arch=arch)
    gen.case = Case(seed)
    failed = []
    t0 = time.time()
    for _ in range(n):
        c = Contended(rng, arch, gen)
        for why in c.avoided:
            stats.avoided[(arch, why)] += 1
        field = None
        if c.form.startswith("field"):
            field = qd.field(getattr(qd, c.dtype), shape=c.m)
            field.from_numpy(c.init)
        kern = build_kernel(c.source(), {"FIELD": field})
        cell, old = c.init.copy(), np.zeros(c.n, NP[c.dtype])
        kern(c.idx, c.vals, cell, old)
        if field is not None:
            cell = field.to_numpy()
        problems = c.check(cell, old)
        stats.contended[arch] += 1
        if problems:
            failed.append((c, problems))
    stats.seconds[arch] += time.time() - t0
    return failed


# --- nested dense layouts -------------------------------------------------------------------------------
# A field laid out by nested qd.root.dense() calls over axes in random order (an axis used twice, one
# call over several axes): its indices are the axes used in axis order i, j, k, l, each of the
# product of its sizes (docs/language.md "Data"). A kernel fills it through a struct-for (`for a, b in x`
# or `for I in x`), copies it into a second field of the same shape under another nesting (a
# struct-for over that one, reading the first by explicit indices), and reads one of them back by
# explicit indices in an ndrange or in serial loops; the atomics of the struct-for count the
# iterations, sum a weighted code of the indices and take each index's maximum. Checked: the shapes,
# to_numpy() of the three fields, Python-scope x[i, k] reads, the read-back and the atomics.
AXIS_NAMES = "ijkl"
LAYOUT_MAX_CELLS = 240
LAYOUT_WEIGHTS = [1, 7, 53, 401]


def _divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


class Layout:
    def __init__(self, rng, gen, index):
        self.index = index
        nax = rng.choice([1, 2, 2, 3, 3, 4])
        self.axes = sorted(rng.sample(range(4), nax))
        while True:
            self.levels = self.random_levels(rng, {a: None for a in self.axes})
            if int(np.prod(self.shape())) <= LAYOUT_MAX_CELLS:
                break
        self.levels2 = self.random_levels(rng, dict(zip(self.axes, self.shape())))
        self.dtype = gen.pick_dtype()
        self.fill = rng.choice(["tuple", "tuple", "grouped", "code"])
        if self.fill == "grouped" and nax == 1:  # `for i in x` over a 1-D field: i is the index itself
            self.fill = "tuple"
        self.read = rng.choice(["ndrange", "serial"])
        self.read_from = rng.choice(["x", "y"])
        self.py_reads = [tuple(rng.randrange(n) for n in self.shape()) for _ in range(2)]
        gen.case = Case(0)
        gen.scopes, gen.readonly = [{n: "i32" for n in self.names()}], set(self.names())
        saved = gen.in_func, gen.caps_on
        gen.in_func, gen.caps_on = True, False  # values of the indices and constants only
        t = self.dtype
        code = None  # a term that tells the indices apart (the rest may be any expression of them)
        for n, w in zip(self.names(), [1, 10, 100, 1000]):
            term = E("bin", "i32", "*", [E("var", "i32", name=n), E("lit", "i32", val=w)])
            code = term if code is None else E("bin", "i32", "+", [code, term])
        op = rng.choice(["+", "-", "^"] if is_int(t) else ["+", "-"])
        rest = gen.exact(gen.expr(t, 2), t)
        self.expr = E("bin", t, op, [gen.exact(code, t), rest])
        gen.in_func, gen.caps_on = saved

    @staticmethod
    def random_levels(rng, totals):
        """dense() calls, outermost first, as (axes, sizes, one_size): each axis once or twice (sizes
        whose product is totals[axis] when given), in random order; sometimes one call over several
        axes (qd.ij, qd.ijk, qd.ijkl, which exist for leading axes only)."""
        pieces = []
        for a, tot in totals.items():
            if tot is None:
                sizes = [rng.randint(1, 6)] if rng.random() < 0.6 else [rng.randint(1, 4), rng.randint(2, 4)]
            else:
                d = rng.choice(_divisors(tot))
                sizes = [tot] if rng.random() < 0.5 or d in (1, tot) else [d, tot // d]
            pieces += [(a, n) for n in sizes]
        rng.shuffle(pieces)
        levels = [((a,), (n,), False) for a, n in pieces]
        lead = [a for a in range(4) if a in totals and all(b in totals for b in range(a + 1))]
        if len(lead) >= 2 and rng.random() < 0.4:  # merge the first piece of each leading axis into qd.ij..
            k = rng.randint(2, len(lead))
            firsts = [next(i for i, lv in enumerate(levels) if lv[0] == (a,)) for a in range(k)]
            sizes = tuple(levels[i][1][0] for i in firsts)
            merged = (tuple(range(k)), sizes, len(set(sizes)) == 1 and rng.random() < 0.5)
            at = min(firsts)
            levels = [lv for i, lv in enumerate(levels) if i not in firsts]
            levels.insert(min(at, len(levels)), merged)
        return levels

    def shape(self, levels=None):
        levels = self.levels if levels is None else levels
        axes = sorted({a for lv in levels for a in lv[0]})
        return tuple(int(np.prod([n for ax, sz, _ in levels for a2, n in zip(ax, sz) if a2 == a])) for a in axes)

    def names(self):
        return [f"a{d}" for d in range(len(self.axes))]

    def copy(self):
        c = Layout.__new__(Layout)
        c.__dict__.update(self.__dict__)
        c.levels, c.py_reads = list(self.levels), list(self.py_reads)
        c.levels2 = list(self.levels2) if self.levels2 else None
        c.expr = self.expr.copy()
        return c

    # reference ----------------------------------------------------------------------------------
    def expected(self):
        shape = self.shape()
        ref = Reference(Case(0))
        vals = {}
        for ix in np.ndindex(*shape):
            env = [{n: ("i32", np.int32(i), frozenset()) for n, i in zip(self.names(), ix)}]
            v, _ = ref.ev(env, self.expr)
            vals[ix] = v
        strides = [int(np.prod(shape[d + 1:])) for d in range(len(shape))]
        acc = [len(vals), sum(sum(i * w for i, w in zip(ix, LAYOUT_WEIGHTS)) for ix in vals)] + [n - 1 for n in shape]
        return dict(shape=shape, vals=vals, strides=strides, acc=acc)

    # source -------------------------------------------------------------------------------------
    def layout_src(self, levels, fields):
        calls = []
        for axes, sizes, one in levels:
            ax = "".join(AXIS_NAMES[a] for a in axes)
            n = str(sizes[0]) if len(sizes) == 1 or one else "(" + ", ".join(map(str, sizes)) + ")"
            calls.append(f".dense(qd.{ax}, {n})")
        return f"qd.root{''.join(calls)}.place({', '.join(fields)})"

    def setup_src(self, p):
        """Python-scope lines creating the fields (prefix p)."""
        lines = [f"{p}x = qd.field(qd.{self.dtype})", f"{p}code = qd.field(qd.i32)",
                 self.layout_src(self.levels, [f"{p}x", f"{p}code"])]
        if self.levels2 is not None:
            lines += [f"{p}y = qd.field(qd.{self.dtype})", self.layout_src(self.levels2, [f"{p}y"])]
        return lines

    def kernel_lines(self, p):
        """The kernel's loops for this layout (its ndarray arguments are {p}o, {p}oc, {p}acc)."""
        exp = self.expected()
        names, shape, strides = self.names(), exp["shape"], exp["strides"]
        idx = ", ".join(names)
        lin = " + ".join(f"{n} * {s}" for n, s in zip(names, strides))
        value = expr_src(self.expr, {"cap": p})
        weighted = " + ".join(f"{n} * {w}" for n, w in zip(names, LAYOUT_WEIGHTS))
        over = f"{p}code" if self.fill == "code" else f"{p}x"
        lines = []
        if self.fill == "grouped":
            lines.append(f"    for I in {over}:")
            lines += [f"        {n} = I[{d}]" for d, n in enumerate(names)]
        else:
            lines.append(f"    for {idx} in {over}:")
        lines += [f"        {p}x[{idx}] = {value}", f"        {p}code[{idx}] = {lin}",
                  f"        qd.atomic_add({p}acc[0], 1)",
                  f"        qd.atomic_add({p}acc[1], {weighted})"]
        lines += [f"        qd.atomic_max({p}acc[{2 + d}], {n})" for d, n in enumerate(names)]
        src = f"{p}x"
        if self.levels2 is not None:
            lines += [f"    for {idx} in {p}y:", f"        {p}y[{idx}] = {p}x[{idx}]"]
            src = f"{p}{self.read_from}"
        body = [f"{p}o[{lin}] = {src}[{idx}]", f"{p}oc[{lin}] = {p}code[{idx}]"]
        if self.read == "ndrange":
            lines.append(f"    for {idx} in qd.ndrange({', '.join(map(str, shape))}):")
            lines += ["        " + b for b in body]
        else:
            lines.append("    for _ in range(1):")
            for d, (n, m) in enumerate(zip(names, shape)):
                lines.append("        " + "    " * d + f"for {n} in range({m}):")
            lines += ["        " + "    " * len(names) + b for b in body]
        return lines

    def params(self, p):
        return [f"{p}o: qd.types.ndarray(dtype=qd.{self.dtype}, ndim=1)",
                f"{p}oc: qd.types.ndarray(dtype=qd.i32, ndim=1)", f"{p}acc: qd.types.ndarray(dtype=qd.i32, ndim=1)"]

    def check(self, g, p, o, oc, acc, arch):
        """Problems (strings) after the kernel ran; g: the globals holding the fields."""
        exp = self.expected()
        shape, vals = exp["shape"], exp["vals"]
        problems = []
        names = ["iterations", "weighted index sum"] + [f"max {AXIS_NAMES[a]} index" for a in self.axes]
        for n, e, gv in zip(names, exp["acc"], acc):
            if int(gv) != e:
                problems.append(f"struct-for {n}: {int(gv)}, expected {e}")
        x, code = g[f"{p}x"], g[f"{p}code"]
        fields = [("x", x), ("code", code)] + ([("y", g[f"{p}y"])] if self.levels2 is not None else [])
        for fname, f in fields:
            if tuple(f.shape) != shape:
                problems.append(f"{fname}.shape is {tuple(f.shape)}, expected {shape}")
        if any("shape" in q for q in problems):
            return problems
        want_code = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
        got = code.to_numpy()
        if got.shape != shape or not np.array_equal(got, want_code):
            bad = next((ix for ix in np.ndindex(*shape) if got.shape != shape or got[ix] != want_code[ix]), None)
            problems.append(f"code.to_numpy() differs from the linear index in axis order (first at {bad}: "
                            f"{got[bad] if bad is not None and got.shape == shape else got.shape})")

        def compare(what, arr_or_get):
            for ix in np.ndindex(*shape):
                gv = arr_or_get(ix)
                if same(vals[ix], gv, arch) is False:
                    problems.append(f"{what}[{', '.join(map(str, ix))}] expected {fmt(vals[ix])}, got {fmt(gv)}")
                    return
        xs = x.to_numpy()
        compare("x.to_numpy()", lambda ix: xs[ix])
        if self.levels2 is not None:
            ys = g[f"{p}y"].to_numpy()
            compare("y.to_numpy()", lambda ix: ys[ix])
        strides = exp["strides"]
        compare(f"{self.read_from if self.levels2 is not None else 'x'} read back",
                lambda ix: o[sum(i * s for i, s in zip(ix, strides))])
        if not np.array_equal(oc[:len(vals)], want_code.reshape(-1)):
            problems.append("code read back by explicit indices differs from the linear index")
        for ix in self.py_reads:
            gv = np.asarray(x[ix] if len(ix) > 1 else x[ix[0]]).astype(NP[self.dtype])[()]
            if same(vals[ix], gv, arch) is False:
                problems.append(f"Python-scope x[{', '.join(map(str, ix))}] expected {fmt(vals[ix])}, got {fmt(gv)}")
        return problems

    def describe(self):
        return self.layout_src(self.levels, ["x", "code"]) + \
            (f"; y: {self.layout_src(self.levels2, ['y'])}" if self.levels2 is not None else "")


def layout_batch_size(arch):
    """Layouts per kernel: 3 fields and 3 ndarrays each (LIMITS storage_buffers_per_shader)."""
    return 4


def run_layout_group(layouts, arch):
    """Runs layouts in one kernel; returns [(Layout, problems)] of those that failed (an error of the
    kernel is bisected to the layouts that fail alone)."""
    g = {}
    lines, params = [], []
    for lay in layouts:
        p = f"L{lay.index}_"
        lines += lay.setup_src(p)
        params += lay.params(p)
    setup = "\n".join(lines) + "\n"
    src = "@qd.kernel\ndef layout_kernel(" + ", ".join(params) + "):\n" + \
        "\n".join(line for lay in layouts for line in lay.kernel_lines(f"L{lay.index}_")) + "\n"
    try:
        exec(compile(setup, "<qd-fuzz-layout-setup>", "exec"), dict(qd=qd), g)
        kern = build_kernel(src, g, name="layout_kernel")
        arrays = []
        for lay in layouts:
            n = int(np.prod(lay.shape()))
            arrays.append((np.zeros(n + 1, NP[lay.dtype]), np.zeros(n + 1, np.int32),
                           np.array([0, 0] + [-1] * len(lay.axes), np.int32)))
        kern(*[a for trio in arrays for a in trio])
        return [(lay, probs) for lay, trio in zip(layouts, arrays)
                if (probs := lay.check(g, f"L{lay.index}_", *trio, arch))]
    except Exception as e:
        if len(layouts) == 1:
            return [(layouts[0], [f"error {error_text(e)}"])]
        mid = len(layouts) // 2
        return run_layout_group(layouts[:mid], arch) + run_layout_group(layouts[mid:], arch)


def layout_script(lay, arch):
    """A standalone script for one layout: it prints the problems found (none: OK)."""
    p = f"L{lay.index}_"
    lines = ["import sys, numpy as np, quadrants as qd",
             f"qd.init(arch=getattr(qd, sys.argv[1] if len(sys.argv) > 1 else '{arch}'))", ""]
    lines += lay.setup_src(p) + ["", "", "@qd.kernel", "def layout_kernel(" + ", ".join(lay.params(p)) + "):"]
    lines += lay.kernel_lines(p)
    n = int(np.prod(lay.shape()))
    lines += ["", "", f"o, oc, acc = np.zeros({n + 1}, np.{NP[lay.dtype].name}), np.zeros({n + 1}, np.int32), "
              f"np.array([0, 0] + [-1] * {len(lay.axes)}, np.int32)", "layout_kernel(o, oc, acc)",
              f"print('shape', {p}x.shape, 'expected {lay.shape()}')", f"print({p}x.to_numpy())",
              f"print('code', {p}code.to_numpy().reshape(-1).tolist())", "print('acc', acc.tolist())"]
    return "\n".join(lines) + "\n"


def run_layouts(arch, seed, n, stats):
    """n random layouts on the current arch; returns [(Layout, problems)] of those that failed."""
    rng = random.Random(seed * 7919 + 3)
    gen = Generator(seed, arch=arch)
    layouts = [Layout(rng, gen, i) for i in range(n)]
    t0 = time.time()
    failed = []
    for k in range(0, n, layout_batch_size(arch)):
        group = layouts[k:k + layout_batch_size(arch)]
        failed += run_layout_group(group, arch)
        stats.layouts[arch] += len(group)
    stats.seconds[arch] += time.time() - t0
    return failed


def shrink_layout(lay, arch, budget_s=30.0):
    """A smaller layout that still fails: no copy, a constant value, simpler loops, fewer and smaller
    dense() calls."""
    t_end = time.time() + budget_s
    first = run_layout_group([lay], arch)
    error = bool(first) and first[0][1][0].startswith("error")

    def bad(c):  # fails the same way (an error, or wrong values)
        try:
            found = run_layout_group([c], arch)
        except Exception:
            return False
        return bool(found) and found[0][1][0].startswith("error") == error

    def variant(c, **changes):
        d = c.copy()
        d.__dict__.update(changes)
        return d

    def candidates(c):
        if c.levels2 is not None:
            yield variant(c, levels2=None)
        if c.expr.kind != "const":
            yield variant(c, expr=E("const", c.dtype, val=make(c.dtype, 1)))
        for attr, simple in (("fill", "tuple"), ("read", "ndrange")):
            if getattr(c, attr) != simple:
                yield variant(c, **{attr: simple})
        if c.py_reads:
            yield variant(c, py_reads=[])
        if c.levels2 is None:
            for i, (axes, sizes, one) in enumerate(c.levels):
                rest = c.levels[:i] + c.levels[i + 1:]
                if rest and {a for lv in rest for a in lv[0]} == set(c.axes):
                    yield variant(c, levels=rest)
                if any(n > 2 for n in sizes):
                    smaller = (axes, tuple(max(2, n - 1) if n > 2 else n for n in sizes), one)
                    yield variant(c, levels=c.levels[:i] + [smaller] + c.levels[i + 1:])
    progress = True
    while progress and time.time() < t_end:
        progress = False
        for cand in candidates(lay):
            if time.time() >= t_end:
                break
            if bad(cand):
                lay, progress = cand, True
                break
    shape = lay.shape()
    lay.py_reads = [ix for ix in lay.py_reads if len(ix) == len(shape) and all(i < n for i, n in zip(ix, shape))]
    return lay
