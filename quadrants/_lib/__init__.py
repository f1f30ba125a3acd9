"""The core binding: the compiled extension quadrants._core and what wraps it (the program of one
qd.init, its options, the offline cache, the atomic support table, the device-capability enums).

Quadrants code reaches a few core enums and helpers as qd._lib.core; they live in core.py.
"""
from quadrants import _core  # the C++ extension; the package reaches it as quadrants._lib._core
from quadrants.types import primitive_types

primitive_types.bind_core(_core.DataType)  # before anything builds IR with a dtype

from quadrants._lib import core  # noqa: E402,F401
from quadrants._lib import utils  # noqa: E402,F401  (qd._lib.utils.import_qd_python_core)
