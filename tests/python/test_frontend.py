"""The kernel front end: specialisation keys, numpy argument staging, Python-scope calls, argument
checks, early returns, vector annotations and clear errors (issue 9's repros)."""
import gc
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import quadrants as qd
from test_utils import test

CPU_VULKAN = [qd.cpu, qd.vulkan]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# --- template specialisation: keyed on the value, never on a reusable address ------------------
@test(arch=CPU_VULKAN)
def test_template_list_keyed_on_value():
    @qd.kernel
    def k2(lst: qd.template()) -> qd.i32:
        return lst[0] + lst[1]

    for i in range(4):
        assert k2([i, i]) == 2 * i  # a fresh temporary list each call
    assert k2.num_compilations == 4
    for i in range(4):
        assert k2([i, i]) == 2 * i
    assert k2.num_compilations == 4  # equal values share their compilation
    assert k2((1, 1)) == 2 and k2.num_compilations == 5  # a tuple is not a list


class _Cfg:
    def __init__(self, scale, offset=0.0):
        self.scale = scale
        self.offset = offset


@test(arch=CPU_VULKAN)
def test_template_object_keyed_on_attributes():
    @qd.kernel
    def k(cfg: qd.template()) -> qd.i32:
        return cfg.scale * 10

    for s in range(1, 40):
        assert k(_Cfg(s)) == s * 10
    assert k.num_compilations == 39
    for s in range(1, 40):
        assert k(_Cfg(s)) == s * 10
    assert k.num_compilations == 39
    c = _Cfg(3)
    assert k(c) == 30
    c.scale = 4  # a changed attribute selects the specialisation for its value
    assert k(c) == 40
    assert k.num_compilations == 39
    assert k(_Cfg(0.5, offset=-0.0)) == 5 and k(_Cfg(0.5, offset=1.0)) == 5  # offset is never read
    assert k.num_compilations == 40

    @qd.kernel
    def k_offset(cfg: qd.template()) -> qd.f32:
        return cfg.offset + 1.0

    assert k_offset(_Cfg(1, offset=-0.0)) == 1.0 and k_offset(_Cfg(1, offset=0.0)) == 1.0
    assert k_offset.num_compilations == 2  # -0.0 and 0.0 are different compile-time values


class _Sim:
    def __init__(self, n):
        self.x = qd.field(qd.f32, shape=n)
        self.frame = 0
        self.inner = _Cfg(2.0)

    def gain(self):
        return self.inner.scale * 3


@test(arch=CPU_VULKAN)
def test_template_object_guards_follow_what_the_kernel_reads():
    @qd.kernel
    def step(sim: qd.template()):
        for i in sim.x:
            sim.x[i] += sim.inner.scale

    a, b = _Sim(4), _Sim(4)
    for _ in range(3):
        step(a)
        a.frame += 1  # not read by the kernel: no recompilation
    assert step.num_compilations == 1 and a.x.to_numpy().tolist() == [6.0] * 4
    step(b)  # another field: its own specialisation
    assert step.num_compilations == 2
    a.inner.scale = 0.5  # read by the kernel: a new specialisation
    step(a)
    assert step.num_compilations == 3 and a.x.to_numpy().tolist() == [6.5] * 4
    a.inner = _Cfg(0.5)  # an equal object in its place: the same one
    step(a)
    assert step.num_compilations == 3 and a.x.to_numpy().tolist() == [7.0] * 4

    @qd.kernel
    def gained(sim: qd.template()) -> qd.f32:
        return sim.gain()  # a method reads whatever it likes: every attribute is part of the key

    assert gained(a) == 1.5
    a.frame += 1
    assert gained(a) == 1.5 and gained.num_compilations == 2
    a.inner.scale = 1.0
    assert gained(a) == 3.0 and gained.num_compilations == 3

    @qd.func
    def read(c):
        return c.scale

    @qd.kernel
    def through_func(sim: qd.template()) -> qd.f32:
        c = sim.inner
        return read(c) + len(sim.x.shape)

    assert through_func(a) == 2.0
    a.frame += 1
    assert through_func(a) == 2.0 and through_func.num_compilations == 1
    a.inner.scale = 4.0
    assert through_func(a) == 5.0 and through_func.num_compilations == 2


class _Knobs:
    def __init__(self, v, t):
        self.v = v
        self.t = t


@test(arch=CPU_VULKAN)
def test_template_object_value_guards_after_repeated_launches():
    # A guard remembers the last immutable value that held (skipping its key on the next launch):
    # every replacement, by an equal value, another value, another type or None, is keyed again.
    @qd.kernel
    def k(cfg: qd.template()) -> qd.f32:
        return qd.static(len(str(cfg.v))) + qd.static(cfg.t[0]) * 10.0  # None 4, 0 1, False 5

    c = _Knobs(0, (1.0, 2.0))
    assert k(c) == 11.0 and k.num_compilations == 1
    c.v = None  # None is a value too (the memo's "nothing yet" is not None)
    assert k(c) == 14.0 and k(c) == 14.0 and k.num_compilations == 2
    c.v = 0
    for _ in range(3):
        assert k(c) == 11.0
    assert k.num_compilations == 2
    c.v = False  # equal to 0 but a bool: its own compile-time value
    assert k(c) == 15.0 and k.num_compilations == 3
    c.v = None
    assert k(c) == 14.0 and k.num_compilations == 3
    c.t = (1.0, 2.0)  # an equal tuple, another object
    assert k(c) == 14.0 and k.num_compilations == 3
    c.t = (3.0, 2.0)
    assert k(c) == 34.0 and k.num_compilations == 4
    c.t = [3.0, 2.0]  # a list is not a tuple
    assert k(c) == 34.0 and k.num_compilations == 5
    c.t[0] = 4.0  # mutable: keyed at every launch
    assert k(c) == 44.0 and k.num_compilations == 6


@test(arch=CPU_VULKAN)
def test_template_field_specialisation_dies_with_the_field():
    @qd.kernel
    def touch(g: qd.template()):
        for i in g:
            g[i] += 1.0

    for n in range(20):
        g = qd.field(qd.f32, shape=8 + n % 2)
        touch(g)
        touch(g)
        assert g.to_numpy().tolist() == [2.0] * (8 + n % 2)
        del g
        gc.collect()
        assert len(touch.cache) == 0  # the specialisation went with its field
    assert touch.num_compilations == 20


@test(arch=CPU_VULKAN)
def test_template_function_argument():
    @qd.func
    def double(x):
        return x * 2

    @qd.func
    def triple(x):
        return x * 3

    @qd.kernel
    def apply(f: qd.template(), x: qd.i32) -> qd.i32:
        return f(x)

    assert apply(double, 5) == 10 and apply(triple, 5) == 15 and apply(double, 6) == 12
    assert apply.num_compilations == 2


# --- numpy arguments: aliasing, read-only inputs, sizes ------------------------------------------
@test(arch=CPU_VULKAN)
def test_aliased_numpy_args_share_one_buffer():
    @qd.kernel
    def two(a: qd.types.ndarray(dtype=qd.f32, ndim=1), b: qd.types.ndarray(dtype=qd.f32, ndim=1)):
        for i in range(a.shape[0]):
            a[i] += 1.0
            b[i] += 10.0

    x = np.zeros(4, np.float32)
    two(x, x)
    assert x.tolist() == [11.0] * 4
    z = np.zeros(8, np.float32)
    v = z[::2]
    two(v, v)
    assert z.tolist() == [11, 0, 11, 0, 11, 0, 11, 0]
    two(z[::2], z[::2])  # two view objects of the same memory
    assert z.tolist() == [22, 0, 22, 0, 22, 0, 22, 0]
    two(z[::2], z[1::2])  # interleaved views do not overlap
    assert z.tolist() == [23, 10, 23, 10, 23, 10, 23, 10]
    w = np.zeros(6, np.float32)
    with pytest.raises(ValueError, match="overlapping memory"):
        two(w[0:4], w[2:6])
    assert w.tolist() == [0.0] * 6


@test(arch=CPU_VULKAN)
def test_read_only_numpy_inputs():
    @qd.kernel
    def total(a: qd.types.ndarray(dtype=qd.i32, ndim=1)) -> qd.i32:
        s = 0
        for i in range(a.shape[0]):
            s += a[i]
        return s

    @qd.kernel
    def bump(a: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        for i in range(a.shape[0]):
            a[i] += 1

    x = np.arange(10, dtype=np.int32)
    x.flags.writeable = False
    assert total(x) == 45
    assert total(np.broadcast_to(np.int32(3), (5,))) == 15  # a read-only, zero-stride view
    with pytest.raises(ValueError, match="read-only"):
        bump(x)
    assert x.tolist() == list(range(10))
    # The same read-only array twice is fine when the kernel only reads.

    @qd.kernel
    def dot(a: qd.types.ndarray(dtype=qd.i32, ndim=1), b: qd.types.ndarray(dtype=qd.i32, ndim=1)) -> qd.i32:
        s = 0
        for i in range(a.shape[0]):
            s += a[i] * b[i]
        return s

    assert dot(x, x) == sum(i * i for i in range(10))
    assert dot(x[:5], x[2:7]) == sum(i * (i + 2) for i in range(5))  # overlapping, but only read


@test(arch=CPU_VULKAN)
def test_numpy_arg_over_2pow31_elements_is_refused():
    @qd.kernel
    def n(a: qd.types.ndarray(dtype=qd.i8, ndim=1)) -> qd.i32:
        return a.shape[0]

    big = np.lib.stride_tricks.as_strided(np.zeros(1, np.int8), shape=((1 << 31) + 10,), strides=(0,))
    with pytest.raises(ValueError, match=r"2\*\*31 - 1 elements"):
        n(big)
    big2 = np.lib.stride_tricks.as_strided(np.zeros(1, np.int8), shape=(1 << 16, 1 << 15), strides=(0, 0))

    @qd.kernel
    def n2(a: qd.types.ndarray(dtype=qd.i8, ndim=2)) -> qd.i32:
        return a.shape[0]

    with pytest.raises(ValueError, match="elements"):
        n2(big2)
    assert n(np.zeros(5, np.int8)) == 5
    with pytest.raises(ValueError, match="at most 2\\*\\*31 - 1"):
        qd.field(qd.i8, shape=(1 << 16, 1 << 15))


# --- Python-scope methods inside kernels ---------------------------------------------------------
@test(arch=CPU_VULKAN)
def test_fill_inside_a_kernel_is_a_loop():
    f = qd.field(qd.i32, shape=4)
    g = qd.Vector.field(2, qd.f32, shape=(3, 2))

    @qd.kernel
    def step(v: qd.i32):
        f.fill(0)  # resets the field on every call
        for i in range(4):
            f[i] += v
        g.fill(v * 0.5)

    for _ in range(3):
        step(2)
        assert f.to_numpy().tolist() == [2] * 4
    assert g.to_numpy().tolist() == [[[1.0, 1.0]] * 2] * 3

    @qd.kernel
    def clear(a: qd.types.ndarray(dtype=qd.i32, ndim=2), v: qd.i32):
        a.fill(v)

    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    clear(a, 7)
    assert a.tolist() == [[7] * 4] * 3


@test(arch=CPU_VULKAN)
def test_python_scope_calls_inside_kernels_are_refused():
    f = qd.field(qd.i32, shape=4)

    @qd.kernel
    def k1():
        a = f.to_numpy()  # noqa: F841

    @qd.kernel
    def k2():
        f.from_numpy(np.zeros(4, np.int32))

    @qd.kernel
    def k3():
        g = qd.field(qd.i32, shape=4)  # noqa: F841

    @qd.kernel
    def k4(a: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        a.to_numpy()

    for k, line in ((k1, "a = f.to_numpy()"), (k2, "f.from_numpy(np.zeros(4, np.int32))"),
                    (k3, "g = qd.field(qd.i32, shape=4)")):
        with pytest.raises(qd.QuadrantsSyntaxError, match="Python-scope operation") as info:
            k()
        assert line in str(info.value) and __file__ in str(info.value)
    with pytest.raises(qd.QuadrantsSyntaxError, match="Python-scope operation"):
        k4(np.zeros(4, np.int32))
    assert f.to_numpy().tolist() == [0] * 4


# --- scalar arguments --------------------------------------------------------------------------
@test(arch=CPU_VULKAN)
def test_scalar_argument_must_fit():
    @qd.kernel
    def k(n: qd.i32) -> qd.i32:
        return n

    @qd.kernel
    def ku(n: qd.u8) -> qd.i32:
        return n

    @qd.kernel
    def kf(x: qd.f32) -> qd.f32:
        return x

    assert k(2**31 - 1) == 2**31 - 1 and k(-2**31) == -2**31 and k(np.int64(7)) == 7 and k(3.0) == 3
    assert k(True) == 1
    # An integer keeps its low bits, as in Quadrants (a C cast); beyond 64 bits it is an OverflowError.
    assert k(2**40 + 5) == 5 and k(-2**31 - 1) == 2**31 - 1 and k(2**64 - 1) == -1
    with pytest.raises(OverflowError, match=r"argument 'n' = 18446744073709551616 does not fit in 64 bits"):
        k(2**64)
    with pytest.raises(OverflowError):
        k(-2**63 - 1)
    with pytest.raises(qd.QuadrantsRuntimeTypeError, match=r"Argument \(0,\) \(type=<class 'float'>\) cannot be "
                       r"converted into required type i32: kernel 'k' argument 'n' expects a number \(i32, an "
                       r"integer\), got 2.7"):
        k(2.7)
    with pytest.raises(qd.QuadrantsRuntimeTypeError, match=r"type=<class 'str'>.*expects a number \(i32\), got '3'"):
        k("3")
    assert ku(255) == 255 and ku(-1) == 255 and ku(256) == 0 and ku(-2**63) == 0
    assert kf(1.5) == 1.5 and kf(2) == 2.0
    with pytest.raises(OverflowError):
        kf(1e300)


def test_init_values_are_checked():
    for kwargs, exc, match in (({"default_fp": qd.i32}, ValueError, r"default_fp=i32\) must be one of qd.f32, qd.f64"),
                               ({"default_ip": qd.f32}, ValueError, r"default_ip=f32\) must be one of qd.i32, qd.i64"),
                               ({"default_ip": "x"}, TypeError, "is not a dtype"),
                               ({"cpu_max_num_threads": -3}, ValueError, "must not be negative"),
                               ({"cpu_max_num_threads": 2.5}, TypeError, "expects an int")):
        with pytest.raises(exc, match=match):
            qd.init(arch=qd.cpu, **kwargs)
    qd.init(arch=qd.cpu, default_ip=qd.i64, default_fp=qd.f64, cpu_max_num_threads=1)

    @qd.kernel
    def k(x: float) -> float:
        return x * 0.5

    assert k(3.0) == 1.5
    qd.reset()


# --- recursion, shapes, literals ---------------------------------------------------------------
@test(arch=CPU_VULKAN)
def test_recursive_func_is_a_clear_error():
    @qd.func
    def fact(n):
        r = 1
        if n > 1:
            r = n * fact(n - 1)
        return r

    @qd.kernel
    def k(n: qd.i32) -> qd.i32:
        return fact(n)

    with pytest.raises(qd.QuadrantsSyntaxError, match="recursion is not supported: @qd.func 'fact'") as info:
        k(5)
    assert "r = n * fact(n - 1)" in str(info.value)

    @qd.func
    def static_fact(n: qd.template()):  # recursion that ends at compile time is fine
        r = 1
        if qd.static(n > 1):
            r = n * static_fact(n - 1)
        return r

    @qd.kernel
    def k2() -> qd.i32:
        return static_fact(5)

    assert k2() == 120


@test(arch=CPU_VULKAN)
def test_shapes():
    assert qd.field(qd.f32, shape=np.int64(4)).shape == (4,)
    assert qd.field(qd.f32, shape=(np.int32(2), 3)).shape == (2, 3)
    assert qd.ndarray(qd.f32, shape=np.int64(3)).shape == (3,)
    for bad, exc, match in ((-5, ValueError, "must not be negative"), ((4, -2), ValueError, "must not be negative"),
                            (4.5, TypeError, "must be an int or a tuple of ints"), ("4", TypeError, "tuple of ints")):
        with pytest.raises(exc, match=match):
            qd.field(qd.f32, shape=bad)
        with pytest.raises(exc, match=match):
            qd.ndarray(qd.f32, shape=bad)


@test(arch=CPU_VULKAN)
def test_u64_literals():
    @qd.kernel
    def mask(x: qd.u64) -> qd.u64:
        return x & 0xFFFFFFFFFFFFFFFF

    @qd.kernel
    def splitmix(x: qd.u64) -> qd.u64:
        return x * 0x9E3779B97F4A7C15

    @qd.kernel
    def top(x: qd.u64) -> qd.u64:
        y: qd.u64 = 0x8000000000000000
        return (x | y) >> 60

    assert mask(12345) == 12345
    assert mask(2**64 - 2) == 2**64 - 2
    assert splitmix(12345) == (12345 * 0x9E3779B97F4A7C15) % 2**64
    assert top(3) == 8


# --- narrow integer `+=`: plain read-modify-write where no other iteration can touch it --------
@test(arch=CPU_VULKAN)
def test_narrow_int_augassign_unique_or_serial():
    @qd.kernel
    def brighten(a: qd.types.ndarray(dtype=qd.u8, ndim=1)):
        for i in range(a.shape[0]):
            a[i] += 10

    x = np.array([0, 1, 250, 255], np.uint8)
    brighten(x)
    assert x.tolist() == [10, 11, 4, 9]  # u8 wraps
    h = qd.field(qd.i16, shape=4)

    @qd.kernel
    def serial(n: qd.i32):
        h[0] += 7  # kernel scope: runs once
        qd.loop_config(serialize=True)
        for i in range(n):
            h[i % 4] -= 1
        for i in range(1):  # a one-iteration loop's index is unique too
            h[3] *= 2

    serial(10)
    assert h.to_numpy().tolist() == [4, -3, -2, -4]


@test(arch=CPU_VULKAN)
def test_f16_augassign_unique_or_serial():
    x = qd.field(qd.f16, shape=8)

    @qd.kernel
    def k():
        for i in x:
            x[i] += 1.5
        x[0] += 1.0

    k()
    k()
    assert x.to_numpy().tolist() == [5.0] + [3.0] * 7


@test(arch=CPU_VULKAN)
def test_narrow_int_augassign_shared_is_a_word_cas_loop():
    """Several iterations update one u8 element: a CAS loop on the 32-bit word holding it
    (tests/python/test_narrow_atomics.py)."""
    hist = qd.field(qd.u8, shape=5)

    @qd.kernel
    def k(a: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        for i in range(a.shape[0]):
            hist[a[i] % 4] += 1

    hist[4] = 200
    k(np.arange(1001, dtype=np.int32))
    assert hist.to_numpy().tolist() == [251, 250, 250, 250, 200]


# --- returns -------------------------------------------------------------------------------------
@test(arch=CPU_VULKAN)
def test_func_early_return():
    @qd.func
    def sign(x):
        if x > 0:
            return 1
        return -1

    @qd.func
    def first_at_least(a, n, v):
        for i in range(n):
            if a[i] >= v:
                return i
        return -1

    @qd.func
    def find2(n, target):
        for i in range(n):
            j = 0
            while True:
                if i * j == target:
                    return i * 100 + j
                if j >= n:
                    break
                j += 1
        return -1

    @qd.func
    def classify(x: qd.f32) -> qd.f32:
        if x < 0:
            return 0
        elif x > 10:
            return 10
        y = x * 2.0
        if y > 10:
            return y - 10
        return y

    @qd.func
    def unrolled(x):
        for k in qd.static(range(4)):
            if x == k:
                return k * 10
        return 99

    @qd.func
    def vec(x):
        if x > 0:
            return qd.Vector([x, x + 1])
        return qd.Vector([0, 0])

    a = qd.field(qd.i32, shape=8)

    @qd.kernel
    def k(x: qd.i32, y: qd.f32) -> qd.i32:
        return sign(x) * 1000000 + first_at_least(a, 8, x) * 10000 + find2(5, x) + qd.i32(classify(y)) * 100000 \
            + unrolled(x % 5) * 10 + vec(x).sum()

    a.from_numpy(np.array([0, 2, 4, 6, 8, 10, 12, 14], np.int32))

    def expected(x, y):
        s = 1 if x > 0 else -1
        f = next((i for i in range(8) if 2 * i >= x), -1)
        f2 = next((i * 100 + j for i in range(5) for j in range(6) if i * j == x), -1)
        c = 0 if y < 0 else 10 if y > 10 else (2 * y - 10 if 2 * y > 10 else 2 * y)
        u = (x % 5) * 10 if x % 5 < 4 else 99
        v = 2 * x + 1 if x > 0 else 0
        return s * 1000000 + f * 10000 + f2 + int(c) * 100000 + u * 10 + v

    for x, y in ((0, -1.0), (3, 2.0), (4, 4.0), (12, 7.0), (-2, 12.0), (9, 5.0), (16, 3.0), (20, 1.0)):
        assert k(x, y) == expected(x, y), (x, y)

    @qd.func
    def mixed(x: qd.f32):
        if x > 0:
            return 1
        return x

    @qd.kernel
    def bad(x: qd.f32) -> qd.f32:
        return mixed(x)

    with pytest.raises(qd.QuadrantsTypeError, match="annotate the @qd.func's return type"):
        bad(1.0)


@test(arch=CPU_VULKAN)
def test_func_early_return_in_a_parallel_loop():
    @qd.func
    def collatz_steps(n):
        steps = 0
        while True:
            if n == 1:
                return steps
            if steps >= 1000:
                return -1
            n = n // 2 if n % 2 == 0 else 3 * n + 1
            steps += 1

    @qd.func
    def clamp01(v):
        if v < 0.0:
            return qd.Vector([0.0, 1.0])
        if v > 1.0:
            return qd.Vector([1.0, 0.0])
        return qd.Vector([v, 1.0 - v])

    out = qd.field(qd.i32, shape=64)
    w = qd.Vector.field(2, qd.f32, shape=64)

    @qd.kernel
    def k():
        for i in range(64):
            out[i] = collatz_steps(i + 1)
            w[i] = clamp01((i - 16) / 32.0)

    k()

    def steps(n):
        s = 0
        while n != 1:
            n, s = (n // 2 if n % 2 == 0 else 3 * n + 1), s + 1
        return s

    assert out.to_numpy().tolist() == [steps(i + 1) for i in range(64)]
    v = [min(max((i - 16) / 32.0, 0.0), 1.0) for i in range(64)]
    assert np.allclose(w.to_numpy(), [[x, 1.0 - x] for x in v])


@test(arch=CPU_VULKAN)
def test_bare_return_in_kernel():
    f = qd.field(qd.i32, shape=2)

    @qd.kernel
    def k(x: qd.i32):
        f[0] = 1
        if x > 0:
            return
        f[1] = 2

    k(1)
    assert f.to_numpy().tolist() == [1, 0]
    k(0)
    assert f.to_numpy().tolist() == [1, 2]


# --- annotations, methods, keyword arguments, vectors --------------------------------------------
@test(arch=CPU_VULKAN)
def test_vector_and_matrix_annotations():
    assert repr(qd.types.vector(3, qd.f32)) == "vector(3, f32)"
    assert repr(qd.types.matrix(2, 3, qd.i32)) == "matrix(2, 3, i32)"

    @qd.kernel
    def k() -> qd.types.vector(3, qd.f32):
        return qd.Vector([1.0, 2.0, 3.0])

    r = k()
    assert isinstance(r, np.ndarray) and r.dtype == np.float32 and r.tolist() == [1.0, 2.0, 3.0]

    @qd.kernel
    def k2(v: qd.types.vector(3, qd.f32), m: qd.types.matrix(2, 2, qd.i32)) -> (qd.f32, qd.types.matrix(2, 2, qd.i32)):
        return v[0] + v[2], m.transpose() * 2

    s, t = k2(qd.Vector([1.0, 2.0, 3.0]), [[1, 2], [3, 4]])
    assert s == 4.0 and t.tolist() == [[2, 6], [4, 8]]
    with pytest.raises(qd.QuadrantsTypeError, match=r"expects a vector\(3, f32\)"):
        k2([1.0, 2.0], [[1, 2], [3, 4]])
    with pytest.raises(qd.QuadrantsTypeError, match="Invalid type annotation of argument 'v' of kernel 'k3': 'x'"):
        @qd.kernel
        def k3(v: "x"):
            pass


@test(arch=CPU_VULKAN)
def test_kernel_as_method():
    class Sim:
        def __init__(self, n):
            self.x = qd.field(qd.f32, shape=n)

        @qd.kernel
        def step(self, dt: qd.f32):
            for i in self.x:
                self.x[i] += dt

        @qd.kernel
        def total(self: qd.template()) -> qd.f32:
            s = 0.0
            for i in self.x:
                s += self.x[i]
            return s

    a, b = Sim(4), Sim(2)
    a.step(0.5)
    a.step(dt=0.25)
    b.step(1.0)
    assert a.x.to_numpy().tolist() == [0.75] * 4 and b.x.to_numpy().tolist() == [1.0] * 2
    assert a.total() == 3.0 and b.total() == 2.0


@test(arch=CPU_VULKAN)
def test_wrong_keyword_argument():
    @qd.kernel
    def k(a: qd.i32) -> qd.i32:
        return a

    with pytest.raises(qd.QuadrantsSyntaxError, match=r"Unexpected argument 'b' in the call of kernel 'k'; it takes \(a\)"):
        k(b=1)
    with pytest.raises(TypeError, match="Missing argument 'a'"):  # also the TypeError of a Python call
        k()
    assert k(a=3) == 3

    @qd.func
    def f(a):
        return a

    @qd.kernel
    def k2() -> qd.i32:
        return f(b=1)

    with pytest.raises(qd.QuadrantsSyntaxError, match="Unexpected argument 'b' in the call of @qd.func 'f'") as e:
        k2()
    assert "return f(b=1)\n" in str(e.value)


@test(arch=CPU_VULKAN)
def test_cross_of_2_vectors():
    @qd.kernel
    def k(x: qd.f32) -> qd.f32:
        a = qd.Vector([x, 2.0])
        b = qd.Vector([3.0, 4.0])
        return a.cross(b)

    assert k(1.0) == -2.0

    @qd.kernel
    def bad() -> qd.f32:
        return qd.Vector([1.0, 2.0]).cross(qd.Vector([1.0, 2.0, 3.0]))[0]

    with pytest.raises(qd.QuadrantsTypeError, match="two 2-vectors"):
        bad()


# --- leaks ---------------------------------------------------------------------------------------
_LEAK_SCRIPT = """
import gc, sys, quadrants as qd
qd.init(arch=getattr(qd, sys.argv[1]))
def rss_mb():
    return int([l for l in open("/proc/self/status") if l.startswith("VmRSS")][0].split()[1]) / 1024
f = qd.field(qd.f32, shape=16)
def compile_and_drop(n):
    for _ in range(n):
        @qd.kernel
        def k(x: qd.f32):
            for i in range(16):
                f[i] = f[i] * x + 1.0
        k(1.0)
        del k
    gc.collect()
compile_and_drop(200)  # warm-up: allocator pools, JIT session
r0 = rss_mb()
compile_and_drop(2000)
kernels = rss_mb() - r0

@qd.kernel
def touch(g: qd.template()):
    for i in g:
        g[i] = 1.0
for _ in range(5):
    g = qd.field(qd.f32, shape=1 << 20)
    touch(g)
    del g
gc.collect()
r0 = rss_mb()
for _ in range(100):
    g = qd.field(qd.f32, shape=1 << 20)  # 4 MiB
    touch(g)
    del g
    gc.collect()
fields = rss_mb() - r0
print(f"{kernels:.1f} {fields:.1f} {len(touch.cache)} {touch.num_compilations}")
"""


@pytest.mark.parametrize("arch", ["cpu", "vulkan"])
def test_no_leak_of_dropped_kernels_and_fields(arch, tmp_path):
    if os.environ.get("QD_GPU_COMPILE_REPORT"):
        pytest.skip("compiles no kernel of its own process (test_gpu_codegen re-runs the suite)")
    if not qd.is_arch_available(getattr(qd, arch)):
        pytest.skip(f"{arch} is not available on this machine")
    script = tmp_path / "leak.py"
    script.write_text(_LEAK_SCRIPT)
    out = subprocess.run([sys.executable, str(script), arch], capture_output=True, text=True, timeout=600,
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})
    assert out.returncode == 0, out.stderr
    kernels, fields, cached, compilations = out.stdout.split()
    assert float(kernels) < 4.0, out.stdout    # 2,000 dropped kernels
    assert float(fields) < 4.0, out.stdout     # 100 dropped 4 MiB fields passed to a template kernel
    assert int(cached) == 0 and int(compilations) == 105


# --- bad inputs: a clean exception, never a crash -------------------------------------------------
_BAD_INPUTS = r'''
import sys, numpy as np, quadrants as qd
qd.init(arch=getattr(qd, sys.argv[1]))

def report(label, fn):
    try:
        r = fn()
        print(label, "OK", r.tolist() if hasattr(r, "tolist") else r)
    except Exception as e:
        print(label, type(e).__name__, str(e).replace("\n", " | "))

report("init_fp", lambda: qd.init(default_fp=qd.i32))
report("init_threads", lambda: qd.init(cpu_max_num_threads=-3))
for label, shape in (("shape_neg", -5), ("shape_tuple", (4, -2)), ("shape_float", 4.5)):
    report(label, lambda: qd.field(qd.f32, shape=shape))

@qd.func
def fact(n):
    r = 1
    if n > 1:
        r = n * fact(n - 1)
    return r

@qd.kernel
def rec(n: qd.i32) -> qd.i32:
    return fact(n)

report("recursion", lambda: rec(5))

@qd.kernel
def k(n: qd.i32) -> qd.i32:
    return n

report("overflow", lambda: k(2**70))
report("keyword", lambda: k(b=1))

@qd.kernel
def n(a: qd.types.ndarray(dtype=qd.i8, ndim=1)) -> qd.i32:
    return a.shape[0]

report("huge", lambda: n(np.lib.stride_tricks.as_strided(np.zeros(1, np.int8), shape=(2**31 + 10,), strides=(0,))))

@qd.kernel
def ret() -> qd.types.vector(3, qd.f32):
    return qd.Vector([1.0, 2.0, 3.0])

report("vector_return", ret)

f = qd.field(qd.i32, shape=4)

@qd.kernel
def scope():
    f.to_numpy()

report("python_scope", scope)

@qd.kernel
def hist(a: qd.types.ndarray(dtype=qd.i32, ndim=1), h: qd.types.ndarray(dtype=qd.u8, ndim=1)):
    for i in range(a.shape[0]):
        h[a[i] % 4] += 1

h = np.zeros(4, np.uint8)
report("shared_u8", lambda: (hist(np.arange(8, dtype=np.int32), h), h)[1])
'''

_EXPECTED = {
    "init_fp": "ValueError qd.init(default_fp=i32) must be one of qd.f32, qd.f64",
    "init_threads": "ValueError qd.init(cpu_max_num_threads=-3) must not be negative",
    "shape_neg": "ValueError shape must not be negative, got -5",
    "shape_tuple": "ValueError shape must not be negative, got (4, -2)",
    "shape_float": "TypeError shape must be an int or a tuple of ints, got 4.5",
    "recursion": "QuadrantsSyntaxError",
    "overflow": "OverflowError kernel 'k': argument 'n' = 1180591620717411303424 does not fit in 64 bits",
    "keyword": "QuadrantsArgumentError Unexpected argument 'b' in the call of kernel 'k'",
    "huge": "ValueError kernel 'n': argument 'a' has 2147483658 elements",
    "vector_return": "OK [1.0, 2.0, 3.0]",
    "python_scope": "QuadrantsSyntaxError",
    "shared_u8": "OK [2, 2, 2, 2]",  # a CAS loop on the 32-bit word holding the element
}


@pytest.mark.parametrize("arch", ["cpu", "vulkan"])
def test_bad_inputs_raise_clean_exceptions(arch, tmp_path):
    if not qd.is_arch_available(getattr(qd, arch)):
        pytest.skip(f"{arch} is not available on this machine")
    script = tmp_path / "bad_inputs.py"
    script.write_text(textwrap.dedent(_BAD_INPUTS))
    out = subprocess.run([sys.executable, str(script), arch], capture_output=True, text=True,
                         timeout=300, cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})
    assert out.returncode == 0, out.stderr  # never a crash
    lines = dict(line.split(" ", 1) for line in out.stdout.splitlines())
    for label, expected in _EXPECTED.items():
        assert lines[label].startswith(expected) or expected in lines[label], (label, lines[label])
    assert "recursion is not supported" in lines["recursion"] and "r = n * fact(n - 1)" in lines["recursion"]
    assert "to_numpy() is a Python-scope operation" in lines["python_scope"]
