"""qd.simt.Tile16x16 / Tile32x32 (docs/simt.md, "Register tiles"): slice loads and stores with their
clipping, eye, qd.outer rank-1 updates, cholesky_ and solve_triangular_, checked exactly against numpy
(integer-valued data, so every rounding step is exact), on the cpu (32-lane subgroups: shuffles) and
vulkan (lavapipe's 8 or 4 lanes: the block shared-memory exchange)."""
import numpy as np
import pytest

import quadrants as qd
from quadrants.lang.exception import QuadrantsSyntaxError
from tests import test_utils

RUNS = [qd.cpu, qd.vulkan]
TILES = [pytest.param(qd.simt.Tile16x16, id="tile16"), pytest.param(qd.simt.Tile32x32, id="tile32")]


def _int_lower(n, seed):
    """A lower-triangular integer matrix with a positive diagonal: A = L L^T factors exactly."""
    rng = np.random.RandomState(seed)
    return np.tril(rng.randint(-2, 3, (n, n)), -1) + np.diag(rng.randint(1, 4, n))


def _shared_path(tile):
    """Whether rows are exchanged through block shared memory (docs/simt.md): on the cpu, and where a
    subgroup has fewer lanes than the tile has rows."""
    return qd.lang.impl.current_cfg().arch == qd.cpu or qd.simt.subgroup.group_size() < tile.SIZE


@test_utils.test(arch=RUNS)
def test_load_store_clip_and_eye():
    """Slices of ndarrays, a batched field and a SharedArray, clipped on each side (the code is the same
    for both sizes: Tile32x32's loads and stores run in the tests below)."""
    TILE = qd.simt.Tile16x16
    n = TILE.SIZE
    g = 2 * n + 4

    @qd.kernel
    def k(src: qd.types.NDArray[qd.f32, 2], dst: qd.types.NDArray[qd.f32, 2], f3: qd.Template, out3: qd.Template,
          eye: qd.types.NDArray[qd.f32, 2], r0: qd.i32, r1: qd.i32, c0: qd.i32, c1: qd.i32, d0: qd.i32):
        qd.loop_config(block_dim=n)
        for _ in range(n):
            t = TILE.zeros()                  # default_fp: f32
            t[:] = src[r0:r1, c0:c1]          # rows r0 .. r1-1, columns c0 .. c1-1, clipped to the array
            dst[d0:d0 + n, d0:d0 + n] = t     # the whole tile, clipped to dst's edge
            u = TILE.zeros(dtype=qd.f32)
            u[:] = f3[1, 2:2 + n, 0:n]        # a batched field
            sh = qd.simt.block.SharedArray((n, n - 3), qd.f32)
            sh[0:n, 0:n] = u                  # clipped to the shared array's n - 3 columns
            qd.simt.block.sync()
            w = TILE.eye(dtype=qd.f32)
            w[:] = sh[0:n, 0:n]               # the last 3 columns keep eye's values
            out3[0, 0:n, 0:n] = w
            e = TILE.zeros(dtype=qd.f32)
            e[:] = src[0:n, 0:n]
            e.eye_()
            eye[0:n, 0:n] = e

    src = (np.arange(g * g, dtype=np.float32).reshape(g, g) + 1)
    f3 = qd.field(qd.f32, (2, n + 4, n))
    f3_np = np.arange(2 * (n + 4) * n, dtype=np.float32).reshape(2, n + 4, n) - 50
    f3.from_numpy(f3_np)
    out3 = qd.field(qd.f32, (1, n, n))
    eye = np.full((n, n), 7.0, np.float32)
    for r0, r1, c0, c1, d0 in [(3, 3 + n, 5, 5 + n, 0), (g - 5, g + 20, g - 9, g + 3, n + 10), (2, 9, 0, 4, 1)]:
        dst = np.full((g, g), -1.0, np.float32)
        k(src, dst, f3, out3, eye, r0, r1, c0, c1, d0)
        t = np.zeros((n, n), np.float32)  # what the tile holds: the slice, clipped, zero elsewhere
        part = src[r0:min(r1, r0 + n), c0:min(c1, c0 + n)]
        t[:part.shape[0], :part.shape[1]] = part
        want = np.full((g, g), -1.0, np.float32)
        rows, cols = min(n, g - d0), min(n, g - d0)
        want[d0:d0 + rows, d0:d0 + cols] = t[:rows, :cols]
        np.testing.assert_array_equal(dst, want, err_msg=f"{(r0, r1, c0, c1, d0)}")
    w = np.eye(n, dtype=np.float32)
    w[:, :n - 3] = f3_np[1, 2:2 + n, :n - 3]
    np.testing.assert_array_equal(out3.to_numpy()[0], w)
    np.testing.assert_array_equal(eye, np.eye(n, dtype=np.float32))


@pytest.mark.parametrize("TILE", TILES)
@test_utils.test(arch=RUNS)
def test_outer_updates(TILE):
    """t -= qd.outer(u, v) with scalars, column slices (2D, batched, clipped rows), in a run-time loop."""
    n = TILE.SIZE
    m = 2 * n + 8

    @qd.kernel
    def k(mat: qd.types.NDArray[qd.f32, 2], a: qd.types.NDArray[qd.f32, 1], vecs: qd.types.NDArray[qd.f32, 3],
          out: qd.types.NDArray[qd.f32, 3], k0: qd.i32, k1: qd.i32, ncols: qd.i32):
        qd.loop_config(block_dim=n)
        for i in range(n):
            t = TILE.zeros(dtype=qd.f32)
            t[:] = mat[0:n, 0:n]
            t -= qd.outer(a[i], a[i] + 1.0)             # scalars: thread i gives u_i, v_i
            out[0, 0:n, 0:n] = t
            for c in range(ncols):                      # a run-time loop: each update reruns the exchange
                v = vecs[1, k0:k0 + n, c]
                t -= qd.outer(v, v)
            out[1, 0:n, 0:n] = t
            t -= qd.outer(vecs[0, k1:m, 2], vecs[1, n:2 * n, 0])  # rows past m are 0
            out[2, 0:n, 0:n] = t

    rng = np.random.RandomState(1)
    mat = rng.randint(-50, 50, (n, n)).astype(np.float32)
    a = rng.randint(-4, 5, n).astype(np.float32)
    vecs = rng.randint(-3, 4, (2, m, m)).astype(np.float32)
    out = np.zeros((3, n, n), np.float32)
    k0, k1, ncols = 5, n + 12, 3
    k(mat, a, vecs, out, k0, k1, ncols)
    want = mat - np.outer(a, a + 1)
    np.testing.assert_array_equal(out[0], want)
    for c in range(ncols):
        want = want - np.outer(vecs[1, k0:k0 + n, c], vecs[1, k0:k0 + n, c])
    np.testing.assert_array_equal(out[1], want)
    u = np.zeros(n, np.float32)
    u[:m - k1] = vecs[0, k1:m, 2]
    np.testing.assert_array_equal(out[2], want - np.outer(u, vecs[1, n:2 * n, 0]))


@pytest.mark.parametrize("TILE, dtype", [(qd.simt.Tile16x16, qd.f32), (qd.simt.Tile16x16, qd.f64),
                                         (qd.simt.Tile32x32, qd.f32)], ids=["tile16-f32", "tile16-f64", "tile32-f32"])
@test_utils.test(arch=RUNS)
def test_cholesky_and_solve(TILE, dtype):
    """cholesky_ gives L exactly (A = L L^T of integers), the upper triangle keeps A; solve_triangular_
    gives X with X L^T = B exactly; eps floors a zero pivot, per lane (lane k's eps for pivot k);
    f64 tiles."""
    test_utils.skip_if_f64_unsupported(dtype)
    n = TILE.SIZE
    npdt = np.float32 if dtype == qd.f32 else np.float64

    @qd.kernel
    def k(a: qd.types.NDArray[dtype, 2], b: qd.types.NDArray[dtype, 2], eps: qd.types.NDArray[dtype, 1],
          lo: qd.types.NDArray[dtype, 2], x: qd.types.NDArray[dtype, 2]):
        qd.loop_config(block_dim=n)
        for i in range(n):
            L = TILE.zeros(dtype=dtype)
            L[:] = a[0:n, 0:n]
            L.cholesky_(eps[i])
            lo[0:n, 0:n] = L
            B = TILE.zeros(dtype=dtype)
            B[:] = b[0:n, 0:n]
            L.solve_triangular_(B)
            x[0:n, 0:n] = B

    Lr = _int_lower(n, 3)
    A = Lr @ Lr.T
    X = np.random.RandomState(4).randint(-3, 4, (n, n))
    B = X @ Lr.T
    eps = np.full(n, 1e-6, npdt)
    lo, x = np.zeros((n, n), npdt), np.zeros((n, n), npdt)
    k(A.astype(npdt), B.astype(npdt), eps, lo, x)
    np.testing.assert_array_equal(np.tril(lo), Lr)
    np.testing.assert_array_equal(np.triu(lo, 1), np.triu(A, 1))
    np.testing.assert_array_equal(x, X)

    # A zero pivot: L's column 5 is zero from the diagonal down, so pivot 5 is sqrt(max(0, eps)):
    # lane 5's eps (9) makes it 3; the other lanes' eps (1) never bind (their pivots are >= 1).
    Lz = _int_lower(n, 5)
    Lz[5:, 5] = 0
    eps = np.ones(n, npdt)
    eps[5] = 9
    k((Lz @ Lz.T).astype(npdt), B.astype(npdt), eps, lo, x)
    Lz[5, 5] = 3
    np.testing.assert_array_equal(np.tril(lo), Lz)


@pytest.mark.parametrize("TILE", TILES)
@test_utils.test(arch=RUNS)
def test_two_tiles_per_block(TILE):
    """block_dim = 2 * SIZE: threads [0, SIZE) hold one tile, [SIZE, 2 SIZE) another (row = thread_idx % SIZE)."""
    n = TILE.SIZE

    @qd.kernel
    def k(a: qd.types.NDArray[qd.f32, 3], lo: qd.types.NDArray[qd.f32, 3]):
        qd.loop_config(block_dim=2 * n)
        for i in range(4 * n):
            L = TILE.zeros(dtype=qd.f32)
            L[:] = a[i // n, 0:n, 0:n]
            L.cholesky_(1e-6)
            lo[i // n, 0:n, 0:n] = L

    Ls = [_int_lower(n, 10 + s) for s in range(4)]
    a = np.stack([L @ L.T for L in Ls]).astype(np.float32)
    lo = np.zeros_like(a)
    k(a, lo)
    for s in range(4):
        np.testing.assert_array_equal(np.tril(lo[s]), Ls[s], err_msg=f"tile {s}")


@pytest.mark.parametrize("TILE", TILES)
@test_utils.test(arch=RUNS)
def test_lowering_follows_the_subgroup_size(TILE):
    """Subgroups of SIZE lanes or more on a GPU: shuffles, any block_dim. Fewer (lavapipe), or the cpu:
    block shared memory, which needs block_dim a multiple of SIZE, else a QuadrantsSyntaxError naming the line."""
    n = TILE.SIZE

    @qd.kernel
    def k(a: qd.types.NDArray[qd.f32, 2], b: qd.types.NDArray[qd.f32, 2]):
        for _ in range(n):  # the default block_dim
            t = TILE.zeros(dtype=qd.f32)
            t[:] = a[0:n, 0:n]
            t -= qd.outer(a[0:n, 0], a[0:n, 1])
            b[0:n, 0:n] = t

    a = np.arange(n * n, dtype=np.float32).reshape(n, n)
    b = np.zeros_like(a)
    if _shared_path(TILE):
        with pytest.raises(QuadrantsSyntaxError, match=r"block shared memory.*block_dim.*multiple of") as e:
            k(a, b)
        assert "t[:] = a[0:n, 0:n]" in str(e.value)  # the tile's first operation
    else:
        k(a, b)
        np.testing.assert_array_equal(b, a - np.outer(a[:, 0], a[:, 1]))


@test_utils.test(arch=qd.cpu)
def test_shuffle_exchange(monkeypatch):
    """The subgroup-shuffle exchange (GPUs whose subgroups hold the tile), run on the cpu's 32-lane
    subgroups: two 16-row tiles per subgroup (lanes 16..31 hold the second), exact as above."""
    from quadrants.lang.simt import _tile  # noqa: E402  (its switch for the cpu's exchange)
    monkeypatch.setattr(_tile, "_SHUFFLES_ON_CPU", True)

    def no_shared_memory(*_):
        raise AssertionError("the shuffle exchange uses no shared memory and no block sync")
    monkeypatch.setattr(_tile.block, "SharedArray", no_shared_memory)
    monkeypatch.setattr(_tile.block, "sync", no_shared_memory)
    T, n = qd.simt.Tile16x16, 16

    @qd.kernel
    def k(a: qd.types.NDArray[qd.f32, 3], b: qd.types.NDArray[qd.f32, 3], v: qd.types.NDArray[qd.f32, 2],
          lo: qd.types.NDArray[qd.f32, 3], x: qd.types.NDArray[qd.f32, 3], g: qd.types.NDArray[qd.f32, 3]):
        qd.loop_config(block_dim=2 * n)
        for i in range(2 * n):
            s = i // n
            L = T.zeros()
            L[:] = a[s, 0:n, 0:n]
            G = T.zeros()
            G[:] = a[s, 0:n, 0:n]
            G -= qd.outer(v[s, i % n], v[1 - s, i % n])  # scalars: row i % n of tile s
            g[s, 0:n, 0:n] = G
            L.cholesky_(1e-6)
            lo[s, 0:n, 0:n] = L
            B = T.zeros()
            B[:] = b[s, 0:n, 0:n]
            L.solve_triangular_(B)
            x[s, 0:n, 0:n] = B

    Ls = [_int_lower(n, 20 + s) for s in range(2)]
    Xs = [np.random.RandomState(30 + s).randint(-3, 4, (n, n)) for s in range(2)]
    a = np.stack([L @ L.T for L in Ls]).astype(np.float32)
    b = np.stack([X @ L.T for X, L in zip(Xs, Ls)]).astype(np.float32)
    v = np.random.RandomState(7).randint(-3, 4, (2, n)).astype(np.float32)
    lo, x, g = np.zeros_like(a), np.zeros_like(a), np.zeros_like(a)
    k(a, b, v, lo, x, g)
    for s in range(2):
        np.testing.assert_array_equal(np.tril(lo[s]), Ls[s])
        np.testing.assert_array_equal(x[s], Xs[s])
        np.testing.assert_array_equal(g[s], a[s] - np.outer(v[s], v[1 - s]))


@test_utils.test(arch=qd.cpu)
def test_errors():
    T = qd.simt.Tile16x16

    def compile_error(body, exc=QuadrantsSyntaxError):
        @qd.kernel
        def k(s: qd.types.NDArray[qd.f32, 2], s3: qd.types.NDArray[qd.f32, 3], c: qd.Template):
            qd.loop_config(block_dim=16)
            for i in range(16):
                t = T.zeros()
                if qd.static(c == "neg"):
                    t[:] = s[-1:16, 0:16]
                if qd.static(c == "no_start"):
                    t[:] = s[:16, 0:16]
                if qd.static(c == "no_stop_vec"):
                    t -= qd.outer(s[0:, 1], s[0:16, 1])
                if qd.static(c == "order"):
                    t -= qd.outer(s3[0:16, 0, 1], s3[0:16, 0, 1])
                if qd.static(c == "ndim"):
                    t[:] = s3[0:16, 0:16]
                if qd.static(c == "add"):
                    t += qd.outer(s[i, 0], s[i, 0])
                if qd.static(c == "scalar"):
                    t -= 1.0
                if qd.static(c == "rebind"):
                    t = s[0:16, 0:16]
                    s[0:16, 0:16] = t
                if qd.static(c == "index"):
                    t[0] = 1.0
                if qd.static(c == "upper"):
                    t.solve_triangular_(t, lower=False)
                if qd.static(c == "int"):
                    T.zeros(dtype=qd.i32)

        s, s3 = np.zeros((16, 16), np.float32), np.zeros((16, 16, 2), np.float32)
        with pytest.raises(exc) as e:
            k(s, s3, body)
        return str(e.value)

    assert "Negative indices" in compile_error("neg")
    assert "start and stop indices are required" in compile_error("no_start")
    assert "both start and stop" in compile_error("no_stop_vec")
    assert "is a tile slice" in compile_error("order")
    assert "3 dimension(s)" in compile_error("ndim")
    assert "unsupported augmented assignment op 'Add'" in compile_error("add", TypeError)
    assert "unsupported augmented assignment with float" in compile_error("scalar", TypeError)
    assert "stores a tile" in compile_error("rebind", TypeError)
    assert "indexed only as tile[:]" in compile_error("index")
    assert "only lower=True" in compile_error("upper", TypeError)
    assert "qd.f32 or qd.f64 entries, got i32" in compile_error("int", TypeError)
    assert "test_simt_tiles.py" in compile_error("neg")  # the kernel line is named


def test_python_scope():
    with pytest.raises(TypeError, match="does not support composition"):
        _ = qd.outer(1, 2) + qd.outer(3, 4)
    from quadrants.lang.simt._tile import _make_tile, _TileSliceProxy  # noqa: E402  (the internal classes)
    assert _make_tile(16, qd.f64) is _make_tile(16, qd.f64) and _make_tile(32).SIZE == 32
    with pytest.raises(TypeError, match="only valid in tile operations"):
        _ = _TileSliceProxy(None, 0, 16, 0, 16) * 2
    with pytest.raises(TypeError, match="only lower=True"):
        _make_tile(16)().solve_triangular_(_make_tile(16)(), lower=False)
