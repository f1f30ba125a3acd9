"""Argument checking and compile-error text in Quadrants' words and classes: the exact exception
class and message of each mistake, and the location block ('File "F", line N, in NAME:', the source
line as in the file, carets under the offending code) of errors raised while compiling."""
import numpy as np
import pytest

import quadrants as qd
from quadrants.types.exceptions import QuadrantsArgumentError
from test_utils import test


def _line(text):
    """The number of the line of this file holding `text` (once)."""
    lines = [i for i, line in enumerate(open(__file__).read().splitlines(), 1)
             if text in line and "_where(" not in line and "_line(" not in line]
    assert len(lines) == 1, (text, lines)
    return lines[0]


def _where(text, name, carets):
    """The location block of the line holding `text`, shown as in the file, over `carets`."""
    n = _line(text)
    return f'File "{__file__}", line {n}, in {name}:\n{open(__file__).read().splitlines()[n - 1]}\n{carets}\n'


# --- the location block -----------------------------------------------------------------------------
@test(arch=qd.cpu)
def test_undefined_name_shows_the_line_and_carets():
    @qd.kernel
    def k():
        x = 1 + undefined_thing  # noqa: F821  (marker: undefined)

    with pytest.raises(qd.QuadrantsNameError) as e:
        k()
    assert str(e.value) == ("in kernel 'k':\n"
                            + _where("(marker: undefined)", "k", " " * 16 + "^" * 15)
                            + 'Name "undefined_thing" is not defined')


@test(arch=qd.cpu)
def test_each_caller_is_shown_kernel_first():
    @qd.func
    def inner():
        return qd.atomic_or(1.5, 1)  # (marker: inner)

    @qd.func
    def outer():
        return inner() + 1  # (marker: outer)

    @qd.kernel
    def k() -> qd.i32:
        return outer()  # (marker: kernel)

    with pytest.raises(qd.QuadrantsSyntaxError) as e:
        k()
    msg = str(e.value)
    blocks = [_where("(marker: kernel)", "k", " " * 15 + "^" * 7),
              _where("(marker: outer)", "outer", " " * 15 + "^" * 7),
              _where("(marker: inner)", "inner", " " * 15 + "^" * 20)]
    assert msg.startswith("in kernel 'k':\n" + "".join(blocks)), msg


@test(arch=qd.cpu)
def test_a_core_error_is_shown_at_its_node():
    x = qd.field(qd.f32, shape=4)

    @qd.kernel
    def k():
        for i in range(4):
            qd.atomic_or(x[i], 1)  # (marker: core)

    with pytest.raises(qd.QuadrantsTypeError) as e:
        k()
    assert str(e.value).startswith("in kernel 'k':\n" + _where("(marker: core)", "k", " " * 12 + "^" * 21)
                                   + "qd.atomic_or takes integer targets"), str(e.value)


@test(arch=qd.cpu)
def test_a_compound_statement_shows_its_header_only():
    @qd.kernel
    def k():
        for i in range(undefined_n):  # noqa: F821  (marker: header)
            pass

    with pytest.raises(qd.QuadrantsNameError) as e:
        k()
    assert _where("(marker: header)", "k", " " * 23 + "^" * 11) in str(e.value)


@test(arch=qd.cpu)
def test_a_statement_over_several_lines_shows_each():
    @qd.kernel
    def k() -> qd.i32:
        return (1 +
                undefined_m)  # noqa: F821  (marker: several)

    with pytest.raises(qd.QuadrantsNameError) as e:
        k()
    n = _line("(marker: several)")
    shown = open(__file__).read().splitlines()[n - 1]  # the second line of the return: the name's own
    assert f'line {n}, in k:\n{shown}\n{" " * 16}{"^" * 11}\n' in str(e.value), str(e.value)


# --- calling a kernel ---------------------------------------------------------------------------------
@test(arch=qd.cpu)
def test_kernel_calls_that_do_not_fit_the_signature():
    @qd.kernel
    def k(a: qd.i32, b: qd.i32):
        pass

    cases = [((2,), {}, "Missing argument 'b' in the call of kernel 'k'; it takes (a, b)"),
             ((), {"b": 2}, "Missing argument 'a' in the call of kernel 'k'; it takes (a, b)"),
             ((1, 2), {"c": 2}, "Unexpected argument 'c' in the call of kernel 'k'; it takes (a, b)"),
             ((1, 2, 3), {}, "Too many arguments in the call of kernel 'k': 3 given, it takes (a, b)"),
             ((1,), {"a": 1, "b": 2}, "Multiple values for argument 'a' in the call of kernel 'k': given by "
                                      "position and by keyword")]
    for args, kwargs, text in cases:
        with pytest.raises(QuadrantsArgumentError) as e:
            k(*args, **kwargs)
        assert str(e.value) == text
        assert isinstance(e.value, qd.QuadrantsSyntaxError) and isinstance(e.value, TypeError)
    k(1, b=2)


@test(arch=qd.cpu)
def test_func_calls_that_do_not_fit_the_signature_name_the_call():
    @qd.func
    def f(a, b, c=3):
        return a + b + c

    @qd.kernel
    def missing() -> qd.i32:
        return f(1, c=3)  # (marker: missing)

    @qd.kernel
    def extra() -> qd.i32:
        return f(1, 2, 3, 4)

    with pytest.raises(qd.QuadrantsSyntaxError) as e:
        missing()
    assert str(e.value) == ("in kernel 'missing':\n" + _where("(marker: missing)", "missing", " " * 15 + "^" * 9)
                            + "Missing argument 'b' in the call of @qd.func 'f'; it takes (a, b, c)")
    with pytest.raises(qd.QuadrantsSyntaxError, match=r"Too many arguments in the call of @qd.func 'f': 4 given"):
        extra()


@test(arch=qd.cpu)
def test_scalar_and_ndarray_arguments_of_the_wrong_kind():
    @qd.kernel
    def k(a: qd.i32):
        pass

    @qd.kernel
    def nd(a: qd.types.ndarray()):
        pass

    with pytest.raises(qd.QuadrantsRuntimeTypeError) as e:
        k(1.2)
    assert str(e.value) == ("Argument (0,) (type=<class 'float'>) cannot be converted into required type i32: "
                            "kernel 'k' argument 'a' expects a number (i32, an integer), got 1.2")
    with pytest.raises(qd.QuadrantsRuntimeTypeError) as e:
        nd(1.2)
    assert str(e.value) == ("Invalid type for argument a, got 1.2: kernel 'nd' expects an ndarray (qd.ndarray or "
                            "numpy array) there, not float")


@test(arch=qd.cpu)
def test_integer_arguments_keep_their_low_bits():
    @qd.kernel
    def k(a: qd.i8, b: qd.u8, c: qd.i16, d: qd.u64) -> qd.i64:
        return a * 1000 + b + c * 0 + qd.cast(d % 7, qd.i64) * 0

    assert k(255, -1, 65537, 2**64 - 1) == -1000 + 255
    assert k(-129, 256, 0, 0) == 127000
    with pytest.raises(OverflowError) as e:
        k(2**64, 0, 0, 0)
    assert str(e.value) == ("kernel 'k': argument 'a' = 18446744073709551616 does not fit in 64 bits (an argument "
                            "of type i8 keeps the low 8 bits of an integer of -2**63..2**64-1)")
    s = qd.types.struct(a=qd.i16, b=qd.f32)
    assert s(a=65537, b=1.0).a == 1 and s(a=-1, b=1.0).a == -1


@test(arch=qd.cpu)
def test_kernel_arguments_are_read_only():
    @qd.kernel
    def assign(a: qd.i32):
        a = 1  # (marker: assign)

    @qd.kernel
    def augassign(a: qd.i32):
        a += 1

    @qd.kernel
    def annassign(a: qd.i32):
        a: qd.i32 = 1

    @qd.kernel
    def template(a: qd.template()):
        b, a = 1, 2

    text = 'Kernel argument "a" is immutable in the kernel: copy it into a new variable and change that'
    with pytest.raises(qd.QuadrantsSyntaxError) as e:
        assign(5)
    assert str(e.value) == "in kernel 'assign':\n" + _where("(marker: assign)", "assign", " " * 8 + "^" * 5) + text
    for kernel in (augassign, annassign, template):
        with pytest.raises(qd.QuadrantsSyntaxError, match=text):
            kernel(5)

    @qd.kernel
    def copies(a: qd.i32) -> qd.i32:
        b = a
        b += 1
        return b

    assert copies(5) == 6


# --- signatures --------------------------------------------------------------------------------------
def test_invalid_annotations_point_at_the_parameter():
    with pytest.raises(QuadrantsArgumentError) as e:
        @qd.kernel
        def k(n: qd.i32, x: "bar"):  # (marker: kernel annotation)
            pass
    assert str(e.value) == (_where("(marker: kernel annotation)", "k", " " * 25 + "^" * 8)
                            + "Invalid type annotation of argument 'x' of kernel 'k': 'bar' is not a dtype, "
                            "qd.types.ndarray(...), qd.types.vector / matrix / struct(...) or qd.template()")
    assert isinstance(e.value, qd.QuadrantsSyntaxError) and isinstance(e.value, qd.QuadrantsTypeError)
    with pytest.raises(qd.QuadrantsSyntaxError, match=r"Invalid type annotation of argument 'x' of @qd.func 'f': "
                                                      r"the string 'foo'"):
        @qd.func
        def f(x: "foo"):
            pass


@test(arch=qd.cpu)
def test_return_statements_and_annotations():
    @qd.kernel
    def no_return() -> qd.i32:
        pass

    @qd.func
    def f() -> qd.i32:
        pass

    @qd.kernel
    def calls_f() -> qd.i32:
        return f()

    @qd.kernel
    def in_loop() -> qd.i32:
        for i in range(3):
            return i

    with pytest.raises(qd.QuadrantsSyntaxError, match=r"Kernel has a return type but does not have a return "
                                                      r"statement: kernel 'no_return' is annotated -> i32"):
        no_return()
    with pytest.raises(qd.QuadrantsSyntaxError, match=r"Function has a return type but does not have a return "
                                                      r"statement: @qd.func 'f' is annotated -> i32"):
        calls_f()
    with pytest.raises(qd.QuadrantsSyntaxError, match=r"Return inside non-static if/for is not supported"):
        in_loop()

    s0 = qd.types.struct(a=qd.i32)
    s1 = qd.types.struct(a=qd.i32)

    @qd.kernel
    def pair() -> tuple[qd.f32, s0]:
        return 1.5, s0(a=3)

    @qd.kernel
    def other_struct() -> s0:
        return s1(a=1)

    r = pair()
    assert r[0] == 1.5 and r[1].a == 3
    with pytest.raises(qd.QuadrantsTypeError, match=r"Return \(type=.*\) cannot be converted into required type"):
        other_struct()


@test(arch=qd.cpu)
def test_func_arguments_of_the_wrong_shape():
    vec3 = qd.types.vector(3, qd.f32)

    @qd.func
    def f(a: vec3):
        return a[0]

    @qd.kernel
    def k() -> qd.f32:
        return f(qd.Vector([3.0, 4.0]))

    @qd.func
    def g(a: qd.types.ndarray(dtype=qd.math.vec2, ndim=1)):
        a[0] = [1, 2]

    @qd.kernel
    def h(x: qd.types.ndarray(ndim=1)):
        g(x)

    with pytest.raises(qd.QuadrantsSyntaxError, match=r"argument 'a' is annotated vector\(3, f32\) but got shape "
                                                      r"\(2,\): it is expected to be a Matrix with n 3, but got 2"):
        k()
    with pytest.raises(qd.QuadrantsCompilationError, match=r"Invalid value for argument a of @qd.func 'g': expects "
                                                           r"vector\(2, f32\) elements, got f32 elements of shape "
                                                           r"\(3,\)"):
        h(qd.Vector.ndarray(3, qd.f32, shape=4))


# --- statements the kernel language does not take ---------------------------------------------------------
@test(arch=qd.cpu)
def test_unsupported_statements_in_quadrants_words():
    @qd.kernel
    def raises():
        raise ValueError()

    @qd.kernel
    def defines():
        def g():
            pass

    @qd.kernel
    def breaks():
        for i in range(3):
            break

    @qd.kernel
    def static_break(n: qd.i32):
        for i in qd.static(range(3)):
            if n > 0:
                break

    @qd.kernel
    def casts():
        qd.i64(1, 2)

    @qd.kernel
    def asserts(n: qd.i32):
        qd.static_assert(n > 0)

    x = 3

    @qd.kernel
    def static_fails():
        qd.static_assert(x == 4, "Oh, no!")

    for kernel, exc, text in [
            (raises, qd.QuadrantsSyntaxError, 'Unsupported node "Raise": this Python construct is not part of the '
                                              'kernel language'),
            (defines, qd.QuadrantsSyntaxError, "Function definition is not allowed in 'qd.kernel': define it outside, "
                                               "as a @qd.func"),
            (breaks, qd.QuadrantsSyntaxError, "Cannot break in the outermost loop of a kernel"),
            (casts, qd.QuadrantsSyntaxError, r"A primitive type can only decorate a single expression: qd.i64\(x\) "
                                             r"takes one value, got qd.i64\(1, 2\)"),
            (static_fails, qd.QuadrantsCompilationError, "Oh, no!")]:
        with pytest.raises(exc, match=text):
            kernel()
    with pytest.raises(qd.QuadrantsTypeError, match="Static assert with non-static condition"):
        asserts(1)
    with pytest.raises(qd.QuadrantsSyntaxError, match="You are trying to `break` a static `for` loop"):
        static_break(1)
    with pytest.raises(qd.QuadrantsAssertionError):  # also an assertion error, as before
        static_fails()
