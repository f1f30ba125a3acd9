"""Helpers under the module path Quadrants code imports them from (quadrants.lang.misc)."""
from quadrants._lib import core as _core_lib
from quadrants._lib import runtime as _runtime
from quadrants.lang.ast.context import current as _current
from quadrants.lang.ops import builtin as _builtin
from quadrants.memory.field import Field


def get_host_arch_list():
    """The arches that run on the host CPU: [qd.cpu] (the LLVM cpu backend compiles for the host)."""
    return [_runtime.cpu]


def is_extension_supported(arch, ext):
    """Whether `arch` has the optional feature `ext` (a qd.extension member), in this implementation."""
    return _core_lib.is_extension_supported(arch, ext)


def is_extension_enabled(ext):
    """Whether the arch of the current qd.init() has `ext` (qd.init() first)."""
    return is_extension_supported(_runtime.program().config.arch, ext)


@_builtin
def loop_unique(val, covers=None):
    """A hint that `val` differs between the iterations of the enclosing parallel loop (so accesses
    indexed by it do not collide). Returns `val`; this implementation does not use the hint, which
    changes no result."""
    ctx = _current()
    return val if ctx is None else ctx.rvalue(val)


@_builtin
def block_local(*fields):
    """A hint to cache `fields` in block-local storage (the reference's BLS for sparse fields); this
    implementation has no sparse fields and does not use it, which changes no result."""
    ctx = _current()
    for f in fields:
        if not isinstance(f, Field) and ctx is not None:
            ctx.type_error(f"qd.block_local takes fields, got {type(f).__name__}")


__all__ = ["block_local", "get_host_arch_list", "is_extension_enabled", "is_extension_supported", "loop_unique"]
