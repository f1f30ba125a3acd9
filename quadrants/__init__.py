"""Quadrants: a Python-embedded JIT compiler for parallel kernels.

    import quadrants as qd
    qd.init(arch=qd.cpu)
"""
import os as _os

if _os.environ.get("QD_CORE_DIR"):  # development: a _core built elsewhere
    __path__.insert(0, _os.environ["QD_CORE_DIR"])

from quadrants._version import __version__ as __version_str__  # noqa: E402

__version__ = tuple(int(p) for p in __version_str__.split("."))  # (major, minor, patch), as Quadrants has it
from quadrants.language import *  # noqa: E402,F401,F403  (the kernel language: qd.kernel, qd.field, qd.cast, ...)
from quadrants.language import _current_config, _lib, exception, graph, impl, simt, types  # noqa: E402,F401
from quadrants.language import _logging  # noqa: E402,F401
from quadrants import ad, algorithms, linalg, math  # noqa: E402,F401  (the libraries written in it, and autodiff)
from quadrants import interop, sparse  # noqa: E402,F401  (the reference's namespaces: Metal queue sharing; sparse grids, unsupported)
from quadrants.linalg import eig, make_spd, polar_decompose, solve, svd, sym_eig  # noqa: E402,F401


def __getattr__(name):
    if name == "cfg":  # the current qd.init()'s configuration, None before qd.init()
        return _current_config()
    raise AttributeError(f"module 'quadrants' has no attribute '{name}'")
