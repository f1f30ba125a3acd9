#!/usr/bin/env python3
"""A seeded fuzzer for the kernel front end: malformed kernels must raise a Quadrants error, or run.

    python3 benchmarks/fuzz_frontend.py [--cases 2000] [--seed 0] [--arch cpu] [--timeout 60] [--keep DIR]

Takes the small valid programs in SEEDS, mutates the kernels and their call sites (delete, duplicate,
swap or move statements; change literals, operators, names, called functions, annotations and
decorators; drop or add call arguments; insert constructs the kernel language does not support) with
random.Random(seed), and runs every mutant in a child process (in batches; a batch restarts after a
crash or a hang, the culprit is rerun alone). Each mutant ends in one outcome:

  ran                the program ran (qd.init(check_out_of_bound=True): an index error is an outcome below)
  compile_error      a QuadrantsCompilationError whose message names the mutant's file and line
  api_error          a deliberate error of the Quadrants API with a message (e.g. a kernel called with
                     the wrong number of arguments, an index out of bounds)
  python_error       raised by the program's own Python code (outside Quadrants)
  --- failures ---
  unlocated_error    a QuadrantsCompilationError without the file:line of the kernel, or without a message
  internal_error     any other exception from inside Quadrants (an AttributeError in the front end, a
                     RuntimeError out of the C++ core, ...)
  crash              the process died (signal, abort)
  hang               no outcome within --timeout seconds

Prints the count of each outcome and, for every failure, the mutation and the error; exit status 1
if there is any. tests/python/test_fuzz_frontend.py runs a bounded version.
"""
import argparse
import ast
import collections
import copy
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
import traceback
import warnings

HEADER = "import numpy as np\nimport quadrants as qd\n\nqd.init(arch=qd.{arch}, check_out_of_bound=True)\n"

SEEDS = [
    # 0: fields, a parallel loop, atomics, a scalar return
    '''
x = qd.field(qd.i32, shape=16)
y = qd.field(qd.f32, shape=16)


@qd.kernel
def fill(n: qd.i32, scale: qd.f32) -> qd.i32:
    total = 0
    for i in range(n):
        x[i % 16] = i * 2 + 1
        qd.atomic_add(y[i % 16], scale * i)
        total += 1
    return total


print(fill(10, 0.5), x.to_numpy()[:4], y.to_numpy()[:4])
''',
    # 1: ndarrays, nested loops, if / elif / else, min / max
    '''
@qd.kernel
def clamp(a: qd.types.ndarray(dtype=qd.f32, ndim=2), lo: qd.f32, hi: qd.f32):
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            v = a[i, j]
            if v < lo:
                a[i, j] = lo
            elif v > hi:
                a[i, j] = hi
            else:
                a[i, j] = qd.max(qd.min(v, hi), lo)


a = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
clamp(a, -1.0, 1.0)
print(a)
''',
    # 2: qd.func, templates, qd.static branch and unrolled loop
    '''
x = qd.field(qd.f32, shape=8)


@qd.func
def poly(t: qd.f32, k: qd.template()) -> qd.f32:
    acc = 0.0
    for p in qd.static(range(k)):
        acc = acc * t + (p + 1)
    return acc


@qd.kernel
def run(k: qd.template(), flag: qd.template()):
    for i in x:
        if qd.static(flag):
            x[i] = poly(i * 0.25, k)
        else:
            x[i] = -poly(i * 0.5, k)


run(3, True)
run(2, False)
print(x.to_numpy())
''',
    # 3: the atomic family on a histogram, returned old values, casts
    '''
hist = qd.field(qd.i32, shape=8)
mx = qd.field(qd.i32, shape=())
bits = qd.field(qd.u32, shape=())


@qd.kernel
def histogram(data: qd.types.ndarray(dtype=qd.i32, ndim=1)) -> qd.i32:
    seen = 0
    for i in range(data.shape[0]):
        b = data[i] % 8
        old = qd.atomic_add(hist[b], 1)
        qd.atomic_max(mx[None], data[i])
        qd.atomic_or(bits[None], qd.cast(1 << b, qd.u32))
        if old == 0:
            seen += 1
        qd.atomic_cas(hist[0], 0, 0)
    return seen


print(histogram(np.arange(50, dtype=np.int32)), hist.to_numpy(), mx[None], bits[None])
''',
    # 4: vectors and matrices, ndrange, grouped
    '''
v = qd.Vector.field(3, qd.f32, shape=(4, 4))
m = qd.Matrix.field(2, 2, qd.f32, shape=4)


@qd.kernel
def geometry(s: qd.f32):
    for i, j in qd.ndrange(4, (0, 4)):
        a = qd.Vector([i * s, j * s, 1.0])
        b = qd.Vector([0.0, 1.0, 0.0])
        v[i, j] = a.cross(b) + a * a.dot(b)
    for I in qd.grouped(m):
        mat = qd.Matrix([[1.0, s], [0.0, 1.0]])
        m[I] = mat @ mat.transpose()
        m[I][0, 1] = v[I[0], 0].norm()


geometry(0.5)
print(v.to_numpy()[1, 2], m.to_numpy()[3])
''',
    # 5: while loop with a bound, break / continue, integer ops, select
    '''
@qd.kernel
def collatz(out: qd.types.ndarray(dtype=qd.i32, ndim=1)):
    for i in range(out.shape[0]):
        n = i + 1
        steps = 0
        for _ in range(200):
            if n == 1:
                break
            if n % 2 == 0:
                n = n // 2
                continue
            n = 3 * n + 1
            steps += 1
        out[i] = qd.select(steps > 5, steps, -steps) ^ (n << 1)


out = np.zeros(20, np.int32)
collatz(out)
print(out)
''',
    # 6: typed variables, math, returns of several dtypes, bit_cast
    '''
@qd.kernel
def math_ops(x: qd.f64, k: qd.u16) -> qd.f64:
    a: qd.f32 = qd.sqrt(x) + qd.sin(x) * qd.exp(-x)
    b: qd.i64 = qd.cast(x * 1000, qd.i64) + k
    c = qd.bit_cast(qd.f32(a), qd.u32) >> 3
    d = qd.floor(x) if x > 0 else qd.ceil(x)
    return a + b + c * 0.0 + d + abs(-x) + qd.atan2(x, 2.0) + x ** 2


print(math_ops(1.5, 3))
''',
    # 7: serial loops, loop_config, an ndarray of vectors, volatile_load
    '''
acc = qd.field(qd.i64, shape=())


@qd.kernel
def prefix(a: qd.types.ndarray(dtype=qd.types.vector(2, qd.f32), ndim=1)) -> qd.f32:
    s = 0.0
    qd.loop_config(serialize=True)
    for i in range(a.shape[0]):
        s += a[i][0] - a[i].y
        a[i] = qd.Vector([s, 1.0])
    for i in range(4):
        qd.atomic_add(acc[None], i)
    return s + qd.volatile_load(acc[None])


arr = np.ones((6, 2), np.float32)
print(prefix(arr), arr[:, 0])
''',
]

# --- mutations ---------------------------------------------------------------------------------------
SMALL = [0, 1, -1, 2, 3, 7, 16, 100, -5, 0.5, -2.5, True, False, None, "s", (1, 2)]
LARGE = SMALL + [2**31, -2**31 - 1, 2**32 + 3, 2**63, -2**63 - 1, 2**64, 1e30, float("nan"), float("inf"), 10**40]
ANNOTATIONS = [
    "qd.i32", "qd.f64", "qd.u8", "qd.u1", "int", "float", "bool", "str", "list", "qd.template()",
    "qd.types.ndarray()", "qd.types.ndarray(dtype=qd.f32, ndim=1)", "qd.types.ndarray(dtype=qd.i32, ndim=3)",
    "qd.math.vec3", "qd.Vector", "qd.field", "3", "None", "'qd.i32'", "qd.types.ndarray", "qd.template",
    "(qd.i32, qd.f32)", "qd.i32 | qd.f32", "qd.types",
]
QD_FUNCS = [
    "atomic_add", "atomic_sub", "atomic_mul", "atomic_min", "atomic_max", "atomic_and", "atomic_or",
    "atomic_xor", "atomic_exchange", "atomic_cas", "volatile_load", "sqrt", "sin", "atan2", "pow", "cast",
    "bit_cast", "select", "min", "max", "abs", "floor", "static", "ndrange", "grouped", "loop_config", "Vector",
    "Matrix", "field", "ndarray", "i32", "f16", "u64", "kernel", "func", "sync", "init", "reset", "template",
]
NAMES = ["i", "j", "x", "y", "a", "n", "s", "qd", "np", "undefined_name", "range", "len", "print", "self",
         "__import__", "hist", "fill", "v", "m", "k"]
UNSUPPORTED = [
    "try:\n    pass\nexcept Exception:\n    pass",
    "with open('f') as fh:\n    pass",
    "f_ = lambda t: t",
    "c_ = [t for t in range(3)]",
    "c_ = {t: t for t in range(3)}",
    "c_ = (t for t in range(3))",
    "d_ = {1: 2}",
    "d_ = {1, 2}",
    "d_ = [1, 2]",
    "d_ = 'text'",
    "d_ = f'{1}'",
    "d_ = b'bytes'",
    "d_ = ...",
    "d_ = None",
    "d_ = (1, 2)[5]",
    "d_ = (1, 2)[0:1]",
    "d_ = 1 < 2 < 3",
    "d_ = not None",
    "del d_",
    "global gvar",
    "import os",
    "from os import path",
    "class C_:\n    pass",
    "def inner_():\n    return 1",
    "yield 1",
    "print(1)",
    "raise ValueError('x')",
    "assert False, 'no'",
    "assert 1 == 1",
    "d_ = *range(2),",
    "d_, e_ = 1",
    "d_, e_ = 1, 2, 3",
    "d_ = e_ = 1",
    "(d_ := 1)",
    "d_ = 1 if None else 2",
    "d_ = qd",
    "d_ = qd.i32",
    "d_ = np.zeros(3)",
    "d_ = len(range(3))",
    "d_ = qd.static(undefined_thing)",
    "d_ = qd.Vector([1, 2])[7]",
    "d_ = qd.Vector([1.0, 2.0]) @ qd.Vector([1.0])",
    "d_ = qd.Matrix([[1, 2], [3]])",
    "qd.atomic_add(1, 2)",
    "qd.atomic_add(qd, 1)",
    "d_ = 0\nqd.atomic_add(d_, 1.5)",
    "d_ = 1.0\nd_ = d_ << 2",
    "d_ = 1 / 0",
    "d_ = 1 // 0",
    "d_ = 2 ** 100",
    "d_ = 2 ** -1",
    "d_ = -(2 ** 63)",
    "d_: qd.i32 = 'x'",
    "d_: qd.Vector = 1",
    "d_: 5 = 1",
    "for p_, q_ in range(3):\n    pass",
    "for p_ in 5:\n    pass",
    "for p_ in range(1, 2, 0):\n    pass",
    "for p_ in range(1.5):\n    pass",
    "for p_ in qd.static(range(3)):\n    break",
    "for p_ in qd.ndrange(2, 2, 2, 2, 2, 2, 2, 2, 2):\n    pass",
    "while 0:\n    pass\nelse:\n    pass",
    "for p_ in range(2):\n    pass\nelse:\n    pass",
    "return",
    "return 1, 2",
    "return qd.Vector([1, 2])",
    "qd.loop_config(serialize=True, bogus=1)",
    "qd.loop_config(block_dim=-1)",
    "d_ = qd.cast(1, 7)",
    "d_ = qd.cast(1, qd.u1)",
    "d_ = qd.bit_cast(1.0, qd.i64)",
    "d_ = qd.select(1)",
    "d_ = abs()",
    "d_ = max(1)",
    "d_ = int('3')",
    "d_ = float(qd.Vector([1.0]))",
    "d_ = qd.f32(1, 2)",
    "d_ = 1\nd_.x = 2",
    "d_ = 1\nd_[0] = 2",
    "d_ = 1\nd_ += 'a'",
    "d_ = 3\nd_ @= 2",
    "async def co_():\n    pass",
    "nonlocal_ = 1\nd_ = nonlocal_.real",
    "match 1:\n    case 1:\n        pass",
]


def _decorated(fn):
    for d in fn.decorator_list:
        if isinstance(d, ast.Attribute) and d.attr in ("kernel", "func"):
            return True
    return False


class _Sites:
    """Where a program can be mutated: inside decorated functions and at the calls of them."""

    def __init__(self, tree):
        self.functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and _decorated(n)]
        names = {f.name for f in self.functions}
        self.bodies, self.exprs, self.consts, self.small_consts, self.calls, self.names = [], [], [], [], [], []
        self.binops, self.compares, self.augs, self.attrs = [], [], [], []
        for f in self.functions:
            for node in ast.walk(f):
                for field in ("body", "orelse"):
                    body = getattr(node, field, None)
                    if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                        self.bodies.append(body)
            for node in ast.walk(f):
                self._collect(node, in_kernel=True)
        for node in ast.walk(tree):  # module-level calls of the kernels / funcs
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in names:
                self.calls.append(node)
                for a in ast.walk(node):
                    if isinstance(a, ast.Constant):
                        self.consts.append(a)
                        self.small_consts.append(a)  # a kernel argument: maybe a loop bound
        self.small = set(id(c) for c in self.small_consts)

    def _collect(self, node, in_kernel):
        if isinstance(node, ast.Constant):
            self.consts.append(node)
        elif isinstance(node, ast.Call):
            self.calls.append(node)
            if isinstance(node.func, ast.Name) and node.func.id == "range" or (
                    isinstance(node.func, ast.Attribute) and node.func.attr in ("ndrange", "static")):
                self.small_consts.extend(a for a in ast.walk(node) if isinstance(a, ast.Constant))
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            self.names.append(node)
        elif isinstance(node, ast.BinOp):
            self.binops.append(node)
        elif isinstance(node, ast.Compare):
            self.compares.append(node)
        elif isinstance(node, ast.AugAssign):
            self.augs.append(node)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "qd":
            self.attrs.append(node)
        if isinstance(node, ast.expr) and not isinstance(node, (ast.Name, ast.Constant)):
            self.exprs.append(node)


BINOPS = [ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.LShift, ast.RShift,
          ast.BitOr, ast.BitXor, ast.BitAnd, ast.MatMult]
CMPOPS = [ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Is, ast.IsNot, ast.In, ast.NotIn]


def _parse_expr(src):
    return ast.parse(src, mode="eval").body


def _mutate_once(tree, rng):
    """Applies one random mutation to tree in place; returns its description, or None if none applied."""
    s = _Sites(tree)
    kind = rng.choice(["delete", "duplicate", "swap", "move", "literal", "literal", "annotation", "return_ann",
                       "arity", "arity", "unsupported", "unsupported", "unsupported", "operator", "compare",
                       "name", "callee", "decorator", "wrap_expr", "aug"])
    if kind == "delete" and s.bodies:
        body = rng.choice(s.bodies)
        i = rng.randrange(len(body))
        gone = body.pop(i)
        if not body:
            body.append(ast.Pass())
        return f"delete line {gone.lineno}"
    if kind == "duplicate" and s.bodies:
        body = rng.choice(s.bodies)
        i = rng.randrange(len(body))
        body.insert(i + 1, copy.deepcopy(body[i]))
        return f"duplicate line {body[i].lineno}"
    if kind == "swap" and s.bodies:
        body = rng.choice([b for b in s.bodies if len(b) > 1] or s.bodies)
        if len(body) > 1:
            i, j = rng.sample(range(len(body)), 2)
            body[i], body[j] = body[j], body[i]
            return f"swap lines {body[j].lineno} and {body[i].lineno}"
    if kind == "move" and len(s.bodies) > 1:
        src, dst = rng.sample(s.bodies, 2)
        stmt = src.pop(rng.randrange(len(src)))
        if not src:
            src.append(ast.Pass())
        if any(stmt is n for n in ast.walk(ast.Module(body=dst, type_ignores=[]))) or _contains(stmt, dst):
            src.append(stmt)
            return None
        dst.insert(rng.randrange(len(dst) + 1), stmt)
        return f"move line {stmt.lineno}"
    if kind == "literal" and s.consts:
        c = rng.choice(s.consts)
        new = rng.choice(SMALL if id(c) in s.small else LARGE)  # no loop of 2^31 iterations
        old, c.value = c.value, new
        return f"literal {old!r} -> {new!r} at line {getattr(c, 'lineno', '?')}"
    if kind == "annotation" and s.functions:
        f = rng.choice(s.functions)
        args = f.args.args
        if args:
            a = rng.choice(args)
            new = rng.choice(ANNOTATIONS + [None])
            a.annotation = _parse_expr(new) if new else None
            return f"annotation of '{a.arg}' in {f.name} -> {new}"
    if kind == "return_ann" and s.functions:
        f = rng.choice(s.functions)
        new = rng.choice(ANNOTATIONS + [None])
        f.returns = _parse_expr(new) if new else None
        return f"return annotation of {f.name} -> {new}"
    if kind == "arity" and s.calls:
        c = rng.choice(s.calls)
        if c.args and rng.random() < 0.5:
            c.args.pop(rng.randrange(len(c.args)))
            return f"drop an argument of the call at line {c.lineno}"
        c.args.append(ast.Constant(rng.choice([1, 2.5, None, "x"])))
        return f"add an argument to the call at line {c.lineno}"
    if kind == "unsupported" and s.bodies:
        body = rng.choice(s.bodies)
        snippet = rng.choice(UNSUPPORTED)
        i = rng.randrange(len(body) + 1)
        body[i:i] = ast.parse(snippet).body
        return f"insert {snippet!r}"
    if kind == "operator" and s.binops:
        b = rng.choice(s.binops)
        b.op = rng.choice(BINOPS)()
        return f"operator -> {type(b.op).__name__} at line {b.lineno}"
    if kind == "compare" and s.compares:
        c = rng.choice(s.compares)
        c.ops = [rng.choice(CMPOPS)() for _ in c.ops]
        return f"comparison -> {[type(o).__name__ for o in c.ops]} at line {c.lineno}"
    if kind == "aug" and s.augs:
        a = rng.choice(s.augs)
        a.op = rng.choice(BINOPS)()
        return f"augmented assignment -> {type(a.op).__name__} at line {a.lineno}"
    if kind == "name" and s.names:
        n = rng.choice(s.names)
        old, n.id = n.id, rng.choice(NAMES)
        return f"name {old} -> {n.id} at line {n.lineno}"
    if kind == "callee" and s.attrs:
        a = rng.choice(s.attrs)
        old, a.attr = a.attr, rng.choice(QD_FUNCS)
        return f"qd.{old} -> qd.{a.attr} at line {a.lineno}"
    if kind == "decorator" and s.functions:
        f = rng.choice(s.functions)
        choice = rng.choice(["kernel", "func", "none", "both"])
        if choice == "none":
            f.decorator_list = []
        elif choice == "both":
            f.decorator_list = [_parse_expr("qd.kernel"), _parse_expr("qd.func")]
        else:
            f.decorator_list = [_parse_expr(f"qd.{choice}")]
        return f"decorator of {f.name} -> {choice}"
    if kind == "wrap_expr" and s.exprs:
        e = rng.choice(s.exprs)
        wrapped = rng.choice(["({0}, {0})", "{0}[0]", "{0}.x", "[{0}]", "{0}({0})", "-{0}", "not {0}",
                              "{0} if {0} else {0}", "qd.static({0})", "{0}.shape", "({0})[None]"])
        new = _parse_expr(wrapped.format("__E__"))
        for node in ast.walk(new):
            for field, value in ast.iter_fields(node):
                if isinstance(value, ast.Name) and value.id == "__E__":
                    setattr(node, field, copy.deepcopy(e))
                elif isinstance(value, list):
                    value[:] = [copy.deepcopy(e) if isinstance(v, ast.Name) and v.id == "__E__" else v for v in value]
        if isinstance(new, ast.Name) and new.id == "__E__":
            return None
        _replace(s.functions, e, new)
        return f"wrap an expression at line {getattr(e, 'lineno', '?')} as {wrapped.format('e')}"
    return None


def _contains(stmt, body):
    return any(n is b for n in ast.walk(stmt) for b in body)


def _replace(roots, old, new):
    for root in roots:
        for node in ast.walk(root):
            for field, value in ast.iter_fields(node):
                if value is old:
                    setattr(node, field, new)
                    return
                if isinstance(value, list):
                    for k, v in enumerate(value):
                        if v is old:
                            value[k] = new
                            return


def mutants(count, seed, arch="cpu"):
    """Yields (index, seed program index, description, source) for `count` distinct valid-Python mutants."""
    rng = random.Random(seed)
    seen = set()
    made = 0
    attempts = 0
    while made < count and attempts < count * 50:
        attempts += 1
        k = rng.randrange(len(SEEDS))
        tree = ast.parse(SEEDS[k])
        steps = []
        for _ in range(rng.choice([1, 1, 1, 2, 3])):
            try:
                d = _mutate_once(tree, rng)
            except Exception:  # an AST shape a mutation does not handle: try another one
                d = None
            if d:
                steps.append(d)
        if not steps:
            continue
        try:
            ast.fix_missing_locations(tree)
            body = ast.unparse(tree)
            src = HEADER.format(arch=arch) + body + "\n"
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                compile(src, "<mutant>", "exec")  # only programs Python itself accepts
        except Exception:
            continue
        if src in seen:
            continue
        seen.add(src)
        yield made, k, "; ".join(steps), src
        made += 1


# --- running them ------------------------------------------------------------------------------------
OK = ("ran", "compile_error", "api_error", "python_error")
FAILURES = ("unlocated_error", "internal_error", "crash", "hang")


def _classify(exc, path, package_dir):
    """The outcome of a mutant that raised exc (in the child process)."""
    import quadrants as qd

    msg = str(exc)
    frames = traceback.extract_tb(exc.__traceback__)
    inner = frames[-1] if frames else None
    in_package = [f for f in frames if f.filename.startswith(package_dir)]
    if isinstance(exc, qd.QuadrantsCompilationError):
        if msg.strip() and (f'File "{path}", line ' in msg or f"{path}:" in msg):
            return "compile_error"
        if re.match(r"kernel '\w+': argument '\w+'|Argument \(\d+,\) |Invalid type for argument |"
                    r"(Missing|Unexpected|Multiple values for) argument '\w+' in the call of kernel|"
                    r"Too many arguments in the call of kernel", msg):  # a launch that does not fit the kernel
            return "api_error"
        return "unlocated_error"
    if not in_package:
        return "python_error"
    # Raised by Quadrants itself: a deliberate `raise` with a message, of a documented kind, is an API error.
    last = in_package[-1]
    deliberate = inner is last and (last.line or "").lstrip().startswith("raise ")
    if deliberate and msg.strip() and isinstance(exc, (TypeError, ValueError, IndexError, RuntimeError,
                                                        NotImplementedError, AttributeError, KeyError, OverflowError)):
        return "api_error"
    return "internal_error"


def child_main(arch):
    """Runs the mutant files named on stdin, one per line; prints one JSON outcome line per file."""
    import runpy
    import quadrants as qd

    package_dir = os.path.dirname(os.path.abspath(qd.__file__)) + os.sep
    devnull = open(os.devnull, "w")
    for line in sys.stdin:
        path = line.strip()
        if not path:
            continue
        print(json.dumps({"start": path}), flush=True)
        out, sys.stdout = sys.stdout, devnull
        try:
            runpy.run_path(path, run_name="__main__")
            outcome, detail = "ran", ""
        except BaseException as e:  # noqa: B902 - every exception is an outcome here
            outcome = _classify(e, path, package_dir)
            detail = "".join(traceback.format_exception_only(type(e), e)).strip()[-800:]
            if outcome == "internal_error":
                detail = "".join(traceback.format_exception(type(e), e, e.__traceback__)[-6:])[-2500:]
        finally:
            sys.stdout = out
            try:
                qd.reset()
            except Exception:
                pass
        print(json.dumps({"path": path, "outcome": outcome, "detail": detail}), flush=True)


def _spawn(arch):
    import quadrants

    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.abspath(quadrants.__file__)))
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.pop("QD_ARCH", None)
    return subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child", "--arch", arch],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, cwd=tempfile.gettempdir())


def _run_batch(paths, arch, timeout):
    """Runs paths in one child; returns {path: (outcome, detail)} for those it got to, and stops at the
    first crash or hang (that path gets the outcome)."""
    import queue
    import threading

    proc = _spawn(arch)
    lines = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout] + [lines.put(None)], daemon=True).start()
    stderr = []
    threading.Thread(target=lambda: stderr.extend(proc.stderr), daemon=True).start()
    proc.stdin.write("".join(p + "\n" for p in paths))
    proc.stdin.close()
    results, current = {}, None
    while len(results) < len(paths):
        try:
            line = lines.get(timeout=timeout)
        except queue.Empty:
            proc.kill()
            proc.wait()
            results[current or paths[len(results)]] = ("hang", f"no outcome within {timeout}s")
            return results
        if line is None:  # the child died
            proc.wait()
            culprit = current or paths[len(results)]
            results[culprit] = ("crash", f"exit status {proc.returncode}: " + "".join(stderr)[-1500:])
            return results
        if not line.startswith("{"):
            continue
        msg = json.loads(line)
        if "start" in msg:
            current = msg["start"]
        else:
            results[msg["path"]] = (msg["outcome"], msg["detail"])
            current = None
    proc.wait()
    return results


def run_mutants(sources, arch="cpu", timeout=60, batch=40, workdir=None):
    """sources: [(name, source)]. Writes each to a file and runs them; returns {name: (outcome, detail)}."""
    workdir = workdir or tempfile.mkdtemp(prefix="qd_fuzz_")
    paths = {}
    for name, src in sources:
        p = os.path.join(workdir, f"{name}.py")
        with open(p, "w") as f:
            f.write(src)
        paths[p] = name
    todo = list(paths)
    results = {}
    while todo:
        chunk = todo[:batch]
        got = _run_batch(chunk, arch, timeout)
        for p, r in got.items():
            if r[0] in ("crash", "hang") and len(chunk) > 1:
                again = _run_batch([p], arch, timeout).get(p, r)  # alone, to be sure it is this one
                if again[0] not in ("crash", "hang"):
                    r = (r[0], f"only in a batch (alone: {again[0]}); " + r[1])
            results[paths[p]] = r
        todo = [p for p in todo if paths[p] not in results]
    return results


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", type=int, default=2000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--arch", default="cpu")
    p.add_argument("--timeout", type=float, default=60, help="seconds one mutant may take")
    p.add_argument("--keep", default=None, help="directory for the mutants (default: a temporary one)")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        return child_main(a.arch)
    start = time.time()
    cases = list(mutants(a.cases, a.seed, a.arch))
    if a.keep:
        os.makedirs(a.keep, exist_ok=True)
    results = run_mutants([(f"mutant{i:05d}", src) for i, _, _, src in cases], a.arch, a.timeout, workdir=a.keep)
    counts = collections.Counter(r[0] for r in results.values())
    print(f"arch={a.arch} seed={a.seed}: {len(cases)} mutants of {len(SEEDS)} seed programs "
          f"in {time.time() - start:.0f}s")
    for outcome in OK + FAILURES:
        print(f"  {outcome:16} {counts.get(outcome, 0)}")
    failures = [(i, k, d) for i, k, d, _ in cases if results[f"mutant{i:05d}"][0] in FAILURES]
    for i, k, d in failures:
        outcome, detail = results[f"mutant{i:05d}"]
        print(f"\n--- mutant{i:05d} (seed program {k}: {d}): {outcome}\n{detail}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
