"""The module path `quadrants._tensor`: the unified tensor API (quadrants/memory/tensor.py)."""
from quadrants.memory.tensor import (  # noqa: F401
    Backend, MatrixTensor, Tensor, VectorTensor, _with_layout, matrix_tensor, tensor, vector_tensor, wrap,
)
