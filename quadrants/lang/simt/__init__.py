"""qd.simt: cooperation between the threads of a block (qd.simt.block), of a subgroup
(qd.simt.subgroup), of a CUDA warp (qd.simt.warp) and of the grid (qd.simt.grid). See docs/simt.md."""
from quadrants.lang.simt import block, grid, subgroup, warp  # noqa: F401
from quadrants.lang.simt._tile import Tile16x16, Tile32x32  # noqa: F401

__all__ = ["block", "grid", "subgroup", "warp", "Tile16x16", "Tile32x32"]
