"""Recursive @qd.real_func: compiled as a real function (an IR function, a call statement, an LLVM
function and call) per specialization of its qd.template() arguments; non-recursive ones are
inlined. The passes that move memory operations leave loops with calls alone; SPIR-V targets and
autodiff refuse the kernel naming the call."""
import math
import os
import shutil
import subprocess
import tempfile

import numpy as np
import pytest

import quadrants as qd
from test_utils import test

PTXAS = shutil.which("ptxas") or next((p for p in ("/usr/local/cuda/bin/ptxas",) if os.access(p, os.X_OK)), None)


def _range_sum(f):
    @qd.real_func
    def part(x: qd.template(), l: qd.i32, r: qd.i32) -> qd.i32:
        if l == r:
            return x[l]
        else:
            return part(x, l, (l + r) // 2) + part(x, (l + r) // 2 + 1, r)

    @qd.kernel
    def total(lo: qd.i32, hi: qd.i32) -> qd.i32:
        return part(f, lo, hi)

    return total


@test(arch=qd.cpu)
def test_sum_over_a_range_by_halves():
    f = qd.field(qd.i32, shape=100)
    f.from_numpy(np.arange(100, dtype=np.int32) * 3 + 1)
    total = _range_sum(f)
    assert total(0, 99) == sum(i * 3 + 1 for i in range(100))
    assert total(17, 17) == 52
    assert total(10, 60) == sum(i * 3 + 1 for i in range(10, 61))
    ir = qd.compile(total, 0, 99).ir
    assert "call part(" in ir and "function part(i32, i32) -> (i32):" in ir


@test(arch=qd.cpu)
def test_template_argument_fixes_a_specialization():
    a = qd.field(qd.i32, shape=8)
    b = qd.field(qd.i32, shape=8)
    a.from_numpy(np.arange(8, dtype=np.int32))
    b.from_numpy(np.arange(8, dtype=np.int32) * 100)

    @qd.real_func
    def suffix(x: qd.template(), i: qd.i32) -> qd.i32:
        if i == 8:
            return 0
        return x[i] + suffix(x, i + 1)

    @qd.kernel
    def both() -> qd.i32:
        return suffix(a, 0) * 1000000 + suffix(b, 3)

    assert both() == 28 * 1000000 + 100 * (3 + 4 + 5 + 6 + 7)
    assert qd.compile(both).ir.count("\nfunction suffix(") == 2


def _sum_to_kernel():
    """A kernel returning sum_to(n), a recursive real_func: 0 + 1 + ... + n."""
    @qd.real_func
    def sum_to(n: qd.i32) -> qd.i32:
        if n == 0:
            return 0
        return sum_to(n - 1) + n

    @qd.kernel
    def run(n: qd.i32) -> qd.i32:
        return sum_to(n)

    return run


@test(arch=qd.cpu)
def test_deep_recursion():
    run = _sum_to_kernel()
    assert run(100) == 5050
    assert run(0) == 0
    assert run(20000) == 20000 * 20001 // 2  # (LLVM makes this tail recursion a loop)

    @qd.real_func
    def h(n: qd.i32) -> qd.u32:
        r = qd.u32(0)
        if n > 0:
            r = h(n - 1) * qd.u32(3) + qd.u32(n)  # not a tail call: one frame per level
        return r

    out = qd.field(qd.u32, shape=16)

    @qd.kernel
    def deep(d: qd.i32):
        for i in range(16):
            out[i] = h(d + i)

    def want(n):
        r = 0
        for k in range(1, n + 1):
            r = (r * 3 + k) % 2**32
        return r

    deep(20000)  # on the worker threads' stacks
    assert out.to_numpy().tolist() == [want(20000 + i) for i in range(16)]
    fn = qd.compile(deep, 1).llvm_ir.split("define internal")[1].split("\n}")[0]
    assert "call " in fn  # the optimised function still calls itself


@test(arch=qd.cpu)
def test_fib_from_every_iteration_of_a_parallel_loop():
    @qd.real_func
    def fib(n: qd.i32) -> qd.i64:
        r = qd.i64(n)
        if n >= 2:
            r = fib(n - 1) + fib(n - 2)
        return r

    out = qd.field(qd.i64, shape=25)

    @qd.kernel
    def run():
        for i in range(25):  # the worker threads' stacks: each iteration recurses 24 deep
            out[i] = fib(i)

    run()
    want = [0, 1]
    while len(want) < 25:
        want.append(want[-1] + want[-2])
    assert out.to_numpy().tolist() == want


@test(arch=qd.cpu)
def test_mutual_recursion():
    @qd.real_func
    def is_even(n: qd.i32) -> qd.i32:
        if n == 0:
            return 1
        return is_odd(n - 1)

    @qd.real_func
    def is_odd(n: qd.i32) -> qd.i32:
        if n == 0:
            return 0
        return is_even(n - 1)

    out = qd.field(qd.i32, shape=(2, 40))

    @qd.kernel
    def run():
        for i in range(40):
            out[0, i] = is_even(i)
            out[1, i] = is_odd(i)

    run()
    assert out.to_numpy()[0].tolist() == [1 - i % 2 for i in range(40)]
    assert out.to_numpy()[1].tolist() == [i % 2 for i in range(40)]


@test(arch=qd.cpu)
def test_recursion_through_a_plain_func():
    @qd.func
    def collatz_step(n: qd.i64) -> qd.i64:
        m = n // 2
        if n % 2 == 1:
            m = 3 * n + 1
        return steps(m)

    @qd.real_func
    def steps(n: qd.i64) -> qd.i64:
        r = qd.i64(0)
        if n != 1:
            r = collatz_step(n) + 1
        return r

    @qd.kernel
    def run(n: qd.i64) -> qd.i64:
        return collatz_step(n) + 1  # the cycle is entered through the plain func

    def want(n):
        k = 0
        while n != 1:
            n = n // 2 if n % 2 == 0 else 3 * n + 1
            k += 1
        return k

    for n in (2, 3, 27, 97, 871):
        assert run(n) == want(n)


@test(arch=qd.cpu)
def test_early_return_from_a_loop():
    # The first index >= start whose value is `want`, searched one recursion level per 4 elements.
    f = qd.field(qd.i32, shape=64)
    vals = np.arange(64, dtype=np.int32) % 10
    f.from_numpy(vals)

    @qd.real_func
    def find(start: qd.i32, want: qd.i32) -> qd.i32:
        if start >= 64:
            return -1
        for k in range(4):
            if f[start + k] == want:
                return start + k
        return find(start + 4, want)

    @qd.kernel
    def run(start: qd.i32, want: qd.i32) -> qd.i32:
        return find(start, want)

    for start, want in [(0, 0), (0, 9), (13, 3), (40, 7), (61, 5), (0, 11)]:
        hits = [i for i in range(start, 64) if vals[i] == want]
        assert run(start, want) == (hits[0] if hits else -1)


@test(arch=qd.cpu)
def test_writes_a_field_and_returns_nothing():
    f = qd.field(qd.i32, shape=50)

    @qd.real_func
    def fill(i: qd.i32, v: qd.i32):
        if i < 50:
            f[i] = v
            fill(i + 1, v * 2 % 1000)

    @qd.kernel
    def run(v: qd.i32):
        fill(0, v)

    run(3)
    want, v = [], 3
    for _ in range(50):
        want.append(v)
        v = v * 2 % 1000
    assert f.to_numpy().tolist() == want


@test(arch=qd.cpu)
def test_vector_matrix_and_struct_values():
    vec2 = qd.types.vector(2, qd.f32)
    pair = qd.types.struct(n=qd.i32, m=qd.math.mat2)

    @qd.real_func
    def power(m: qd.math.mat2, n: qd.i32) -> qd.math.mat2:
        r = qd.math.mat2(1, 0, 0, 1)
        if n > 0:
            r = m @ power(m, n - 1)
        return r

    @qd.real_func
    def walk(p: vec2, n: qd.i32) -> pair:
        r = pair(n=0, m=qd.math.mat2(p[0], p[1], 0, 0))
        if n > 0:
            q = walk(p * 2, n - 1)
            r = pair(n=q.n + 1, m=q.m)
        return r

    point = qd.types.struct(x=qd.f32, y=vec2, k=qd.i16)

    @qd.real_func
    def grow(p: point, n: qd.i32) -> point:
        if n > 0:
            return grow(point(x=p.x * 2, y=p.y + 1, k=p.k + 1), n - 1)
        return p

    @qd.kernel
    def run() -> qd.types.vector(10, qd.f32):
        m = power(qd.math.mat2(1, 1, 1, 0), 10)  # Fibonacci numbers
        w = walk(vec2(1.5, -2), 3)
        g = grow(point(x=0.75, y=vec2(0, -1), k=5), 4)
        return qd.Vector([m[0, 0], m[0, 1], m[1, 1], w.n, w.m[0, 0], w.m[0, 1], w.m[1, 0], g.x, g.y[1], g.k])

    assert run().tolist() == [89, 55, 34, 3, 12, -16, 0, 12, 3, 9]


@test(arch=qd.cpu)
def test_non_recursive_real_func_is_inlined():
    @qd.real_func
    def add(a: qd.i32, b: qd.i32) -> qd.i32:
        return a + b

    @qd.kernel
    def run(x: qd.i32) -> qd.i32:
        return add(x, 2)

    assert run(5) == 7
    assert "call" not in qd.compile(run, 5).ir


@pytest.mark.parametrize("rewrite", ["privatize", "scatter", "unique"])
@test(arch=qd.cpu)
def test_loops_with_calls_keep_their_atomics(rewrite):
    """privatize_reductions / partition_scatters / demote_unique_atomics leave a loop with a call
    as written (the call may read or write the same memory); the loop without the call is
    rewritten, and both give the exact sums."""
    n = 1 << 16 if rewrite == "scatter" else 4096
    dest = qd.field(qd.i32, shape=() if rewrite == "privatize" else (1 << 20) if rewrite == "scatter" else n)

    @qd.real_func
    def bits(m: qd.i32) -> qd.i32:
        r = 0
        if m > 0:
            r = bits(m // 2) + 1
        return r

    @qd.kernel
    def with_call():
        for i in range(n):
            if qd.static(rewrite == "privatize"):
                dest[None] += bits(i)
            elif qd.static(rewrite == "scatter"):
                dest[i * 257 % (1 << 20)] += bits(i)
            else:
                dest[i] += bits(i)

    @qd.kernel
    def without_call():
        for i in range(n):
            if qd.static(rewrite == "privatize"):
                dest[None] += i % 7
            elif qd.static(rewrite == "scatter"):
                dest[i * 257 % (1 << 20)] += i % 7
            else:
                dest[i] += i % 7

    marker = {"privatize": "before its share of the loop", "scatter": "with scratch"}.get(rewrite)
    plain, ir = qd.compile(without_call).ir, qd.compile(with_call).ir
    if marker:
        assert marker in plain and marker not in ir
    else:  # the unique element's atomic became a plain read-modify-write
        assert "global atomic add" not in plain and "global atomic add" in ir
    for fn, term in ((with_call, lambda i: int(i).bit_length()), (without_call, lambda i: i % 7)):
        dest.fill(0)
        fn()
        want = np.zeros(dest.shape or (1,), np.int64)
        for i in range(n):
            want[0 if rewrite == "privatize" else i * 257 % (1 << 20) if rewrite == "scatter" else i] += term(i)
        assert (dest.to_numpy().reshape(-1) == want).all()


@test(arch=qd.cpu, debug=True)
def test_bounds_checked_inside_the_function():
    f = qd.field(qd.i32, shape=10)

    @qd.real_func
    def down(i: qd.i32) -> qd.i32:
        r = 0
        if i >= -1:
            r = f[i] + down(i - 1)
        return r

    @qd.kernel
    def run(i: qd.i32) -> qd.i32:
        return down(i)

    f.fill(1)
    assert run(-2) == 0
    with pytest.raises(qd.QuadrantsOutOfBoundsError):
        run(9)  # reaches f[-1]


@test(arch=qd.cpu)
def test_errors_name_the_call():
    @qd.real_func
    def count(n: qd.i32) -> qd.f32:
        r = 0.0
        if n > 0:
            r = count(n - 1) + 1.0
        return r

    x = qd.field(qd.f32, shape=4, needs_grad=True)
    y = qd.field(qd.f32, shape=(), needs_grad=True)

    @qd.kernel
    def k():
        for i in range(4):
            y[None] += x[i] * count(i)

    for arch in ("vulkan", "metal"):
        with pytest.raises(qd.QuadrantsCompilationError,
                           match=rf"(?s)y\[None\] \+= x\[i\] \* count\(i\).*recursive qd.real_func is not supported "
                                 rf"on {arch}"):
            qd.compile(k, arch=arch)
    x.fill(2)
    k()
    assert y[None] == 2 * (0 + 1 + 2 + 3)
    with pytest.raises(qd.QuadrantsCompilationError, match=r"(?s)count\(i\).*automatic differentiation"):
        k.grad()

    @qd.real_func
    def by_ref(a: qd.ref(qd.i32), n: qd.i32):
        if n > 0:
            by_ref(a, n - 1)

    @qd.kernel
    def r():
        a = 0
        by_ref(a, 3)

    with pytest.raises(qd.QuadrantsSyntaxError, match="qd.ref parameter 'a' is not supported"):
        r()

    @qd.real_func
    def noisy(n: qd.i32) -> qd.f32:
        r = qd.random()
        if n > 0:
            r += noisy(n - 1)
        return r

    @qd.kernel
    def rnd() -> qd.f32:
        return noisy(3)

    with pytest.raises(qd.QuadrantsSyntaxError, match=r"(?s)r = qd.random\(\).*qd.random inside a recursive"):
        rnd()


@test(arch=qd.cpu, deterministic=True)
def test_deterministic_mode_refuses_atomics_behind_a_call():
    total = qd.field(qd.f32, shape=())

    @qd.real_func
    def add_down(n: qd.i32):
        if n > 0:
            total[None] += 0.5
            add_down(n - 1)

    @qd.kernel
    def k():
        for i in range(8):
            add_down(i)

    with pytest.raises(qd.QuadrantsTypeError, match="its atomics are not made deterministic"):
        k()

    @qd.kernel
    def serial():
        add_down(8)  # serial code: the atomics run in program order

    serial()
    assert total[None] == 4.0


def _ptxas(ptx, sm):
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "k.ptx")
        with open(src, "w") as fh:
            fh.write(ptx)
        r = subprocess.run([PTXAS, f"-arch={sm}", "-o", os.path.join(d, "k.cubin"), src], capture_output=True, text=True)
    assert r.returncode == 0, f"ptxas rejected the PTX:\n{r.stderr}\n{ptx}"


@test(arch=qd.cpu)
def test_gpu_code_calls_the_function():
    f = qd.field(qd.i32, shape=100)
    total = _range_sum(f)
    ptx = qd.compile(total, 0, 99, arch="cuda").ptx
    assert ".func" in ptx and "call" in ptx
    if PTXAS:
        for sm in ("sm_75", "sm_90"):
            _ptxas(ptx, sm)
    art = qd.compile(total, 0, 99, arch="amdgpu")
    assert any("_f0_part" in getattr(art, n) for n in dir(art) if isinstance(getattr(art, n), str))


@test(arch=[qd.vulkan, qd.metal])
def test_spirv_launch_refuses_recursion():
    run = _sum_to_kernel()
    with pytest.raises(qd.QuadrantsCompilationError, match=r"(?s)return sum_to\(n\)\n.*recursive qd.real_func is not "
                                                           r"supported on (vulkan|metal)"):
        run(3)
