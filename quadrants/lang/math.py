"""qd.math: vector constructors, the math intrinsics and constants under one namespace."""
import math as _math

from quadrants.lang.matrix import vec2, vec3, vec4  # noqa: F401
from quadrants.lang.ops import (  # noqa: F401
    acos, asin, atan, atan2, ceil, cos, exp, floor, log, max, min, pow, round, sin, sqrt, tan, tanh,
)

# Python floats: in a kernel they are compile-time constants of the default float type, or of the
# type they are cast to (qd.cast(qd.math.nan, qd.f64)).
nan, inf, pi, e = _math.nan, _math.inf, _math.pi, _math.e
