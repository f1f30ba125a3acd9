"""*Pooled* shared arrays for the algorithms' phase loops.

qd.simt.block.SharedArray allocates a fresh shared array per call site. An algorithm emits many
phase loops into one kernel, and the SPIR-V backend counts every shared array of a kernel among its
buffer bindings (lavapipe allows 32 per shader), so a radix sort of 64-bit keys would not fit. Here
a shared array is allocated once per kernel and per role (`pooled`), and every phase loop reuses it:
the loops are separate tasks run one after another, and each writes a pooled array before reading
it."""
from quadrants.lang.ast.context import require
from quadrants.lang.ops import builtin
from quadrants.lang.simt import block as _block


class _Pooled(_block.SharedArray):
    """A shared array allocated at the kernel's scope and used by several of its parallel loops."""

    def __init__(self, ctx, shape, dtype, role):
        self.shape, self.dtype, self.element_shape = tuple(shape), dtype, ()
        self.name = f"algorithms_{role}_{dtype}_{len(ctx.shared_arrays)}"
        ctx.shared_arrays.append(self)
        self.buffer = ctx.b.add_shared(dtype.core, list(self.shape), self.name)


def pooled(ctx, role, shape, dtype):
    """The kernel's shared array for `role` (one per role, shape and dtype)."""
    pool = ctx.__dict__.setdefault("_qd_algorithms_shared", {})
    key = (role, tuple(shape), dtype)
    if key not in pool:
        pool[key] = _Pooled(ctx, shape, dtype, role)
    return pool[key]


@builtin
def shared(role, shape, dtype):
    """A pooled shared array (see the module doc) for use in a phase loop."""
    return pooled(require("qd.algorithms"), role, (shape,) if isinstance(shape, int) else shape, dtype)
