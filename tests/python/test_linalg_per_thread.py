"""Per-thread linear algebra (docs/linalg.md): qd.svd, qd.polar_decompose, qd.sym_eig, qd.make_spd,
qd.eig, qd.solve and Matrix.inverse() past 4x4, checked against numpy on every arch, f32 and f64.

Each test decomposes a batch of matrices in one kernel (one thread per matrix): random ones and
adversarial ones (diagonal, zero, identity, reflections, repeated and clustered singular values /
eigenvalues, rank-deficient, near-singular, large and small scales).

Tolerances. The algorithms are backward stable: every result is an exact decomposition of a matrix
within a few rounding errors of the input. So reconstruction residuals are bounded by
C * eps * |A|_F, orthogonality defects by C * eps, where eps is the working type's machine epsilon
and C covers the O(n * sweeps) rotations each entry goes through; C = 64 (observed: at most 10).
Quantities that are not backward stable (eigenvectors of close eigenvalues, solutions of
ill-conditioned systems) are checked through residuals, or scaled by the condition number.
"""
import numpy as np
import pytest

import quadrants as qd
from test_utils import skip_if_f64_unsupported, test

DTYPES = [qd.f32, qd.f64]
C = 64


def _np(dt):
    return np.float32 if dt == qd.f32 else np.float64


def _eps(dt):
    return float(np.finfo(_np(dt)).eps)


def _orthogonal(rng, n):
    q, r = np.linalg.qr(rng.standard_normal((n, n)))
    return q * np.sign(np.diag(r))


def _square_inputs(n, seed):
    """Matrices that stress the sign, sort, rank and convergence paths, then random ones."""
    rng = np.random.default_rng(seed)
    U, V = _orthogonal(rng, n), _orthogonal(rng, n)
    out = [
        np.eye(n),
        np.zeros((n, n)),
        np.diag(np.arange(1.0, n + 1.0)),  # diagonal, ascending: the sort must reverse it
        np.diag([(-1.0) ** k * (k + 1) for k in range(n)]),  # diagonal with negative entries
        np.diag([1.0] * (n - 1) + [-1.0]),  # a reflection
        3.0 * U,  # every singular value equal
        U @ np.diag([2.0] * (n - 1) + [0.5]) @ V.T,  # a repeated singular value
        U @ np.diag([2.0, 2.0 + 1e-4] + [0.5] * (n - 2)) @ V.T,  # two nearly equal
        np.outer(rng.standard_normal(n), rng.standard_normal(n)),  # rank 1
        U @ np.diag([3.0] + [1.0] * (n - 2) + [0.0]) @ V.T,  # rank n - 1
        U @ np.diag([1.0] * (n - 1) + [1e-7]) @ V.T,  # near-singular
        1e6 * rng.standard_normal((n, n)),
        1e-6 * rng.standard_normal((n, n)),
        np.triu(rng.standard_normal((n, n))),
    ]
    neg = rng.standard_normal((n, n))
    neg[0] = -neg[0] if np.linalg.det(neg) > 0 else neg[0]
    out.append(neg)  # det < 0
    out += [rng.standard_normal((n, n)) for _ in range(12)]
    return np.array(out)


def _symmetric_inputs(n, seed):
    rng = np.random.default_rng(seed)
    Q = _orthogonal(rng, n)
    sym = lambda d: Q @ np.diag(d) @ Q.T  # noqa: E731
    out = [
        np.eye(n),
        np.zeros((n, n)),
        -2.5 * np.eye(n),
        np.diag(np.arange(n, 0.0, -1.0)),  # diagonal, descending: the sort must reverse it
        sym([1.0] * (n // 2) + [3.0] * (n - n // 2)),  # two repeated eigenvalues
        sym([0.0] * (n - 1) + [3.0]),  # rank 1 (a cluster at zero)
        sym(np.linspace(-1.0, 2.0, n)),  # indefinite
        sym(-np.linspace(0.5, 2.0, n)),  # negative definite
        sym([1.0 + 1e-6 * k for k in range(n)]),  # a tight cluster
        1e5 * sym(np.linspace(-1.0, 1.0, n)),
    ]
    eq = np.diag(np.arange(2.0, 2.0 + n))  # equal diagonal pair, negative coupling
    eq[0, 0] = eq[1, 1] = 2.0
    eq[0, 1] = eq[1, 0] = -1.0
    out.append(eq)
    for _ in range(10):
        m = rng.standard_normal((n, n))
        out.append((m + m.T) / 2)
    return np.array(out)


def _batch(make, n, dt, seed):
    """The inputs in the working type, and a float64 copy of exactly those values."""
    A = make(n, seed).astype(_np(dt))
    return A, A.astype(np.float64)


def _field(shape_tail, dt, count):
    if len(shape_tail) == 1:
        return qd.Vector.field(shape_tail[0], dtype=dt, shape=count)
    return qd.Matrix.field(shape_tail[0], shape_tail[1], dtype=dt, shape=count)


def _fro(A):
    return np.linalg.norm(A, axis=(-2, -1))


def _assert_small(err, bound, what):
    bad = np.nonzero(~(err <= bound))[0]  # NaN fails too
    limit = np.asarray(bound)[bad].tolist() if np.ndim(bound) else bound
    assert bad.size == 0, f"{what}: at inputs {bad.tolist()}: {err[bad].tolist()} > {limit}"


# --- svd ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("dt", DTYPES)
@test()
def test_svd(n, dt):
    skip_if_f64_unsupported(dt)
    A_in, A = _batch(_square_inputs, n, dt, 10 + n)
    count = len(A)
    a, u, s, v = (_field((n, n), dt, count) for _ in range(4))
    a.from_numpy(A_in)

    @qd.kernel
    def run():
        for i in range(count):
            u[i], s[i], v[i] = qd.svd(a[i], dt)

    run()
    U, S, V = (f.to_numpy().astype(np.float64) for f in (u, s, v))
    eps, scale = _eps(dt), np.maximum(_fro(A), np.finfo(np.float64).tiny)
    I = np.eye(n)
    _assert_small(np.abs(U @ S @ V.transpose(0, 2, 1) - A).max(axis=(1, 2)), C * eps * scale, "A - U S V^T")
    _assert_small(np.abs(U.transpose(0, 2, 1) @ U - I).max(axis=(1, 2)), C * eps, "U^T U - I")
    _assert_small(np.abs(V.transpose(0, 2, 1) @ V - I).max(axis=(1, 2)), C * eps, "V^T V - I")
    d = np.diagonal(S, axis1=1, axis2=2)
    assert np.all(S - np.apply_along_axis(np.diag, 1, d) == 0), "S has off-diagonal entries"
    _assert_small(np.max(np.diff(d, axis=1), axis=1), C * eps * scale, "S descending")
    # The singular values themselves (perfectly conditioned: a perturbation E moves them by |E|).
    _assert_small(np.abs(np.abs(d) - np.linalg.svd(A, compute_uv=False)).max(axis=1), C * eps * scale, "sigma")
    assert np.all(d[:, :-1] >= 0), "only the last singular value may be negative"
    if n == 2:
        assert np.all(d >= 0), "2x2: the singular values are non-negative"
    else:  # 3x3: det(U) = det(V) = +1, the sign of det(A) on the last singular value
        _assert_small(np.abs(np.linalg.det(U) - 1), C * eps, "det(U) - 1")
        _assert_small(np.abs(np.linalg.det(V) - 1), C * eps, "det(V) - 1")
        det = np.linalg.det(A)
        clear = np.abs(det) > 1e-3 * scale ** 3
        assert np.all(np.sign(d[clear, -1]) == np.sign(det[clear])), "sign(sigma_3) != sign(det A)"


@pytest.mark.parametrize("dt", DTYPES)
@test()
def test_svd_f64_under_default_f32_and_inside_func(dt):
    """dt=qd.f64 computes in f64 even when the default float type is f32 (f64 accuracy is only
    reachable if no step rounds to f32); the call also works from a @qd.func and outside loops."""
    skip_if_f64_unsupported(qd.f64)
    A = np.array([[1.0, 1.0, 3.0], [9.0, -3.0, 2.0], [-3.0, 4.0, 2.0]])
    a = qd.Matrix.field(3, 3, dtype=qd.f64, shape=())
    r = qd.Matrix.field(3, 3, dtype=qd.f64, shape=())
    a.from_numpy(A)

    @qd.func
    def closest_rotation(m):
        U, S, V = qd.svd(m, qd.f64)
        return U @ V.transpose()

    @qd.kernel
    def run():
        r[None] = closest_rotation(a[None])

    run()
    U, _, Vt = np.linalg.svd(A)
    D = np.diag([1.0, 1.0, np.sign(np.linalg.det(U @ Vt))])
    np.testing.assert_allclose(r.to_numpy(), U @ D @ Vt, atol=1e-12)


# --- polar decomposition -------------------------------------------------------------------------
@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("dt", DTYPES)
@test()
def test_polar_decompose(n, dt):
    skip_if_f64_unsupported(dt)
    A_in, A = _batch(_square_inputs, n, dt, 20 + n)
    count = len(A)
    a, r, s = (_field((n, n), dt, count) for _ in range(3))
    a.from_numpy(A_in)

    @qd.kernel
    def run():
        for i in range(count):
            r[i], s[i] = qd.polar_decompose(a[i], dt)

    run()
    R, S = (f.to_numpy().astype(np.float64) for f in (r, s))
    eps, scale = _eps(dt), np.maximum(_fro(A), np.finfo(np.float64).tiny)
    _assert_small(np.abs(R @ S - A).max(axis=(1, 2)), C * eps * scale, "A - R S")
    _assert_small(np.abs(R @ R.transpose(0, 2, 1) - np.eye(n)).max(axis=(1, 2)), C * eps, "R R^T - I")
    assert np.all(S == S.transpose(0, 2, 1)), "S is not symmetric"
    eig = np.linalg.eigvalsh(S)
    if n == 3:  # R is a proper rotation; S carries det(A)'s sign
        _assert_small(np.abs(np.linalg.det(R) - 1), C * eps, "det(R) - 1")
    else:  # S is positive semi-definite
        _assert_small(-eig.min(axis=1), C * eps * scale, "S's smallest eigenvalue")
    # |eigenvalues of S| are A's singular values
    _assert_small(np.abs(np.sort(np.abs(eig), axis=1)[:, ::-1] - np.linalg.svd(A, compute_uv=False)).max(axis=1),
                  C * eps * scale, "|eig(S)| vs sigma")


# --- symmetric eigendecomposition ---------------------------------------------------------------
@pytest.mark.parametrize("n", [2, 3, 4, 6])
@pytest.mark.parametrize("dt", DTYPES)
@test()
def test_sym_eig(n, dt):
    skip_if_f64_unsupported(dt)
    A_in, A = _batch(_symmetric_inputs, n, dt, 30 + n)
    count = len(A)
    a, q = _field((n, n), dt, count), _field((n, n), dt, count)
    w = _field((n,), dt, count)
    a.from_numpy(A_in)

    @qd.kernel
    def run():
        for i in range(count):
            w[i], q[i] = qd.sym_eig(a[i], dt)

    run()
    W, Q = w.to_numpy().astype(np.float64), q.to_numpy().astype(np.float64)
    eps, scale = _eps(dt), np.maximum(_fro(A), np.finfo(np.float64).tiny)
    # eigenvalues: perfectly conditioned for symmetric matrices (Weyl)
    _assert_small(np.abs(W - np.linalg.eigvalsh(A)).max(axis=1), C * eps * scale, "eigenvalues vs numpy")
    assert np.all(np.diff(W, axis=1) >= 0), "eigenvalues not ascending"
    _assert_small(np.abs(Q.transpose(0, 2, 1) @ Q - np.eye(n)).max(axis=(1, 2)), C * eps, "Q^T Q - I")
    # column i is an eigenvector of W[i]: A q_i = w_i q_i
    residual = np.abs(A @ Q - Q * W[:, None, :]).max(axis=(1, 2))
    _assert_small(residual, C * eps * scale, "A Q - Q diag(w)")


@pytest.mark.parametrize("n", [2, 4, 6])
@pytest.mark.parametrize("dt", DTYPES)
@test()
def test_make_spd(n, dt):
    skip_if_f64_unsupported(dt)
    A_in, A = _batch(_symmetric_inputs, n, dt, 40 + n)
    count = len(A)
    a, m = _field((n, n), dt, count), _field((n, n), dt, count)
    a.from_numpy(A_in)

    @qd.kernel
    def run():
        for i in range(count):
            m[i] = qd.make_spd(a[i], dt)

    run()
    M = m.to_numpy().astype(np.float64)
    eps, scale = _eps(dt), np.maximum(_fro(A), np.finfo(np.float64).tiny)
    lam, Q = np.linalg.eigh(A)
    expected = Q @ (np.clip(lam, 0.0, None)[:, :, None] * Q.transpose(0, 2, 1))
    # the projection onto the PSD cone is 1-Lipschitz: well conditioned whatever the eigen-gaps
    _assert_small(np.abs(M - expected).max(axis=(1, 2)), C * eps * scale, "make_spd vs numpy")
    assert np.all(M == M.transpose(0, 2, 1)), "not symmetric"
    _assert_small(-np.linalg.eigvalsh(M).min(axis=1), C * eps * scale, "smallest eigenvalue")
    neg_def = 7  # _symmetric_inputs' negative definite matrix projects to zero
    _assert_small(np.abs(M[neg_def:neg_def + 1]).max(axis=(1, 2)), C * eps * scale[neg_def:neg_def + 1], "zero")


# --- general 2x2 eigendecomposition --------------------------------------------------------------
def _eig_inputs(seed):
    rng = np.random.default_rng(seed)
    out = [
        [[1.0, 1.0], [2.0, 3.0]],
        [[1.0, -1.0], [1.0, 1.0]],  # 1 +- i
        [[0.0, -2.0], [2.0, 0.0]],  # +- 2i
        [[2.0, 0.0], [0.0, 2.0]],  # a multiple of I
        [[3.0, 0.0], [0.0, -1.0]],
        [[1.0, 1.0], [0.0, 1.0]],  # defective: one eigenvector
        [[0.0, 0.0], [0.0, 0.0]],
        [[5.0, 3.0], [3.0, 2.0]],
    ]
    out += rng.standard_normal((12, 2, 2)).tolist()
    return np.array(out)


@pytest.mark.parametrize("dt", DTYPES)
@test()
def test_eig2x2(dt):
    skip_if_f64_unsupported(dt)
    A = _eig_inputs(50).astype(_np(dt))
    count = len(A)
    a, vals = _field((2, 2), dt, count), _field((2, 2), dt, count)
    vecs = _field((4, 2), dt, count)
    a.from_numpy(A)

    @qd.kernel
    def run():
        for i in range(count):
            vals[i], vecs[i] = qd.eig(a[i], dt)

    run()
    A = A.astype(np.float64)
    L = vals.to_numpy().astype(np.float64)
    X = vecs.to_numpy().astype(np.float64)
    lam = L[:, :, 0] + 1j * L[:, :, 1]
    vec = X[:, 0::2, :] + 1j * X[:, 1::2, :]  # column i: eigenvector i
    eps, scale = _eps(dt), _fro(A) + 1.0
    _assert_small(np.abs(np.linalg.norm(vec, axis=1) - 1).max(axis=1), C * eps, "|v| - 1")
    residual = np.abs(A @ vec - vec * lam[:, None, :]).max(axis=(1, 2))
    _assert_small(residual, C * eps * scale, "A v - lambda v")
    key = lambda z: np.lexsort((z.imag, z.real))  # noqa: E731
    ours = np.array([z[key(z)] for z in lam])
    theirs = np.array([z[key(z)] for z in np.linalg.eigvals(A)])
    well = np.array([k != 5 for k in range(count)])  # the defective matrix's eigenvalue is sqrt(eps)-sensitive
    _assert_small(np.abs(ours - theirs)[well].max(axis=1), C * eps * scale[well], "eigenvalues vs numpy")
    # a complex pair comes conjugated, with conjugate eigenvectors
    cplx = np.abs(L[:, 0, 1]) > 0
    assert cplx[[1, 2]].all() and not cplx[[0, 3, 4, 5, 6, 7]].any()
    np.testing.assert_array_equal(L[cplx, 0, 1], -L[cplx, 1, 1])


# --- solve ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("dt", DTYPES)
@test()
def test_solve(n, dt):
    skip_if_f64_unsupported(dt)
    rng = np.random.default_rng(60 + n)
    A = _square_inputs(n, 60 + n)
    A = A[np.linalg.cond(A) < 1e-2 / _eps(dt)]  # those invertible in the working precision
    P = np.eye(n)[::-1] @ np.triu(rng.standard_normal((n, n)) + 2 * np.eye(n))  # A[0, 0] = 0: must pivot
    P[0, 0] = 0.0
    U, V = _orthogonal(rng, n), _orthogonal(rng, n)
    ill = U @ np.diag([1.0] * (n - 1) + [1e-3]) @ V.T  # cond(A) = 1000
    A = np.concatenate([A, P[None], ill[None]]).astype(_np(dt))
    count = len(A)
    B = rng.standard_normal((count, n)).astype(_np(dt))
    a, b, x = _field((n, n), dt, count), _field((n,), dt, count), _field((n,), dt, count)
    a.from_numpy(A)
    b.from_numpy(B)

    @qd.kernel
    def run():
        for i in range(count):
            x[i] = qd.solve(a[i], b[i], dt)

    run()
    A, B, X = A.astype(np.float64), B.astype(np.float64), x.to_numpy().astype(np.float64)
    eps = _eps(dt)
    # backward error: |A x - b| <= C eps |A| |x| (Gaussian elimination with partial pivoting)
    resid = np.abs(np.einsum("kij,kj->ki", A, X) - B).max(axis=1)
    _assert_small(resid, C * eps * (_fro(A) * np.linalg.norm(X, axis=1) + np.linalg.norm(B, axis=1)), "A x - b")
    # forward error: relative to |x|, cond(A) times the backward error
    expected = np.linalg.solve(A, B[:, :, None])[:, :, 0]
    err = np.linalg.norm(X - expected, axis=1) / np.linalg.norm(expected, axis=1)
    _assert_small(err, C * eps * np.linalg.cond(A), "x vs numpy")


@test(debug=True)
def test_solve_singular_asserts_under_debug():
    a = qd.Matrix.field(3, 3, dtype=qd.f32, shape=())
    x = qd.Vector.field(3, dtype=qd.f32, shape=())
    a.from_numpy(np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.0, 0.0, 0.0]], dtype=np.float32))

    @qd.kernel
    def run():
        x[None] = qd.solve(a[None], qd.Vector([1.0, 2.0, 3.0]))

    with pytest.raises(qd.QuadrantsAssertionError, match="singular"):
        run()


# --- inverse past 4x4 ----------------------------------------------------------------------------
@pytest.mark.parametrize("n", [5, 8])
@pytest.mark.parametrize("dt", DTYPES)
@test()
def test_inverse_gauss_jordan(n, dt):
    skip_if_f64_unsupported(dt)
    rng = np.random.default_rng(70 + n)
    diag_dom = rng.standard_normal((n, n)) + (n + 1) * np.eye(n)
    spd = rng.standard_normal((n, n))
    spd = spd @ spd.T + 2 * np.eye(n)
    perm = np.eye(n)[::-1] @ (np.triu(rng.standard_normal((n, n)), 1) + np.diag(np.arange(1.0, n + 1)))  # needs pivots
    A = np.array([diag_dom, spd, perm, rng.standard_normal((n, n))]).astype(_np(dt))
    count = len(A)
    a, inv = _field((n, n), dt, count), _field((n, n), dt, count)
    a.from_numpy(A)

    @qd.kernel
    def run():
        for i in range(count):
            inv[i] = a[i].inverse()

    run()
    A, X = A.astype(np.float64), inv.to_numpy().astype(np.float64)
    eps, cond = _eps(dt), np.linalg.cond(A)
    _assert_small(np.abs(A @ X - np.eye(n)).max(axis=(1, 2)), C * eps * cond, "A A^-1 - I")
    _assert_small(np.abs(X - np.linalg.inv(A)).max(axis=(1, 2)) / np.abs(np.linalg.inv(A)).max(axis=(1, 2)),
                  C * eps * cond, "A^-1 vs numpy")


# --- shapes and types: compile-time errors -----------------------------------------------------
@pytest.mark.parametrize("call, shape, message", [
    ("svd", (4, 4), "2x2 and 3x3"),
    ("polar_decompose", (4, 4), "2x2 and 3x3"),
    ("sym_eig", (7, 7), "up to 6"),
    ("make_spd", (7, 7), "up to 6"),
    ("eig", (3, 3), "2x2"),
    ("svd", (2, 3), "square"),
])
@test(arch=qd.cpu)
def test_unsupported_shapes_raise(call, shape, message):
    a = qd.Matrix.field(*shape, dtype=qd.f32, shape=())
    fn = getattr(qd, call)

    @qd.kernel
    def run():
        _ = fn(a[None])

    with pytest.raises(qd.QuadrantsTypeError, match=message):
        run()


@test(arch=qd.cpu)
def test_solve_and_dt_errors():
    a = qd.Matrix.field(3, 3, dtype=qd.f32, shape=())
    b = qd.Vector.field(2, dtype=qd.f32, shape=())

    @qd.kernel
    def mismatch():
        _ = qd.solve(a[None], b[None])

    with pytest.raises(qd.QuadrantsTypeError, match="vector of size 3"):
        mismatch()

    @qd.kernel
    def int_dt():
        _ = qd.svd(a[None], qd.i32)

    with pytest.raises(qd.QuadrantsTypeError, match="f32 or qd.f64"):
        int_dt()
    with pytest.raises(RuntimeError, match="inside a @qd.kernel"):
        qd.svd(np.eye(3))


# --- docs/linalg.md's examples run as written ---------------------------------------------------
def _doc_examples():
    import pathlib
    import re
    text = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "linalg.md").read_text()
    return "\n".join(re.findall(r"```python\n(.*?)```", text, re.S))


@test()
def test_docs_examples():
    skip_if_f64_unsupported(qd.f64)
    import linecache
    source = _doc_examples()
    name = "<docs/linalg.md>"
    linecache.cache[name] = (len(source), None, source.splitlines(True), name)  # the kernels' source
    ns = {"qd": qd}
    exec(compile(source, name, "exec"), ns)
    rng = np.random.default_rng(80)

    H = rng.standard_normal((4, 6, 6))
    H = (H + H.transpose(0, 2, 1)) / 2
    h = qd.ndarray(qd.types.matrix(6, 6, qd.f64), 4)
    h.from_numpy(H)
    ns["project"](h)
    lam, Q = np.linalg.eigh(H)
    np.testing.assert_allclose(h.to_numpy(), Q @ (np.clip(lam, 0, None)[:, :, None] * Q.transpose(0, 2, 1)),
                               atol=1e-12)

    A = (rng.standard_normal((5, 3, 3)) + 3 * np.eye(3)).astype(np.float32)
    b = rng.standard_normal((5, 3)).astype(np.float32)
    a_, b_, x_ = qd.ndarray(qd.math.mat3, 5), qd.ndarray(qd.math.vec3, 5), qd.ndarray(qd.math.vec3, 5)
    a_.from_numpy(A)
    b_.from_numpy(b)
    ns["solve_all"](a_, b_, x_)
    np.testing.assert_allclose(x_.to_numpy(), np.linalg.solve(A.astype(np.float64), b[:, :, None])[:, :, 0],
                               rtol=1e-4, atol=1e-5)

    F = qd.Matrix.field(3, 3, dtype=qd.f32, shape=())
    R = qd.Matrix.field(3, 3, dtype=qd.f32, shape=())
    H3 = qd.Matrix.field(3, 3, dtype=qd.f64, shape=())
    P3 = qd.Matrix.field(3, 3, dtype=qd.f64, shape=())
    F_np = np.diag([1.0, 2.0, -3.0]).astype(np.float32)  # det < 0: still a rotation
    F.from_numpy(F_np)
    H3.from_numpy(np.diag([2.0, -1.0, 0.5]))
    closest_rotation, clamp_eigenvalues = ns["closest_rotation"], ns["clamp_eigenvalues"]

    @qd.kernel
    def run():
        R[None] = closest_rotation(F[None])
        P3[None] = clamp_eigenvalues(H3[None])

    run()
    np.testing.assert_allclose(R.to_numpy(), _closest_rotation(F_np), atol=1e-6)  # diag(-1, 1, -1)
    np.testing.assert_allclose(P3.to_numpy(), np.diag([2.0, 0.0, 0.5]), atol=1e-12)


def _closest_rotation(F):
    U, _, Vt = np.linalg.svd(F.astype(np.float64))
    return U @ np.diag([1.0, 1.0, np.sign(np.linalg.det(U @ Vt))]) @ Vt


# --- Python-scope element write-back (how the reference's tests fill their inputs) -------------
@test(arch=qd.cpu)
def test_python_scope_element_writes_back():
    m = qd.Matrix.field(2, 2, dtype=qd.f32, shape=3)
    v = qd.Vector.field(4, dtype=qd.i32, shape=(2, 2))
    nd = qd.Vector.ndarray(3, dtype=qd.f32, shape=2)
    m[1][0, 1] = 5.0
    m[2][1] = [7.0, 8.0]  # a row
    v[1, 0].y = 3
    v[1, 0].zw = [4, 6]
    nd[1][2] = 2.5
    e = m[0]
    copy = e * 2  # computed from an element: a plain array
    copy[0, 0] = 9.0
    assert v[1, 0].x == 0 and v[1, 0].y == 3 and v[1, 0].w == 6
    np.testing.assert_array_equal(m.to_numpy()[1], [[0.0, 5.0], [0.0, 0.0]])
    np.testing.assert_array_equal(m.to_numpy()[2], [[0.0, 0.0], [7.0, 8.0]])
    np.testing.assert_array_equal(m.to_numpy()[0], np.zeros((2, 2)))
    np.testing.assert_array_equal(v.to_numpy()[1, 0], [0, 3, 4, 6])
    np.testing.assert_array_equal(nd.to_numpy()[1], [0.0, 0.0, 2.5])
    assert m[1].n == 2 and v[1, 0].q == 6
    with pytest.raises(AttributeError):
        _ = qd.Vector([1.0, 2.0]).z  # past the end
    with pytest.raises(AttributeError):
        _ = v[0, 0].xq  # two groups


@test()
def test_list_augmented_assignment_to_matrix_element():
    """`m[i] += [[1, 2], [3, 4]]`: a list operand of an augmented assignment takes the target's shape,
    as in plain assignment (the reference's test_matrix_list_assign)."""
    m = qd.Matrix.field(2, 2, dtype=qd.i32, shape=2)
    v = qd.Vector.field(2, dtype=qd.i32, shape=2)

    @qd.kernel
    def run():
        m[1] = [[1, 2], [3, 4]]
        m[1] += [[1, 2], [3, 4]]
        v[1] = [5, 6]
        v[1] *= [2, 3]
        loc = qd.Vector([1, 1])
        loc -= (1, 2)
        v[0] = loc

    run()
    np.testing.assert_array_equal(m.to_numpy()[1], [[2, 4], [6, 8]])
    np.testing.assert_array_equal(v.to_numpy(), [[0, -1], [10, 18]])
