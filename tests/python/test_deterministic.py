"""Deterministic mode (issue 29; transforms/deterministic.cpp, docs/atomics.md "Deterministic mode"):
with qd.init(deterministic=True) or @qd.kernel(deterministic=True) an f32 atomic sum is the exact sum
of its addends (the target's old value included) rounded once to nearest-even, and a slot counter
hands out slots in iteration order. Each pattern runs 20 times with 1 and 2 cpu threads, three block
sizes, on the cpu and on Vulkan (and at subgroup size 4), every bit compared with a reference
computed here in exact rational arithmetic; the patterns the mode rejects raise QuadrantsTypeError
naming the line."""
import os
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest

import quadrants as qd
from test_utils import host_has_avx512f, test

N = 20011  # not a multiple of any block, subgroup or chunk size
BINS, SCATTER = 256, 5003
RUNS = 20
BLOCK_DIMS = [32, 128, 512]


# --- the reference: exact sums rounded once ----------------------------------------------------

def _round_f32(x):
    """The f32 nearest to the rational x, ties to the even significand; +-inf past the largest."""
    if abs(x) >= 2 ** 128 - 2 ** 103:  # the largest f32 plus half its ulp: a tie goes to the even infinity
        return np.float32(np.inf if x > 0 else -np.inf)
    with np.errstate(over="ignore"):
        r = np.float32(float(x))
    if np.isinf(r):
        r = np.copysign(np.finfo(np.float32).max, r)
    with np.errstate(over="ignore"):
        cands = [np.nextafter(r, np.float32(-np.inf)), r, np.nextafter(r, np.float32(np.inf))]
    cands = [c for c in cands if np.isfinite(c)]  # (r the largest f32: x is below the infinity's threshold)
    # (float(x) rounds to f64 first: its f32 neighbours hold the answer)
    return min(cands, key=lambda c: (abs(Fraction(float(c)) - x), int(np.float32(c).view(np.uint32)) & 1))


def f32_sum(values):
    """What a deterministic f32 atomic sum leaves: NaN if any addend is NaN or both infinities occur,
    an infinity if one does, -0.0 if every addend is -0.0, else the exact sum rounded once."""
    v = np.asarray(values, np.float32)
    if np.isnan(v).any() or (np.isposinf(v).any() and np.isneginf(v).any()):
        return np.float32(np.nan)
    if np.isinf(v).any():
        return v[np.isinf(v)][0]
    exact = sum(Fraction(int(m)) for m in (v.astype(np.float64) * 2.0 ** 149).astype(object)) / Fraction(2) ** 149
    if exact == 0:
        return np.float32(-0.0) if np.all(np.signbit(v)) else np.float32(0.0)
    return _round_f32(exact)


def _bits(a):
    return np.asarray(a, np.float32).view(np.uint32)


def _data(seed, n=N):
    """Magnitudes spread over 2^-30 .. 2^20 with both signs, and every 97th value +-2^36 (they cancel
    in pairs): a running sum carries a large value through most of the small ones, so every order
    rounds differently."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(n) * np.exp2(rng.integers(-30, 20, n))).astype(np.float32)
    big = np.arange(0, n, 97)
    x[big] = np.where(np.arange(len(big)) % 2 == 0, 2.0 ** 36, -(2.0 ** 36))
    return x


# --- the patterns ------------------------------------------------------------------------------

class Patterns:
    def __init__(self, block_dim):
        self.x = qd.ndarray(qd.f32, N)
        self.b = qd.ndarray(qd.i32, N)
        self.p = qd.ndarray(qd.i32, N)
        self.out = qd.ndarray(qd.i32, N)
        self.total = qd.field(qd.f32, shape=())
        self.hist = qd.field(qd.f32, shape=BINS)
        self.y = qd.field(qd.f32, shape=SCATTER)
        self.c = qd.field(qd.i32, shape=())
        total, hist, y, c = self.total, self.hist, self.y, self.c
        bd = block_dim

        @qd.kernel
        def same_address(x: qd.types.ndarray(dtype=qd.f32, ndim=1)):
            qd.loop_config(block_dim=bd)
            for i in range(x.shape[0]):
                total[None] += x[i]

        @qd.kernel
        def histogram(x: qd.types.ndarray(dtype=qd.f32, ndim=1), b: qd.types.ndarray(dtype=qd.i32, ndim=1)):
            qd.loop_config(block_dim=bd)
            for i in range(x.shape[0]):
                hist[b[i]] += x[i]

        @qd.kernel
        def scatter(x: qd.types.ndarray(dtype=qd.f32, ndim=1), p: qd.types.ndarray(dtype=qd.i32, ndim=1)):
            qd.loop_config(block_dim=bd)
            for i in range(x.shape[0]):
                y[p[i]] += x[i]

        @qd.kernel
        def compaction(x: qd.types.ndarray(dtype=qd.f32, ndim=1), out: qd.types.ndarray(dtype=qd.i32, ndim=1)):
            qd.loop_config(block_dim=bd)
            for i in range(x.shape[0]):
                if x[i] > 0:
                    out[qd.atomic_add(c[None], 1)] = i

        self.kernels = same_address, histogram, scatter, compaction

    def run(self, xs, bs, ps):
        same_address, histogram, scatter, compaction = self.kernels
        self.x.from_numpy(xs)
        self.b.from_numpy(bs)
        self.p.from_numpy(ps)
        self.out.from_numpy(np.full(N, -1, np.int32))
        self.total[None] = 0.75
        self.hist.fill(0.0)
        self.y.from_numpy(np.linspace(-1, 1, SCATTER).astype(np.float32))
        self.c[None] = 5
        same_address(self.x)
        histogram(self.x, self.b)
        scatter(self.x, self.p)
        compaction(self.x, self.out)
        return (_bits(self.total.to_numpy()), _bits(self.hist.to_numpy()), _bits(self.y.to_numpy()),
                self.out.to_numpy(), np.int32(self.c[None]))


def _inputs():
    rng = np.random.default_rng(29)
    return _data(1), rng.integers(0, BINS, N).astype(np.int32), rng.integers(0, SCATTER, N).astype(np.int32)


def _reference(xs, bs, ps):
    total = f32_sum(np.concatenate([[np.float32(0.75)], xs]))
    hist = np.array([f32_sum(np.concatenate([[np.float32(0.0)], xs[bs == k]])) for k in range(BINS)], np.float32)
    y0 = np.linspace(-1, 1, SCATTER).astype(np.float32)
    order = np.argsort(ps, kind="stable")
    groups = np.split(xs[order], np.cumsum(np.bincount(ps, minlength=SCATTER))[:-1])
    y = np.array([f32_sum(np.concatenate([[y0[k]], groups[k]])) for k in range(SCATTER)], np.float32)
    keep = np.flatnonzero(xs > 0).astype(np.int32)
    out = np.full(N, -1, np.int32)
    out[5:5 + len(keep)] = keep
    return _bits(total), _bits(hist), _bits(y), out, np.int32(5 + len(keep))


_REF = {}


def _ref():
    if not _REF:
        _REF["inputs"] = _inputs()
        _REF["want"] = _reference(*_REF["inputs"])
    return _REF["inputs"], _REF["want"]


def test_reference_is_not_an_order():
    """The data makes the reference differ from a sequential f32 sum and from numpy's pairwise one:
    a lowering that sums in some fixed order would fail the tests below."""
    (xs, bs, _), (total, hist, *_rest) = _ref()
    seq = np.float32(0.75)
    for v in xs:
        seq = np.float32(seq + v)
    assert _bits(seq) != total
    assert _bits(np.float32(0.75) + xs.sum(dtype=np.float32)) != total
    naive = np.zeros(BINS, np.float32)
    np.add.at(naive, bs, xs)  # sequential per bin
    assert (_bits(naive) != hist).sum() > BINS // 4


@pytest.mark.parametrize("threads", [1, 2])
@test(arch=[qd.cpu, qd.vulkan])
def test_every_run_every_thread_count_and_block_size_gives_the_reference(threads, req_arch):
    if req_arch == qd.vulkan and threads == 2:
        pytest.skip("cpu_max_num_threads is the cpu's")
    qd.init(arch=req_arch, deterministic=True, cpu_max_num_threads=threads, enable_fallback=False, offline_cache=False)
    inputs, want = _ref()
    for bd in BLOCK_DIMS:
        pat = Patterns(bd)
        for _ in range(RUNS):
            got = pat.run(*inputs)
            for name, g, w in zip(("sum", "histogram", "scatter", "compaction", "counter"), got, want):
                assert np.array_equal(g, w), (name, bd, int((np.asarray(g) != np.asarray(w)).sum()))


_SUBGROUP4 = r"""
import sys, numpy as np
sys.path[:0] = sys.argv[1:]
import quadrants as qd
import test_deterministic as t
qd.init(arch=qd.vulkan, deterministic=True, enable_fallback=False, offline_cache=False)
assert qd.vulkan_caps()["subgroup_size"] == 4, qd.vulkan_caps()["subgroup_size"]
inputs, want = t._ref()
got = t.Patterns(64).run(*inputs)
assert all(np.array_equal(g, w) for g, w in zip(got, want))
print("same bits")
"""


@test(arch=[qd.vulkan])
def test_subgroup_size_4_gives_the_same_bits():
    """lavapipe at 128-bit vectors (LP_NATIVE_VECTOR_WIDTH=128) has subgroups of 4 lanes."""
    env = dict(os.environ, LP_NATIVE_VECTOR_WIDTH="128")
    here = os.path.dirname(__file__)
    r = subprocess.run([sys.executable, "-c", _SUBGROUP4, here, os.path.join(here, "..")], env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and "same bits" in r.stdout, r.stdout + r.stderr


# --- the rounding, specials, targets ----------------------------------------------------------

CASES = {
    "tie to even": [1.0, 2.0 ** -24],
    "sticky bit": [1.0, 2.0 ** -24, 2.0 ** -60],
    "no intermediate overflow": [3e38, 3e38, -3e38],
    "overflow": [3e38] * 4,
    "negative overflow": [-3e38] * 4,
    "cancellation": [1e30, 1.0, -1e30],
    "subnormals": [1e-45] * 1000 + [-3e-45],
    "into a normal": [2.0 ** -126 - 2.0 ** -149, 2.0 ** -149],
    "inf": [np.inf, 1.0, -5.0],
    "-inf": [-np.inf, 1.0],
    "inf - inf": [np.inf, -np.inf],
    "nan": [1.0, np.nan],
    "-0.0 only": [-0.0, -0.0],
    "-0.0 and +0.0": [-0.0, 0.0],
    "exact zero": [-1.5, 1.5],
    "one value": [2.5],
    "huge and tiny": [2.0 ** 127, 2.0 ** -149, -(2.0 ** 127)],
}


@pytest.mark.parametrize("init", [0.0, -0.0, 1.0])
@test(arch=[qd.cpu, qd.vulkan], deterministic=True)
def test_rounding_and_special_values(init):
    total = qd.field(qd.f32, shape=())

    @qd.kernel
    def k(x: qd.types.ndarray(dtype=qd.f32, ndim=1)):
        for i in range(x.shape[0]):
            qd.atomic_add(total[None], x[i])

    for name, vals in CASES.items():
        xs = np.array(vals, np.float32)
        total[None] = init
        k(xs)
        want = f32_sum(np.concatenate([[np.float32(init)], xs]))
        got = np.float32(total[None])
        assert (np.isnan(got) and np.isnan(want)) or _bits(got) == _bits(want), (name, got, want)


@pytest.mark.parametrize("size", [64, 3000, 70000])
@test(arch=[qd.cpu, qd.vulkan], deterministic=True)
def test_rounding_and_special_values_at_computed_indices(size):
    """Every case of CASES into its own element of a field, each case's values spread over the
    iterations: a field small enough for the cpu's private copies (64), one whose flags are only
    updated when they change (3000), and a large one (70000); the smallest and largest magnitudes
    reach the limbs kept outside an element's row."""
    y = qd.field(qd.f32, shape=size)
    names = list(CASES)
    xs = np.concatenate([np.array(CASES[n], np.float32) for n in names])
    where = np.concatenate([np.full(len(CASES[n]), (k * 7919) % size, np.int32) for k, n in enumerate(names)])
    order = np.random.default_rng(size).permutation(len(xs))

    @qd.kernel
    def k(x: qd.types.ndarray(dtype=qd.f32, ndim=1), w: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        for i in range(x.shape[0]):
            y[w[i]] += x[i]

    for init in (0.0, -0.0, 1.0):
        y.fill(init)
        k(xs[order], where[order])
        got = y.to_numpy()
        for j, name in enumerate(names):
            want = f32_sum(np.concatenate([[np.float32(init)], np.array(CASES[name], np.float32)]))
            g = got[(j * 7919) % size]
            assert (np.isnan(g) and np.isnan(want)) or _bits(g) == _bits(want), (name, init, g, want)
        untouched = np.setdiff1d(np.arange(size), where)
        assert (_bits(got[untouched]) == _bits(np.float32(init))).all()


@test(arch=[qd.cpu, qd.vulkan], deterministic=True)
def test_many_addends_with_the_widest_limb_values():
    """Values in [2, 4) have the widest limb values (24 significant bits shifted by 31): thousands of
    them per element overflow any i64 that sums them unsplit for long (the cpu's private copies spill
    past 2^62; a same-address chunk stops at 256 such adds)."""
    rng = np.random.default_rng(11)
    n = 20000
    xs = (rng.uniform(3, 4, n) * np.where(rng.random(n) < 0.98, 1, -1)).astype(np.float32)
    bins = rng.integers(0, 3, n).astype(np.int32)
    total = qd.field(qd.f32, shape=())
    small = qd.field(qd.f32, shape=3)
    large = qd.field(qd.f32, shape=70000)

    @qd.kernel
    def k(x: qd.types.ndarray(dtype=qd.f32, ndim=1), b: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        for i in range(x.shape[0]):
            total[None] += x[i]
            small[b[i]] += x[i]
            large[b[i] * 30000] -= x[i]

    k(xs, bins)
    assert _bits(total[None]) == _bits(f32_sum(np.concatenate([[np.float32(0)], xs])))
    for j in range(3):
        want = f32_sum(np.concatenate([[np.float32(0)], xs[bins == j]]))
        assert _bits(small.to_numpy()[j]) == _bits(want), j
        assert _bits(large.to_numpy()[j * 30000]) == _bits(-want), j


def _same_address_sum():
    """A 0-d f32 field `total` and the kernel `plain(x)` adding every element of x into it."""
    total = qd.field(qd.f32, shape=())

    @qd.kernel
    def plain(x: qd.types.ndarray(dtype=qd.f32, ndim=1)):
        for i in range(x.shape[0]):
            total[None] += x[i]

    return total, plain


@test(arch=[qd.cpu, qd.vulkan], deterministic=True)
def test_same_address_sums_run_in_chunks_unless_a_barrier_or_an_inner_loop():
    """A same-address sum's loop runs as chunks of at most 256 additions per accumulator (the IR's
    `deterministic chunk`); with a block barrier in the loop, or the sum in an inner loop, it keeps
    the per-addend limb atomics. The bits are the reference's either way."""
    xs = _data(13, 3001)
    total, plain = _same_address_sum()

    @qd.kernel
    def barrier(x: qd.types.ndarray(dtype=qd.f32, ndim=1)):
        qd.loop_config(block_dim=64)
        for i in range(x.shape[0]):
            total[None] += x[i]
            qd.simt.block.sync()

    @qd.kernel
    def inner(x: qd.types.ndarray(dtype=qd.f32, ndim=1)):
        for i in range(x.shape[0] // 3):
            for j in range(3):
                total[None] += x[3 * i + j]

    want = _bits(f32_sum(np.concatenate([[np.float32(0)], xs])))
    for k, chunked in ((plain, True), (barrier, False), (inner, False)):
        assert ("deterministic chunk" in qd.compile(k, xs).ir) == chunked, k
        total[None] = 0
        k(xs)
        assert _bits(total[None]) == want, k


def _chunk_cases():
    """1024-addend blocks (one cpu chunk each) whose non-zero magnitudes span few exponents (the cpu
    sums those in f64) or more, around the bounds of that path, plus a short tail."""
    rng = np.random.default_rng(29)
    top = np.float32(2.0 ** -100 * (2 - 2.0 ** -23))  # the largest significand
    def span(k, sign=1.0):  # 1023 addends 2^k above the one odd smallest
        v = np.full(1024, top * np.float32(2.0 ** k), np.float32) * np.float32(sign)
        v[17] = np.float32(2.0 ** -100 * (1 + 2.0 ** -23))
        return v
    below = np.float32(8.0e37) * np.where(np.arange(1024) % 2 == 0, 1, -1).astype(np.float32)
    below[5] = np.float32(1.5e33)  # 2^110 .. 2^126: s above 223
    near_max = np.float32(3.0e38) * np.where(np.arange(1024) % 2 == 0, 1, -1).astype(np.float32)
    near_max[5] = np.float32(1.5e33)
    tie = np.full(1024, -0.0, np.float32)  # 1 + 2^-22 + 2^-24 is a tie (to 1 + 2^-22); the 2^-60s break it
    tie[0], tie[1], tie[2:10] = 1 + 2.0 ** -22, 2.0 ** -24, 2.0 ** -60
    return {
        "uniform [0, 1)": rng.random(1024, dtype=np.float32),
        "across 1.0 with both signs": (rng.uniform(0.5, 2.0, 1024) * rng.choice([-1, 1], 1024)).astype(np.float32),
        "span 19 at the largest significands": span(19),
        "span 19 negative": span(19, -1.0),
        "span 20": span(20),
        "span 40": span(40),
        "subnormals": (rng.integers(-2 ** 23, 2 ** 23, 1024) * 2.0 ** -149).astype(np.float32),
        "below 2^126": below,
        "near the largest f32": near_max,
        "overflow": np.full(1024, 3.0e38, np.float32),
        "zeros and -0.0": np.where(np.arange(1024) % 3 == 0, 0.0, -0.0).astype(np.float32),
        "only -0.0": np.full(1024, -0.0, np.float32),
        "an infinity": np.where(np.arange(1024) == 200, np.inf, 1.0).astype(np.float32),
        "a NaN": np.where(np.arange(1024) == 3, np.nan, 1.0).astype(np.float32),
        "a tiny one among ones": np.where(np.arange(1024) == 9, 2.0 ** -100, 1.0).astype(np.float32),
        "a tie the 2^-60s decide": tie,
        "a short tail": rng.random(100, dtype=np.float32),
    }


@pytest.mark.parametrize("threads", [1, 2])
@test(arch=[qd.cpu, qd.vulkan])
def test_chunks_of_few_exponents_give_the_reference(threads, req_arch):
    """The cpu sums a chunk in f64 when at most 1024 addends' magnitudes span at most 19 exponents
    (its sum is then exact), and decodes each addend otherwise: every block here, alone and all in
    one loop, with an old value, under an if, with two sums of one target per iteration, after a
    continue and from a variable, and in a loop that also stores, gives the reference's bits, on 1
    and 2 threads and on Vulkan. On the cpu a loop whose only effect is the sum decodes a chunk by
    running its iterations again; one with other effects stores the addends (`sum.bits`). Vulkan
    on a CPU device (lavapipe: Cap::cpu_device) sums the first kind's chunks, of consecutive
    iterations, in f64 too, each chunk's sum into the slots at once."""
    if req_arch == qd.vulkan and threads == 2:
        pytest.skip("cpu_max_num_threads is the cpu's")
    qd.init(arch=req_arch, deterministic=True, cpu_max_num_threads=threads, enable_fallback=False, offline_cache=False)
    total, plain = _same_address_sum()

    @qd.kernel
    def guarded(x: qd.types.ndarray(dtype=qd.f32, ndim=1)):
        for i in range(x.shape[0]):
            if i % 3 != 1:
                total[None] -= x[i]

    @qd.kernel
    def twice(x: qd.types.ndarray(dtype=qd.f32, ndim=1)):
        for i in range(x.shape[0] // 2):
            total[None] += x[2 * i]
            total[None] += x[2 * i + 1]

    @qd.kernel
    def skipping(x: qd.types.ndarray(dtype=qd.f32, ndim=1)):
        for i in range(x.shape[0]):
            if i % 5 == 2:
                continue
            v = x[i]
            if i % 7 == 3:
                v = -v
            total[None] += v

    @qd.kernel
    def storing(x: qd.types.ndarray(dtype=qd.f32, ndim=1), seen: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        for i in range(x.shape[0]):
            total[None] += x[i]
            seen[i] = i + 1

    cases = _chunk_cases()
    cases["all of them"] = np.concatenate(list(cases.values()))
    if req_arch == qd.cpu:
        for k, stores in ((plain, False), (guarded, False), (twice, False), (skipping, False), (storing, True)):
            args = (cases["a short tail"],) + ((np.zeros(100, np.int32),) if k is storing else ())
            ir = qd.compile(k, *args).ir
            assert ("sum.bits" in ir) == stores, k
            # (the f64 chunk loop at the host's full 32-bit width: sixteen lanes with AVX-512, else eight)
            assert f"serial vector_width={16 if host_has_avx512f() else 8} (deterministic chunk)" in ir, k
    else:  # Vulkan: the f64 chunk sums on a CPU device (lavapipe), for loops whose only effect is the sum
        fast = qd.vulkan_caps()["cpu_device"] and qd.vulkan_caps()["shader_float64"]
        for k, f64 in ((plain, fast), (guarded, fast), (twice, fast), (skipping, fast), (storing, False)):
            args = (cases["a short tail"],) + ((np.zeros(100, np.int32),) if k is storing else ())
            assert (": f64 = add" in qd.compile(k, *args).ir) == f64, k
    for name, xs in cases.items():
        total[None] = 0.5
        skipping(xs)
        idx = np.arange(len(xs))
        kept = np.where(idx % 7 == 3, -xs, xs)[idx % 5 != 2]
        assert _bits(total[None]) == _bits(f32_sum(np.concatenate([[np.float32(0.5)], kept]))), name
        seen = np.zeros(len(xs), np.int32)
        total[None] = -0.0
        storing(xs, seen)
        assert _bits(total[None]) == _bits(f32_sum(np.concatenate([[np.float32(-0.0)], xs]))), name
        assert np.array_equal(seen, idx + 1), name
        for old in (np.float32(0.0), np.float32(-0.0), np.float32(0.75)):
            total[None] = old
            plain(xs)
            assert _bits(total[None]) == _bits(f32_sum(np.concatenate([[old], xs]))), (name, old)
        total[None] = -0.0
        guarded(xs)
        kept = -xs[np.arange(len(xs)) % 3 != 1]
        assert _bits(total[None]) == _bits(f32_sum(np.concatenate([[np.float32(-0.0)], kept]))), name
        total[None] = 0.25
        twice(xs)
        assert _bits(total[None]) == _bits(f32_sum(np.concatenate([[np.float32(0.25)], xs[:len(xs) // 2 * 2]]))), name


@pytest.mark.parametrize("threads", [1, 2])
@test(arch=[qd.cpu, qd.vulkan])
def test_a_window_of_chunks_flushes_before_its_f64_total_could_round(threads, req_arch):
    """The cpu adds a thread's chunk sums into one f64 total while all their addends, c chunks of
    1024, have s in [lo, hi] with c 1024 2^(hi - lo) <= 2^29 (every partial sum is then below
    2^(lo + 53) units: exact). Chunk 0 here has s = 119 only, chunk 1 s = 100 and 119 (a span of
    19, as much as one chunk takes): together they exceed the bound, and their total, about 2^54
    units, would round away the one unit that breaks a tie of the f32 rounding (the big addends
    sum to a tie whose even neighbour is below). The result must round up, as the reference does."""
    if req_arch == qd.vulkan and threads == 2:
        pytest.skip("cpu_max_num_threads is the cpu's")
    qd.init(arch=req_arch, deterministic=True, cpu_max_num_threads=threads, enable_fallback=False, offline_cache=False)
    total, plain = _same_address_sum()

    big = np.float32((2 ** 24 - 1) * 2.0 ** -30)  # s = 119 (units of 2^-149), the largest significand
    # v: the big addends, 2045 of them and v 2^-30, sum to X 2^-30 with X a tie between two f32 whose
    # lower neighbour is even (the exact sum then rounds up only by the unit below)
    v = next(v for v in range(2 ** 23, 2 ** 24) if (lambda X, e: X % 2 ** e == 2 ** (e - 1) and (X >> e) % 2 == 0)(
        2045 * (2 ** 24 - 1) + v, (2045 * (2 ** 24 - 1) + v).bit_length() - 24))
    xs = np.zeros(64 * 1024, np.float32)  # 64 chunks: both first ones in one thread's share (the rest zeros)
    xs[:2048] = big
    xs[0] = np.float32(v * 2.0 ** -30)
    xs[1024], xs[1025] = np.float32((2 ** 23 + 1) * 2.0 ** -49), np.float32(-(2.0 ** -26))  # s = 100: +1 unit of 2^-49
    want = f32_sum(np.concatenate([[np.float32(0.0)], xs[:2048]]))
    tie = f32_sum(np.concatenate([[np.float32(0.0)], xs[:1024], xs[1026:2048]]))  # without the unit: to even
    assert _bits(want) == _bits(tie) + 1  # (the unit decides)
    total[None] = 0.0
    plain(xs)
    assert _bits(total[None]) == _bits(want)


@test(arch=[qd.cpu, qd.vulkan], deterministic=True)
def test_histogram_updates_staged_per_chunk_on_the_cpu():
    """On the cpu a small field's updates in the loop body itself are decoded a chunk at a time into
    per-chunk arrays (`.el`, `.sw`, ... in the IR) and applied after the chunk; one under an if keeps
    the direct update, and so does a loop with a `continue`. All give the reference's bits."""
    xs = _data(17, 5003)
    bins = np.random.default_rng(17).integers(0, 40, len(xs)).astype(np.int32)
    h = qd.field(qd.f32, shape=40)
    g = qd.field(qd.f32, shape=40)

    @qd.kernel
    def k(x: qd.types.ndarray(dtype=qd.f32, ndim=1), b: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        for i in range(x.shape[0]):
            h[b[i]] += x[i]
            if x[i] > 0:
                g[b[i]] -= x[i]

    @qd.kernel
    def skipping(x: qd.types.ndarray(dtype=qd.f32, ndim=1), b: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        for i in range(x.shape[0]):
            if x[i] < 0:
                continue  # (an iteration may skip the update: not staged)
            h[b[i]] += x[i]

    cpu = qd.lang.impl.current_cfg().arch == qd.cpu
    ir = qd.compile(k, xs, bins).ir
    assert ("deterministic chunk" in ir) == cpu and (".sw[" in ir) == cpu
    assert ".sw[" not in qd.compile(skipping, xs, bins).ir
    h.fill(0.5)
    g.fill(-0.0)
    k(xs, bins)
    for j in range(40):
        assert _bits(h.to_numpy()[j]) == _bits(f32_sum(np.concatenate([[np.float32(0.5)], xs[bins == j]]))), j
        sel = xs[(bins == j) & (xs > 0)]
        assert _bits(g.to_numpy()[j]) == _bits(f32_sum(np.concatenate([[np.float32(-0.0)], -sel]))), j
    h.fill(0.0)
    skipping(xs, bins)
    for j in range(40):
        sel = xs[(bins == j) & (xs >= 0)]
        assert _bits(h.to_numpy()[j]) == _bits(f32_sum(np.concatenate([[np.float32(0.0)], sel]))), j


def _histogram_cases():
    """(addends, bins) for 40 bins: runs of 1024 iterations (one cpu chunk) whose magnitudes keep to
    a few exponents (the cpu's per-bin f64 sums), change range (a flush), or do not fit."""
    rng = np.random.default_rng(31)
    top = np.float32(2.0 ** -80 * (2 - 2.0 ** -23))  # the largest significand
    odd = np.float32(2.0 ** -80 * (1 + 2.0 ** -23))

    def span(k, count):  # into bin 0: the largest significand 2^k above an odd smallest, per 1024
        v = np.full(count, top * np.float32(2.0 ** k), np.float32)
        v[::1024] = odd
        return v, np.zeros(count, np.int32)

    uniform = rng.random(5003, dtype=np.float32)
    ranges = np.concatenate([rng.random(1024, dtype=np.float32) * np.float32(2.0 ** (-60 if c % 2 else 10))
                             for c in range(6)])
    zeros = np.where(np.arange(2048) % 5 == 0, 0.0, -0.0).astype(np.float32)
    zbins = (np.arange(2048) % 7).astype(np.int32) + np.where(np.arange(2048) % 5 == 0, 0, 20).astype(np.int32)
    cancel = np.repeat(rng.random(512, dtype=np.float32), 2) * np.tile(np.float32([1, -1]), 512)
    specials = rng.random(4096, dtype=np.float32)
    specials[600], specials[2300], specials[2301] = np.inf, np.nan, -np.inf
    big = (rng.random(2048, dtype=np.float32) + np.where(np.arange(2048) < 1024, 0, 1)).astype(np.float32)
    big[1024:] *= np.float32(2.0 ** 99)  # (then from 2^99: decoded)
    tie = rng.random(512, dtype=np.float32)  # bin 0: 1 + 2^-22 + 2^-24 (a tie) and 2^-60s that break it
    tie[0], tie[1], tie[2:10] = 1 + 2.0 ** -22, 2.0 ** -24, 2.0 ** -60
    return {
        "uniform": (uniform, rng.integers(0, 40, len(uniform)).astype(np.int32)),
        "a range per chunk": (ranges, rng.integers(0, 40, len(ranges)).astype(np.int32)),
        "span 19, two chunks": span(19, 2048),
        "span 13, 65536 in one bin": span(13, 65536),
        "span 20": span(20, 2048),
        "zeros": (zeros, zbins),
        "cancelling pairs": (cancel, (np.arange(1024) // 2 % 40).astype(np.int32)),
        "inf and NaN": (specials, rng.integers(0, 40, 4096).astype(np.int32)),
        "smallest past 2^98": (big, rng.integers(0, 40, 2048).astype(np.int32)),
        "a tie the 2^-60s decide": (tie, np.where(np.arange(512) < 10, 0, np.arange(512) % 39 + 1).astype(np.int32)),
        "a short tail": (uniform[:300] - np.float32(0.5), rng.integers(0, 40, 300).astype(np.int32)),
    }


@pytest.mark.parametrize("threads", [1, 2])
@test(arch=[qd.cpu, qd.vulkan])
def test_histogram_chunks_of_few_exponents_give_the_reference(threads, req_arch):
    """On the cpu a small field's staged updates go to per-bin f64 sums while the addends since the
    last flush keep to few exponents (flushed when the range changes, and at the end); other chunks
    are decoded. Each case, with the old values 0.5 and -0.0, gives the reference's bits per bin."""
    if req_arch == qd.vulkan and threads == 2:
        pytest.skip("cpu_max_num_threads is the cpu's")
    qd.init(arch=req_arch, deterministic=True, cpu_max_num_threads=threads, enable_fallback=False, offline_cache=False)
    h = qd.field(qd.f32, shape=40)

    @qd.kernel
    def k(x: qd.types.ndarray(dtype=qd.f32, ndim=1), b: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        for i in range(x.shape[0]):
            h[b[i]] += x[i]

    for name, (xs, bins) in _histogram_cases().items():
        for old in (np.float32(0.5), np.float32(-0.0)):
            h.fill(old)
            k(xs, bins)
            got = h.to_numpy()
            for j in range(40):
                assert _bits(got[j]) == _bits(f32_sum(np.concatenate([[old], xs[bins == j]]))), (name, old, j)

def _f32(exponent_field, significand):
    return np.uint32((exponent_field << 23) | (significand & 0x7FFFFF)).view(np.float32)


def _carry_cases():
    """Element 7: values whose unsplit limb values (significand << 31) fill limb 4's slot to
    2^63 - 2^32, then limb 3's values wrap their slot, whose carry wraps limb 4's (in iteration
    order: one thread sees it). Element 4000: the largest values (limb 7), 1100 positive then 1099
    negative: limb 7's slot wraps up, then down (its carries are the last slot's)."""
    top = (1 << 24) - 1
    limb4 = [_f32(160, top)] * 255 + [_f32(160, (1 << 23) + 127), _f32(160, (1 << 23) + 126)]
    limb3 = [_f32(128, top)] * 257
    big = _f32(254, top)
    xs = np.array(limb4 + limb3 + [big] * 1100 + [-big] * 1099, np.float32)
    at = np.array([7] * (len(limb4) + len(limb3)) + [4000] * 2199, np.int32)
    return xs, at


@pytest.mark.parametrize("threads", [1, 2])
@test(arch=[qd.cpu, qd.vulkan])
def test_scatter_slots_that_wrap_carry_exactly(threads, req_arch):
    """A large field's updates on the cpu and Vulkan add each value unsplit to one slot per limb,
    kept wrapped to 64 bits, and carry a wrap into the next limb's slot (a carry may wrap that one
    too; the last slot only gets carries; Vulkan's final pass reads only the slots the flags say were
    updated, carries' included): on the cpu staged per chunk (the loop body's), or at once (under an
    if, or in a loop with a continue). The sums are the reference's bits, with old values 0.5 and
    -0.0."""
    if req_arch == qd.vulkan and threads == 2:
        pytest.skip("cpu_max_num_threads is the cpu's")
    qd.init(arch=req_arch, deterministic=True, cpu_max_num_threads=threads, enable_fallback=False, offline_cache=False)
    y = qd.field(qd.f32, shape=SCATTER)

    @qd.kernel
    def staged(x: qd.types.ndarray(dtype=qd.f32, ndim=1), at: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        for i in range(x.shape[0]):
            y[at[i]] += x[i]

    @qd.kernel
    def guarded(x: qd.types.ndarray(dtype=qd.f32, ndim=1), at: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        for i in range(x.shape[0]):
            if at[i] >= 0:
                y[at[i]] += x[i]

    @qd.kernel
    def skipping(x: qd.types.ndarray(dtype=qd.f32, ndim=1), at: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        for i in range(x.shape[0]):
            if at[i] < 0:
                continue
            y[at[i]] += x[i]

    xs, at = _carry_cases()
    cpu = req_arch == qd.cpu
    for k in (staged, guarded, skipping):
        ir = qd.compile(k, xs, at).ir
        assert (".seen" in ir) == (cpu and k is staged) and "while true" in ir, k  # (the carries' loop, Vulkan's too)
        for old in (np.float32(0.5), np.float32(-0.0)):
            y.fill(old)
            k(xs, at)
            got = y.to_numpy()
            for j in (7, 4000):
                assert _bits(got[j]) == _bits(f32_sum(np.concatenate([[old], xs[at == j]]))), (k, old, j)
            assert np.all(_bits(np.delete(got, [7, 4000])) == _bits(old))


def _one_slot_cases():
    """(old value, addends) per element: sums held in one slot (Vulkan's single-slot rounding: ties,
    subnormals, an overflow to inf, cancellation to +0.0, -0.0 alone, an old value in the addends'
    limb), and sums that are not (addends in two limbs, an old value in another limb, a slot past
    2^62, a carry, inf / NaN, also after the slot they add 0 to holds a value, none at all)."""
    f = np.float32
    return [(f(1.0), [2.0 ** -24]), (f(1.0), [3 * 2.0 ** -24]), (f(0.0), [2.0 ** -149, 2.0 ** -149]),
            (f(-0.0), [3e38, 3e38]), (f(-0.0), [1.5, -1.5]), (f(-0.0), [-0.0, -0.0]), (f(0.0), [-0.0]),
            (f(-1.5), [0.25, 0.125]), (f(2.0 ** -130), [2.0 ** -140]), (f(0.0), [-(2.0 ** 100)]),
            (f(0.0), [1.0, 2.0 ** -60]), (f(2.0 ** 40), [1.0]), (f(0.0), [3.9] * 150), (f(0.0), [3.9] * 1200),
            (f(1.0), [np.inf]), (f(0.0), [np.nan, 1.0]), (f(0.0), [1e38] * 5 + [np.nan] + [1e38] * 5),
            (f(1.0), [3e38] * 4 + [-np.inf]), (f(-0.0), []), (f(np.nan), []), (f(7.0), [])]


@pytest.mark.parametrize("size", [3000, 70000])
@test(arch=[qd.cpu, qd.vulkan], deterministic=True)
def test_one_slot_sums_and_the_listed_rest(size, req_arch):
    """Vulkan's final pass rounds an element whose updates (and old value) sit in one slot from that
    slot alone, and lists the other elements for a second task that rounds all their limbs: both
    kinds in one field, in both layouts (3000: flags beside the limbs; 70000: rows), the reference's
    bits, untouched elements unchanged. (On the cpu the same sums go its own ways.)"""
    y = qd.field(qd.f32, shape=size)
    cases = _one_slot_cases()
    where = [(j * 997) % size for j in range(len(cases))]
    y0 = np.full(size, 0.75, np.float32)
    xs, at = [], []
    for (old, adds), w in zip(cases, where):
        y0[w] = old
        xs += adds
        at += [w] * len(adds)
    order = np.random.default_rng(size).permutation(len(xs))
    xs, at = np.array(xs, np.float32)[order], np.array(at, np.int32)[order]

    @qd.kernel
    def k(x: qd.types.ndarray(dtype=qd.f32, ndim=1), w: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        for i in range(x.shape[0]):
            y[w[i]] += x[i]

    if req_arch == qd.vulkan:  # the loop, the single-slot pass, the listed elements' pass
        assert qd.compile(k, xs, at).ir.count("(parallel range-for)") == 3
    for _ in range(2):
        y.from_numpy(y0)
        k(xs, at)
        got = y.to_numpy()
        for (old, adds), w in zip(cases, where):
            want = f32_sum(np.array([old] + adds, np.float32))
            assert (np.isnan(got[w]) and np.isnan(want)) or _bits(got[w]) == _bits(want), (old, adds[:3], got[w], want)
        assert np.all(_bits(np.delete(got, where)) == _bits(np.float32(0.75)))
    # On Vulkan the final passes zero the slots they read (and a last task the summary and the
    # list), and the runtime fills them at the kernel's first launch only: other elements and
    # other slots next (the addends 2^40 times larger, one element on), the reference's bits again.
    y.from_numpy(y0)
    k((xs * np.float32(2.0 ** 40)).astype(np.float32), (at + 1) % size)
    got = y.to_numpy()
    for (old, adds), w in zip(cases, where):
        w1 = (w + 1) % size
        want = f32_sum(np.array([y0[w1]] + [a * 2.0 ** 40 for a in adds], np.float32))
        assert (np.isnan(got[w1]) and np.isnan(want)) or _bits(got[w1]) == _bits(want), (w1, adds[:3], got[w1], want)



def _single_slot_kernel_cases():
    """(old value, addends) per element, every addend of magnitude 2^-30 .. 4 (all in one slot, limb
    3), +-0.0, inf or NaN: one-slot sums (a tie, cancellation to +0.0 from an old -0.0, -0.0 alone,
    +0.0 and -0.0 added to -0.0 / +0.0), and elements listed for the second task (an old value in
    another limb, a subnormal one, a slot past 2^62, inf / NaN, none at all)."""
    f = np.float32
    return [(f(1.0), [2.0 ** -24]), (f(1.0), [3 * 2.0 ** -24]), (f(-0.0), [1.5, -1.5]), (f(-0.0), [1.5, 0.5, -2.0]),
            (f(-0.0), [-0.0, -0.0]), (f(-0.0), [0.0]), (f(0.0), [-0.0]), (f(-1.5), [0.25, 0.125]),
            (f(2.0 ** 40), [1.0]), (f(2.0 ** -130), [2.0 ** -30]), (f(0.0), [3.9] * 150), (f(1.0), [np.inf]),
            (f(0.0), [np.nan, 1.0]), (f(1.0), [3.0] * 4 + [-np.inf]), (f(-0.0), []), (f(np.nan), []), (f(7.0), [])]


def _lowest_slot_kernel_cases():
    """The same with every addend below 2^-117 (slot 0): normal results (the smallest normal f32 among
    them) rounded from the slot, subnormal ones listed."""
    f = np.float32
    return [(f(0.0), [2.0 ** -120, 2.0 ** -120]), (f(2.0 ** -125), [-(2.0 ** -126)]), (f(0.0), [2.0 ** -149, 2.0 ** -149]),
            (f(0.0), [2.0 ** -126, -(2.0 ** -127)]), (f(-0.0), [2.0 ** -140, -(2.0 ** -140)]), (f(2.0 ** -118), [-(2.0 ** -118)]),
            (f(1.0), [2.0 ** -118])]


@pytest.mark.parametrize("size", [3000, 70000])
@test(arch=[qd.cpu, qd.vulkan], deterministic=True)
def test_sums_of_a_kernel_whose_updates_all_go_to_one_slot(size):
    """Vulkan: where every update of the kernel adds to one slot (its summary word has that slot's
    bit alone), the final pass loads that slot per element and rounds it with the old value, and
    lists the others; also with slot 0 (subnormal results listed) and a kernel whose addends are
    only zeros and infinities (no slot at all).
    The reference's bits, untouched elements (-0.0 and 0.75) unchanged. (The cpu takes its own ways.)"""
    y = qd.field(qd.f32, shape=size)

    @qd.kernel
    def k(x: qd.types.ndarray(dtype=qd.f32, ndim=1), w: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        for i in range(x.shape[0]):
            y[w[i]] += x[i]

    every = _single_slot_kernel_cases()
    for cases in (every, _lowest_slot_kernel_cases(), [c for c in every if all(a == 0 or np.isinf(a) for a in c[1])]):
        where = [(j * 997) % size for j in range(len(cases))]
        y0 = np.where(np.arange(size) % 2 == 0, np.float32(0.75), np.float32(-0.0)).astype(np.float32)
        xs, at = [], []
        for (old, adds), w in zip(cases, where):
            y0[w] = old
            xs += adds
            at += [w] * len(adds)
        order = np.random.default_rng(size).permutation(len(xs))
        xs, at = np.array(xs, np.float32)[order], np.array(at, np.int32)[order]
        for _ in range(2):
            y.from_numpy(y0)
            k(xs, at)
            got = y.to_numpy()
            for (old, adds), w in zip(cases, where):
                want = f32_sum(np.array([old] + adds, np.float32))
                assert (np.isnan(got[w]) and np.isnan(want)) or _bits(got[w]) == _bits(want), (old, adds[:3], got[w], want)
            assert np.all(_bits(np.delete(got, where)) == _bits(np.delete(y0, where)))

BUCKETED = 70001  # > 2^16 elements: the cpu's bucketed scatter; nine buckets of at most 2^13, the last short


def _scatter_want(y0, xs, at, sign=1):
    """Each element's f32_sum of its old value and its addends (sign times the values at it)."""
    order = np.argsort(at, kind="stable")
    groups = np.split(xs[order], np.cumsum(np.bincount(at, minlength=len(y0)))[:-1])
    want = np.where(np.isnan(y0), np.float32(np.nan), y0).astype(np.float32)  # (no addends: f32_sum([old]))
    for k in np.unique(at):
        want[k] = f32_sum(np.concatenate([[y0[k]], np.float32(sign) * groups[k]]))
    return want


def _bucketed_cases():
    """(name, old values, addends, elements): addends within a few exponents (the f64 sums), spread
    over 50 (the limbs), infinities and NaNs among them and a NaN old value nobody updates, and 20000
    updates of one element within 16 exponents (too many for an f64 sum)."""
    rng = np.random.default_rng(5)
    n = 40000
    at = rng.integers(0, BUCKETED, n).astype(np.int32)
    y0 = np.linspace(-1, 1, BUCKETED).astype(np.float32)
    few = (rng.uniform(0.5, 4, n) * np.where(rng.random(n) < 0.5, 1, -1)).astype(np.float32)
    special = few.copy()
    special[[3, 4, 5]] = [np.inf, -np.inf, np.nan]
    y_nan = y0.copy()
    untouched = np.setdiff1d(np.arange(BUCKETED), at)
    y_nan[untouched[len(untouched) // 2]] = np.nan
    crowd = at.copy()
    crowd[:20000] = 8191  # the first bucket's last element
    wide16 = (rng.uniform(1, 2, n) * np.exp2(rng.integers(0, 16, n))).astype(np.float32)
    return [("few exponents", y0, few, at), ("wide", np.zeros(BUCKETED, np.float32), _data(3, n), at),
            ("specials", y_nan, special, at), ("crowded", y0, wide16, crowd)]


@pytest.mark.parametrize("threads", [1, 2])
@test(arch=[qd.cpu, qd.vulkan])
def test_large_scatter_buckets_give_the_reference(threads, req_arch):
    """On the cpu a scatter into a large field (the loop's only effect besides its own elements'
    writes) runs bucketed: its updates sorted into buckets of consecutive elements, each bucket summed
    by one thread, exactly in f64 where its values allow, else in limbs. Every element is the
    reference's bits, with add and sub; a loop that also sums into a second field, or one with a
    block_dim, keeps the field's accumulators."""
    if req_arch == qd.vulkan and threads == 2:
        pytest.skip("cpu_max_num_threads is the cpu's")
    qd.init(arch=req_arch, deterministic=True, cpu_max_num_threads=threads, enable_fallback=False, offline_cache=False)
    y = qd.field(qd.f32, shape=BUCKETED)
    z = qd.field(qd.f32, shape=BUCKETED)
    w = qd.field(qd.f32, shape=40000)

    @qd.kernel
    def add(x: qd.types.ndarray(dtype=qd.f32, ndim=1), at: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        for i in range(x.shape[0]):
            y[at[i]] += x[i]
            w[i] = 2 * x[i]  # the iteration's own element: still bucketed

    @qd.kernel
    def sub(x: qd.types.ndarray(dtype=qd.f32, ndim=1), at: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        for i in range(x.shape[0]):
            y[at[i]] -= x[i]

    @qd.kernel
    def two(x: qd.types.ndarray(dtype=qd.f32, ndim=1), at: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        for i in range(x.shape[0]):
            y[at[i]] += x[i]
            z[at[i]] += x[i]

    @qd.kernel
    def blocks(x: qd.types.ndarray(dtype=qd.f32, ndim=1), at: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        qd.loop_config(block_dim=64)
        for i in range(x.shape[0]):
            y[at[i]] += x[i]

    cpu = req_arch == qd.cpu
    for name, y0, xs, at in _bucketed_cases():
        wants = {1: _scatter_want(y0, xs, at), -1: _scatter_want(y0, xs, at, -1)}
        for k, sign in ((add, 1), (sub, -1), (two, 1), (blocks, 1)):
            if k in (two, blocks) and name != "few exponents":
                continue
            assert (".bucket.f64" in qd.compile(k, xs, at).ir) == (cpu and k in (add, sub)), (name, k)
            want = wants[sign]
            for _ in range(2):
                y.from_numpy(y0)
                z.from_numpy(y0)
                k(xs, at)
                assert np.array_equal(_bits(y.to_numpy()), _bits(want)), (name, k, int((_bits(y.to_numpy()) != _bits(want)).sum()))
            if k is add:
                assert np.array_equal(w.to_numpy(), 2 * xs, equal_nan=True)
            if k is two:
                assert np.array_equal(_bits(z.to_numpy()), _bits(want))


@test(arch=[qd.cpu, qd.vulkan], deterministic=True)
def test_large_scatter_into_a_2d_field():
    """A 2-D field's buckets are ranges of its row-major flat index (301 x 233 elements: the last
    bucket short, rows across bucket boundaries); updates at both indices computed."""
    y = qd.field(qd.f32, shape=(301, 233))
    _, y0, xs, at = _bucketed_cases()[1]  # (the limbs' data)
    flat = at % (301 * 233)

    @qd.kernel
    def k(x: qd.types.ndarray(dtype=qd.f32, ndim=1), at: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        for i in range(x.shape[0]):
            y[at[i] // 233, at[i] % 233] += x[i]

    y0 = np.linspace(-3, 3, 301 * 233).astype(np.float32)
    y.from_numpy(y0.reshape(301, 233))
    k(xs, flat)
    assert (".bucket.f64" in qd.compile(k, xs, flat).ir) == (qd.lang.impl.current_cfg().arch == qd.cpu)
    assert np.array_equal(_bits(y.to_numpy().reshape(-1)), _bits(_scatter_want(y0, xs, flat)))


def test_large_scatter_without_scratch_gives_the_reference(monkeypatch):
    """Where the runtime has no scratch memory for the buckets (here a 1-byte limit) the loop's
    accumulators per element take over, zeroed by a task of the kernel's at each launch (the runtime
    skips them): the same bits launch after launch."""
    monkeypatch.setenv("QD_CPU_MAX_SCRATCH_BYTES", "1")
    try:
        qd.init(arch=qd.cpu, deterministic=True, enable_fallback=False, offline_cache=False)
        y = qd.field(qd.f32, shape=BUCKETED)

        @qd.kernel
        def add(x: qd.types.ndarray(dtype=qd.f32, ndim=1), at: qd.types.ndarray(dtype=qd.i32, ndim=1)):
            for i in range(x.shape[0]):
                y[at[i]] += x[i]

        for name, y0, xs, at in _bucketed_cases()[:3]:
            ir = qd.compile(add, xs, at).ir
            assert ".bucket.f64" in ir and ir.count("without scratch") == 3, ir  # (zeroing, the loop, rounding)
            want = _scatter_want(y0, xs, at)
            for _ in range(3):
                y.from_numpy(y0)
                add(xs, at)
                assert np.array_equal(_bits(y.to_numpy()), _bits(want)), name
    finally:
        qd.reset()


@test(arch=[qd.cpu, qd.vulkan], deterministic=True)
def test_sub_kernel_variables_vectors_and_argument_indices():
    xs = _data(7, 3001)
    v = qd.Vector.field(2, qd.f32, shape=())
    t = qd.field(qd.f32, shape=4)
    g = qd.field(qd.f32, shape=(3, 5))

    @qd.kernel
    def k(x: qd.types.ndarray(dtype=qd.f32, ndim=1), a: qd.i32, b: qd.i32) -> qd.f32:
        s = 0.0
        for i in range(x.shape[0]):
            s += x[i]
            qd.atomic_sub(t[a], x[i])
            t[b] += 2 * x[i]
            v[None] += qd.Vector([x[i], -3 * x[i]])
            g[i % 3, i % 5] -= x[i]
        return s

    t.fill(0.5)
    got = k(xs, 1, 3)
    assert _bits(got) == _bits(f32_sum(np.concatenate([[np.float32(0)], xs])))
    tt = t.to_numpy()
    assert _bits(tt[1]) == _bits(f32_sum(np.concatenate([[np.float32(0.5)], -xs])))
    assert _bits(tt[3]) == _bits(f32_sum(np.concatenate([[np.float32(0.5)], np.float32(2) * xs])))
    assert _bits(tt[[0, 2]]).tolist() == _bits([0.5, 0.5]).tolist()
    vv = v.to_numpy()
    assert _bits(vv[0]) == _bits(f32_sum(np.concatenate([[np.float32(0)], xs])))
    assert _bits(vv[1]) == _bits(f32_sum(np.concatenate([[np.float32(0)], np.float32(-3) * xs])))
    gg = g.to_numpy()
    idx = np.arange(len(xs))
    for r in range(3):
        for c in range(5):
            assel = xs[(idx % 3 == r) & (idx % 5 == c)]
            assert _bits(gg[r, c]) == _bits(f32_sum(np.concatenate([[np.float32(0)], -assel]))), (r, c)


@test(arch=[qd.cpu, qd.vulkan], deterministic=True)
def test_counter_steps_sub_and_integer_atomics():
    """Data-dependent steps, atomic_sub, a slot bound check that only guards a store, and integer
    atomics (already order-independent) next to the counter."""
    rng = np.random.default_rng(3)
    xs = rng.integers(-5, 6, N).astype(np.int32)
    out = qd.ndarray(qd.i32, 4 * N)
    c = qd.field(qd.i32, shape=())
    d = qd.field(qd.i32, shape=())
    m = qd.field(qd.i32, shape=())

    @qd.kernel
    def k(x: qd.types.ndarray(dtype=qd.i32, ndim=1), out: qd.types.ndarray(dtype=qd.i32, ndim=1), cap: qd.i32):
        for i in range(x.shape[0]):
            if x[i] > 0:
                s = qd.atomic_add(c[None], x[i])
                if s < cap:
                    out[s] = i
            elif x[i] < 0:
                qd.atomic_sub(d[None], 1)
            qd.atomic_max(m[None], x[i] * 3)

    outs = np.full(4 * N, -1, np.int32)
    out.from_numpy(outs)
    c[None], d[None], m[None] = 2, 100, -1000
    cap = 4 * N
    k(xs, out, cap)
    steps = np.where(xs > 0, xs, 0).astype(np.int64)
    slots = 2 + np.concatenate([[0], np.cumsum(steps)[:-1]])
    want = np.full(4 * N, -1, np.int32)
    for i in np.flatnonzero(xs > 0):
        if slots[i] < cap:
            want[slots[i]] = i
    assert np.array_equal(out.to_numpy(), want)
    assert c[None] == 2 + steps.sum()
    assert d[None] == 100 - int((xs < 0).sum())
    assert m[None] == 15


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("batched", [True, False])
def test_cpu_compaction_chunks_run_as_batches(threads, batched):
    """The cpu: each chunk of a compaction whose body has the batched form (a constant step) lists its
    passing elements a batch of 1024 at a time and takes their slots from the chunk's running slot,
    in order. Ranges with chunks of 0 or 1 elements, of 1100 and 1101 (a batch and a part), a range
    from an argument, atomic_sub, no element or every element passing: the slots of a serial run,
    also with the batching off (subgroup_aggregation=False: one slot at a time)."""
    qd.init(arch=qd.cpu, deterministic=True, cpu_max_num_threads=threads, subgroup_aggregation=batched,
            offline_cache=False)
    n = 4096 * 1100 + 4093
    x = qd.ndarray(qd.f32, n)
    out = qd.ndarray(qd.i32, n + 8)
    c = qd.field(qd.i32, shape=())

    @qd.kernel
    def up(x: qd.types.ndarray(dtype=qd.f32, ndim=1), out: qd.types.ndarray(dtype=qd.i32, ndim=1), lo: qd.i32,
           hi: qd.i32):
        for i in range(lo, hi):
            if x[i] > 0.5:
                out[qd.atomic_add(c[None], 3) // 3] = i

    @qd.kernel
    def down(x: qd.types.ndarray(dtype=qd.f32, ndim=1), out: qd.types.ndarray(dtype=qd.i32, ndim=1), lo: qd.i32,
             hi: qd.i32):
        for i in range(lo, hi):
            if x[i] < 0.25:
                out[n - qd.atomic_sub(c[None], 2) // 2] = i * 2

    for k in (up, down):
        assert ("batched compaction in loops" in qd.compile(k, x, out, 0, 1).ir) == batched
    rng = np.random.default_rng(7)
    xs = rng.random(n, dtype=np.float32)
    x.from_numpy(xs)
    for lo, hi, fill in [(0, n, None), (5, 1005, None), (3, 3, None), (17, n - 9, None), (0, n, 1.0), (0, n, 0.375)]:
        if fill is not None:
            x.from_numpy(np.full(n, fill, np.float32))
        vals = xs if fill is None else np.full(n, fill, np.float32)
        idx = np.arange(lo, hi)
        for k, keep, c0, slot, value in [(up, vals[lo:hi] > 0.5, 6, lambda r: 2 + r, idx),
                                         (down, vals[lo:hi] < 0.25, 2 * n, lambda r: r, 2 * idx)]:
            out.from_numpy(np.full(n + 8, -1, np.int32))
            c[None] = c0
            k(x, out, lo, hi)
            passing = value[keep]
            want = np.full(n + 8, -1, np.int32)
            want[slot(np.arange(len(passing)))] = passing
            assert np.array_equal(out.to_numpy(), want), (k, lo, hi, fill)
            step = 3 if k is up else -2
            assert c[None] == c0 + step * len(passing), (k, lo, hi, fill)
        x.from_numpy(xs)


def test_per_kernel_option():
    """@qd.kernel(deterministic=...) overrides qd.init: the same exchange loop is rejected under True
    and compiles under False."""
    qd.init(arch=qd.cpu, deterministic=True)
    c = qd.field(qd.i32, shape=())

    def loop():
        for i in range(10):
            qd.atomic_exchange(c[None], i)

    qd.kernel(deterministic=False)(loop)()
    with pytest.raises(qd.QuadrantsTypeError, match="deterministic mode"):
        qd.kernel(loop)()
    qd.init(arch=qd.cpu)
    c = qd.field(qd.i32, shape=())
    with pytest.raises(qd.QuadrantsTypeError, match="deterministic mode"):
        qd.kernel(deterministic=True)(loop)()
    qd.kernel(loop)()
    with pytest.raises(TypeError, match="deterministic"):
        qd.kernel(deterministic=1)


# --- what the mode rejects -------------------------------------------------------------------

@test(arch=[qd.cpu, qd.vulkan], deterministic=True)
def test_accumulators_past_1_gib_are_refused_naming_the_line():
    """A scatter into a field whose exact accumulators would pass 1 GiB of temps (10 i64 slots per
    element, 11 on Vulkan: 14 M elements on both) is a compile error naming the update's line."""
    y = qd.field(qd.f32, shape=14_000_000)

    @qd.kernel
    def scatter(x: qd.types.ndarray(dtype=qd.f32, ndim=1), p: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        for i in range(x.shape[0]):
            y[p[i]] += x[i]  # the refused update

    with pytest.raises(qd.QuadrantsTypeError, match=r"(?s)the refused update.*more than 1 GiB \(10 x 8 bytes per "
                                                    r"element of the target fields, 11 x 8 on Vulkan\)"):
        scatter(np.ones(4, np.float32), np.arange(4, dtype=np.int32))


REJECTED = {
    "exchange": ("qd.atomic_exchange(ci[None], i)", "qd.atomic_exchange"),
    "cas spin lock": ("while qd.atomic_cas(ci[None], 0, 1) != 0:\n                pass", "qd.atomic_cas"),
    "inc": ("qd.atomic_inc(cu[None], 7)", "qd.atomic_inc"),
    "float old value": ("y = qd.atomic_add(cf[None], 1.0)\n            xs[i] = y", "old value is used"),
    "min old value for control flow": ("if qd.atomic_min(ci[None], i) > 3:\n                xs[i] = 1.0",
                                       "old value is used"),
    "slot decides a counter": ("s = qd.atomic_add(ci[None], 1)\n            if s < 5:\n"
                               "                qd.atomic_add(ci[None], 1)", "decides which counter updates"),
    "counter bitwise old value": ("xs[qd.atomic_or(ci[None], 1)] = 1.0", "old value is used"),
    "float max": ("qd.atomic_max(cf[None], xs[i])", "float min / max"),
    "f64 add": ("qd.atomic_add(cd[None], 1.0)", "f32 only"),
    "float mul": ("qd.atomic_mul(cf[None], xs[i])", "qd.atomic_mul on floats"),
    "fence": ("qd.atomic_fence()", "qd.atomic_fence"),
    "atomic load": ("xs[i] = qd.atomic_load(cf[None])", "qd.atomic_load"),
    "ordered atomic": ("qd.atomic_add(ci[None], 1, memory_order=qd.MemoryOrder.Release)", "with an ordering"),
    "read of the target": ("cf[None] += xs[i]\n            xs[i] = cf[None]", "is read or written"),
    "ndarray scatter": ("nd[ix[i]] += xs[i]", "use a field"),
    "compaction reads what it writes": ("s = qd.atomic_add(ci[None], 1)\n            xs[s] = xs[i]",
                                        "reads memory it writes"),
    "subgroup op": ("xs[i] = qd.simt.subgroup.reduce_add(xs[i])", "depends on the block / subgroup layout"),
    "shared array": ("sh = qd.simt.block.SharedArray((4,), qd.i32)\n            qd.atomic_add(sh[i % 4], 1)",
                     "block-shared array"),
}


@pytest.mark.parametrize("case", sorted(REJECTED))
@test(arch=[qd.cpu, qd.vulkan], deterministic=True)
def test_scheduling_dependent_patterns_are_errors_naming_the_line(case, tmp_path):
    body, message = REJECTED[case]
    src = f'''
import quadrants as qd
ci = qd.field(qd.i32, shape=())
cu = qd.field(qd.u32, shape=())
cf = qd.field(qd.f32, shape=())
cd = qd.field(qd.f64, shape=())

@qd.kernel
def k(xs: qd.types.ndarray(dtype=qd.f32, ndim=1), nd: qd.types.ndarray(dtype=qd.f32, ndim=1),
      ix: qd.types.ndarray(dtype=qd.i32, ndim=1)):
    for i in range(xs.shape[0]):
            {body}
'''
    path = tmp_path / f"det_{case.replace(' ', '_')}.py"
    path.write_text(src)
    ns = {}
    exec(compile(src, str(path), "exec"), ns)
    a = np.zeros(16, np.float32)
    with pytest.raises(qd.QuadrantsTypeError) as e:
        ns["k"](a, a, np.zeros(16, np.int32))
    text = str(e.value)
    assert "deterministic mode" in text and message in text, text
    assert any(line.strip() in text for line in body.split("\n") if line.strip() not in ("", "pass")), text
    assert f"{path}:" in text, text


def test_gpu_code_of_the_rewrites_compiles():
    """cuda / amdgpu get the same lowering (run_passes is shared): the kernels compile, and ptxas
    accepts the PTX where it is installed."""
    import re
    import shutil
    import tempfile
    qd.init(arch=qd.cpu, deterministic=True)
    pat = Patterns(128)
    ptxas = shutil.which("ptxas") or ("/usr/local/cuda/bin/ptxas" if os.access("/usr/local/cuda/bin/ptxas", os.X_OK)
                                      else None)
    args = {"same_address": (pat.x,), "histogram": (pat.x, pat.b), "scatter": (pat.x, pat.p),
            "compaction": (pat.x, pat.out)}
    for k in pat.kernels:
        for arch in (qd.cuda, qd.amdgpu):
            a = qd.compile(k, *args[k.__name__], arch=arch)
            assert re.search(r": i64 = global (load )?atomic", a.ir)  # the limbs / the chunks' counts
            if arch == qd.cuda and ptxas:
                with tempfile.TemporaryDirectory() as d:
                    src = os.path.join(d, "k.ptx")
                    with open(src, "w") as f:
                        f.write(a.ptx)
                    sm = re.search(r"\.target (sm_\d+)", a.ptx).group(1)
                    r = subprocess.run([ptxas, f"-arch={sm}", "-o", os.path.join(d, "k.cubin"), src],
                                       capture_output=True, text=True)
                    assert r.returncode == 0, r.stderr


@test(arch=[qd.cpu], deterministic=True)
def test_algorithms_integer_reduce_runs_float_reduce_is_an_error():
    from quadrants import algorithms as A

    def make(dtype):
        @qd.kernel
        def run(a: qd.types.ndarray(dtype=dtype, ndim=1), o: qd.types.ndarray(dtype=dtype, ndim=1),
                s: qd.types.ndarray(dtype=qd.u32, ndim=1), n: qd.i32):
            A.reduce_add(a, o, s, n, dtype, 2)
        return run

    s = qd.ndarray(qd.u32, (A.reduce_scratch_slots(5000, 2),))
    a, o = qd.ndarray(qd.i32, (5000,)), qd.ndarray(qd.i32, (1,))
    a.from_numpy(np.arange(5000, dtype=np.int32) - 77)
    make(qd.i32)(a, o, s, 5000)
    assert o.to_numpy()[0] == int((np.arange(5000) - 77).sum())
    with pytest.raises(qd.QuadrantsTypeError, match="reduce_add on f32") as e:
        make(qd.f32)(qd.ndarray(qd.f32, (5000,)), qd.ndarray(qd.f32, (1,)), s, 5000)
    assert "A.reduce_add(a, o, s, n, dtype, 2)" in str(e.value)


@test(arch=[qd.cpu, qd.vulkan], deterministic=True)
def test_several_loops_computed_components_and_inner_loops():
    """Two loops into one field (the second's old values are the first's results), a vector
    component chosen at run time (the front end keeps the unused old value in a variable), an
    inner loop, and -0.0 kept where every addend is -0.0."""
    n = 5000
    xs = _data(5, n)
    x = qd.field(qd.f32, shape=n)
    x.from_numpy(xs)
    y = qd.field(qd.f32, shape=7)
    v = qd.Vector.field(3, qd.f32, shape=11)
    z = qd.field(qd.f32, shape=4)

    @qd.kernel
    def k() -> qd.f32:
        s = 0.0
        for i in range(n):
            y[i % 7] += x[i]
        for i in range(n):
            y[i % 5] -= x[i]
            for j in range(3):
                v[(i * 3) % 11][j] += x[i] * (j + 1)
        for i in range(n // 10):
            for j in range(10):
                s += x[i * 10 + j]
                z[i % 4] += -0.0
        return s

    y.fill(-0.0)
    z.fill(-0.0)
    v.fill(0.0)
    r = k()
    idx = np.arange(n)
    for b in range(7):
        want = f32_sum(np.concatenate([[np.float32(-0.0)], xs[idx % 7 == b]]))
        if b < 5:
            want = f32_sum(np.concatenate([[want], -xs[idx % 5 == b]]))
        assert _bits(y.to_numpy()[b]) == _bits(want), b
    vv = v.to_numpy()
    for e in range(11):
        for j in range(3):
            part = (xs[(idx * 3) % 11 == e] * np.float32(j + 1)).astype(np.float32)
            assert _bits(vv[e, j]) == _bits(f32_sum(np.concatenate([[np.float32(0)], part]))), (e, j)
    assert _bits(r) == _bits(f32_sum(np.concatenate([[np.float32(0)], xs])))
    assert _bits(z.to_numpy()).tolist() == [0x80000000] * 4


@test(arch=[qd.vulkan])
def test_vulkan_stable_compaction_runs_chunks_on_subgroups(req_arch):
    """On Vulkan a compaction loop of the batched form runs each chunk on a subgroup's lanes together
    (both passes: `batched count`, `batched compaction` in the IR), its slots in iteration order
    for short and long ranges, none or every element passing; a block_dim that is not a multiple of
    the subgroup size keeps the one-thread chunks."""
    qd.init(arch=req_arch, deterministic=True, enable_fallback=False, offline_cache=False)
    c = qd.field(qd.i32, shape=())

    def make(bd):
        @qd.kernel
        def comp(x: qd.types.ndarray(dtype=qd.f32, ndim=1), out: qd.types.ndarray(dtype=qd.i32, ndim=1)):
            if qd.static(bd):
                qd.loop_config(block_dim=bd)
            for i in range(x.shape[0]):
                if x[i] > 0.5:
                    out[qd.atomic_add(c[None], 1)] = i * 3 + 1
        return comp

    comp, odd = make(0), make(3)
    rng = np.random.default_rng(5)
    x0 = rng.random(1000).astype(np.float32)
    assert "deterministic chunk, batched compaction" in qd.compile(comp, x0, np.zeros(1000, np.int32)).ir
    assert "deterministic chunk, batched count" in qd.compile(comp, x0, np.zeros(1000, np.int32)).ir
    assert "batched" not in qd.compile(odd, x0, np.zeros(1000, np.int32)).ir
    for k in (comp, odd):
        for n in (0, 1, 7, 129, 1000, 4097, 70001, 1 << 20):
            for xs in (rng.random(n).astype(np.float32), np.zeros(n, np.float32), np.ones(n, np.float32)):
                out = np.full(n + 5, -1, np.int32)
                c[None] = 5  # the first slot
                k(xs, out)
                want = np.full(n + 5, -1, np.int32)
                hits = np.flatnonzero(xs > 0.5)
                want[5:5 + len(hits)] = hits * 3 + 1
                assert c[None] == 5 + len(hits)
                assert np.array_equal(out, want), (n, k)
