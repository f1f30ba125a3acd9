"""qd._lib.utils.import_qd_python_core(): the version and repository-directory queries Quadrants code
asks its core for, under the names it uses."""
import ctypes
import os
import types

from quadrants._version import __version__


def _getenv(name):
    """The process environment as the C library sees it (os.putenv changes it without os.environ)."""
    libc = ctypes.CDLL(None)
    libc.getenv.restype = ctypes.c_char_p
    value = libc.getenv(name.encode())
    return value.decode() if value is not None else os.environ.get(name)


def get_repo_dir():
    """Where Quadrants keeps its files: $XDG_CACHE_HOME/quadrants, else ~/.cache/quadrants."""
    base = _getenv("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "quadrants")


def import_qd_python_core():
    major, minor, patch = (int(n) for n in __version__.split(".")[:3])
    return types.SimpleNamespace(get_version_major=lambda: major, get_version_minor=lambda: minor,
                                 get_version_patch=lambda: patch, get_version_string=lambda: __version__,
                                 get_repo_dir=get_repo_dir)
