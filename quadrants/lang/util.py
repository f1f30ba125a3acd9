"""Helpers under the module path Quadrants code imports them from (quadrants.lang.util)."""
import functools
import importlib.util
import shutil

from quadrants import types as T


def to_numpy_type(dtype):
    """The numpy scalar type of a Quadrants dtype (qd.f32 -> numpy.float32)."""
    return T.to_dtype(dtype).np.type


@functools.cache
def has_pytorch():
    """Whether torch can be imported (the torch interop needs it)."""
    return importlib.util.find_spec("torch") is not None


@functools.cache
def has_paddle():
    """Whether paddle can be imported. Quadrants has no paddle interop here; this only reports it."""
    return importlib.util.find_spec("paddle") is not None


def has_clangpp():
    """Whether clang++ is on PATH (tests of external C++ functions compile with it)."""
    return shutil.which("clang++") is not None


__all__ = ["has_clangpp", "has_paddle", "has_pytorch", "to_numpy_type"]
