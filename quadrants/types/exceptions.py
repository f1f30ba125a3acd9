"""Exceptions. Compile-time errors name the kernel file and line.

The names follow Quadrants' own; each is a subclass of what this project raised before it had the
name, so `except` clauses written against either keep working (QuadrantsNameError is the one
exception: Python cannot make a class both a SyntaxError and a NameError, so an undefined name,
which raised QuadrantsSyntaxError before, is now caught by QuadrantsCompilationError or NameError):

    QuadrantsCompilationError
        QuadrantsNameError (NameError)          an undefined name in a kernel
        QuadrantsSyntaxError (SyntaxError)
            QuadrantsIndexError (IndexError)    a compile-time index out of range
            QuadrantsArgumentError (QuadrantsTypeError)  missing / extra arguments, an annotation not a type
        QuadrantsTypeError (TypeError)
            QuadrantsRuntimeTypeError           a launch argument of the wrong kind
        QuadrantsStaticAssertionError (QuadrantsAssertionError)   a failed qd.static_assert
    QuadrantsRuntimeError (RuntimeError)
        QuadrantsAssertionError (AssertionError)
            QuadrantsOutOfBoundsError (IndexError)   debug-mode bounds checks
"""


class QuadrantsCompilationError(Exception):
    """A kernel could not be compiled."""


class QuadrantsSyntaxError(QuadrantsCompilationError, SyntaxError):
    """A construct the kernel language does not accept, or an invalid target."""

    def __str__(self):
        return self.args[0] if self.args else ""


class QuadrantsNameError(QuadrantsCompilationError, NameError):
    """A name used in a kernel is not defined."""


class QuadrantsIndexError(QuadrantsSyntaxError, IndexError):
    """A compile-time index (into a vector or matrix) is out of range."""


class QuadrantsTypeError(QuadrantsCompilationError, TypeError):
    """A type error in a kernel: wrong operand dtype, bad annotation, unsupported atomic dtype."""


class QuadrantsArgumentError(QuadrantsSyntaxError, QuadrantsTypeError):
    """A kernel or @qd.func whose signature or call does not fit: a missing, extra or repeated argument,
    or an annotation that is not a type. A QuadrantsSyntaxError, as Quadrants raises, and a
    QuadrantsTypeError (a TypeError, as Python raises for such a call)."""


class QuadrantsRuntimeError(RuntimeError):
    """A compiled kernel could not run, or failed while running."""


class QuadrantsRuntimeTypeError(QuadrantsRuntimeError, QuadrantsTypeError):
    """A kernel was called with an argument that cannot be converted to its parameter's type."""


class QuadrantsAssertionError(QuadrantsRuntimeError, AssertionError):
    """A check inside a running kernel failed."""


class QuadrantsStaticAssertionError(QuadrantsCompilationError, QuadrantsAssertionError):
    """qd.static_assert failed: the kernel does not compile (a QuadrantsCompilationError, as in Quadrants),
    and an assertion failed (a QuadrantsAssertionError, as this project raised before)."""


class QuadrantsOutOfBoundsError(QuadrantsAssertionError, IndexError):
    """A field or ndarray index out of range: in a kernel under qd.init(debug=True) /
    check_out_of_bound=True, and x[i] in Python scope always. The message's text (after the source
    location, if any) starts with OUT_OF_BOUND, the reference's words."""


OUT_OF_BOUND = "Out of bound access"


def out_of_bound_text(located):
    """A bounds-check message with OUT_OF_BOUND put before its last line, the text after the location."""
    head, sep, last = located.rpartition("\n")
    return f"{head}{sep}{OUT_OF_BOUND}: {last}"


# --- where an error is: the reference layout, `File "F", line N, in NAME:` then the source lines with
# carets under the offending code -------------------------------------------------------------------
TAB_WIDTH = 4   # tabs in the shown source line expand to this many columns
WRAP_WIDTH = 80  # longer source lines are cut into pieces of this width, each over its carets


def _display_col(line, col):
    """The column `col` (a character index into `line`) takes on screen once tabs are expanded."""
    return len(line[:col].expandtabs(TAB_WIDTH))


def _excerpt_line(line, start, end):
    """`line` (tabs expanded) over carets from character `start` to `end` (None: its last printable one)."""
    shown = line.rstrip().expandtabs(TAB_WIDTH)
    a = _display_col(line, start)
    b = len(shown) if end is None else _display_col(line, end)
    carets = " " * a + "^" * max(b - a, 1 if a < len(shown) else 0)
    out = []
    for k in range(0, max(len(shown), 1), WRAP_WIDTH):
        out.append(shown[k:k + WRAP_WIDTH])
        mark = carets[k:k + WRAP_WIDTH].rstrip()
        if mark:
            out.append(mark)
    return out


def source_location(file, lineno, name, lines, start=None, end=None):
    """The location block of an error message, newline-terminated.

    lines: the source lines from `lineno` on, as they are in the file; start: the character where the
    offending code begins on the first line (None: its first non-blank one); end: where it ends on the
    last line (None: the end of that line)."""
    head = f'File "{file}", line {lineno}, in {name}:\n'
    body = []
    for k, line in enumerate(lines):
        indent = len(line) - len(line.lstrip())
        a = start if k == 0 and start is not None else indent
        b = end if k == len(lines) - 1 else None
        if line.strip():
            body.extend(_excerpt_line(line, a, b))
    return head + "".join(s + "\n" for s in body)
