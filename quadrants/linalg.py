"""Per-thread linear algebra on small matrices (docs/linalg.md): qd.svd, qd.polar_decompose,
qd.sym_eig, qd.make_spd, qd.eig, qd.solve, and Matrix.inverse() beyond 4x4.

Each thread decomposes or solves its own matrix in registers; nothing is shared between threads.
The algorithms are written below in the kernel language and inlined at every call, so the core
and its backends know nothing about them: they see loads, stores, arithmetic, sqrt, branches and,
for the iterative ones, a serial loop.

- svd (2x2, 3x3): one-sided (Hestenes) Jacobi rotations orthogonalise the columns of B = A V,
  the columns are sorted by norm, and a Givens QR of B gives U and the singular values (the
  diagonal of R). Rotations are computed from the columns themselves, not from A^T A, so small
  singular values keep their accuracy relative to |A|.
- sym_eig / make_spd (2x2 .. 6x6): cyclic Jacobi on (A + A^T) / 2, rotations accumulated into
  the eigenvector matrix; an off-diagonal entry below 0.1 eps |A|_F counts as zero.
- eig (2x2): closed form; eigenvectors are columns of (A - lambda' I) (Cayley-Hamilton).
- solve (2x2, 3x3) and inverse (5x5 .. 12x12): Gaussian elimination with partial pivoting.
"""
import builtins

import numpy as np

from quadrants import types as T
from quadrants.lang.ast.context import require
from quadrants.kernels.kernel import Func
from quadrants.lang.matrix import Matrix
from quadrants.lang.ops import abs, cast, max, sqrt, static  # noqa: A004  (the kernel versions)
from quadrants.lang.ast.values import MatrixValue

MAX_SYM_EIG_SWEEPS = 12  # cyclic Jacobi converges (quadratically) in about 7 sweeps at 6x6 in f64
MAX_SVD_SWEEPS = 10  # one-sided Jacobi at 3x3: 4 or 5 sweeps in f64


def _builtin(f):
    f._qd_builtin = True
    return f


# --- the algorithms, in the kernel language --------------------------------------------------
# Parameters: A (a matrix already cast to dt), n (its size), dt (the working float type), eps
# (dt's machine epsilon) and the sweep caps are compile-time values; everything else is a kernel
# value. Locals start from cast(0.0, dt) / Matrix.zero(dt, ...) so that an f64 solve under the
# default f32 stays f64 throughout.

@Func
def _jacobi_svd(A, n, dt, eps, max_sweeps, nonnegative):
    B = cast(A, dt)  # becomes U R: its columns are rotated until orthogonal
    V = Matrix.identity(dt, n)
    tol = eps * eps
    for _sweep in range(max_sweeps):
        rotated = 0
        for p in static(range(n)):
            for q in static(range(p + 1, n)):
                alpha = cast(0.0, dt)
                beta = cast(0.0, dt)
                gamma = cast(0.0, dt)
                for k in static(range(n)):
                    alpha += B[k, p] * B[k, p]
                    beta += B[k, q] * B[k, q]
                    gamma += B[k, p] * B[k, q]
                # columns p and q are orthogonal to working precision when |cos| <= eps
                if gamma * gamma > tol * alpha * beta:
                    rotated = 1
                    zeta = (beta - alpha) / (2.0 * gamma)
                    t = 1.0 / (abs(zeta) + sqrt(zeta * zeta + 1.0))  # the smaller root: |angle| <= pi/4
                    if zeta < 0.0:
                        t = -t
                    c = 1.0 / sqrt(t * t + 1.0)
                    s = c * t
                    for k in static(range(n)):
                        bp = B[k, p]
                        bq = B[k, q]
                        B[k, p] = c * bp - s * bq
                        B[k, q] = s * bp + c * bq
                        vp = V[k, p]
                        vq = V[k, q]
                        V[k, p] = c * vp - s * vq
                        V[k, q] = s * vp + c * vq
        if rotated == 0:
            break
    # Sort the columns by norm, largest first. A swap negates one column so det(V) stays +1.
    norms = Matrix.zero(dt, n)
    for j in static(range(n)):
        for k in static(range(n)):
            norms[j] += B[k, j] * B[k, j]
    for i in static(range(n - 1)):
        for j in static(range(n - 1 - i)):
            if norms[j] < norms[j + 1]:
                norms[j], norms[j + 1] = norms[j + 1], norms[j]
                for k in static(range(n)):
                    B[k, j], B[k, j + 1] = B[k, j + 1], -B[k, j]
                    V[k, j], V[k, j + 1] = V[k, j + 1], -V[k, j]
    # Givens QR, B = U R: U is a product of rotations (det +1), R's diagonal is the singular values,
    # all but the last non-negative; the last carries the sign of det(A).
    U = Matrix.identity(dt, n)
    for j in static(range(n - 1)):
        for i in static(range(n - 1, j, -1)):
            x = B[i - 1, j]
            y = B[i, j]
            r = sqrt(x * x + y * y)
            c = cast(1.0, dt)
            s = cast(0.0, dt)
            if r > 0.0:
                c = x / r
                s = y / r
            for k in static(range(n)):
                top = B[i - 1, k]
                bottom = B[i, k]
                B[i - 1, k] = c * top + s * bottom
                B[i, k] = c * bottom - s * top
                left = U[k, i - 1]
                right = U[k, i]
                U[k, i - 1] = c * left + s * right
                U[k, i] = c * right - s * left
    S = Matrix.zero(dt, n, n)
    for i in static(range(n)):
        S[i, i] = B[i, i]
    if static(nonnegative):
        if S[n - 1, n - 1] < 0.0:
            S[n - 1, n - 1] = -S[n - 1, n - 1]
            for k in static(range(n)):
                U[k, n - 1] = -U[k, n - 1]
    return U, S, V


@Func
def _polar(A, n, dt, eps, max_sweeps, nonnegative):
    U, S, V = _jacobi_svd(A, n, dt, eps, max_sweeps, nonnegative)
    R = U @ V.transpose()
    P = Matrix.zero(dt, n, n)  # V S V^T, built symmetric
    for i in static(range(n)):
        for j in static(range(i, n)):
            acc = cast(0.0, dt)
            for k in static(range(n)):
                acc += V[i, k] * S[k, k] * V[j, k]
            P[i, j] = acc
            P[j, i] = acc
    return R, P


@Func
def _jacobi_eigh(A, n, dt, eps, max_sweeps):
    W = Matrix.zero(dt, n, n)  # the symmetric part of A, rotated towards diagonal
    scale = cast(0.0, dt)
    for i in static(range(n)):
        for j in static(range(n)):
            W[i, j] = (A[i, j] + A[j, i]) * 0.5
            scale += W[i, j] * W[i, j]
    Q = Matrix.identity(dt, n)
    # An off-diagonal entry with apq^2 <= thr is treated as zero: rotating it (when app ~ aqq)
    # would turn an O(1) angle out of rounding noise and undo earlier rotations.
    thr = scale * (0.01 * eps * eps)
    for _sweep in range(max_sweeps):
        largest = cast(0.0, dt)
        for p in static(range(n)):
            for q in static(range(p + 1, n)):
                largest = max(largest, W[p, q] * W[p, q])
        if largest <= thr:
            break
        for p in static(range(n)):
            for q in static(range(p + 1, n)):
                apq = W[p, q]
                if apq * apq > thr:
                    theta = (W[q, q] - W[p, p]) / (2.0 * apq)
                    t = 1.0 / (abs(theta) + sqrt(theta * theta + 1.0))
                    if theta < 0.0:
                        t = -t
                    c = 1.0 / sqrt(t * t + 1.0)
                    s = c * t
                    for k in static(range(n)):
                        if static(k != p and k != q):
                            wkp = W[k, p]
                            wkq = W[k, q]
                            W[k, p] = c * wkp - s * wkq
                            W[p, k] = W[k, p]
                            W[k, q] = s * wkp + c * wkq
                            W[q, k] = W[k, q]
                    W[p, p] -= t * apq
                    W[q, q] += t * apq
                    W[p, q] = cast(0.0, dt)
                    W[q, p] = cast(0.0, dt)
                    for k in static(range(n)):
                        qkp = Q[k, p]
                        qkq = Q[k, q]
                        Q[k, p] = c * qkp - s * qkq
                        Q[k, q] = s * qkp + c * qkq
    w = Matrix.zero(dt, n)
    for i in static(range(n)):
        w[i] = W[i, i]
    for i in static(range(n - 1)):  # ascending, the eigenvector columns with their values
        for j in static(range(n - 1 - i)):
            if w[j] > w[j + 1]:
                w[j], w[j + 1] = w[j + 1], w[j]
                for k in static(range(n)):
                    Q[k, j], Q[k, j + 1] = Q[k, j + 1], Q[k, j]
    return w, Q


@Func
def _make_spd(A, n, dt, eps, max_sweeps):
    w, Q = _jacobi_eigh(A, n, dt, eps, max_sweeps)
    M = Matrix.zero(dt, n, n)  # Q diag(max(w, 0)) Q^T, built symmetric
    for i in static(range(n)):
        for j in static(range(i, n)):
            acc = cast(0.0, dt)
            for k in static(range(n)):
                acc += Q[i, k] * max(w[k], 0.0) * Q[j, k]
            M[i, j] = acc
            M[j, i] = acc
    return M


@Func
def _eig2(A, dt):
    a = A[0, 0]
    b = A[0, 1]
    c = A[1, 0]
    d = A[1, 1]
    mid = (a + d) * 0.5
    h = (a - d) * 0.5
    disc = h * h + b * c  # ((a - d) / 2)^2 + bc: the eigenvalues are mid +- sqrt(disc)
    values = Matrix.zero(dt, 2, 2)  # row i: (re, im) of eigenvalue i
    vectors = Matrix.zero(dt, 4, 2)  # column i: (re, im) of component 0, then of component 1
    if disc >= 0.0:
        r = sqrt(disc)
        values[0, 0] = mid + r
        values[1, 0] = mid - r
        # (A - l1 I)(A - l2 I) = 0: the columns of (A - l2 I) are eigenvectors of l1 and vice
        # versa; take the longer column (the other may be zero or all rounding).
        for e in static(range(2)):
            other = values[1 - e, 0]
            x0 = a - other
            y0 = c
            x1 = b
            y1 = d - other
            n0 = x0 * x0 + y0 * y0
            n1 = x1 * x1 + y1 * y1
            vx = x0
            vy = y0
            vn = n0
            if n1 > n0:
                vx = x1
                vy = y1
                vn = n1
            if vn > 0.0:
                inv = 1.0 / sqrt(vn)
                vectors[0, e] = vx * inv
                vectors[2, e] = vy * inv
            else:  # A = lambda I: every vector is an eigenvector
                vectors[2 * e, e] = cast(1.0, dt)
    else:
        r = sqrt(-disc)
        values[0, 0] = mid
        values[0, 1] = r
        values[1, 0] = mid
        values[1, 1] = -r
        # first column of A - conj(lambda) I: (h + i im(lambda), c), never zero here (c != 0)
        inv = 1.0 / sqrt(h * h + r * r + c * c)
        for e in static(range(2)):
            vectors[0, e] = h * inv
            vectors[1, e] = values[e, 1] * inv
            vectors[2, e] = c * inv
    return values, vectors


@Func
def _gauss_solve(A, b, n, dt):
    M = cast(A, dt)
    x = cast(b, dt)
    for i in static(range(n)):
        for j in static(range(i + 1, n)):  # partial pivoting: the largest |M[j, i]| to row i
            if abs(M[j, i]) > abs(M[i, i]):
                for k in static(range(i, n)):
                    M[i, k], M[j, k] = M[j, k], M[i, k]
                x[i], x[j] = x[j], x[i]
        assert M[i, i] != 0.0, "qd.solve: the matrix is singular (a zero pivot)"
        for j in static(range(i + 1, n)):
            f = M[j, i] / M[i, i]
            for k in static(range(i + 1, n)):
                M[j, k] -= f * M[i, k]
            x[j] -= f * x[i]
    for i in static(range(n - 1, -1, -1)):
        acc = x[i]
        for k in static(range(i + 1, n)):
            acc -= M[i, k] * x[k]
        x[i] = acc / M[i, i]
    return x


@Func
def _gauss_jordan_inverse(A, n, dt):
    M = cast(A, dt)
    X = Matrix.identity(dt, n)
    for i in static(range(n)):
        for j in static(range(i + 1, n)):  # partial pivoting
            if abs(M[j, i]) > abs(M[i, i]):
                for k in static(range(i, n)):
                    M[i, k], M[j, k] = M[j, k], M[i, k]
                for k in static(range(n)):
                    X[i, k], X[j, k] = X[j, k], X[i, k]
        assert M[i, i] != 0.0, "Matrix.inverse(): the matrix is singular (a zero pivot)"
        inv = 1.0 / M[i, i]
        for k in static(range(i + 1, n)):
            M[i, k] *= inv
        for k in static(range(n)):
            X[i, k] *= inv
        for j in static(range(n)):
            if static(j != i):
                f = M[j, i]
                for k in static(range(i + 1, n)):
                    M[j, k] -= f * M[i, k]
                for k in static(range(n)):
                    X[j, k] -= f * X[i, k]
    return X


# --- entry points ----------------------------------------------------------------------------
def _working_type(ctx, name, dt):
    """dt, or the default float type; f32 or f64."""
    if dt is None:
        dt = ctx.config.default_fp
    try:
        dt = T.to_dtype(dt)
    except TypeError as e:
        ctx.type_error(f"qd.{name}(): dt: {e}")
    if dt not in (T.f32, T.f64):
        ctx.type_error(f"qd.{name}(): dt must be qd.f32 or qd.f64, got {dt!r}")
    return dt


def _square(ctx, name, A, sizes, what):
    """A as a matrix rvalue of one of the supported sizes; a compile-time error otherwise."""
    A = ctx.rvalue(A)
    if name == "polar_decompose" and getattr(A, "element_shape", None) and A.element_shape[0] not in sizes:
        ctx.type_error(f"Polar decomposition only supports 2×2 and 3×3 matrices. qd.polar_decompose() takes a "
                       f"matrix value, got a field of {A.element_shape} matrices")
    if not isinstance(A, MatrixValue) or len(A.shape) != 2 or A.shape[0] != A.shape[1]:
        got = f"shape {A.shape}" if isinstance(A, MatrixValue) else type(A).__name__
        ctx.type_error(f"qd.{name}() takes a square matrix, got {got}")
    if A.shape[0] not in sizes:
        prefix = "Polar decomposition only supports 2×2 and 3×3 matrices. " if name == "polar_decompose" else ""
        ctx.type_error(f"{prefix}qd.{name}() supports {what}, got a {A.shape[0]}x{A.shape[0]} matrix")
    return A


def _eps(dt):
    return float(np.finfo(dt.np).eps)


def _values(ctx, result):
    return tuple(ctx.rvalue(v) for v in result) if isinstance(result, tuple) else ctx.rvalue(result)


@_builtin
def svd(A, dt=None):
    """(U, S, V) with A = U @ S @ V.transpose() for a 2x2 or 3x3 matrix: U, V orthogonal, S diagonal
    with the singular values in descending order. 3x3: det(U) = det(V) = +1 and the last singular
    value carries the sign of det(A). 2x2: every singular value is >= 0 (U may be a reflection)."""
    ctx = require("qd.svd")
    dt = _working_type(ctx, "svd", dt)
    A = _square(ctx, "svd", A, (2, 3), "2x2 and 3x3 matrices only")
    n = A.shape[0]
    return _values(ctx, _jacobi_svd.inline(ctx, [ctx.cast(A, dt), n, dt, _eps(dt), MAX_SVD_SWEEPS, n == 2], {}))


@_builtin
def polar_decompose(A, dt=None):
    """(R, S) with A = R @ S for a 2x2 or 3x3 matrix: R = U V^T orthogonal, S = V Sigma V^T symmetric
    (from qd.svd, with its sign conventions: at 3x3 R is a rotation, and S has a negative
    eigenvalue when det(A) < 0; at 2x2 S is positive semi-definite and R may be a reflection)."""
    ctx = require("qd.polar_decompose")
    dt = _working_type(ctx, "polar_decompose", dt)
    A = _square(ctx, "polar_decompose", A, (2, 3), "2x2 and 3x3 matrices only")
    n = A.shape[0]
    return _values(ctx, _polar.inline(ctx, [ctx.cast(A, dt), n, dt, _eps(dt), MAX_SVD_SWEEPS, n == 2], {}))


@_builtin
def sym_eig(A, dt=None):
    """(eigenvalues, eigenvectors) of a real symmetric matrix, 2x2 up to 6x6: a Vector(n) in ascending
    order and a Matrix(n, n) whose column i is the unit eigenvector of eigenvalue i (columns
    orthonormal). Only the symmetric part (A + A^T) / 2 is used."""
    ctx = require("qd.sym_eig")
    dt = _working_type(ctx, "sym_eig", dt)
    A = _square(ctx, "sym_eig", A, range(1, 7), "sizes up to 6x6")
    return _values(ctx, _jacobi_eigh.inline(ctx, [ctx.cast(A, dt), A.shape[0], dt, _eps(dt), MAX_SYM_EIG_SWEEPS],
                                            {}))


@_builtin
def make_spd(A, dt=None):
    """The positive semi-definite matrix nearest to the symmetric matrix A (Frobenius norm), up to 6x6:
    Q diag(max(lambda, 0)) Q^T from qd.sym_eig."""
    ctx = require("qd.make_spd")
    dt = _working_type(ctx, "make_spd", dt)
    A = _square(ctx, "make_spd", A, range(1, 7), "sizes up to 6x6")
    return _values(ctx, _make_spd.inline(ctx, [ctx.cast(A, dt), A.shape[0], dt, _eps(dt), MAX_SYM_EIG_SWEEPS], {}))


@_builtin
def eig(A, dt=None):
    """(eigenvalues, eigenvectors) of a real 2x2 matrix, complex numbers packed as (re, im) pairs: a
    Matrix(2, 2) whose row i is eigenvalue i, and a Matrix(4, 2) whose column i is the unit eigenvector
    of eigenvalue i as (re, im) of its first component, then of its second."""
    ctx = require("qd.eig")
    dt = _working_type(ctx, "eig", dt)
    A = _square(ctx, "eig", A, (2,), "2x2 matrices only")
    return _values(ctx, _eig2.inline(ctx, [ctx.cast(A, dt), dt], {}))


@_builtin
def solve(A, b, dt=None):
    """x with A @ x = b for a 2x2 or 3x3 matrix A and a vector b, by Gaussian elimination with partial
    pivoting. A singular A fails a kernel assert under qd.init(debug=True); without debug the
    result is inf / NaN."""
    ctx = require("qd.solve")
    dt = _working_type(ctx, "solve", dt)
    A = _square(ctx, "solve", A, (2, 3), "2x2 and 3x3 matrices only")
    b = ctx.rvalue(b)
    if not isinstance(b, MatrixValue) or len(b.shape) != 1 or b.shape[0] != A.shape[0]:
        got = f"shape {b.shape}" if isinstance(b, MatrixValue) else type(b).__name__
        ctx.type_error(f"qd.solve(): b must be a vector of size {A.shape[0]}, got {got}")
    return _values(ctx, _gauss_solve.inline(ctx, [ctx.cast(A, dt), ctx.cast(b, dt), A.shape[0], dt], {}))


MAX_INVERSE_SIZE = 12


def inverse(ctx, A):
    """A.inverse() for 5x5 .. 12x12 (Gauss-Jordan with partial pivoting), in A's widest float type (the
    default float type for a matrix of integers)."""
    reals = [e.dtype for e in A.entries if getattr(e, "dtype", None) is not None and e.dtype.is_real]
    dt = builtins.max(reals, key=lambda t: t.bits) if reals else ctx.config.default_fp
    return _values(ctx, _gauss_jordan_inverse.inline(ctx, [ctx.cast(A, dt), A.shape[0], dt], {}))


__all__ = ["eig", "make_spd", "polar_decompose", "solve", "svd", "sym_eig"]
