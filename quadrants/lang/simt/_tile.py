"""qd.simt.Tile16x16 / qd.simt.Tile32x32: an N x N matrix held in registers by the N threads of a
tile, one row per thread (N scalar kernel variables each). See docs/simt.md, "Register tiles".

Everything here runs while the kernel compiles and emits IR: loads read a clamped column and keep
it where the column is in range, stores are guarded, and rows see each other's values through
`_Rows`, chosen per kernel: subgroup shuffles on a GPU whose subgroups hold a whole tile
(group_size() >= N), else (lavapipe's 8- or 4-lane subgroups, the cpu) block shared-memory tables
with block barriers.

Row i of a tile belongs to the thread whose index in its tile is i: thread_idx % N of the block
(its lane % N on the shuffle path; with block_dim == N both are the lane, subgroup.invocation_id())."""
from quadrants import types as T
from quadrants._lib import runtime
from quadrants.lang.ast.context import current
from quadrants.lang.ast.values import NdarrayArg
from quadrants.lang.ops import builtin
from quadrants.lang.simt import block, subgroup
from quadrants.lang.simt import reductions as R
from quadrants.lang.simt._common import gpu_context, in_parallel_loop
from quadrants.memory.field import Field


# ------------------------------------------------------------------------- deferred proxies
class _Deferred:
    """A value that only a tile operation consumes; using it as a number is a TypeError."""

    _what = "a tile proxy"

    def _misuse(self, *_):
        raise TypeError(f"{self._what} is not a value: it is only valid in tile operations "
                        f"(tile[:] = arr[...], arr[...] = tile, tile -= qd.outer(u, v))")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __getitem__ = _misuse

    def __repr__(self):
        return f"<{self._what}: not a value; use it in a tile operation>"


class _TileSliceProxy(_Deferred):
    """arr[r0:r1, c0:c1] or arr[batch, r0:r1, c0:c1] in a kernel: what a tile loads from or stores to."""

    _what = "a tile slice arr[r0:r1, c0:c1]"

    def __init__(self, arr, row_start, row_stop, col_start, col_stop, batch=None):
        self.arr, self.batch = arr, batch
        self.row_start, self.row_stop, self.col_start, self.col_stop = row_start, row_stop, col_start, col_stop

    def _qd_assign(self, value):  # arr[r0:r1, c0:c1] = tile
        if not isinstance(value, _Tile):
            _error("type", f"arr[r0:r1, c0:c1] = ... stores a tile (qd.simt.Tile16x16 / Tile32x32), got "
                           f"{type(value).__name__}")
        value._transfer(self, store=True)


class _VecSliceProxy(_Deferred):
    """arr[r0:r1, col] or arr[batch, r0:r1, col]: one entry per tile row (row r0 + i on thread i, 0
    past r1 or the array's rows), for qd.outer."""

    _what = "a column slice arr[r0:r1, col]"

    def __init__(self, arr, row_start, row_stop, col, batch=None):
        self.arr, self.row_start, self.row_stop, self.col, self.batch = arr, row_start, row_stop, col, batch


class _TileRefProxy(_Deferred):
    """tile[:], the target of a load: tile[:] = arr[r0:r1, c0:c1]."""

    _what = "tile[:]"

    def __init__(self, tile):
        self.tile = tile

    def _qd_assign(self, value):
        if not isinstance(value, _TileSliceProxy):
            _error("type", f"tile[:] = ... loads from an array slice arr[r0:r1, c0:c1], got {type(value).__name__}")
        self.tile._transfer(value, store=False)


class _OuterProduct:
    """qd.outer(u, v): the rank-1 update u v^T, consumed by tile -= qd.outer(u, v)."""

    def __init__(self, a, b):
        self.a, self.b = a, b

    def _compose(self, _other):
        raise TypeError("qd.outer(u, v) does not support composition (+, -, *): apply each rank-1 update "
                        "separately, tile -= qd.outer(u, v)")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _compose


@builtin
def outer(a, b):
    """qd.outer(u, v): a deferred rank-1 update for `tile -= qd.outer(u, v)` (tile[i][j] -= u_i v_j).
    Thread i of the tile gives u_i and v_i: scalars or column slices arr[r0:r1, col]."""
    return _OuterProduct(a, b)


def _error(kind, msg):
    """A QuadrantsSyntaxError / QuadrantsTypeError naming the kernel line, or a TypeError outside kernels."""
    ctx = current()
    if ctx is None:
        raise TypeError(msg)
    (ctx.syntax_error if kind == "syntax" else ctx.type_error)(msg)


# ------------------------------------------------------------------------------ slices
def array_slice(ctx, arr, index):
    """arr[...] in a kernel with a slice among its indices: a tile slice (called by the AST walker).
    Slice bounds may be run-time values; both are required and a compile-time one may not be negative."""
    for i in index:
        parts = (i.start, i.stop) if isinstance(i, slice) else (i,)
        if isinstance(i, slice) and (i.start is None or i.stop is None):
            ctx.syntax_error("a tile slice needs both start and stop indices: start and stop indices are "
                             "required (arr[0:N, 0:N], not arr[:N, :N] or arr[0:, 0:])")
        if isinstance(i, slice) and i.step is not None:
            ctx.syntax_error("a tile slice takes no step (arr[r0:r1, c0:c1])")
        if any(isinstance(p, int) and p < 0 for p in parts):
            ctx.syntax_error("Negative indices are not supported in a tile slice: rows and columns count from 0")
    index = [slice(ctx.scalar(i.start), ctx.scalar(i.stop)) if isinstance(i, slice) else ctx.scalar(i)
             for i in index]
    kinds = tuple(isinstance(i, slice) for i in index)
    if kinds in ((True, True), (False, True, True)):
        b, r, c = ([None] + index)[-3:]
        return _TileSliceProxy(arr, r.start, r.stop, c.start, c.stop, b)
    if kinds in ((True, False), (False, True, False)):
        b, r, c = ([None] + index)[-3:]
        return _VecSliceProxy(arr, r.start, r.stop, c, b)
    ctx.syntax_error("a slice of an array in a kernel is a tile slice: arr[r0:r1, c0:c1], arr[b, r0:r1, c0:c1] "
                     "(a tile's rows and columns) or arr[r0:r1, col], arr[b, r0:r1, col] (a column, for qd.outer); a "
                     "sub-range of a 1-D ndarray is qd.BufferView(arr, offset, size)")


def _shape(ctx, arr, ndim):
    """The shape (ints or run-time i32 values) of an array of scalars a tile slice reads or writes."""
    if isinstance(arr, NdarrayArg):
        elem, shape = arr.element_shape, ctx.ndarray_sizes(arr)
    elif isinstance(arr, (Field, block.SharedArray)):
        elem, shape = arr.element_shape, list(arr.shape)
    else:
        ctx.type_error(f"a tile slice reads or writes a field, an ndarray or a qd.simt.block.SharedArray, got "
                       f"{type(arr).__name__}")
    if elem:
        ctx.type_error("a tile slice needs an array of scalars, not of vectors / matrices")
    if len(shape) != ndim:
        ctx.syntax_error(f"this tile slice indexes a {ndim}-D array (arr[r0:r1, ...] or arr[b, r0:r1, ...]), but the "
                         f"array has {len(shape)} dimension(s)")
    return shape


def _and(ctx, a, b):
    """a and b, a Python bool when either decides it at compile time."""
    if isinstance(a, bool) or isinstance(b, bool):
        return b if a is True else a if b is True else False
    return ctx.binary("and_", a, b)


def _in(ctx, i, stop):
    """0 <= i < stop."""
    return _and(ctx, ctx.binary("ge", i, 0), ctx.binary("lt", i, stop))


def _when(ctx, cond, emit):
    """emit() under `cond` (an IR if, or at compile time)."""
    if isinstance(cond, bool):
        if cond:
            emit()
        return
    s = ctx.b.begin_if(ctx.scalar(cond).stmt)
    emit()
    ctx.b.end_if(s)


def _loop(ctx, stop, body):
    """for i in range(stop): body(i), a run-time loop of the thread (stop: an int or i32 value)."""
    loop = ctx.b.begin_range_for(ctx.const(0).stmt, ctx.scalar(stop).stmt, True, 0)
    body(ctx.expr(ctx.b.loop_index(loop)))
    ctx.b.end_range_for(loop)


def _dot(ctx, dtype, terms):
    """sum of a * b over `terms` ((a, b) pairs), in order from 0."""
    acc = ctx.const(0.0, dtype)
    for a, b in terms:
        acc = ctx.binary("add", acc, ctx.binary("mul", a, b))
    return acc


# ------------------------------------------------------------------------- row exchange
_SHUFFLES_ON_CPU = False  # tests set it to run the shuffle exchange on the cpu (32-lane subgroups)


class _Rows:
    """Which row of its tile this thread holds (`tid`, i32), and the values other rows hold.

    On the shared-memory path row r of the tile owns `width` slots of each table (a SharedArray of
    block_dim * width entries): the rows write their slots, one block sync, every row reads; close()
    syncs again so that the operation may run again (in a loop) without racing on its slots."""

    def __init__(self, ctx, n, dtype, width=0):
        self.ctx, self.n, self.dtype, self.width, self.buf = ctx, n, dtype, width, None
        g = subgroup.group_size()
        # The cpu runs a block's threads one after another between barriers, so a shuffle there is a
        # barrier: the shared tables (a few barriers per operation) are the cheaper exchange.
        self.shuffle = g >= n and (ctx.arch is not runtime.cpu or _SHUFFLES_ON_CPU)
        if self.shuffle:  # the n lanes of a tile are an aligned run of the subgroup
            lane = R.lane_id(ctx)
            self.tid = ctx.binary("bit_and", lane, n - 1)
            self.first = 0 if g == n else ctx.binary("sub", lane, self.tid)  # the lane holding row 0
            return
        bd = ctx.block_dim
        if not bd or bd % n:
            ctx.syntax_error(f"a {n}x{n} tile on {ctx.arch.name} (subgroups of {g} lanes) exchanges rows through block "
                             f"shared memory: set qd.loop_config(block_dim=...) to a multiple of {n} "
                             f"(block_dim={n}: one tile per block), got {bd or 'the default'}")
        t = block.thread_idx()
        self.tid = ctx.binary("bit_and", t, n - 1)
        self.first = ctx.binary("sub", t, self.tid)  # the block thread holding row 0
        self.block_dim = bd

    def table(self):
        """A fresh SharedArray of `width` slots per thread of the block (the shared-memory path)."""
        return block.SharedArray((self.block_dim * self.width,), self.dtype)

    def at(self, buf, row, i):
        """Slot i of row `row` of this thread's tile in `buf`."""
        ctx = self.ctx
        base = ctx.binary("mul", ctx.binary("add", self.first, row), self.width)
        return ctx.element(buf, [ctx.binary("add", base, i)])

    def _slot(self, row, i):
        if self.buf is None:
            self.buf = self.table()
        return self.at(self.buf, row, i)

    def _shuffled(self, v, row):
        return R.shuffle(self.ctx, "shuffle", v, self.ctx.binary("add", self.first, row))

    def of_row(self, values, k):
        """values as row k holds them, on every row (the shuffle path)."""
        assert self.shuffle
        return [self._shuffled(v, k) for v in values]

    def of_every_row(self, values, needed=None):
        """[row j's values[:needed(j)] for each row j], on every row (needed: all of them)."""
        needed = needed or (lambda j: len(values))
        if self.shuffle:
            return [[self._shuffled(v, j) for v in values[:needed(j)]] for j in range(self.n)]
        ctx = self.ctx
        for i, v in enumerate(values):
            ctx.store(self._slot(self.tid, i), v)
        block.sync()
        return [[ctx.rvalue(self._slot(j, i)) for i in range(needed(j))] for j in range(self.n)]

    def close(self):
        if self.buf is not None:
            block.sync()


# ---------------------------------------------------------------------------------- tiles
class _Tile:
    """An N x N tile of DTYPE: thread i of the tile holds row i in N kernel variables. Tile() and
    Tile.zeros() are zero, Tile.eye() the identity."""

    SIZE = 0
    DTYPE = None
    _qd_builtin = True  # Tile() in a kernel

    def __init__(self):
        ctx = current()
        self.regs = None  # outside a kernel a tile holds nothing (its methods need a kernel)
        if ctx is not None:
            self._ctx("zeros")
            in_parallel_loop(ctx, f"{self._name()}.zeros()")
            self.regs = [ctx.new_var(ctx.const(0.0, self.DTYPE)) for _ in range(self.SIZE)]

    @classmethod
    def _name(cls):
        return f"qd.simt.Tile{cls.SIZE}x{cls.SIZE}"

    def _ctx(self, what):
        return gpu_context(f"{self._name()}.{what}")

    def __repr__(self):
        return f"<{self._name()} of {self.DTYPE}>"

    @classmethod
    @builtin
    def zeros(cls):
        return cls()

    @classmethod
    @builtin
    def eye(cls):
        t = cls()
        t.eye_()
        return t

    def __getitem__(self, key):
        if key != slice(None):
            _error("syntax", f"a tile is indexed only as tile[:] (tile[:] = arr[r0:r1, c0:c1]), got [{key!r}]")
        return _TileRefProxy(self)

    def _values(self):
        ctx = current()
        return [ctx.rvalue(v) for v in self.regs]

    def _set(self, values):
        for var, v in zip(self.regs, values):
            current().store(var, v)

    @builtin
    def eye_(self):
        """Sets the tile to the identity: thread i's entry i is 1, the others 0."""
        ctx = self._ctx("eye_")
        rows = _Rows(ctx, self.SIZE, self.DTYPE)
        one, zero = ctx.const(1.0, self.DTYPE), ctx.const(0.0, self.DTYPE)
        self._set([R.select(ctx, ctx.binary("eq", rows.tid, j), one, zero) for j in range(self.SIZE)])

    # --- load / store ---------------------------------------------------------------------
    def _transfer(self, s, store):
        """tile[:] = s (store=False) or s = tile: thread i reads / writes row s.row_start + i, columns
        s.col_start + j for j < SIZE, clipped to [0, min(stop, the array's size)) on both axes; entries
        outside keep their values (in the tile on a load, in the array on a store)."""
        ctx = self._ctx("store" if store else "load")
        arr, batched = s.arr, s.batch is not None
        shape = _shape(ctx, arr, 3 if batched else 2)
        rows = _Rows(ctx, self.SIZE, self.DTYPE)
        row = ctx.binary("add", s.row_start, rows.tid)
        row_ok = _in(ctx, row, ctx.binary("min", s.row_stop, shape[-2]))
        col_stop = ctx.binary("min", s.col_stop, shape[-1])
        lead = [s.batch] if batched else []

        def columns():
            for j, var in enumerate(self.regs):
                col = ctx.binary("add", s.col_start, j)
                ok = _in(ctx, col, col_stop)
                if store:
                    _when(ctx, ok, lambda var=var, col=col: ctx.store(ctx.element(arr, lead + [row, col]),
                                                                       ctx.cast(var, arr.dtype)))
                else:  # branch-free: a load from a column clamped into the row, kept where `ok`
                    safe = ctx.binary("min", ctx.binary("max", col, 0), ctx.binary("sub", shape[-1], 1))
                    v = ctx.cast(ctx.element(arr, lead + [row, safe]), self.DTYPE)
                    ctx.store(var, R.select(ctx, ok, v, var) if not isinstance(ok, bool) else v if ok else var)
        if not store:  # a row to clamp a column into
            row_ok = _and(ctx, row_ok, ctx.binary("gt", shape[-1], 0))
        _when(ctx, row_ok, columns)

    @builtin
    def _load(self, arr, row_start, row_stop, col_start, col_stop):
        self._transfer(_TileSliceProxy(arr, *self._bounds(row_start, row_stop, col_start, col_stop)), store=False)

    @builtin
    def _store(self, arr, row_start, row_stop, col_start, col_stop):
        self._transfer(_TileSliceProxy(arr, *self._bounds(row_start, row_stop, col_start, col_stop)), store=True)

    @builtin
    def _load3d(self, arr, batch, row_start, row_stop, col_start, col_stop):
        self._transfer(_TileSliceProxy(arr, *self._bounds(row_start, row_stop, col_start, col_stop, batch)),
                       store=False)

    @builtin
    def _store3d(self, arr, batch, row_start, row_stop, col_start, col_stop):
        self._transfer(_TileSliceProxy(arr, *self._bounds(row_start, row_stop, col_start, col_stop, batch)),
                       store=True)

    def _bounds(self, *values):
        ctx = self._ctx("load")
        return [ctx.scalar(v) for v in values]

    def _column(self, ctx, rows, v):
        """This thread's entry of qd.outer's argument: a scalar, or row r0 + tid of a column slice."""
        if not isinstance(v, _VecSliceProxy):
            return ctx.cast(ctx.scalar(v), self.DTYPE)
        batched = v.batch is not None
        shape = _shape(ctx, v.arr, 3 if batched else 2)
        row = ctx.binary("add", v.row_start, rows.tid)
        ok = _and(ctx, _in(ctx, row, ctx.binary("min", v.row_stop, shape[-2])), _in(ctx, v.col, shape[-1]))
        out = ctx.new_var(ctx.const(0.0, self.DTYPE))
        index = ([v.batch] if batched else []) + [row, v.col]
        _when(ctx, ok, lambda: ctx.store(out, ctx.cast(ctx.element(v.arr, index), self.DTYPE)))
        return ctx.rvalue(out)

    # --- updates and factorizations ----------------------------------------------------------
    @builtin
    def _ger_sub(self, a, b):
        """self -= a b^T: row i subtracts a_i * (b_0 .. b_{N-1}), b_j from row j."""
        ctx = self._ctx("outer")
        rows = _Rows(ctx, self.SIZE, self.DTYPE, width=1)
        a_i = self._column(ctx, rows, a)
        b_i = a_i if b is a else self._column(ctx, rows, b)
        b_row = [bj for bj, in rows.of_every_row([b_i])]
        rows.close()
        self._set([ctx.binary("sub", r, ctx.binary("mul", a_i, bj)) for r, bj in zip(self._values(), b_row)])

    def _qd_augassign(self, value, op):
        """tile -= qd.outer(u, v) (called by the AST walker for an augmented assignment on a tile)."""
        if not isinstance(value, _OuterProduct):
            _error("type", f"{self._name()}: unsupported augmented assignment with {type(value).__name__}: a tile "
                           f"is updated only by tile -= qd.outer(u, v)")
        if op != "Sub":
            _error("type", f"{self._name()}: unsupported augmented assignment op '{op}' with qd.outer: only "
                           f"tile -= qd.outer(u, v) is supported")
        self._ger_sub(value.a, value.b)

    @builtin
    def cholesky_(self, eps):
        """In place: the lower triangle becomes L with L L^T = A (the strict upper triangle keeps A's
        entries). Pivot k is sqrt(max(A_kk - sum_j<k L_kj^2, eps)), eps read on row k's thread, so eps
        may differ per thread; L_ik = (A_ik - sum_j<k L_ij L_kj) / pivot k below it."""
        ctx = self._ctx("cholesky_")
        rows = _Rows(ctx, self.SIZE, self.DTYPE, width=self.SIZE)
        eps = ctx.cast(ctx.scalar(eps), self.DTYPE)
        if not rows.shuffle:
            return self._cholesky_shared(ctx, rows, eps)
        r = self._values()
        for k in range(self.SIZE):  # step k: row k's pivot and L_k0 .. L_k(k-1) to every row
            pivot = self._pivot(ctx, r[k], _dot(ctx, self.DTYPE, [(r[j], r[j]) for j in range(k)]), eps)
            got = rows.of_row([pivot] + r[:k], k)
            below = ctx.binary("div", ctx.binary("sub", r[k], _dot(ctx, self.DTYPE, zip(r, got[1:]))), got[0])
            r[k] = R.select(ctx, ctx.binary("eq", rows.tid, k), got[0],
                            R.select(ctx, ctx.binary("gt", rows.tid, k), below, r[k]))
        self._set(r)

    def _pivot(self, ctx, a_kk, norm, eps):
        return ctx.unary("sqrt", ctx.binary("max", ctx.binary("sub", a_kk, norm), eps))

    def _cholesky_shared(self, ctx, rows, eps):
        """cholesky_ on the shared-memory path: the tile in a shared table, one block sync per step
        (row k's pivot, then the rows below it), run-time loops over the table."""
        n, dt, tid = self.SIZE, self.DTYPE, rows.tid
        a = rows.table()
        for j, v in enumerate(self.regs):
            ctx.store(rows.at(a, tid, j), v)
        block.sync()

        def dot(row, k, stop):  # sum_j<stop a[row][j] * a[k][j]
            acc = ctx.new_var(ctx.const(0.0, dt))
            _loop(ctx, stop, lambda j: ctx.store(acc, ctx.binary(
                "add", acc, ctx.binary("mul", rows.at(a, row, j), rows.at(a, k, j)))))
            return ctx.rvalue(acc)

        def step(k):
            akk = rows.at(a, k, k)
            _when(ctx, ctx.binary("eq", tid, k), lambda: ctx.store(akk, self._pivot(ctx, akk, dot(k, k, k), eps)))
            block.sync()
            aik = rows.at(a, tid, k)
            _when(ctx, ctx.binary("gt", tid, k), lambda: ctx.store(aik, ctx.binary(
                "div", ctx.binary("sub", aik, dot(tid, k, k)), akk)))
        _loop(ctx, n, step)
        self._set([ctx.rvalue(rows.at(a, tid, j)) for j in range(n)])  # this thread's row: its own writes
        block.sync()  # the table is read by all before the call site may run again

    @builtin
    def solve_triangular_(self, B, lower=True):
        """B becomes X with X L^T = B, L = self lower triangular with a nonzero diagonal (only its
        lower triangle is read): forward substitution on each row of B."""
        if not lower:
            _error("type", f"{self._name()}.solve_triangular_: only lower=True is supported (self is the lower "
                           f"triangular L, e.g. from cholesky_)")
        ctx = self._ctx("solve_triangular_")
        if not isinstance(B, _Tile) or B.SIZE != self.SIZE or B.DTYPE != self.DTYPE:
            ctx.type_error(f"{self._name()}.solve_triangular_(B): B must be a {self._name()} of {self.DTYPE}, got "
                           f"{B!r}")
        rows = _Rows(ctx, self.SIZE, self.DTYPE, width=self.SIZE)
        if not rows.shuffle:
            return self._solve_shared(ctx, rows, B)
        x = B._values()
        for c, lc in enumerate(rows.of_every_row(self._values(), needed=lambda c: c + 1)):  # row c: L_c0 .. L_cc
            x[c] = ctx.binary("div", ctx.binary("sub", x[c], _dot(ctx, self.DTYPE, zip(lc, x[:c]))), lc[c])
        B._set(x)

    def _solve_shared(self, ctx, rows, B):
        """solve_triangular_ on the shared-memory path: L and this thread's row of X in shared tables,
        one block sync, run-time loops."""
        n, dt, tid = self.SIZE, self.DTYPE, rows.tid
        lt, xt = rows.table(), rows.table()
        for j in range(n):
            ctx.store(rows.at(lt, tid, j), self.regs[j])
            ctx.store(rows.at(xt, tid, j), B.regs[j])
        block.sync()

        def column(c):
            acc = ctx.new_var(ctx.const(0.0, dt))
            _loop(ctx, c, lambda j: ctx.store(acc, ctx.binary(
                "add", acc, ctx.binary("mul", rows.at(lt, c, j), rows.at(xt, tid, j)))))
            x = rows.at(xt, tid, c)
            ctx.store(x, ctx.binary("div", ctx.binary("sub", x, acc), rows.at(lt, c, c)))
        _loop(ctx, n, column)
        B._set([ctx.rvalue(rows.at(xt, tid, j)) for j in range(n)])
        block.sync()


_tile_cache = {}


def _make_tile(n, dtype=None):
    """The tile class of n x n entries of `dtype` (qd.f32 when None), one per (n, dtype)."""
    dtype = T.f32 if dtype is None else dtype
    if n not in (16, 32):
        raise ValueError(f"a register tile is 16x16 or 32x32, got {n}")
    if not isinstance(dtype, T.DataType) or not dtype.is_real or dtype.bits < 32:
        _error("type", f"a register tile holds qd.f32 or qd.f64 entries, got {dtype!r}")
    key = (n, dtype)
    if key not in _tile_cache:
        _tile_cache[key] = type(f"Tile{n}x{n}", (_Tile,), {"SIZE": n, "DTYPE": dtype, "__doc__": _Tile.__doc__})
    return _tile_cache[key]


class _TileKind:
    """qd.simt.Tile16x16 / Tile32x32: SIZE, and zeros(dtype=None) / eye(dtype=None) in kernels, the
    dtype defaulting to the kernel's default_fp."""

    def __init__(self, n):
        self.SIZE = n

    def _resolve(self, dtype):
        ctx = gpu_context(f"qd.simt.Tile{self.SIZE}x{self.SIZE}")
        return _make_tile(self.SIZE, ctx.config.default_fp if dtype is None else dtype)

    @builtin
    def zeros(self, dtype=None):
        return self._resolve(dtype)()

    @builtin
    def eye(self, dtype=None):
        return self._resolve(dtype).eye()

    def __repr__(self):
        return f"qd.simt.Tile{self.SIZE}x{self.SIZE}"


Tile16x16 = _TileKind(16)
Tile32x32 = _TileKind(32)
