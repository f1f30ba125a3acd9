"""Bad kernels raise the documented exception, naming the source line."""
import numpy as np
import pytest

import quadrants as qd
from test_utils import test


def _raises(exc, kernel, *args, match=None, line=None):
    with pytest.raises(exc, match=match) as info:
        kernel(*args)
    msg = str(info.value)
    assert __file__ in msg, msg          # names the kernel's file
    if line is not None:
        assert line in msg, msg          # and shows the offending source line
    return msg


@test(arch=qd.cpu)
def test_unsupported_construct():
    @qd.kernel
    def k():
        try:
            pass
        except Exception:
            pass

    msg = _raises(qd.QuadrantsSyntaxError, k, match="Try")
    assert "try:" in msg


@test(arch=qd.cpu)
def test_unsupported_call_and_names():
    @qd.kernel
    def k(n: qd.i32):
        sorted(n)

    _raises(qd.QuadrantsSyntaxError, k, 1, match="sorted", line="sorted(n)")

    @qd.kernel
    def k2():
        x = undefined_name + 1  # noqa: F821

    # A NameError and a compilation error (Python cannot make it a SyntaxError as well).
    _raises(qd.QuadrantsNameError, k2, match="undefined_name", line="x = undefined_name + 1")
    assert issubclass(qd.QuadrantsNameError, NameError) and issubclass(qd.QuadrantsNameError,
                                                                        qd.QuadrantsCompilationError)


@test(arch=qd.cpu)
def test_missing_and_wrong_annotation():
    with pytest.raises(qd.QuadrantsSyntaxError, match="needs a type annotation"):
        @qd.kernel
        def k(a):
            pass

    with pytest.raises(qd.QuadrantsTypeError, match="unsupported annotation"):
        @qd.kernel
        def k2(a: str):
            pass

    @qd.kernel
    def k3(a: qd.types.ndarray(dtype=qd.f32, ndim=1)):
        for i in range(4):
            a[i] = 1

    import numpy as np
    with pytest.raises(qd.QuadrantsTypeError, match="expects dtype f32"):
        k3(np.zeros(4, np.int32))
    with pytest.raises(qd.QuadrantsTypeError, match="expects ndim=1"):
        k3(np.zeros((4, 4), np.float32))


@test(arch=qd.cpu)
def test_type_mismatch():
    x = qd.field(qd.f32, shape=4)

    @qd.kernel
    def k():
        for i in range(4):
            x[i] = x[i] & 3

    _raises(qd.QuadrantsTypeError, k, match="integer operands", line="x[i] = x[i] & 3")

    @qd.kernel
    def k2():
        x[1.5] = 0

    _raises(qd.QuadrantsTypeError, k2, match="must be an integer", line="x[1.5] = 0")

    @qd.kernel
    def k3():
        v: str = 1

    _raises(qd.QuadrantsTypeError, k3, match="annotation must be a dtype")


@test(arch=qd.cpu)
def test_wrong_index_count_and_break_in_parallel_loop():
    x = qd.field(qd.i32, shape=(4, 4))

    @qd.kernel
    def k():
        x[1] = 0

    _raises(qd.QuadrantsSyntaxError, k, match="2 dimension", line="x[1] = 0")

    @qd.kernel
    def k2():
        for i in range(4):
            break

    _raises(qd.QuadrantsSyntaxError, k2, match="outermost", line="break")


@test(arch=qd.cpu)
def test_type_error_is_a_python_type_error():
    assert issubclass(qd.QuadrantsTypeError, TypeError)
    assert issubclass(qd.QuadrantsTypeError, qd.QuadrantsCompilationError)
    assert issubclass(qd.QuadrantsSyntaxError, qd.QuadrantsCompilationError)


@test(arch=qd.cpu)
def test_func_called_outside_kernel():
    @qd.func
    def f():
        return 1

    with pytest.raises(RuntimeError, match="can only be called from a kernel"):
        f()


def test_unavailable_arch_raises_clearly():
    for arch in (qd.metal, qd.cuda, qd.amdgpu):
        if qd.is_arch_available(arch):
            continue
        with pytest.raises(RuntimeError, match=arch.name):
            qd.init(arch=arch, enable_fallback=False)
        with pytest.warns(RuntimeWarning, match=f"(?s)falling back to cpu.*{arch.name}: "):
            qd.init(arch=arch)
        from quadrants.lang import runtime
        assert runtime.program().config.arch is qd.cpu
        qd.reset()


@test(debug=True)
def test_debug_mode_bounds_checks():
    x = qd.field(qd.i32, shape=(4, 3))

    @qd.kernel
    def k(i: qd.i32, j: qd.i32) -> qd.i32:
        x[1, 2] = 5
        return x[i, j]

    @qd.kernel
    def nd(a: qd.types.ndarray(dtype=qd.f32, ndim=1), n: qd.i32):
        for i in range(n):
            a[i] = 1.0

    assert k(1, 2) == 5
    with pytest.raises(IndexError, match=r"index 3 out of range for axis 1 of 'field\d+' with shape \(4, 3\)") as e:
        k(0, 3)
    assert "return x[i, j]" in str(e.value) and __file__ in str(e.value)
    with pytest.raises(IndexError, match="index -1 out of range for axis 0"):
        k(-1, 0)
    import numpy as np
    a = np.zeros(8, np.float32)
    nd(a, 8)
    with pytest.raises(IndexError, match="index 8 out of range for axis 0 of 'a'"):
        nd(a, 9)


@test(check_out_of_bound=True)
def test_check_out_of_bound_alone_turns_on_the_index_checks():
    from quadrants.lang import runtime
    assert not runtime.program().config.debug
    x = qd.field(qd.i32, shape=(4, 3))

    @qd.kernel
    def k(i: qd.i32, j: qd.i32) -> qd.i32:
        return x[i, j]

    @qd.kernel
    def nd(a: qd.types.ndarray(dtype=qd.f32, ndim=1), i: qd.i32):
        qd.atomic_add(a[i], 1.0)

    assert k(3, 2) == 0
    with pytest.raises(IndexError, match=r"index 4 out of range for axis 0 of 'field\d+' with shape \(4, 3\)"):
        k(4, 0)
    a = np.zeros(2, np.float32)
    nd(a, 1)
    assert a[1] == 1.0
    with pytest.raises(IndexError, match="index 2 out of range for axis 0 of 'a'"):
        nd(a, 2)


@test()
def test_index_checks_are_off_by_default():
    # Without debug / check_out_of_bound no check is compiled in: the IR has no error slot.
    x = qd.field(qd.i32, shape=4)

    @qd.kernel
    def k(i: qd.i32) -> qd.i32:
        return x[i]

    plain = qd.compile(k, 0).ir
    from quadrants.lang import runtime
    qd.init(arch=runtime.program().config.arch, check_out_of_bound=True)
    x = qd.field(qd.i32, shape=4)
    checked = qd.compile(k, 0).ir
    assert plain != checked


@test(debug=True)
def test_debug_bounds_checks_see_wide_and_unsigned_indices():
    x = qd.field(qd.i32, shape=10)

    @qd.kernel
    def wide(i: qd.i64) -> qd.i32:
        return x[i]

    @qd.kernel
    def unsigned(i: qd.u32) -> qd.i32:
        return x[i]

    assert wide(3) == 0 and unsigned(3) == 0
    # Both used to be narrowed to i32 before the check: 2**32 + 3 passed as 3.
    with pytest.raises(IndexError, match=f"index {2**32 + 3} out of range"):
        wide(2**32 + 3)
    with pytest.raises(IndexError, match=f"index {2**31 + 5} out of range"):
        unsigned(2**31 + 5)

    @qd.kernel
    def nd(a: qd.types.ndarray(dtype=qd.f32, ndim=1), i: qd.i64) -> qd.f32:
        return a[i]

    a = np.arange(4, dtype=np.float32)
    assert nd(a, 3) == 3.0
    with pytest.raises(IndexError, match=f"index {2**32 + 1} out of range for axis 0 of 'a'"):
        nd(a, 2**32 + 1)


@test()
def test_return_before_a_parallel_loop_is_rejected():
    x = qd.field(qd.i32, shape=4)

    @qd.kernel
    def k(n: qd.i32) -> qd.i32:
        if n > 0:
            return 1
        for i in range(4):
            x[i] = 7
        return 0

    # The return would end only the code before the loop: the loop would still run and the
    # final `return 0` would overwrite the result.
    _raises(qd.QuadrantsSyntaxError, k, 5, match="before a parallel loop", line="return 1")
    assert list(x.to_numpy()) == [0, 0, 0, 0]

    @qd.kernel
    def ok(n: qd.i32) -> qd.i32:
        for i in range(4):
            x[i] = n
        if n > 0:
            return 1
        return 0

    assert ok(3) == 1 and ok(-1) == 0 and list(x.to_numpy()) == [-1] * 4


@test(arch=qd.cpu)
def test_break_and_continue_in_unrolled_loops_are_rejected():
    @qd.kernel
    def k(n: qd.i32) -> qd.i32:
        s = 0
        for i in range(n):
            for j in qd.static(range(4)):
                if j == 1:
                    continue  # would continue the `i` loop, skipping j = 2, 3
                s += 1
        return s

    _raises(qd.QuadrantsSyntaxError, k, 3, match="unrolled", line="continue")

    @qd.kernel
    def b(n: qd.i32) -> qd.i32:
        s = 0
        for i in range(n):
            for j in qd.static(range(4)):
                if i == j:
                    while True:
                        break  # leaves the while: fine
                s += 1
        return s

    assert b(3) == 12

    @qd.kernel
    def r(n: qd.i32) -> qd.i32:
        for j in qd.static(range(3)):
            if n == j:
                return j * 10
        return -1

    assert r(2) == 20 and r(5) == -1


# --- found by the front-end fuzzer (benchmarks/fuzz_frontend.py) --------------------------------------
def _decorating_raises(exc, make, match, line):
    with pytest.raises(exc, match=match) as info:
        make()
    msg = str(info.value)
    assert __file__ in msg and line in msg, msg
    return msg


def test_bad_signatures_name_the_def_line():
    def unannotated():
        @qd.kernel
        def k(n):
            pass

    def bad_annotation():
        @qd.kernel
        def k(n: str):
            pass

    def bad_ndarray_dtype():
        @qd.kernel
        def k(a: qd.types.ndarray(dtype=qd.atomic_add, ndim=1)):
            pass

    def bad_ndarray_ndim():
        @qd.kernel
        def k(a: qd.types.ndarray(dtype=qd.f32, ndim=1.5)):
            pass

    def bad_return():
        @qd.kernel
        def k() -> qd.template():
            pass

    def stacked():
        @qd.kernel
        @qd.func
        def k():
            pass

    _decorating_raises(qd.QuadrantsSyntaxError, unannotated, "needs a type annotation", "def k(n):")
    _decorating_raises(qd.QuadrantsTypeError, bad_annotation, "unsupported annotation", "def k(n: str):")
    _decorating_raises(qd.QuadrantsTypeError, bad_ndarray_dtype, "is not a dtype", "def k(a:")
    _decorating_raises(qd.QuadrantsTypeError, bad_ndarray_ndim, "not a number of dimensions", "def k(a:")
    _decorating_raises(qd.QuadrantsTypeError, bad_return, "unsupported return annotation template()", "def k()")
    _decorating_raises(qd.QuadrantsSyntaxError, stacked, "cannot decorate the @qd.func 'k'", "def k():")


@test(arch=qd.cpu)
def test_compile_time_mistakes_inside_kernels_name_the_line():
    @qd.kernel
    def ragged():
        m = qd.Matrix([[1, 2], [3]])

    @qd.kernel
    def div0() -> qd.i32:
        return 1 // 0

    @qd.kernel
    def func_of_a_range():
        f = qd.func(range(3))

    _raises(qd.QuadrantsSyntaxError, ragged, match="rows of equal length", line="qd.Matrix([[1, 2], [3]])")
    _raises(qd.QuadrantsSyntaxError, div0, match="ZeroDivisionError", line="return 1 // 0")
    _raises(qd.QuadrantsSyntaxError, func_of_a_range, match="decorates a Python function", line="qd.func(range(3))")


def test_python_scope_misuse_is_a_clear_type_error():
    with pytest.raises(TypeError, match="is not a dtype"):
        qd.field(len, shape=3)
    with pytest.raises(TypeError, match=r"qd.u64\(<built-in function len>\)"):
        qd.u64(len)
    with pytest.raises(TypeError, match="qd.min takes two or more values"):
        qd.min()
    with pytest.raises(TypeError, match="qd.max takes two or more values"):
        qd.max(len)
    assert qd.max([3, 9, 2]) == 9 and qd.min(4, 1) == 1
    with pytest.raises(TypeError, match="arch must be qd.cpu"):
        qd.init(arch=len)
