"""Where Python code runs: inside a kernel being built or in Python scope.

The front end (quadrants.lang.ast.context.KernelContext) sets the kernel being built; the lower
layers only ask, so that qd.f32(x) casts inside a kernel and converts in Python scope, or a field
refuses host access while a kernel compiles, without importing the front end.
"""
_current = None  # the KernelContext being built, None in Python scope


def current():
    """The kernel being built, or None in Python scope."""
    return _current


def swap(ctx):
    """Makes `ctx` (None: Python scope) the current scope; returns the previous one, to restore."""
    global _current
    prev, _current = _current, ctx
    return prev
