"""What the qd.simt modules share: the current arch and the check that an op runs on a GPU."""
from quadrants.lang import runtime
from quadrants.lang.context import require

GPU_ARCHES = (runtime.cuda, runtime.amdgpu, runtime.vulkan, runtime.metal)


def gpu_context(qualified_name, error_name=None):
    """The kernel being built, after checking that the arch it is built for has blocks (a GPU)."""
    ctx = require(qualified_name)
    arch = ctx.arch
    if arch not in GPU_ARCHES:
        raise ValueError(f"{error_name or qualified_name} is not supported for arch {arch.name}: block-shared "
                         f"memory, barriers and fences need a GPU arch (cuda, amdgpu, vulkan, metal)")
    return ctx


def in_parallel_loop(ctx, what):
    if not ctx.in_parallel_loop:
        ctx.syntax_error(f"{what} must be called inside the kernel's parallel for loop (every thread of the "
                         f"block runs it)")
