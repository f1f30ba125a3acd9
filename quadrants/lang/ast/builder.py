"""Walks a kernel's Python AST and builds the C++ IR through the pybind11 builder.

Python values (ints, floats, fields, template arguments) stay Python values until they meet a
runtime value; Expr / Var / Ptr / MatrixValue (values.py) stand for what exists only at run time.
"""
import ast
import builtins
import inspect
import itertools
import operator
import os
import sys
import textwrap

import numpy as np

from quadrants._lib import _core, log
from quadrants import types as T
from quadrants.lang.ast.context import is_py_scalar
from quadrants.types.exceptions import (QuadrantsCompilationError, QuadrantsIndexError, QuadrantsNameError,
                                      QuadrantsOutOfBoundsError, QuadrantsSyntaxError, out_of_bound_text,
                                      source_location)
from quadrants.memory.field import Field
from quadrants.memory.struct import ANONYMOUS, PyStruct, StructField, StructType, StructValue, UnpackedGroup
from quadrants.memory.ndarray import Ndarray
from quadrants.memory.host import PyMatrix
from quadrants.memory.tensor import Tensor
from quadrants.lang.ast.values import DynIndex, Expr, LoopGroup, MatrixValue, NdarrayArg, Ptr, Var, ViewValue
from quadrants.lang import matrix, ops
from quadrants.lang import printing
from quadrants.lang.printing import Format
from quadrants.lang.simt.block import SharedArray
from quadrants.lang.simt import _tile

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep  # quadrants/


def signature(func):
    """inspect.signature, with string annotations (`from __future__ import annotations`) evaluated in
    the function's module (left as strings where they name something it does not define)."""
    try:
        return inspect.signature(func, eval_str=True)
    except Exception:  # NameError / SyntaxError in an annotation; TypeError before Python 3.10
        return inspect.signature(func)


def _atomic_targets(fdef):
    """The variables the first argument of qd.atomic_*(...) calls starts from (a, p.m[0] -> p) in a
    function's body."""
    out = set()
    for n in ast.walk(fdef):
        if isinstance(n, ast.Call) and n.args:
            callee = n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", "")
            root = _stored_root(n.args[0])
            if callee.startswith("atomic_") and root is not None:
                out.add(root)
    return out


def _public_module(name):
    """How users reach a library module: quadrants.math -> qd.math, quadrants.algorithms._scan -> qd.algorithms."""
    parts = [p for p in name.split(".")[1:] if not p.startswith("_")]
    return ".".join(["qd"] + parts)


def _core_promoted(a, b):
    return _core.promoted_type(a, b)


_BINOPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.FloorDiv: "floordiv",
           ast.Mod: "mod", ast.Pow: "pow", ast.BitAnd: "bit_and", ast.BitOr: "bit_or", ast.BitXor: "bit_xor",
           ast.LShift: "shl", ast.RShift: "shr"}
_MISSING = object()  # no binding (a bound value may be None)
_CMPOPS = {ast.Eq: "eq", ast.NotEq: "ne", ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge"}
# Augmented assignments on global memory that are atomic; the others are plain read-modify-writes.
# dtypes whose atomics some backends lack: their `+=` in serial code is a plain read-modify-write.
NARROW_ATOMIC_DTYPES = (T.i8, T.i16, T.u8, T.u16, T.f16)
ATOMIC_AUGASSIGN = {ast.Add: "add", ast.Sub: "sub", ast.BitAnd: "and", ast.BitOr: "or", ast.BitXor: "xor"}


def source_name(path):
    """How errors name a source file: a Jupyter/IPython cell reads "Cell In[3]", as in IPython's tracebacks."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    label = getattr(getattr(shell, "compile", None), "format_code_name", lambda _: None)(path)
    return f"{label[0]} {label[1]}" if label else path


def _stored_root(target):
    """The variable a store target starts from: p for p, p[i], p.color, p.a[0].b; else None."""
    while isinstance(target, (ast.Subscript, ast.Attribute)):
        target = target.value
    return target.id if isinstance(target, ast.Name) else None


def matrix_items(mv):
    """What iterating a vector / matrix value gives: a vector's entries, a matrix's rows (vectors)."""
    if len(mv.shape) == 1:
        return list(mv.entries)
    n, m = mv.shape
    return [MatrixValue(mv.entries[r * m:(r + 1) * m], (m,)) for r in range(n)]


class _GeneratorArgumentError(QuadrantsSyntaxError, ValueError):
    """f(*generator) in a kernel (a ValueError, as Quadrants raises)."""


class _UnrolledBreak(Exception):
    """`break` under compile-time conditions in a loop unrolled at compile time: no more copies."""


class _UnrolledContinue(Exception):
    """`continue` under compile-time conditions in an unrolled loop: the rest of this copy is skipped."""


class FunctionWalker(ast.NodeVisitor):
    """Emits one Python function (the kernel, or an inlined @qd.func) into the context's builder."""

    _static_depth = 0  # inside the arguments of qd.static(...)

    def __init__(self, ctx, func, is_kernel):
        self.ctx, self.func, self.is_kernel = ctx, func, is_kernel
        self.top_level = False  # a requires_top_level @qd.func: its top-level loops are parallel
        self.b = ctx.b
        try:
            lines, first = inspect.getsourcelines(func)
        except (OSError, TypeError):
            raise QuadrantsSyntaxError(f"cannot read the source of '{func.__name__}': kernels and funcs are compiled "
                                       f"from their Python source, so they must be defined in a file (or a notebook "
                                       f"cell), not in `python -c` or a plain interactive prompt") from None
        self.source = textwrap.dedent("".join(lines))
        self.lines = self.source.splitlines()
        self.file_lines = [line.rstrip("\r\n") for line in lines]  # as in the file, for error messages
        self.indent = len(self.file_lines[0]) - len(self.lines[0]) if self.lines else 0
        self.line_offset = first - 1
        self.file = source_name(inspect.getsourcefile(func) or "<unknown>")
        # A function of Quadrants' own (qd.math's): its errors are reported at the user's call.
        self.caller = ctx.walker
        self.is_library = os.path.abspath(inspect.getsourcefile(func) or "").startswith(_PACKAGE_DIR)
        self.tree = ast.parse(self.source)
        self.fdef = self.tree.body[0]
        self.scopes = [{}]
        self._unroll_depths = []  # self.depth (run-time branches) where each unrolled loop began
        self.globals = dict(func.__globals__)
        if func.__closure__:
            for name, cell in zip(func.__code__.co_freevars, func.__closure__):
                try:
                    self.globals[name] = cell.cell_contents
                except ValueError:
                    pass
        self.lineno = self.fdef.lineno
        self.node = None  # the AST node being visited: where errors point
        self.kernel_args = set()  # a kernel's parameter names: read-only in its body
        self.identity_args = {}  # a kernel's qd.template() / qd.Tensor parameters: name -> value (`x is None`)
        self.parents = None  # AST node -> parent, built on first need
        self.loops = []  # "parallel" / "serial" / "while" / "static" (unrolled)
        self.depth = 0   # nesting of if/loops inside the function body
        self.return_value = None
        # A @qd.func with a `return` that is not its last statement returns through a flag and
        # variables: later code runs under `if not returned`, loops are left with break.
        self.ret_flag = None     # Var: set to 1 by a return taken at run time
        self.ret_vars = None     # Var / MatrixValue of Vars / tuple of those: the returned value
        self.runtime_returns = 0  # returns emitted under run-time control flow so far
        self.block_done = False  # the statement just visited returned: the rest of its block is dead
        self.done = False        # an unconditional return: the rest of the function is dead

    # --- locations ------------------------------------------------------------------------------
    def located(self, msg):
        """msg after where the walk is: the calls that led here (kernel first), then this line."""
        if self.is_library and self.caller is not None:
            line = self.lines[self.lineno - 1].strip() if 0 < self.lineno <= len(self.lines) else ""
            return self.caller.located(f"in {_public_module(self.func.__module__)}."
                                       f"{self.func.__name__} ({os.path.basename(self.file)}:"
                                       f"{self.lineno + self.line_offset}: {line}): {msg}")
        return f"in kernel '{self.ctx.name}':\n{self.position()}{msg}"

    def position(self):
        """The location blocks of the walk: each caller's call, then the node being visited here; a
        block repeating the one before it (recursion) is counted, as Python's tracebacks do."""
        blocks, out, k = self._blocks(), [], 0
        while k < len(blocks):
            n = 1
            while k + n < len(blocks) and blocks[k + n] == blocks[k]:
                n += 1
            out.append(blocks[k] + (f"[the same call {n - 1} more time{'s' if n > 2 else ''}]\n" if n > 1 else ""))
            k += n
        return "".join(out)

    def _blocks(self):
        outer = self.caller._blocks() if self.caller is not None else []
        if self.is_library and self.caller is not None:
            return outer
        node = self.node if self.node is not None and hasattr(self.node, "lineno") else None
        first = node.lineno if node is not None else self.lineno
        last = first
        start = end = None
        if node is not None:
            last = node.end_lineno or first
            body = getattr(node, "body", None)
            if isinstance(body, list) and body and isinstance(node, ast.stmt):
                last, end = max(body[0].lineno - 1, first), None  # a compound statement: its header
            else:
                end = self._file_col(last, node.end_col_offset)
            start = self._file_col(first, node.col_offset)
        shown = self.file_lines[first - 1:last]
        return outer + [source_location(self.file, first + self.line_offset, self.func.__name__, shown, start, end)]

    def _file_col(self, lineno, col):
        """The character index in the file's line of `col`, a UTF-8 byte offset into the dedented line."""
        if col is None or not 0 < lineno <= len(self.lines):
            return None
        return self.indent + len(self.lines[lineno - 1].encode()[:col].decode("utf-8", "ignore"))

    def set_loc(self, node):
        if hasattr(node, "lineno"):
            self.lineno = node.lineno
            line = self.lines[node.lineno - 1].strip() if node.lineno <= len(self.lines) else ""
            self.b.set_loc(self.file, node.lineno + self.line_offset, line)

    def visit(self, node):
        self.set_loc(node)
        outer, self.node = self.node, node
        method = getattr(self, "visit_" + type(node).__name__, None)
        if method is None:
            self.unsupported(node)
        try:
            result = method(node)
            if self.ctx.tracker.tracked and isinstance(node, ast.expr) and self.ctx.tracker.is_tracked(result) \
                    and not self._reads_only(node):
                self.ctx.tracker.escape(result)  # used other than by reading attributes: guarded whole
            if isinstance(result, Tensor):  # kernels see the bare field / ndarray
                result = result._unwrap()
            if isinstance(result, Ndarray):
                result = self.ctx.captured_ndarray(result)
            return result
        except QuadrantsCompilationError as e:
            text = str(e)
            if text.startswith(("in kernel '", 'File "')):
                raise  # located already
            # the core's error (located by line only), or one raised without a location: at this node
            core = self._core_message(text)
            raise type(e)(self.located(text if core is None else core)) from None
        except (TypeError, ValueError, AttributeError, KeyError, IndexError, ArithmeticError) as e:
            # A Python-level mistake in kernel code (wrong arity, bad value): report it at its line.
            self.set_loc(node)
            raise QuadrantsSyntaxError(self.located(f"{type(e).__name__}: {e}")) from e
        finally:
            self.node = outer

    def _core_message(self, text):
        """The message of an error the core raised at this walker's line ('FILE:LINE:\\n    TEXT\\nMSG'), or None."""
        head = f"{self.file}:{self.lineno + self.line_offset}:\n    "
        if not text.startswith(head) or "\n" not in text[len(head):]:
            return None
        return text[len(head):].split("\n", 1)[1]

    def _reads_only(self, node):
        """Whether the use of a template object at `node` lets the tracker see everything read from it."""
        if self.parents is None:
            self.parents = {c: p for p in ast.walk(self.fdef) for c in ast.iter_child_nodes(p)}
        p = self.parents.get(node)
        if isinstance(p, (ast.Attribute, ast.Expr, ast.Return, ast.keyword)):
            return True  # an attribute read (recorded), a discarded value, a func's result
        if isinstance(p, ast.Call):
            return node is not p.func  # visit_Call decides for arguments
        if isinstance(p, ast.Assign):
            return all(isinstance(t, ast.Name) for t in p.targets)  # another name for it
        if isinstance(p, ast.Compare):
            return all(isinstance(o, (ast.Is, ast.IsNot)) for o in p.ops)
        return False

    # --- names ----------------------------------------------------------------------------------
    def bind(self, name, value):
        self.scopes[-1][name] = value

    def lookup_local(self, name):
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    def visit_Name(self, node):
        for scope in reversed(self.scopes):
            if node.id in scope:
                return scope[node.id]
        if node.id in self.globals:
            v = self.globals[node.id]
            if isinstance(v, float) and self.ctx.config.raise_on_templated_floats and not self.is_library:
                self.ctx.type_error(f"global '{node.id}' is the float {v!r}, which would be compiled in as a constant "
                                    f"(qd.init(raise_on_templated_floats=True)); pass it as an argument")
            return v
        if hasattr(builtins, node.id):
            return getattr(builtins, node.id)
        raise QuadrantsNameError(self.located(f'Name "{node.id}" is not defined'))

    def run_body(self, stmts, new_scope=True):
        if new_scope:
            self.scopes.append({})
        try:
            self.run_stmts(stmts)
        finally:
            if new_scope:
                self.scopes.pop()

    def run_stmts(self, stmts):
        for k, s in enumerate(stmts):
            if self.done:
                return
            before = self.runtime_returns
            self.visit(s)
            if self.block_done:  # a return in this block: what follows it is unreachable
                self.block_done = False
                return
            if self.runtime_returns != before:
                # A return may have been taken inside `s`: leave the enclosing loop too, and run
                # the rest of the block only if it was not.
                if isinstance(s, (ast.For, ast.While)) and self.loops and self.loops[-1] != "static":
                    taken = self.b.begin_if(self.ctx.binary("ne", self.ret_flag, 0).stmt)
                    self.b.break_()
                    self.b.end_if(taken)
                if k + 1 < len(stmts):
                    self.guarded(lambda: self.run_stmts(stmts[k + 1:]))
                return

    def guarded(self, emit):
        """Runs emit() under `if not returned`."""
        s = self.b.begin_if(self.ctx.binary("eq", self.ret_flag, 0).stmt)
        self.depth += 1
        self.ctx.depth += 1
        emit()
        self.depth -= 1
        self.ctx.depth -= 1
        self.b.end_if(s)

    # --- entry ----------------------------------------------------------------------------------
    def emit(self, bound_args, by_reference=()):
        """bound_args: parameter name -> frontend value. Returns a @qd.func's return value. A
        parameter the body assigns to is a copy, but for those in `by_reference` (qd.template()
        ones: `x = 1` in the func sets the caller's variable)."""
        prev = self.ctx.walker
        self.ctx.walker = self
        if self.is_kernel:
            self.kernel_args = set(bound_args)
        try:
            assigned = {_stored_root(n) for n in ast.walk(self.fdef)
                        if isinstance(n, (ast.Name, ast.Subscript, ast.Attribute)) and isinstance(n.ctx, ast.Store)}
            assigned |= _atomic_targets(self.fdef)  # qd.atomic_add(a, 1) writes a, as a += 1 does
            assigned -= set(by_reference)
            for name, value in bound_args.items():
                if name in assigned and isinstance(value, (Expr, Var, Ptr, MatrixValue, StructValue, DynIndex)) or \
                        name in assigned and is_py_scalar(value):
                    value = self.ctx.new_var(value)
                self.bind(name, value)
            body = self.fdef.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                body = body[1:]  # docstring
            if not self.is_kernel and any(isinstance(n, ast.Return) and n is not body[-1] for n in ast.walk(self.fdef)):
                self.ret_flag = self.ctx.new_var(0, T.i32)
            self.run_body(body, new_scope=False)
            if self.ret_vars is not None:
                return self.ctx.rvalue(self.ret_vars) if not isinstance(self.ret_vars, tuple) else \
                    tuple(self.ctx.rvalue(v) for v in self.ret_vars)
            return self.return_value
        finally:
            self.ctx.walker = prev

    # --- statements -----------------------------------------------------------------------------
    def visit_Expr(self, node):
        self.visit(node.value)

    def visit_Pass(self, node):
        pass

    def visit_Assert(self, node):
        """`assert cond, "message"`: checked at run time under qd.init(debug=True). Otherwise the
        condition is still evaluated (as the reference does: `assert f(x) == 0` calls f), unchecked.
        A failure raises QuadrantsAssertionError naming the line when the launch returns."""
        if not self.ctx.config.debug:
            self.visit(node.test)
            return
        msg = None
        if node.msg is not None:
            msg = self.visit(node.msg)
            if not isinstance(msg, str):
                self.ctx.syntax_error("an assert message in a kernel must be a string known at compile time")
        cond = self.ctx.truth(self.visit(node.test))
        if cond is True:
            return
        self.set_loc(node)
        self.ctx.kernel_assert(cond, self.located(msg if msg is not None else "assertion failed"))

    def visit_Assign(self, node):
        value = self.visit(node.value)
        static = isinstance(node.value, ast.Call) and self.visit(node.value.func) is ops.static
        for t in node.targets:
            if static:
                self.static_assign(t, value)
            else:
                self.assign(t, value)

    def static_assign(self, target, value):
        """x = qd.static(v) (x, y = qd.static(a, b)): the names are bound to the compile-time values."""
        if isinstance(target, ast.Name):
            self.check_not_kernel_argument(target)
            existing = self.lookup_local(target.id)
            if isinstance(existing, (Var, MatrixValue, StructValue)) and self._is_lvalue(existing):
                self.ctx.syntax_error(f"Recreating variables is not allowed: '{target.id}' is a kernel variable; "
                                      f"bind qd.static(...) to a new name")
            self.bind(target.id, value)
        elif isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (tuple, list)):
            if len(value) != len(target.elts):
                self.ctx.syntax_error(f"cannot unpack {len(value)} values into {len(target.elts)} targets")
            for t, v in zip(target.elts, value):
                self.static_assign(t, v)
        elif isinstance(target, (ast.Tuple, ast.List)):
            self.assign(target, value)
        else:
            self.ctx.syntax_error("Static assign cannot be used on elements in arrays: qd.static(...) binds a name "
                                  "to a compile-time value")

    def check_not_kernel_argument(self, target):
        """A kernel's arguments are read-only, as in Quadrants: `a = ...` / `a += ...` on one is an error."""
        names = [n.id for n in ast.walk(target) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]
        for name in names:
            if name in self.kernel_args:
                self.ctx.syntax_error(f'Kernel argument "{name}" is immutable in the kernel: copy it into a new '
                                      f'variable and change that')

    def visit_AnnAssign(self, node):
        if not isinstance(node.target, ast.Name):
            self.ctx.syntax_error("annotated assignment needs a plain variable name")
        self.check_not_kernel_argument(node.target)
        dtype = self.visit(node.annotation)
        if isinstance(dtype, (T.VectorType, T.MatrixType, StructType)):  # v: vec3 = ..., p: Particle = ...
            value = self.ctx.rvalue(self.visit(node.value)) if node.value is not None else None
            if isinstance(dtype, StructType):
                if value is None:
                    value = dtype()
                if not isinstance(value, StructValue) or value.type is not dtype:
                    self.ctx.type_error(f"variable annotated {dtype!r} assigned {type(value).__name__}")
            else:
                value = dtype(value if value is not None else 0)  # converts, broadcasts, checks the shape
            self.bind(node.target.id, self.ctx.new_var(value))
            return
        if not isinstance(dtype, T.DataType):
            self.ctx.type_error(f"variable annotation must be a dtype such as qd.i32, got {dtype!r}")
        value = self.visit(node.value) if node.value is not None else 0
        self.bind(node.target.id, self.ctx.new_var(value, dtype))

    def assign(self, target, value):
        if isinstance(target, ast.Name):
            self.check_not_kernel_argument(target)
            existing = self.lookup_local(target.id)
            if isinstance(existing, (Var, MatrixValue, StructValue)) and self._is_lvalue(existing):
                if isinstance(value, (PyStruct, np.ndarray)):  # b = st, b = v: their captured values
                    captured = self._captured_value(value)
                    value = captured if captured is not None else value
                self.ctx.store(existing, value)
            elif isinstance(value, (Expr, Var, Ptr, MatrixValue, StructValue, DynIndex)) or is_py_scalar(value):
                self.bind(target.id, self.ctx.new_var(value))
            elif (captured := self._captured_value(value)) is not None:
                # a Python-scope qd.Vector / qd.Matrix / struct: a kernel variable holding its
                # values, so that assigning it again in a loop or a branch updates it
                self.bind(target.id, self.ctx.new_var(captured))
            else:
                self.bind(target.id, value)  # a Python object: field, function, tuple, ...
        elif isinstance(target, (ast.Tuple, ast.List)):
            value = self.ctx.rvalue(value)
            if isinstance(value, MatrixValue) and len(value.shape) == 2:  # a matrix unpacks into its rows
                n, m = value.shape
                items = [MatrixValue(value.entries[r * m:(r + 1) * m], (m,)) for r in range(n)]
            else:
                items = value.entries if isinstance(value, MatrixValue) else list(value)
            if len(items) != len(target.elts):
                self.ctx.syntax_error(f"cannot unpack {len(items)} values into {len(target.elts)} targets")
            # Read every value before storing any: `a, b = b, a` swaps.
            items = [self.ctx.rvalue(v) for v in items]
            for t, v in zip(target.elts, items):
                self.assign(t, v)
        else:
            dest = self.visit(target)
            if hasattr(dest, "_qd_assign"):  # a tile slice or tile[:] (qd.simt.Tile16x16 ...): a tile store / load
                dest._qd_assign(value)
            else:
                self.ctx.store(dest, value)

    def _captured_value(self, v, dtype=None):
        """A Python-scope vector / matrix (numeric numpy array of 1 or 2 axes, PyMatrix) or struct
        (PyStruct) as a kernel value of constants; None for any other Python object. Values made
        with a dtype keep it (a struct's declared member types, qd.Vector(..., dt=qd.i8), x[i] of a
        field); others take the default dtypes, as the same literals written in the kernel do."""
        if isinstance(v, np.ndarray) and v.ndim in (1, 2) and v.dtype.kind in "biuf":
            mv = self.ctx.rvalue(v)  # typed where v was made with a dtype
            return self.ctx.cast(mv, dtype) if dtype is not None else mv
        if isinstance(v, PyStruct):
            declared = {} if v.type is ANONYMOUS else v.type.members
            members = {}
            for k, m in v.items():
                t = declared.get(k)
                if is_py_scalar(m):
                    m = self.ctx.cast(m, T.to_dtype(t)) if t is not None and not hasattr(t, "members") else m
                else:
                    m = self._captured_value(m, getattr(t, "dtype", None) if hasattr(t, "shape") else None)
                if m is None:
                    return None
                members[k] = m
            return StructValue(v.type, members)
        return None

    @staticmethod
    def _is_lvalue(v):
        if isinstance(v, MatrixValue):
            return all(FunctionWalker._is_lvalue(e) for e in v.entries)
        if isinstance(v, StructValue):
            return all(FunctionWalker._is_lvalue(e) for e in v.members.values())
        if isinstance(v, DynIndex):
            return all(FunctionWalker._is_lvalue(e) for e in v.entries)
        return isinstance(v, (Var, Ptr))

    def visit_AugAssign(self, node):
        if isinstance(node.target, ast.Name):
            self.check_not_kernel_argument(node.target)
        target = self.visit(node.target)
        value = self.visit(node.value)
        if hasattr(target, "_qd_augassign"):  # a tile: tile -= qd.outer(u, v)
            target._qd_augassign(value, type(node.op).__name__)
            return
        if not self._is_lvalue(target):
            self.ctx.syntax_error("augmented assignment needs a variable or a memory element as its target")
        if isinstance(target, MatrixValue) and isinstance(value, (list, tuple)):  # m[i] += [[1, 2], [3, 4]]
            value = self.ctx._sequence_as(value, target.shape)
        entries = target.entries if isinstance(target, (MatrixValue, DynIndex)) else [target]
        entries = [x for e in entries for x in (e.entries if isinstance(e, DynIndex) else [e])]
        # Global memory, and kernel-scope variables inside the parallel loop, are shared by the
        # loop's iterations: their `+=` etc. must be atomic.
        shared = any(isinstance(e, Ptr) or (self.ctx.in_parallel_loop and e.kernel_scope) for e in entries)
        atomic = ATOMIC_AUGASSIGN.get(type(node.op))
        if shared and atomic and not self.ctx.in_parallel_loop and all(
                e.dtype in NARROW_ATOMIC_DTYPES for e in entries):
            # Serial code (kernel scope, a serialized loop): one thread, so the plain
            # read-modify-write is the same; narrow dtypes have no atomics on some backends.
            shared = False
        if shared and atomic:
            self.ctx.atomic(atomic, target, value)
        else:
            self.ctx.store(target, self.ctx.binary(_BINOPS[type(node.op)], target, value, user_code=True))

    def visit_If(self, node):
        cond = self.ctx.truth(self.visit(node.test))
        if isinstance(cond, bool):  # compile-time condition (qd.static or Python values)
            self.run_body(node.body if cond else node.orelse)
            return
        s = self.b.begin_if(cond.stmt)
        self.depth += 1
        self.ctx.depth += 1
        self.run_body(node.body)
        if node.orelse:
            self.b.begin_else(s)
            self.run_body(node.orelse)
        self.depth -= 1
        self.ctx.depth -= 1
        self.b.end_if(s)

    def _graph_do_while_flag(self, test):
        """The flag's AST node of `while qd.graph.do_while(flag):`, or None for another while."""
        if not isinstance(test, ast.Call) or not isinstance(test.func, (ast.Attribute, ast.Name)):
            return None
        try:
            f = self.visit(test.func)
        except Exception:  # not a name this walker resolves: an ordinary condition, visited as such
            return None
        if not getattr(f, "_qd_graph_do_while", False):
            return None
        if len(test.args) != 1 or test.keywords:
            self.ctx.syntax_error("qd.graph.do_while() takes one argument: a scalar qd.i32 ndarray")
        return test.args[0]

    def _graph_do_while(self, node, flag_node):
        """`while qd.graph.do_while(flag): body` -- body, then again while flag[()] != 0. The loop
        runs inside the kernel (no CUDA graph here), so the for-loops of its body run serially."""
        if not (self.is_kernel and getattr(self, "use_graph", False)):
            self.ctx.syntax_error("qd.graph.do_while() requires @qd.kernel(graph=True)")
        if any(kind != "do_while" for kind in self.loops) or self.depth != len(self.loops):  # nested: each is one
            self.ctx.syntax_error("qd.graph.do_while() must be at the kernel top level or directly nested inside "
                                  "another qd.graph.do_while(); it cannot appear inside a for-loop.")
        flag = self.visit(flag_node)
        if not isinstance(flag, NdarrayArg) or flag.ndim != 0 or flag.dtype is not T.i32 or flag.element_shape:
            self.ctx.syntax_error("qd.graph.do_while(flag): flag must be a scalar (0-d) qd.i32 ndarray argument of the "
                                  f"kernel, got {type(flag).__name__}")
        loop = self.b.begin_while()
        self.loops.append("do_while")
        self.depth += 1
        self.ctx.depth += 1
        self.run_body(node.body)
        read = ast.copy_location(ast.Subscript(value=flag_node, slice=ast.Tuple(elts=[], ctx=ast.Load()),
                                               ctx=ast.Load()), flag_node)
        ast.fix_missing_locations(read)
        stop = self.b.begin_if(self.ctx.binary("eq", self.visit(read), 0).stmt)
        self.b.break_()
        self.b.end_if(stop)
        self.depth -= 1
        self.ctx.depth -= 1
        self.loops.pop()
        self.b.end_while(loop)

    def visit_While(self, node):
        if node.orelse:
            self.ctx.syntax_error("'while ... else' is not supported in kernels")
        flag_node = self._graph_do_while_flag(node.test)
        if flag_node is not None:
            return self._graph_do_while(node, flag_node)
        loop = self.b.begin_while()
        self.loops.append("while")
        self.depth += 1
        self.ctx.depth += 1
        cond = self.ctx.truth(self.visit(node.test))
        if not isinstance(cond, bool):
            s = self.b.begin_if(self.ctx.unary("not_", cond).stmt)
            self.b.break_()
            self.b.end_if(s)
        elif not cond:
            self.b.break_()
        self.run_body(node.body)
        self.depth -= 1
        self.ctx.depth -= 1
        self.loops.pop()
        self.b.end_while(loop)

    def visit_Break(self, node):
        if self.loops and self.loops[-1] == "parallel":
            self.ctx.syntax_error("Cannot break in the outermost loop of a kernel: it is the parallel loop, whose "
                                  "iterations run at once")
        self._not_in_unrolled_loop("break")
        self.b.break_()

    def visit_Continue(self, node):
        self._not_in_unrolled_loop("continue")
        self.b.continue_()

    def _not_in_unrolled_loop(self, what):
        # The unrolled copies are not a loop at run time: a jump under a run-time condition would
        # leave the enclosing loop. Under compile-time conditions only, it ends the copy (continue)
        # or the unrolling (break) while the kernel compiles.
        if self.loops and self.loops[-1] == "static":
            if self.depth == self._unroll_depths[-1]:
                raise (_UnrolledBreak if what == "break" else _UnrolledContinue)()
            self.ctx.syntax_error(f"You are trying to `{what}` a static `for` loop (unrolled at compile time: "
                                  f"qd.static or a Python sequence) under a run-time condition; its condition must "
                                  f"be compile-time (qd.static(...))")

    def visit_Return(self, node):
        value = self.visit(node.value) if node.value is not None else None
        if not self.is_kernel:
            return self.func_return(value)
        if any(l != "static" for l in self.loops):
            self.ctx.syntax_error("Return inside non-static if/for is not supported here: a kernel returns only "
                                  "outside its run-time loops")
        value = self.ctx.rvalue(value) if value is not None else None
        self._check_struct_return(value)
        values = self.flatten_return(value) if value is not None else []
        self.b.return_([self.ctx.scalar(v).stmt for v in values])
        self.block_done = True

    def _check_struct_return(self, value):
        """A kernel annotated to return a struct type returns a value of that type (or of one per tuple entry)."""
        want = signature(self.func).return_annotation
        wants, values = (want, value) if isinstance(want, tuple) and isinstance(value, (tuple, list)) else \
            ((want,), (value,))
        for w, v in zip(wants, values):
            if isinstance(w, StructType) and isinstance(v, StructValue) and v.type is not w:
                self.ctx.type_error(f"Return (type={v.type!r}) cannot be converted into required type {w!r}: a "
                                    f"struct is returned as the struct type the kernel is annotated with")

    def flatten_return(self, value):
        if isinstance(value, StructValue):
            return [x for m in value.members.values() for x in self.flatten_return(self.ctx.rvalue(m))]
        if isinstance(value, MatrixValue):
            return [self.ctx.rvalue(e) for e in value.entries]
        if isinstance(value, (tuple, list)):
            return [x for v in value for x in self.flatten_return(self.ctx.rvalue(v))]
        return [value]

    def func_return(self, value):
        value = self.ctx.rvalue(value)
        if self.ret_flag is None or (self.depth == 0 and not self.runtime_returns):
            # Unconditional, and no return taken at run time before it: the function's value.
            self.return_value = value
            self.done = True
            return
        # A return under run-time control flow: store the value, raise the flag, leave the loop.
        if self.ret_vars is None:
            self.ret_vars = self.return_storage(value)
        self.store_return(self.ret_vars, value)
        self.ctx.store(self.ret_flag, 1)
        if self.loops and self.loops[-1] != "static":
            self.b.break_()
        self.runtime_returns += 1
        self.block_done = True

    def return_storage(self, value):
        """Variables for a returned value, declared where the function starts (they outlive the block)."""
        if isinstance(value, tuple):
            return tuple(self.return_storage(self.ctx.rvalue(v)) for v in value)
        if isinstance(value, MatrixValue):
            return MatrixValue([self.return_storage(e) for e in value.entries], value.shape)
        if isinstance(value, StructValue):
            return StructValue(value.type, {k: self.return_storage(self.ctx.rvalue(m)) for k, m in value.members.items()})
        ann = self.func.__annotations__.get("return") if hasattr(self.func, "__annotations__") else None
        if isinstance(ann, T.DataType):
            dtype = ann
        elif isinstance(value, Expr):
            dtype = value.dtype
        elif is_py_scalar(value):
            dtype = self.ctx.scalar(value).dtype
        else:
            self.ctx.syntax_error(f"a @qd.func that returns early (before its last statement) must return numbers, "
                                  f"vectors or matrices, got {type(value).__name__}")
        return Var(self.b.alloca_before(self.ret_flag.stmt, dtype.core), dtype)

    def store_return(self, storage, value):
        if isinstance(storage, tuple):
            if not isinstance(value, tuple) or len(value) != len(storage):
                self.ctx.type_error("the returns of this @qd.func give different numbers of values")
            for st, v in zip(storage, value):
                self.store_return(st, self.ctx.rvalue(v))
            return
        if isinstance(storage, MatrixValue) and not (isinstance(value, MatrixValue) and value.shape == storage.shape):
            self.ctx.type_error(f"this return gives {type(value).__name__} but an earlier one a vector/matrix of "
                                f"shape {storage.shape}")
        if isinstance(storage, Var) and isinstance(value, Expr) and value.dtype is not storage.dtype:
            self.ctx.type_error(f"this return gives {value.dtype} but an earlier one {storage.dtype}; annotate the "
                                f"@qd.func's return type (-> qd.{value.dtype}) to convert both")
        self.ctx.store(storage, value)

    def visit_For(self, node):

        if node.orelse:
            self.ctx.syntax_error("'for ... else' is not supported in kernels")
        it = node.iter
        while isinstance(it, ast.IfExp):  # `for i in range(n) if qd.static(c) else qd.static(range(m))`
            cond = self.ctx.truth(self.visit(it.test))
            if not isinstance(cond, bool):
                self.ctx.syntax_error("a conditional loop iterable needs a compile-time condition (qd.static(...))")
            it = it.body if cond else it.orelse
        if isinstance(it, ast.Call) and self.visit(it.func) is builtins.range:
            args = [self.visit(a) for a in it.args]
            if it.keywords or not 1 <= len(args) <= 3:
                self.ctx.syntax_error("range() takes 1 to 3 positional arguments in kernels")
            begin, end = (0, args[0]) if len(args) == 1 else (args[0], args[1])
            step = args[2] if len(args) == 3 else 1
            return self.range_for(node, [(begin, end)], grouped=False, step=step)
        iterable = self.visit(it)
        if isinstance(iterable, ops.StaticIterable):
            return self.unroll(node, iterable.values)
        if isinstance(iterable, (list, tuple, range)):
            return self.unroll(node, iterable)
        if isinstance(iterable, (Field, NdarrayArg, StructField)):
            iterable = ops.grouped_impl(self.ctx, iterable, grouped=False)  # `for I in x` groups below
        if isinstance(iterable, LoopGroup):
            names = len(node.target.elts) if isinstance(node.target, (ast.Tuple, ast.List)) else 1
            if iterable.from_ndrange and not iterable.grouped and names != len(iterable.bounds):
                self.ctx.syntax_error(f"for with {names} loop variable(s) over a {len(iterable.bounds)}-D qd.ndrange: "
                                      f"Ndrange for loop with number of the loop variables not equal to the dimension "
                                      f"of the ndrange is not supported (qd.grouped(qd.ndrange(...)) gives one vector)")
            return self.range_for(node, iterable.bounds, iterable.grouped, axes=iterable.axes)
        self.ctx.syntax_error(f"cannot iterate over {type(iterable).__name__} in a kernel")

    def visit_ListComp(self, node):
        """[elt for x in it if c ...]: unrolled at compile time into a Python list of kernel values
        (qd.Vector([f(k) for k in range(3)])): each iterable must be known when the kernel compiles
        (a range of Python ints, a list / tuple, qd.static(...), a vector's entries or a matrix's
        rows), each condition too."""
        out = []
        self.comprehension(node.generators, lambda: out.append(self.visit(node.elt)))
        return out

    def visit_DictComp(self, node):
        """{k: v for x in it if c ...}: unrolled as a list comprehension is; the keys must be known
        when the kernel compiles."""
        out = {}

        def emit():
            key = self.ctx.rvalue(self.visit(node.key))
            if isinstance(key, (Expr, MatrixValue)):
                self.ctx.syntax_error("a dict comprehension in a kernel needs compile-time keys")
            out[key] = self.visit(node.value)

        self.comprehension(node.generators, emit)
        return out

    def comprehension(self, generators, emit):
        if not generators:
            emit()
            return
        gen = generators[0]
        if getattr(gen, "is_async", False):
            self.ctx.syntax_error("async comprehensions are not supported in kernels")
        it = gen.iter
        if isinstance(it, ast.Call) and self.visit(it.func) is builtins.range:
            bounds = [self.ctx.rvalue(self.visit(a)) for a in it.args]
            if not all(isinstance(b, (int, np.integer)) for b in bounds) or it.keywords:
                self.ctx.syntax_error("a comprehension in a kernel is unrolled when the kernel compiles: its "
                                      "range() needs compile-time int bounds")
            values = range(*[int(b) for b in bounds])
        else:
            values = self.visit(it)
            values = values.values if isinstance(values, ops.StaticIterable) else values
            if isinstance(values, (Var, MatrixValue)):
                values = self.ctx.rvalue(values)
            if isinstance(values, MatrixValue):  # a vector's entries, a matrix's rows
                values = matrix_items(values)
            if not isinstance(values, (list, tuple, range)):
                self.ctx.syntax_error("a comprehension in a kernel is unrolled when the kernel compiles: it needs "
                                      "a compile-time iterable (range of Python ints, list, tuple, qd.static, a "
                                      "vector or matrix)")
        for v in values:
            self.scopes.append({})
            self.assign_loop_target(gen.target, v)
            keep = True
            for cond in gen.ifs:
                c = self.ctx.truth(self.visit(cond))
                if not isinstance(c, bool):
                    self.ctx.syntax_error("a comprehension's 'if' in a kernel must be known when the kernel "
                                          "compiles (it decides the list's length)")
                keep = keep and c
            if keep:
                self.comprehension(generators[1:], emit)
            self.scopes.pop()

    def unroll(self, node, values):
        self.loops.append("static")
        self._unroll_depths.append(self.depth)
        guards = 0
        for v in values:
            if self.done:
                break
            before = self.runtime_returns
            scopes = len(self.scopes)
            self.scopes.append({})
            self.assign_loop_target(node.target, v)
            stop = False
            try:
                self.run_body(node.body, new_scope=False)
            except _UnrolledContinue:
                pass
            except _UnrolledBreak:
                stop = True
            del self.scopes[scopes:]
            if self.runtime_returns != before:  # the next copies run only if no return was taken
                guards += 1
                self.guard_stack_open()
            if stop:
                break
        for _ in range(guards):
            self.guard_stack_close()
        self._unroll_depths.pop()
        self.loops.pop()

    def guard_stack_open(self):
        self._guards = getattr(self, "_guards", [])
        self._guards.append(self.b.begin_if(self.ctx.binary("eq", self.ret_flag, 0).stmt))
        self.depth += 1
        self.ctx.depth += 1

    def guard_stack_close(self):
        self.depth -= 1
        self.ctx.depth -= 1
        self.b.end_if(self._guards.pop())

    def assign_loop_target(self, target, value):
        if isinstance(target, ast.Name):
            self.bind(target.id, value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            if isinstance(value, MatrixValue) and len(value.shape) == 2:  # a matrix unpacks into its rows
                n, m = value.shape
                items = [MatrixValue(value.entries[r * m:(r + 1) * m], (m,)) for r in range(n)]
            else:
                items = value.entries if isinstance(value, MatrixValue) else list(value)
            if len(items) != len(target.elts):
                self.ctx.syntax_error(f"the loop has {len(target.elts)} targets but iterates over {len(items)} values")
            for t, v in zip(target.elts, items):
                self.assign_loop_target(t, v)
        else:
            self.ctx.syntax_error("loop targets must be names")

    def range_for(self, node, bounds, grouped, step=1, axes=None):
        ctx = self.ctx
        names = [t.id for t in ast.walk(node.target) if isinstance(t, ast.Name)]
        for name in names:  # a run-time loop's variables are its own, as in Quadrants
            if isinstance(self.lookup_local(name), (Var, MatrixValue, StructValue)):
                ctx.syntax_error(f"the loop variable '{name}' is already a variable of the kernel: a run-time loop "
                                 f"declares its own loop variables; use another name")
        cfg, ctx.loop_config = ctx.loop_config, {}
        if cfg.get("name") is not None and (any(l != "static" for l in self.loops) or ctx.in_parallel_loop):
            log.warn(f"qd.loop_config(name={cfg['name']!r}) in kernel '{ctx.name}' ({os.path.basename(self.file)}:"
                     f"{self.lineno + self.line_offset}): the loop is nested inside another for-loop; only a "
                     f"top-level loop of a kernel is named, this name is dropped")
        parallel = (self.is_kernel or self.top_level) and self.depth == 0 and not cfg.get("serialize", False)
        if not isinstance(step, int) or step == 0:
            ctx.syntax_error("range() step must be a nonzero compile-time integer")
        # Flatten the iteration space into one index; recover each coordinate from it.
        sizes = [ctx.binary("sub", e, b) for b, e in bounds]
        if step != 1:
            b0, e0 = bounds[0]
            sizes[0] = ctx.binary("floordiv", ctx.binary("add", ctx.binary("sub", e0, b0), step - (1 if step > 0 else -1)), step)
        if len(sizes) > 1:  # an empty axis empties the product: two negative sizes must not multiply
            sizes = [ctx.binary("max", s, 0) for s in sizes]
        total = sizes[0] if sizes else 1  # a 0-D field has one element
        for s in sizes[1:]:
            total = ctx.binary("mul", total, s)
        total = ctx.scalar(total)
        zero = ctx.const(0)
        loop = self.b.begin_range_for(zero.stmt, total.stmt, not parallel, int(cfg.get("block_dim", 0) or 0))
        self.loops.append("parallel" if parallel else "serial")
        outer_parallel, self.ctx.in_parallel_loop = self.ctx.in_parallel_loop, self.ctx.in_parallel_loop or parallel
        outer_block_dim = ctx.block_dim
        if parallel:
            ctx.block_dim = int(cfg.get("block_dim", 0) or 0)
        self.depth += 1
        self.ctx.depth += 1
        self.scopes.append({})
        flat = ctx.expr(self.b.loop_index(loop))
        if parallel:  # qd.random's per-iteration stream: the counter is declared here on first use
            ctx.rng_loops.append({"anchor": flat.stmt, "thread": flat, "counter": None})
        coords = [None] * len(bounds)
        for a in reversed(axes or range(len(bounds))):  # the last axis of `axes` varies fastest
            b, size = bounds[a][0], sizes[a]
            if len(bounds) == 1:
                local = flat
            else:
                local = ctx.binary("mod", flat, size)
                flat = ctx.binary("floordiv", flat, size)
            coords[a] = (ctx.binary("add", ctx.binary("mul", local, step), b) if step != 1 else
                         ctx.binary("add", local, b) if not (is_py_scalar(b) and b == 0) else local)
        if grouped or (isinstance(node.target, ast.Name) and len(coords) != 1):
            self.assign_loop_target(node.target, MatrixValue(coords, (len(coords),)))
        elif isinstance(node.target, ast.Name) and len(coords) == 1:
            self.bind(node.target.id, coords[0])
        else:
            self.assign_loop_target(node.target, coords)
        self.run_stmts(node.body)
        self.scopes.pop()
        self.depth -= 1
        self.ctx.depth -= 1
        self.loops.pop()
        self.ctx.in_parallel_loop = outer_parallel
        ctx.block_dim = outer_block_dim
        if parallel:
            ctx.rng_loops.pop()
        self.set_loc(node)
        self.b.end_range_for(loop)

    # --- expressions ----------------------------------------------------------------------------
    def visit_Constant(self, node):
        return node.value

    def visit_Tuple(self, node):
        return tuple(self.visit(e) for e in node.elts)

    def visit_List(self, node):
        return [self.visit(e) for e in node.elts]

    def visit_BinOp(self, node):
        a, c = self.visit(node.left), self.visit(node.right)
        if isinstance(node.op, ast.MatMult):
            return matrix.matmul(self.ctx, self.ctx.rvalue(a), self.ctx.rvalue(c))
        op = _BINOPS.get(type(node.op))
        if op is None:
            self.ctx.syntax_error(f"unsupported operator {type(node.op).__name__}")
        return self.ctx.binary(op, a, c, user_code=True)

    def visit_UnaryOp(self, node):
        v = self.ctx.rvalue(self.visit(node.operand))
        if isinstance(node.op, ast.UAdd):
            return v
        if is_py_scalar(v):
            return {ast.USub: operator.neg, ast.Not: operator.not_, ast.Invert: operator.invert}[type(node.op)](v)
        return self.ctx.unary({ast.USub: "neg", ast.Not: "not_", ast.Invert: "bit_not"}[type(node.op)], v)

    def visit_BoolOp(self, node):
        # Python's semantics: `a and b` is a if a is false, else b; `a or b` is a if a is true,
        # else b; the right operand is evaluated only when the left one does not decide
        # (`i < n and x[i] > 0` never reads x[n]). On vectors / matrices (the reference's rule):
        # element-wise truth, 0 or 1 (i32), both operands evaluated.
        return self.short_circuit(isinstance(node.op, ast.And), self.visit(node.values[0]), node.values[1:])

    def short_circuit(self, is_and, first, rest):
        if not rest:
            return first
        v = self.ctx.rvalue(first)
        if not isinstance(v, (Expr, MatrixValue)):  # compile-time: Python decides, and keeps the value
            if bool(v) != is_and:
                return first
            return self.short_circuit(is_and, self.visit(rest[0]), rest[1:])
        if isinstance(v, MatrixValue):
            other = self.ctx.rvalue(self.short_circuit(is_and, self.visit(rest[0]), rest[1:]))
            truth = lambda x: self.ctx.binary("ne", x, 0)
            return self.ctx.cast(self.ctx.binary("bit_and" if is_and else "bit_or", truth(v), truth(other)), T.i32)
        result = self.ctx.new_var(v)
        flag = self.ctx.new_var(self.ctx.binary("ne", v, 0), T.i32)  # the truth, for mixed types
        s = self.b.begin_if(self.ctx.binary("ne" if is_and else "eq", v, 0).stmt)  # v does not decide
        self.depth += 1
        self.ctx.depth += 1
        second = self.ctx.rvalue(self.short_circuit(is_and, self.visit(rest[0]), rest[1:]))
        if isinstance(second, MatrixValue) or not (is_py_scalar(second) or isinstance(second, Expr)):
            self.ctx.type_error("'and'/'or' take scalars (or vectors on both sides)")
        same = is_py_scalar(second) or second.dtype is v.dtype
        if same:
            self.ctx.store(result, second)
        self.ctx.store(flag, self.ctx.binary("ne", second, 0) if isinstance(second, Expr) else int(bool(second)))
        self.depth -= 1
        self.ctx.depth -= 1
        self.b.end_if(s)
        # Operands of one type: the deciding operand itself. Of two types (`f and i < n`), whose
        # value the result would be is known only at run time: its truth, 0 or 1 (i32).
        return self.ctx.rvalue(result if same else flag)

    def _check_static_identity(self, word, left_node, right_node):
        """qd.static(x is None) / qd.static(x is not None): as in the reference, `x` must be a direct
        qd.template() / qd.Tensor parameter of the kernel (not a func's, not re-bound, not a reserved
        __qd_ name) and the other side the literal None. It asks whether an optional argument was
        given; identity of anything else is not a stable question (values are copied and re-made
        between compilations), so it is a QuadrantsSyntaxError."""
        def is_none(n):
            return isinstance(n, ast.Constant) and n.value is None
        name_node = left_node if is_none(right_node) else right_node if is_none(left_node) else None
        ok = self.is_kernel and isinstance(name_node, ast.Name) and not name_node.id.startswith("__qd_") \
            and name_node.id in self.identity_args and not any(name_node.id in sc for sc in self.scopes[1:]) \
            and self.scopes[0].get(name_node.id, _MISSING) is self.identity_args[name_node.id]
        if not ok:
            self.ctx.syntax_error(f'Operator "{word}" inside `qd.static` requires a direct `qd.template()` or '
                                  f'`qd.Tensor` kernel argument and `None`. (qd.static(x {word} None) asks whether '
                                  f'the optional argument x was given; compare other values with == / !=)')

    def visit_Compare(self, node):
        result, left, left_node = None, self.visit(node.left), node.left
        for op, right_node in zip(node.ops, node.comparators):
            right = self.visit(right_node)
            name = _CMPOPS.get(type(op))
            if name is None:
                compile_time = {ast.Is: operator.is_, ast.IsNot: operator.is_not,
                                ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}
                word = {ast.Is: "is", ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in"}.get(type(op))
                if type(op) in (ast.Is, ast.IsNot):
                    if not self._static_depth:
                        self.ctx.syntax_error(f'Operator "{word}" in Quadrants scope is not supported: it is only '
                                              f'supported inside `qd.static` (qd.static(x {word} None) on a '
                                              f'qd.template() / qd.Tensor kernel argument, evaluated when the kernel '
                                              f'compiles)')
                    self._check_static_identity(word, left_node, right_node)
                elif type(op) in compile_time and not self._static_depth:
                    self.ctx.syntax_error(f'"{type(op).__name__}" is only supported inside `qd.static`. '
                                          f'(qd.static(a {word} b), evaluated when the kernel compiles)')
                if type(op) in compile_time and not any(isinstance(v, (Expr, Var, Ptr, MatrixValue))
                                                        for v in (left, right)):
                    try:
                        r = compile_time[type(op)](left, right)
                    except Exception as e:
                        self.ctx.syntax_error(f"'{type(op).__name__}' on {type(left).__name__} and "
                                              f"{type(right).__name__}: {e}")
                else:
                    self.ctx.syntax_error(f"unsupported comparison '{type(op).__name__}' in a kernel")
            else:
                r = self.ctx.binary(name, left, right)
            result = r if result is None else self.ctx.binary("and_", result, r)
            left, left_node = right, right_node
        return result

    def visit_IfExp(self, node):
        cond = self.ctx.truth(self.visit(node.test))
        if isinstance(cond, bool):
            return self.visit(node.body if cond else node.orelse)
        a, c = self.ctx.rvalue(self.visit(node.body)), self.ctx.rvalue(self.visit(node.orelse))
        if isinstance(a, MatrixValue) or isinstance(c, MatrixValue):  # vectors: element-wise select
            return self.ctx.elementwise(lambda x, y: self.select(cond, x, y), a, c)
        return self.select(cond, a, c)

    def select(self, cond, a, c):
        a, c = self.ctx.scalar(a), self.ctx.scalar(c)
        if a.dtype is not c.dtype:
            t = T.from_core(_core_promoted(a.dtype.core, c.dtype.core))
            a, c = self.ctx.cast(a, t), self.ctx.cast(c, t)
        return self.ctx.expr(self.b.select(cond.stmt, a.stmt, c.stmt))

    def visit_Attribute(self, node):
        base = self.visit(node.value)
        attr = node.attr
        if isinstance(base, NdarrayArg):
            if attr == "shape":
                return tuple(self.ctx.ndarray_sizes(base))
            if attr == "grad" and base.grad is not None:
                self.ctx.reads_grad = True  # an adjoint of this kernel would differentiate through a gradient
                return base.grad
            if attr == "dtype":
                return base.dtype
            if attr == "fill":
                fill = lambda value: self.ctx.fill(base, value)  # noqa: E731
                fill._qd_builtin = True
                return fill
            if attr in ("to_numpy", "from_numpy"):
                self.ctx.syntax_error(f"{attr}() is a Python-scope operation and cannot be used inside a kernel or "
                                      f"@qd.func; call it before or after the kernel")
            self.ctx.syntax_error(f"ndarray arguments have no attribute '{attr}' in kernels")
        if isinstance(base, ViewValue):
            if attr == "size":
                return base.size
            if attr == "shape":
                return (base.size,)
            if attr == "offset":
                return base.offset
            if attr == "dtype":
                return base.array.dtype
            if attr == "subview":
                sub = lambda offset, size: self.ctx.subview(base, offset, size)  # noqa: E731
                sub._qd_builtin = True
                return sub
            self.ctx.syntax_error(f"a BufferView has no attribute '{attr}' in kernels (size, shape, offset, dtype, "
                                  f"subview)")
        if isinstance(base, MatrixValue):
            return matrix.attribute(self.ctx, base, attr)
        if isinstance(base, StructValue):
            if attr in base.members:
                return base.members[attr]
            if attr in base.type._unpacked_groups:
                return UnpackedGroup(base, attr)
            if attr in base.type.methods:
                return base.type.methods[attr].bind(base)
            self.ctx.syntax_error(f"struct {base.type.name} has no member '{attr}'")
        if isinstance(base, (Expr, Var, Ptr)):
            self.ctx.syntax_error(f"a scalar has no attribute '{attr}'")
        try:
            value = getattr(base, attr)
        except AttributeError:
            self.ctx.syntax_error(f"'{type(base).__name__}' has no attribute '{attr}'")
        if self.ctx.tracker.is_tracked(base):
            self.ctx.tracker.read_attribute(base, attr, value)
        return value

    def visit_Subscript(self, node):
        base = self.visit(node.value)
        if isinstance(base, ViewValue):
            return self.view_subscript(base, node.slice)
        parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if isinstance(base, (Field, NdarrayArg, SharedArray)) and any(isinstance(p, ast.Slice) for p in parts):
            return _tile.array_slice(self.ctx, base, [self.slice_bounds(p) if isinstance(p, ast.Slice) else
                                                      self.visit(p) for p in parts])
        index = self.visit(node.slice)
        if isinstance(base, (Field, NdarrayArg, StructField, SharedArray)):
            if index is None:
                indices = []
            elif isinstance(index, MatrixValue):
                indices = index.entries
            elif isinstance(index, tuple):  # a vector among the indices gives its components: x[f, base + offset]
                indices = [e for i in index for e in (i.entries if isinstance(i, MatrixValue) else [i])]
            else:
                indices = [index]
            return self.ctx.element(base, indices)
        if isinstance(base, MatrixValue):
            return self.matrix_subscript(base, index)
        if isinstance(base, UnpackedGroup):
            return self.unpacked_member(base, index)
        if isinstance(base, (Expr, Var, Ptr)):
            self.ctx.syntax_error("cannot index a scalar")
        try:
            r = base[index]
        except Exception as e:
            self.ctx.syntax_error(f"cannot index {type(base).__name__}: {e}")
        if isinstance(base, PyMatrix) and base.qd_dtype() is None and isinstance(r, np.generic):
            return r.item()  # an entry of a vector made without a dtype is a literal (a typed one keeps its dtype)
        return r

    def matrix_subscript(self, base, index):
        """v[i] / m[i, j] of a kernel vector or matrix (and the reference's older v(i))."""
        idx = index if isinstance(index, tuple) else (index,)
        if isinstance(index, MatrixValue):
            idx = tuple(index.entries)
        if any(isinstance(i, slice) for i in idx):
            return self.slice_matrix(base, idx)
        if not all(isinstance(i, (int, np.integer)) for i in idx):
            return self.runtime_index(base, idx)
        self._check_index_count(base, idx)
        # Python's rules per axis: negative counts from the end, out of range is an error (a
        # flat offset would silently land on another entry).
        for i, n in zip(idx, base.shape):
            if not -n <= i < n:
                raise QuadrantsIndexError(self.located(f"index {i} out of range for a vector/matrix of shape "
                                                       f"{base.shape}"))
        idx = tuple(int(i) % n for i, n in zip(idx, base.shape))
        return base.entry(*idx)

    def unpacked_member(self, group, index):
        """t.r[i] of an unpacked vector member r: the scalar member _r{i}; i must be known at compile time."""
        if not isinstance(index, (int, np.integer)) or isinstance(index, bool):
            self.ctx.syntax_error(f"{group.name}[...] of an unpacked vector (unpacked=True) takes a python-int index "
                                  f"or a qd.static loop variable, known at compile time; a run-time index is not "
                                  f"supported (use a packed qd.types.vector for that)")
        if not 0 <= index < group.count:
            raise QuadrantsIndexError(self.located(f"index {index} is out of bounds for the unpacked vector "
                                                   f"'{group.name}' of {group.count} entries"))
        return group.value.members[group.names[int(index)]]

    def _check_index_count(self, base, idx):
        """A vector takes one index, a matrix two (a row is m[i, :])."""
        if len(idx) != len(base.shape):
            self.ctx.syntax_error(f"a {'vector' if len(base.shape) == 1 else 'matrix'} of shape {base.shape} takes "
                                  f"{len(base.shape)} indices: Expected {len(base.shape)} indices, got {len(idx)}"
                                  + (" (a row is m[i, :])" if len(idx) == 1 else ""))

    def runtime_index(self, base, idx):
        """v[i] / m[i, j] with run-time indices: a DynIndex over the entries (out of range: the last
        entry is read, nothing is written)."""
        self._check_index_count(base, idx)
        idx = [self.ctx.rvalue(i) if not isinstance(i, (int, np.integer)) else int(i) for i in idx]
        for i in idx:
            if isinstance(i, Expr) and i.dtype.is_real:
                self.ctx.type_error("vector/matrix indices must be integers")
        if self.ctx.config.bounds_checks:  # debug=True / check_out_of_bound=True: each run-time index checked
            for i, n in zip(idx, base.shape):
                if isinstance(i, Expr):
                    ok = self.ctx.binary("and_", self.ctx.binary("ge", i, 0), self.ctx.binary("lt", i, n))
                    self.ctx.kernel_assert(ok, out_of_bound_text(self.located(
                        f"run-time index out of range for a vector/matrix of shape {base.shape}")),
                        QuadrantsOutOfBoundsError)
        flat = idx[0]
        if len(idx) == 2:
            flat = self.ctx.binary("add", self.ctx.binary("mul", idx[0], base.shape[1]), idx[1])
        return DynIndex(base.entries, self.ctx.scalar(flat))

    def visit_JoinedStr(self, node):
        """An f-string: compile-time parts are formatted now, run-time values when the record is printed."""

        parts = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                parts.append(str(v.value))
                continue
            value = self.visit(v.value)
            spec = self.visit(v.format_spec) if v.format_spec is not None else ""
            if isinstance(spec, Format):
                if spec.values:
                    self.ctx.syntax_error("a format spec in a kernel f-string must be known at compile time")
                spec = "".join(spec.parts)
            conv = {-1: "", 115: "!s", 114: "!r", 97: "!a"}[v.conversion]
            parts.append(printing.hole(self.ctx, value, conv, spec))
        return Format.of(parts)

    def visit_NamedExpr(self, node):
        """(n := expr): assigns n, as `n = expr` does, and is n's value."""
        self.assign(node.target, self.visit(node.value))
        return self.visit(ast.Name(id=node.target.id, ctx=ast.Load()))

    def visit_Dict(self, node):
        """A dict display, {"a": x, ...}: a Python dict of kernel values (qd.Struct({...}), a
        template argument); its keys must be known when the kernel compiles."""
        out = {}
        for k, v in zip(node.keys, node.values):
            if k is None:  # {**d}: a dict known when the kernel compiles
                d = self.visit(v)
                if not isinstance(d, dict):
                    self.ctx.syntax_error(f"** in a dict in a kernel takes a dict, got {type(d).__name__}")
                out.update(d)
                continue
            key = self.ctx.rvalue(self.visit(k))
            if isinstance(key, (Expr, MatrixValue)):
                self.ctx.syntax_error("a dict in a kernel needs compile-time keys")
            out[key] = self.visit(v)
        return out

    def view_subscript(self, view, index):
        """v[i] (element offset + i of the ndarray) or v[lo:hi] (a subview) of a BufferView."""
        ctx = self.ctx
        if isinstance(index, ast.Slice):
            if index.step is not None:
                ctx.syntax_error("a BufferView slice in a kernel takes no explicit step (v[lo:hi] only)")
            lo = ctx.rvalue(self.visit(index.lower)) if index.lower is not None else 0
            hi = ctx.rvalue(self.visit(index.upper)) if index.upper is not None else view.size
            return ctx.subview(view, lo, ctx.binary("sub", hi, lo))
        i = ctx.rvalue(self.visit(index))
        if isinstance(i, (tuple, MatrixValue)):
            ctx.syntax_error("a BufferView takes one index")
        if ctx.config.debug:  # the view's own range, not only its ndarray's
            inside = ctx.binary("and", ctx.binary("ge", i, 0), ctx.binary("lt", i, view.size))
            ctx.kernel_assert(inside, self.located("BufferView Out Of Range: the index is outside [0, size) of the view"))
        return ctx.element(view.array, [ctx.binary("add", view.offset, i)])

    def visit_Slice(self, node):
        """v[a:b:c] on a vector / matrix: a Python slice; its bounds must be known at compile time."""
        parts = []
        for p in (node.lower, node.upper, node.step):
            v = self.ctx.rvalue(self.visit(p)) if p is not None else None
            if v is not None and not isinstance(v, (int, np.integer)):
                self.ctx.syntax_error("Quadrants does not support variables in slice now: slice bounds in a "
                                      "kernel must be compile-time ints (a slice decides a vector's length)")
            parts.append(None if v is None else int(v))
        return slice(*parts)

    def slice_bounds(self, node):
        """lo:hi:step of an array's tile slice: a Python slice of kernel values (run-time bounds allowed)."""
        return slice(*(self.ctx.rvalue(self.visit(p)) if p is not None else None
                       for p in (node.lower, node.upper, node.step)))

    def slice_matrix(self, base, idx):
        """v[1:], m[0, :], m[:, 1], m[:2, 1:]: a vector / matrix of the selected entries (lvalues
        stay lvalues, so m[:, 1] = v stores into them). An int index drops its axis."""
        if len(idx) > len(base.shape):
            self.ctx.syntax_error(f"a {base.shape} matrix needs {len(base.shape)} indices: Expected {len(base.shape)} "
                                      f"indices, got {len(idx)}")
        idx = tuple(idx) + (slice(None),) * (len(base.shape) - len(idx))
        picks, shape, dynamic = [], [], {}
        for axis, (i, n) in enumerate(zip(idx, base.shape)):
            if isinstance(i, slice):
                picks.append(list(range(n))[i])
                shape.append(len(picks[-1]))
            elif isinstance(i, (int, np.integer)):
                if not -n <= i < n:
                    raise QuadrantsIndexError(self.located(f"index {i} out of range for a vector/matrix of shape "
                                                           f"{base.shape}"))
                picks.append([int(i) % n])
            else:  # a run-time index on this axis: each entry picks among the axis's n (m[:, j], m[i, :])
                i = self.ctx.rvalue(i)
                if not isinstance(i, Expr) or i.dtype.is_real:
                    self.ctx.type_error("vector/matrix indices must be integers")
                dynamic[axis] = i
                picks.append([0])
        if 0 in shape:
            self.ctx.syntax_error("an empty slice of a vector / matrix")
        if len(dynamic) > 1:
            self.ctx.syntax_error("a slice of a matrix takes at most one run-time index")

        def entry(ix):
            if not dynamic:
                return base.entry(*ix)
            (axis, index), = dynamic.items()
            return DynIndex([base.entry(*ix[:axis], k, *ix[axis + 1:]) for k in range(base.shape[axis])], index)

        entries = [entry(ix) for ix in itertools.product(*picks)]
        return MatrixValue(entries, tuple(shape)) if shape else entries[0]

    def visit_Call(self, node):

        func = self.visit(node.func)
        static = func is ops.static
        self._static_depth += static  # qd.static(a is b): `is` / `in` allowed inside
        try:
            args = []
            for a in node.args:
                if isinstance(a, ast.Starred):
                    items = self.visit(a.value)
                    if inspect.isgenerator(items):  # consumed by the first compilation: a later one would see none
                        raise _GeneratorArgumentError(self.located("f(*generator) in a kernel: a generator can be read only once; "
                                                      "pass a tuple or list (tuple(generator))"))
                    args.extend(items)
                else:
                    args.append(self.visit(a))
            kwargs = {k.arg: self.visit(k.value) for k in node.keywords}
        finally:
            self._static_depth -= static
        self.set_loc(node)
        if isinstance(func, MatrixValue) and args and not kwargs:  # v(0): v[0], as older Quadrants code writes it
            return self.matrix_subscript(func, args[0] if len(args) == 1 else tuple(args))
        if not getattr(func, "_qd_func", False) and func is not ops.static:
            for a in args + list(kwargs.values()):  # the callee may read anything from it
                if self.ctx.tracker.is_tracked(a):
                    self.ctx.tracker.escape(a)
        if getattr(func, "_qd_builtin", False):
            return func(*args, **kwargs)
        if getattr(func, "_qd_func", False):  # a @qd.func: inlined
            return func.inline(self.ctx, args, kwargs)
        if func is operator.matmul and len(args) == 2 and not kwargs:  # operator.matmul(m, n)
            return matrix.matmul(self.ctx, self.ctx.rvalue(args[0]), self.ctx.rvalue(args[1]))
        if isinstance(func, type(operator.add)) and func in ops.PYTHON_OPERATORS and not kwargs:  # operator.add(a, b)
            return ops.PYTHON_OPERATORS[func](*args)
        if getattr(func, "_qd_kernel", False):
            self.ctx.syntax_error("a kernel cannot call another kernel; make the callee a @qd.func")
        if func in (abs, min, max, int, float, len, bool, pow, all, any):
            return self.python_builtin(func, args)
        if func is builtins.range:
            return range(*args) if all(isinstance(a, int) for a in args) else \
                self.ctx.syntax_error("range() with run-time bounds is only allowed as a for-loop iterator")
        if func is print:
            return self.ctx.kernel_print(args, kwargs)
        if isinstance(getattr(func, "__self__", None), str) and getattr(func, "__name__", None) == "format":
            return printing.str_format(self.ctx, func.__self__, args, kwargs)  # "{} {:.2f}".format(i, x)
        runtime_args = [a for a in list(args) + list(kwargs.values()) if isinstance(a, (Expr, Var, Ptr, MatrixValue))]
        if runtime_args:
            if inspect.isfunction(func):  # a plain Python function (a lambda): run now, on the kernel values
                rv = self.ctx.rvalue
                return func(*[rv(a) for a in args], **{k: rv(v) for k, v in kwargs.items()})
            name = getattr(func, "__name__", repr(func))
            self.ctx.syntax_error(f"cannot call the Python function '{name}' with kernel values; "
                                  f"decorate it with @qd.func")
        return func(*args, **kwargs)  # a compile-time call on Python values

    def python_builtin(self, func, args):

        vals = [self.ctx.rvalue(a) for a in args]
        if all(is_py_scalar(v) for v in vals) or func is len:
            if func is len and isinstance(vals[0], MatrixValue):
                return vals[0].shape[0]
            return func(*vals)
        if func is abs:
            return ops.abs(vals[0])
        if func in (all, any):  # all(v == w): every / some entry of a vector or matrix nonzero
            if len(vals) != 1 or not isinstance(vals[0], MatrixValue):
                self.ctx.syntax_error(f"{func.__name__}() in a kernel takes one vector or matrix")
            return matrix.attribute(self.ctx, vals[0], func.__name__)()
        if func is pow:  # pow(x, y) is x ** y; pow(x, y, m) only on Python values
            if len(vals) != 2:
                self.ctx.syntax_error("pow() with kernel values takes two arguments (x ** y)")
            return ops.pow(*vals)
        if func in (min, max):
            return ops.min(*vals) if func is min else ops.max(*vals)
        if func is int:
            return self.ctx.cast(vals[0], self.ctx.config.default_ip)
        if func is float:
            return self.ctx.cast(vals[0], self.ctx.config.default_fp)
        return self.ctx.binary("ne", vals[0], 0)

    def generic_visit(self, node):
        self.unsupported(node)

    def unsupported(self, node):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            self.ctx.syntax_error(f"Function definition is not allowed in '{'qd.kernel' if self.is_kernel else 'qd.func'}'"
                                  f": define it outside, as a @qd.func")
        self.ctx.syntax_error(f'Unsupported node "{type(node).__name__}": this Python construct is not part of the '
                              f'kernel language')
