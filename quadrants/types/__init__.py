"""The bottom layer: dtypes, annotations and exceptions. Imports nothing else of the package.

As `qd.types` it is the namespace of kernel argument annotations and compound dtypes:
qd.types.ndarray(dtype, ndim), qd.types.NDArray[qd.f32, 1], qd.types.vector(3, qd.f32),
qd.types.matrix(2, 2, qd.f32), qd.types.struct(a=qd.f32), qd.types.template().
"""
from quadrants.types import primitive_types
from quadrants.types.annotations import (
    MatrixType, NdarrayType, RefType, Template, VectorType, _NDArrayAlias, is_template, ref, template,
)
from quadrants.types.primitive_types import (  # qd.types.f32 ... as well as qd.f32
    ALL, DataType, f16, f32, f64, from_core, from_numpy, i8, i16, i32, i64, to_dtype, u1, u8, u16, u32, u64,
)

ndarray = NdarrayType
NDArray = _NDArrayAlias()
vector = VectorType
matrix = MatrixType


def struct(**members):
    """qd.types.struct(a=qd.f32, b=qd.types.vector(3, qd.f32)): a struct dtype."""
    from quadrants.memory.struct import StructType  # reach up: a struct type lays out fields (memory)

    return StructType(members)


def is_integral(dtype):
    return primitive_types.to_dtype(dtype).np.kind in "iub"


def is_real(dtype):
    return primitive_types.to_dtype(dtype).is_real


def is_signed(dtype):
    return primitive_types.to_dtype(dtype).np.kind in "if"


__all__ = ["ALL", "f16", "f32", "f64", "from_core", "from_numpy", "i8", "i16", "i32", "i64", "to_dtype",
           "u1", "u8", "u16", "u32", "u64", "DataType", "MatrixType", "NDArray", "NdarrayType", "RefType", "Template", "VectorType", "is_integral", "is_real",
           "is_signed", "is_template", "matrix", "ndarray", "primitive_types", "ref", "struct", "template", "vector"]
