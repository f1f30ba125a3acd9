"""Exceptions raised while compiling a kernel. Messages name the kernel file and line."""


class QuadrantsCompilationError(Exception):
    """A kernel could not be compiled."""


class QuadrantsSyntaxError(QuadrantsCompilationError, SyntaxError):
    """A construct the kernel language does not accept, or an invalid target."""

    def __str__(self):
        return self.args[0] if self.args else ""


class QuadrantsTypeError(QuadrantsCompilationError, TypeError):
    """A type error in a kernel: wrong operand dtype, bad annotation, unsupported atomic dtype."""
