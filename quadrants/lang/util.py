"""Small conversions the reference's tests import (quadrants.lang.util)."""
from quadrants import types as T


def to_numpy_type(dtype):
    """The numpy scalar type of a Quadrants dtype (qd.f32 -> numpy.float32)."""
    return T.to_dtype(dtype).np.type
