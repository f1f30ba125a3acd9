"""qd.simt.grid: operations over the whole launch. There is no grid-wide barrier: split the work
into two top-level loops (two launches) instead."""
import warnings

from quadrants.lang.ops import builtin
from quadrants.lang.simt._common import gpu_context


@builtin
def mem_fence():
    """A device-scope memory fence: this thread's earlier writes are ordered before its later ones
    for every thread of the launch. No thread waits; legal in divergent code."""
    ctx = gpu_context("qd.simt.grid.mem_fence")
    ctx.b.simt("grid.mem_fence")


@builtin
def memfence():
    """Deprecated spelling of qd.simt.grid.mem_fence()."""
    warnings.warn("qd.simt.grid.memfence() is deprecated; use qd.simt.grid.mem_fence() instead.",
                  DeprecationWarning, stacklevel=2)
    return globals()["mem_fence"]()
