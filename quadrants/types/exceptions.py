"""Exceptions. Compile-time errors name the kernel file and line.

The names follow Quadrants' own; each is a subclass of what this project raised before it had the
name, so `except` clauses written against either keep working (QuadrantsNameError is the one
exception: Python cannot make a class both a SyntaxError and a NameError, so an undefined name,
which raised QuadrantsSyntaxError before, is now caught by QuadrantsCompilationError or NameError):

    QuadrantsCompilationError
        QuadrantsNameError (NameError)          an undefined name in a kernel
        QuadrantsSyntaxError (SyntaxError)
            QuadrantsIndexError (IndexError)    a compile-time index out of range
        QuadrantsTypeError (TypeError)
            QuadrantsRuntimeTypeError           a launch argument of the wrong kind
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


class QuadrantsRuntimeError(RuntimeError):
    """A compiled kernel could not run, or failed while running."""


class QuadrantsRuntimeTypeError(QuadrantsRuntimeError, QuadrantsTypeError):
    """A kernel was called with an argument that cannot be converted to its parameter's type."""


class QuadrantsAssertionError(QuadrantsRuntimeError, AssertionError):
    """A check inside a running kernel failed."""


class QuadrantsOutOfBoundsError(QuadrantsAssertionError, IndexError):
    """qd.init(debug=True) / check_out_of_bound=True: a field or ndarray index was out of range."""
