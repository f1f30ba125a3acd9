"""What the qd.simt modules share: the current arch and the check that it has blocks (a GPU, or the
cpu, which runs each block's threads on one worker: docs/backends.md)."""
from quadrants._lib import runtime
from quadrants.lang.ast.context import require

GPU_ARCHES = (runtime.cuda, runtime.amdgpu, runtime.vulkan, runtime.metal)
BLOCK_ARCHES = GPU_ARCHES + (runtime.cpu,)


def gpu_context(qualified_name, error_name=None):
    """The kernel being built, after checking that the arch it is built for has blocks."""
    ctx = require(qualified_name)
    arch = ctx.arch
    if arch not in BLOCK_ARCHES:
        raise ValueError(f"{error_name or qualified_name} is not supported for arch {arch.name}: block-shared "
                         f"memory, barriers and fences need an arch with blocks (cpu, cuda, amdgpu, vulkan, metal)")
    return ctx


def in_parallel_loop(ctx, what):
    if not ctx.in_parallel_loop:
        ctx.syntax_error(f"{what} must be called inside the kernel's parallel for loop (every thread of the "
                         f"block runs it)")
