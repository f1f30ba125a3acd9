"""Interleaved iterations on the cpu (transforms/interleave.cpp, docs/backends.md): a parallel loop
of straight-line code around one inner loop of the same trip count in every iteration runs 8
iterations side by side. Shown applied (printed IR: "interleaved iterations") where it may be and
not elsewhere; the results bit for bit those of a serial float32 run of the loop as written (numpy,
one operation at a time), for every length around the 8-iteration blocks, ranges not starting at
0, 1 and 2 threads, f32 and f64."""
import numpy as np
import pytest

import quadrants as qd
from test_utils import test

EPS2 = 0.0025


def _interleaved(kernel, *args):
    return "interleaved iterations" in qd.compile(kernel, *args).ir


def _pull_reference(xs, ms, begin, end, dtype):
    """What `a[i] = sum over j of m[j] * d / (r2 * sqrt(r2))` gives with every operation rounded to
    dtype in the order written (d = x[j] - x[i], r2 = d.d + eps2, the sum from j = 0 up)."""
    t = dtype.type
    out = np.zeros_like(xs)
    for i in range(begin, end):
        acc = [t(0), t(0), t(0)]
        for j in range(len(xs)):
            d = [t(xs[j, c] - xs[i, c]) for c in range(3)]
            r2 = t(t(t(t(d[0] * d[0]) + t(d[1] * d[1])) + t(d[2] * d[2])) + t(EPS2))
            q = t(r2 * t(np.sqrt(r2)))
            for c in range(3):
                acc[c] = t(acc[c] + t(t(ms[j] * d[c]) / q))
        out[i] = acc
    return out


@pytest.mark.parametrize("n,begin", [(1, 0), (7, 0), (8, 0), (9, 0), (16, 3), (23, 5), (61, 0)])
@pytest.mark.parametrize("fp", [qd.f32, qd.f64])
@test(arch=qd.cpu)
def test_all_pairs_bit_for_bit(n, begin, fp):
    np_fp = np.dtype(np.float32 if fp == qd.f32 else np.float64)
    rng = np.random.default_rng(n)
    xs = rng.random((n, 3)).astype(np_fp)
    ms = (rng.random(n) + 0.5).astype(np_fp)
    x = qd.Vector.field(3, fp, shape=n)
    a = qd.Vector.field(3, fp, shape=n)
    m = qd.field(fp, shape=n)
    x.from_numpy(xs)
    m.from_numpy(ms)

    @qd.kernel
    def pull(lo: qd.i32):
        for i in range(lo, n):
            xi = x[i]
            acc = qd.Vector.zero(fp, 3)
            for j in range(n):
                d = x[j] - xi
                r2 = d.dot(d) + EPS2
                acc += m[j] * d / (r2 * qd.sqrt(r2))
            a[i] = acc

    assert _interleaved(pull, begin)
    pull(begin)
    want = _pull_reference(xs, ms, begin, n, np_fp)
    assert a.to_numpy().tobytes() == want.tobytes()


@pytest.mark.parametrize("fp", [qd.f32, qd.f64])
@test(arch=qd.cpu)
def test_all_pairs_in_vector_instructions(fp):
    """The copies of each statement are one vector instruction of 8 lanes (Stmt::lanes): the three
    IEEE divisions and the square root per pair 8 pairs at a time, not left to LLVM's SLP
    vectorizer (which bundled the x and y components of one iteration, two lanes wide)."""
    n = 64
    t = "float" if fp == qd.f32 else "double"
    x = qd.Vector.field(3, fp, shape=n)
    a = qd.Vector.field(3, fp, shape=n)
    m = qd.field(fp, shape=n)

    @qd.kernel
    def pull():
        for i in x:
            xi = x[i]
            acc = qd.Vector.zero(fp, 3)
            for j in range(n):
                d = x[j] - xi
                r2 = d.dot(d) + EPS2
                acc += m[j] * d / (r2 * qd.sqrt(r2))
            a[i] = acc

    ir = qd.compile(pull).llvm_ir
    wide = ir.count(f"fdiv <8 x {t}>")
    assert wide >= 3 and wide % 3 == 0, wide  # 3 per pair, however often LLVM unrolls the loop
    assert f"@llvm.sqrt.v8f{32 if fp == qd.f32 else 64}(" in ir
    assert f"phi <8 x {t}>" in ir  # the accumulators: one vector each


@test(arch=qd.cpu)
def test_lanes_of_selects_casts_and_integers():
    """Comparisons, selects, floor / min / abs, float -> int casts and integer arithmetic in
    lanes: bit for bit the operations one iteration at a time (numpy over i, float32 / int32)."""
    n = 29
    xs = (np.random.default_rng(3).random(n) * 2 - 1).astype(np.float32)
    x = qd.field(qd.f32, shape=n)
    y = qd.field(qd.f32, shape=n)
    k = qd.field(qd.i32, shape=n)
    x.from_numpy(xs)

    @qd.kernel
    def mixed():
        for i in range(n):
            s = 0.0
            c = 0
            for j in range(n):
                d = x[j] - x[i]
                w = qd.select(d > 0, d, -d * 0.5)
                s += qd.floor(w * 4.0) * 0.125 + qd.min(w, 0.25) + qd.abs(d)
                c += (qd.cast(w * 10.0, qd.i32) & 3) ^ j
            y[i] = s
            k[i] = c

    ir = qd.compile(mixed).llvm_ir
    assert _interleaved(mixed)
    for op in ("select <8 x i1>", "fptosi <8 x float>", "xor <8 x i32>", "phi <8 x i32>"):
        assert op in ir, op
    mixed()
    f = np.float32
    s = np.zeros(n, f)
    c = np.zeros(n, np.int32)
    for j in range(n):
        d = xs[j] - xs
        w = np.where(d > 0, d, -d * f(0.5))
        s = s + ((np.floor(w * f(4)) * f(0.125) + np.minimum(w, f(0.25))) + np.abs(d))
        c = c + ((np.trunc(w * f(10)).astype(np.int32) & 3) ^ j)
    assert y.to_numpy().tobytes() == s.tobytes()
    assert k.to_numpy().tolist() == c.tolist()


def _inverse_distance_sums():
    """An interleaved all-pairs sum's bits, and those of the same float32 operations in numpy."""
    n = 203
    xs = np.random.default_rng(1).random((n, 3)).astype(np.float32)
    x = qd.Vector.field(3, qd.f32, shape=n)
    a = qd.field(qd.f32, shape=n)
    x.from_numpy(xs)

    @qd.kernel
    def inverse_distance_sum():
        for i in x:
            s = 0.0
            for j in range(n):
                s += 1.0 / qd.sqrt((x[j] - x[i]).norm_sqr() + EPS2)
            a[i] = s

    assert _interleaved(inverse_distance_sum)
    inverse_distance_sum()
    d = xs[None, :, :] - xs[:, None, :]
    want = np.zeros(n, np.float32)
    for j in range(n):  # the same float32 operations in the same order, vectorized over i
        r = (d[:, j, 0] * d[:, j, 0] + d[:, j, 1] * d[:, j, 1]) + d[:, j, 2] * d[:, j, 2]
        want = want + np.float32(1.0) / np.sqrt(r + np.float32(EPS2))
    return a.to_numpy().tobytes(), want.tobytes()


@test(arch=qd.cpu, cpu_max_num_threads=1)
def test_one_thread():
    got, want = _inverse_distance_sums()
    assert got == want


@test(arch=qd.cpu, cpu_max_num_threads=2)
def test_two_threads():
    got, want = _inverse_distance_sums()
    assert got == want


@test(arch=qd.cpu)
def test_left_alone_where_iterations_could_see_each_other():
    n = 64
    x = qd.field(qd.f32, shape=n)
    y = qd.field(qd.f32, shape=n)
    total = qd.field(qd.f32, shape=())
    x.from_numpy(np.arange(n, dtype=np.float32))

    @qd.kernel
    def control():  # what each kernel below changes, and this one has not
        for i in range(n):
            s = 0.0
            for j in range(n):
                s += x[j] * 0.5
            y[i] = s

    @qd.kernel
    def reads_what_it_writes():
        for i in range(n):
            s = 0.0
            for j in range(n):
                s += x[j] * 0.5
            x[i] = s

    @qd.kernel
    def trip_count_varies():
        for i in range(n):
            s = 0.0
            for j in range(i):
                s += x[j] * 0.5
            y[i] = s

    @qd.kernel
    def atomic_in_body():
        for i in range(n):
            s = 0.0
            for j in range(n):
                s += x[j] * 0.5
            total[None] += s

    @qd.kernel
    def branch_in_inner_loop():
        for i in range(n):
            s = 0.0
            for j in range(n):
                if x[j] > x[i]:
                    s += x[j]
            y[i] = s

    @qd.kernel
    def integer_work_only():
        for i in range(n):
            s = 0
            for j in range(n):
                s += j * i
            y[i] = s

    assert _interleaved(control)
    for k in (reads_what_it_writes, trip_count_varies, atomic_in_body, branch_in_inner_loop, integer_work_only):
        assert not _interleaved(k), k.__name__
    trip_count_varies()
    want = np.array([np.float32(0.5) * np.float32(sum(range(i))) for i in range(n)], dtype=np.float32)
    assert np.allclose(y.to_numpy(), want)
