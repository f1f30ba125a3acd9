"""qd.simt: cooperation between the threads of a block (qd.simt.block) and of the grid
(qd.simt.grid). See docs/simt.md."""
from quadrants.lang.simt import block, grid  # noqa: F401

__all__ = ["block", "grid"]
