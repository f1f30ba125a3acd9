"""Helpers under the module path Quadrants' own tests import them from (quadrants.lang.misc)."""
from quadrants._lib import runtime as _runtime


def get_host_arch_list():
    """The arches that run on the host CPU: [qd.cpu] (the LLVM cpu backend compiles for the host)."""
    return [_runtime.cpu]


__all__ = ["get_host_arch_list"]
