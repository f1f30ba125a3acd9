"""qd.math: vector constructors and the math intrinsics under one namespace."""
from quadrants.lang.matrix import vec2, vec3, vec4  # noqa: F401
from quadrants.lang.ops import (  # noqa: F401
    acos, asin, atan, atan2, ceil, cos, exp, floor, log, max, min, pow, round, sin, sqrt, tan, tanh,
)
