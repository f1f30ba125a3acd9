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

    with pytest.raises(qd.QuadrantsSyntaxError, match="Invalid type annotation of argument 'a' of kernel 'k2'") as e:
        @qd.kernel
        def k2(a: str):
            pass
    assert isinstance(e.value, qd.QuadrantsTypeError)  # what this project raised before
    assert f'File "{__file__}", line ' in str(e.value) and "def k2(a: str):\n" in str(e.value)

    @qd.kernel
    def k3(a: qd.types.ndarray(dtype=qd.f32, ndim=1)):
        for i in range(4):
            a[i] = 1

    import numpy as np
    with pytest.raises(qd.QuadrantsTypeError, match="expects dtype f32"):
        k3(np.zeros(4, np.int32))
    with pytest.raises(qd.QuadrantsTypeError, match="expects ndim=1") as e:
        k3(np.zeros((4, 4), np.float32))
    assert isinstance(e.value, ValueError)  # as Quadrants raises it
    # a numpy array gets Quadrants' wording for numpy arrays (a qd.ndarray: "required ndim=1, but 2d ndarray ...")
    assert "required array has ndim=1, array with 2 dimensions is provided" in str(e.value)


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
        from quadrants._lib import runtime
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
    from quadrants._lib import runtime
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
    from quadrants._lib import runtime
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
                if i == j:
                    continue  # a run-time condition: would continue the `i` loop, skipping the later j
                s += 1
        return s

    _raises(qd.QuadrantsSyntaxError, k, 3, match="unrolled", line="continue")

    @qd.kernel
    def c(n: qd.i32) -> qd.i32:
        s = 0
        for i in range(n):
            for j in qd.static(range(4)):
                if j == 1:  # j is a Python int: a compile-time condition, the copy for j = 1 ends here
                    continue
                s += 1
        return s

    assert c(3) == 9

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
    _decorating_raises(qd.QuadrantsSyntaxError, bad_annotation, "Invalid type annotation of argument 'n'",
                       "def k(n: str):\n              ^^^^^^\n")  # the caret under the parameter
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


def _plain(exc_info):
    """Python-scope misuse is a plain TypeError/ValueError/OverflowError/IndexError raised by Quadrants
    itself: not a compilation error (there is no kernel line) and not an error from inside numpy."""
    assert not isinstance(exc_info.value, qd.QuadrantsCompilationError), exc_info.value
    assert "quadrants" in exc_info.traceback[-1].path.parts, exc_info.traceback[-1]


def _a_function():
    pass


@test(arch=qd.cpu)
def test_python_scope_math_on_non_numbers_is_a_type_error():
    # The fuzzer's cases: a kernel decorated with a math function instead of @qd.kernel.
    for deco, name in [(qd.floor, r"qd\.floor\(\)"), (qd.sqrt, r"qd\.sqrt\(\)"), (qd.abs, r"abs\(\)")]:
        with pytest.raises(TypeError, match=name + r" takes numbers, vectors or matrices .*got function 'k'") as info:
            @deco
            def k(n: qd.i32):
                pass
        _plain(info)
    cases = [
        (lambda: qd.sqrt("s"), r"qd\.sqrt\(\) .*got str 's'"),
        (lambda: qd.sin(None), r"qd\.sin\(\) .*got NoneType None"),
        (lambda: qd.exp([1, "a"]), r"qd\.exp\(\) .*got list \[1, 'a'\]"),
        (lambda: qd.min(_a_function, 1), r"qd\.min\(\) .*got function '_a_function'"),
        (lambda: qd.max("ab", "c"), r"qd\.max\(\) .*got str 'ab'"),
        (lambda: qd.atan2(_a_function, 1.0), r"qd\.atan2\(\) .*got function"),
        (lambda: qd.pow(2.0, "x"), r"qd\.pow\(\) .*got str 'x'"),
        (lambda: qd.cast(_a_function, qd.i32), r"qd\.cast\(\) .*got function"),
        (lambda: qd.cast(1, 7), r"qd\.cast\(\): 7 is not a dtype"),
        (lambda: qd.math.length(_a_function), r"qd\.math\.length\(\) .*got function"),
        (lambda: qd.math.clamp(_a_function, 0, 1), r"qd\.math\.clamp\(\) .*got function"),
        (lambda: qd.math.isnan("x"), r"qd\.math\.isnan\(\) .*got str"),
        (lambda: qd.math.popcnt(None), r"qd\.math\.popcnt\(\) .*got NoneType"),
    ]
    for call, match in cases:
        with pytest.raises(TypeError, match=match) as info:
            call()
        _plain(info)
    for call, match in [(lambda: qd.cast(2**64, qd.i32), r"does not fit in i32 \(-2147483648\.\.2147483647\)"),
                        (lambda: qd.u8(256), r"qd\.u8\(256\): the value does not fit in u8 \(0\.\.255\)")]:
        with pytest.raises(OverflowError, match=match) as info:
            call()
        _plain(info)
    # What they take still works, element-wise on arrays as in kernels.
    assert qd.sqrt(2**70) == 2.0**35 and qd.floor(2.5) == 2.0 and abs(qd.abs(-3)) == 3
    assert qd.abs([-1, 2]).tolist() == [1, 2] and qd.cast(1.7, qd.i32) == 1
    assert qd.math.clamp(qd.Vector([-1.0, 0.5, 5.0]), 0.0, 2.0).tolist() == [0.0, 0.5, 2.0]
    assert qd.max(qd.Vector([1.0, 5.0]), qd.Vector([3.0, 2.0])).tolist() == [3.0, 5.0]
    assert qd.max([3, 9, 2]) == 9 and qd.min(2**70, 1) == 1


@test(arch=qd.cpu)
def test_python_scope_vector_of_non_numbers_is_a_type_error():
    with pytest.raises(TypeError, match=r"qd\.Vector\(\) takes a list of entries, got function 'k'") as info:
        @qd.Vector
        def k(n: qd.i32):
            pass
    _plain(info)
    cases = [
        (TypeError, lambda: qd.Vector(3), r"qd\.Vector\(\) takes a list of entries, got int 3"),
        (TypeError, lambda: qd.Matrix(None), r"qd\.Matrix\(\) takes a list of entries \(or of rows\)"),
        (TypeError, lambda: qd.Vector([_a_function, 1]), r"qd\.Vector\(\): expected a number or an array"),
        (TypeError, lambda: qd.Vector([1, 2], 7), r"qd\.Vector\(\): 7 is not a dtype"),
        (TypeError, lambda: qd.math.vec3("a"), r"vector\(3, f32\): expected a number or an array"),
        (ValueError, lambda: qd.Matrix([[1, 2], [3]]), r"qd\.Matrix\(\): list \[\[1, 2\], \[3\]\] is not a number or "
                                                       r"a rectangular array"),
        (OverflowError, lambda: qd.Vector([1, 2**64]), r"qd\.Vector\(\): .* does not fit in 64 bits"),
        (TypeError, lambda: qd.Vector.field(_a_function, qd.f32, shape=3), r"vector/matrix size must be an int"),
    ]
    for exc, call, match in cases:
        with pytest.raises(exc, match=match) as info:
            call()
        _plain(info)
    assert qd.Vector((1, 2)).tolist() == [1, 2] and qd.Matrix.identity(float, 2).tolist() == [[1, 0], [0, 1]]


@test(arch=[qd.cpu, qd.vulkan])
def test_python_scope_field_and_ndarray_writes_check_the_value():
    x = qd.field(qd.i32, shape=4)
    u = qd.field(qd.u8, shape=4)
    v = qd.Vector.field(3, qd.f32, shape=2)
    nd = qd.ndarray(qd.i32, shape=4)
    x[1], u[1], nd[1] = 7, 255, -3
    i32 = r"i32 \(-2147483648\.\.2147483647\)"
    cases = [
        # The fuzzer's case: `x[i] = i * 2 + 2**64` in a function that lost its @qd.kernel.
        (OverflowError, lambda: x.__setitem__(0, 2**64), r"field\w*\[0\] = \.\.\.: int 18446744073709551616 does not "
                                                          r"fit in " + i32),
        (OverflowError, lambda: x.__setitem__(0, 2**31), "does not fit in " + i32),
        (OverflowError, lambda: u.__setitem__(0, -1), r"int -1 does not fit in u8 \(0\.\.255\)"),
        (OverflowError, lambda: x.__setitem__(0, float("inf")), "float inf does not fit in i32"),
        (ValueError, lambda: x.__setitem__(0, float("nan")), "cannot convert float nan to i32"),
        (TypeError, lambda: x.__setitem__(0, _a_function), "expected a number or an array of numbers, got function"),
        (TypeError, lambda: x.__setitem__(0, "a"), "expected a number or an array of numbers, got str 'a'"),
        (TypeError, lambda: x.__setitem__(0, None), "got NoneType None"),
        (ValueError, lambda: v.__setitem__(0, [1.0, 2.0]), r"a value of shape \(2,\) does not fit an element of "
                                                           r"shape \(3,\)"),
        (TypeError, lambda: x.__setitem__(_a_function, 1), "an index must be an integer, got function"),
        (TypeError, lambda: x[1.5], "an index must be an integer, got float 1.5"),
        (OverflowError, lambda: x.fill(2**64), r"\.fill\(\): int 18446744073709551616 does not fit in i32"),
        (OverflowError, lambda: x.from_numpy([2**64] * 4), r"\.from_numpy\(\): list .* does not fit in i32"),
        (TypeError, lambda: x.from_numpy(_a_function), r"\.from_numpy\(\): expected a number or an array"),
        (OverflowError, lambda: nd.__setitem__(0, 2**64), r"qd\.ndarray.*\[0\] = \.\.\.: int .* does not fit in i32"),
        (TypeError, lambda: nd.__setitem__(0, _a_function), r"qd\.ndarray.*expected a number or an array"),
        (IndexError, lambda: nd[_a_function], r"qd\.ndarray.*\[<function _a_function.*\]: only integers"),
    ]
    for exc, call, match in cases:
        with pytest.raises(exc, match=match) as info:
            call()
        _plain(info)
    # Nothing was written by the failed writes.
    assert x.to_numpy().tolist() == [0, 7, 0, 0] and u.to_numpy().tolist() == [0, 255, 0, 0]
    assert nd.to_numpy().tolist() == [0, -3, 0, 0] and v.to_numpy().tolist() == [[0, 0, 0]] * 2


@test(arch=qd.cpu)
def test_math_intrinsics_on_non_numbers_in_kernels_name_the_line():
    @qd.kernel
    def sqrt_of_a_function():
        d = qd.sqrt(_a_function)

    @qd.kernel
    def abs_of_a_function():
        d = abs(_a_function)

    @qd.kernel
    def vector_of_a_function():
        d = qd.Vector(_a_function)

    @qd.kernel
    def vector_entry_a_function():
        d = qd.Vector([_a_function, 1.0])

    @qd.kernel
    def length_of_a_function():
        d = qd.math.length(_a_function)

    @qd.kernel
    def cast_to_a_number():
        d = qd.cast(1, 7)

    @qd.kernel
    def dot_of_scalars():
        d = qd.math.dot(1.0, 2.0)

    _raises(qd.QuadrantsTypeError, sqrt_of_a_function, match=r"qd\.sqrt\(\) takes numbers, vectors or matrices, got "
            r"function '_a_function'", line="d = qd.sqrt(_a_function)")
    _raises(qd.QuadrantsTypeError, abs_of_a_function, match=r"abs\(\) takes numbers", line="d = abs(_a_function)")
    _raises(qd.QuadrantsTypeError, vector_of_a_function, match=r"qd\.Vector\(\) takes a list of entries, got function",
            line="d = qd.Vector(_a_function)")
    _raises(qd.QuadrantsTypeError, vector_entry_a_function, match=r"qd\.Vector\(\) takes numbers",
            line="d = qd.Vector([_a_function, 1.0])")
    _raises(qd.QuadrantsTypeError, length_of_a_function, match=r"qd\.math\.length\(\) takes numbers",
            line="d = qd.math.length(_a_function)")
    _raises(qd.QuadrantsTypeError, cast_to_a_number, match=r"qd\.cast\(\): 7 is not a dtype", line="d = qd.cast(1, 7)")
    # An error inside a qd.math function's own body is reported at the kernel's call of it.
    _raises(qd.QuadrantsSyntaxError, dot_of_scalars, match=r"in qd\.math\.dot \(math\.py:\d+: return x\.dot\(y\)\): "
            r"'float' has no attribute 'dot'", line="d = qd.math.dot(1.0, 2.0)")


@test(arch=qd.cpu)
def test_atomic_cas_with_none_is_a_type_error_not_a_crash():
    x = qd.field(qd.i32, shape=2)

    @qd.kernel
    def desired_none():
        qd.atomic_cas(x[0], 0, None)

    @qd.kernel
    def expected_none():
        qd.atomic_cas(x[0], None, 1)

    # desired=None reached the IR builder as a missing operand and segfaulted.
    _raises(qd.QuadrantsTypeError, desired_none, match=r"qd\.atomic_cas\(x, expected, desired\): the desired value is "
            r"None", line="qd.atomic_cas(x[0], 0, None)")
    _raises(qd.QuadrantsTypeError, expected_none, match="the expected value is None",
            line="qd.atomic_cas(x[0], None, 1)")


def test_decorating_quadrants_own_functions_is_a_type_error():
    from quadrants.kernels.kernel import kernel as qd_kernel  # qd.kernel itself (a test plugin may wrap qd.kernel)

    with pytest.raises(TypeError, match="@qd.kernel decorates a Python function of yours, got Quadrants' own function "
                                        "'kernel'") as info:
        @qd.kernel(qd_kernel)
        def run(k: qd.template()):
            pass
    _plain(info)
    with pytest.raises(TypeError, match="@qd.func decorates .* own function 'sqrt'") as info:
        qd.func(qd.sqrt)
    _plain(info)


@test(arch=qd.cpu)
def test_primitive_type_literals_are_checked():
    """qd.f32(0), qd.i32(0.0), qd.u16(-1), qd.i8(300) and qd.f32(vector) are errors in a kernel (qd.cast
    converts); qd.f32(0.5), qd.u32(4294967295), qd.i32(x) of a kernel value are fine."""
    def kernel_of(body):
        @qd.kernel
        def k(x: qd.f32) -> qd.f32:
            return body(x)
        return k

    cases = [(lambda x: qd.f32(0), qd.QuadrantsTypeError, "Integer literals must be annotated with a integer type"),
             (lambda x: qd.i32(0.0), qd.QuadrantsTypeError, "Floating-point literals must be annotated"),
             (lambda x: qd.u16(-1), qd.QuadrantsTypeError, r"Integer literal -1 exceeded the range of specified "
                                                             r"dtype: u16 \(0..65535\)"),
             (lambda x: qd.i8(300), qd.QuadrantsTypeError, "Integer literal 300 exceeded the range"),
             (lambda x: qd.f32(qd.Vector([x])), qd.QuadrantsSyntaxError, "cannot decorate an expression with a "
                                                                          "compound type")]
    for body, exc, match in cases:
        with pytest.raises(exc, match=match):
            kernel_of(body)(1.0)

    @qd.kernel
    def fine(x: qd.f32) -> qd.types.vector(3, qd.f64):
        return qd.Vector([qd.f32(0.5) + qd.f32(qd.i32(2)), qd.u32(4294967295), qd.i32(x)], dt=qd.f64)

    assert list(fine(3.7)) == [2.5, 4294967295, 3]


@test(arch=qd.cpu)
def test_a_bare_literal_must_fit_default_ip():
    @qd.kernel
    def k() -> qd.i64:
        b = 0x80000000
        return b

    with pytest.raises(qd.QuadrantsTypeError, match=r"Integer literal 2147483648 exceeded the range of default_ip: "
                                                     r"i32 .*qd\.u64\(2147483648\)"):
        k()

    @qd.kernel
    def typed(x: qd.i64) -> qd.i64:
        b = qd.i64(0x80000000)
        return b + x + 0x100000000  # next to a typed operand a literal takes a type that holds it

    assert typed(1) == 0x80000000 + 1 + 0x100000000

    big = qd.u64(18408377188311713667)  # a numpy scalar made in Python scope: it keeps a type that holds it

    @qd.kernel
    def captured() -> qd.u64:
        b = big
        return b

    assert captured() == 18408377188311713667


@test(arch=qd.cpu, debug=True)
def test_out_of_bound_messages_say_out_of_bound_access():
    """Every bounds error is a QuadrantsOutOfBoundsError (an IndexError and an AssertionError) whose
    text, after the source location, starts with "Out of bound access: "."""
    x = qd.field(qd.f32, shape=3)
    for do in (lambda: x.__setitem__(3, 1.0), lambda: x[-1]):
        with pytest.raises(qd.QuadrantsOutOfBoundsError, match=r"^Out of bound access: index \(-?\d,\) out of range "
                                                                r"for shape \(3,\)$"):
            do()

    @qd.kernel
    def k(a: qd.types.ndarray(dtype=qd.f32, ndim=2), i: qd.i32):
        for _ in range(1):
            a[i, 0] = 1.0

    with pytest.raises(AssertionError) as e:
        k(np.zeros((3, 4), np.float32), 10)
    assert isinstance(e.value, IndexError)
    assert str(e.value).endswith("\n    a[i, 0] = 1.0\nOut of bound access: index 10 out of range for axis 0 of 'a'")

    @qd.kernel
    def v(i: qd.i32) -> qd.f32:
        m = qd.Vector([1.0, 2.0])
        return m[i]

    with pytest.raises(qd.QuadrantsOutOfBoundsError, match=r"Out of bound access: run-time index out of range for a "
                                                            r"vector/matrix of shape \(2,\)"):
        v(2)


@test(arch=qd.cpu)
def test_static_is_only_asks_whether_an_optional_argument_was_given():
    """qd.static(x is None) / (x is not None) takes a direct qd.template() / qd.Tensor kernel argument
    and the literal None; anything else (a run-time argument, an ndarray parameter, another identity,
    a re-bound name, a func's parameter) is a QuadrantsSyntaxError. `in` / `is` outside qd.static too."""
    @qd.kernel
    def given(t: qd.template(), x: qd.Tensor) -> qd.i32:
        return (1 if qd.static(t is None) else 0) + (2 if qd.static(None is not x) else 0)

    assert given(None, None) == 1 and given(3, qd.field(qd.i32, shape=1)) == 2

    @qd.kernel
    def runtime(v: qd.i32) -> qd.i32:
        return 1 if qd.static(v is None) else 0

    @qd.kernel
    def other_identity(t: qd.template()) -> qd.i32:
        return 1 if qd.static(t is qd.i32) else 0

    @qd.kernel
    def rebound(t: qd.template()) -> qd.i32:
        r = 0
        for t in qd.static([None]):
            r = 1 if qd.static(t is None) else 0
        return r

    @qd.func
    def f(t: qd.template()) -> qd.i32:
        return 1 if qd.static(t is None) else 0

    @qd.kernel
    def through_func() -> qd.i32:
        return f(None)

    for k, args, word in [(runtime, (0,), "is"), (other_identity, (qd.i32,), "is"), (rebound, (1,), "is"),
                          (through_func, (), "is")]:
        with pytest.raises(qd.QuadrantsSyntaxError, match=f'Operator "{word}" inside `qd.static` requires a direct '
                                                          r'`qd.template\(\)` or `qd.Tensor` kernel argument and `None`'):
            k(*args)

    @qd.kernel
    def bare_is(t: qd.template()) -> qd.i32:
        return 1 if t is not None else 0

    @qd.kernel
    def bare_in(t: qd.template()) -> qd.i32:
        return 1 if t not in (1, 2) else 0

    with pytest.raises(qd.QuadrantsSyntaxError, match='Operator "is not" in Quadrants scope is not supported'):
        bare_is(1)
    with pytest.raises(qd.QuadrantsSyntaxError, match='"NotIn" is only supported inside `qd.static`'):
        bare_in(1)


@test(arch=qd.cpu)
def test_impl_subscript_of_a_0d_field_with_none():
    from quadrants.lang import impl
    b = qd.field(qd.i32, ())

    def bump(n):
        return qd.atomic_add(impl.subscript(impl.get_runtime().compiling_callable.ast_builder(), b, None), n)

    @qd.kernel
    def k() -> qd.i32:
        return bump(2)

    assert k() == 0 and b[None] == 2
