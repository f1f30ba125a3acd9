"""Quadrants code reaches a few core enums and helpers as qd._lib.core; they live in core.py."""
from quadrants._lib import core  # noqa: F401
