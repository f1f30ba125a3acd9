"""Enumerations of the reference's quadrants.types.enums that programs and tests name."""
import enum


class SNodeGradType(enum.Enum):
    """What a field is to autodiff: a primal, its gradient (x.grad), its tangent (x.dual)."""

    PRIMAL = 0
    ADJOINT = 1
    DUAL = 2
    ADJOINT_CHECKBIT = 3


class AutodiffMode(enum.Enum):
    """Which version of a kernel runs: the kernel itself, its dual (forward mode) or its adjoint (reverse)."""

    NONE = 0
    VALIDATION = 1
    FORWARD = 2
    REVERSE = 3


class Layout(enum.Enum):
    AOS = 0
    SOA = 1
