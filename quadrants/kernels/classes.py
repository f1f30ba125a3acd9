"""@qd.dataclass and @qd.data_oriented: classes whose methods are funcs and kernels."""
from quadrants.kernels.kernel import Func
from quadrants.memory.struct import StructType


def dataclass(cls):
    """@qd.dataclass: a struct type from a class's annotated members; its @qd.func methods stay methods."""
    members = {k: v for k, v in getattr(cls, "__annotations__", {}).items()}
    methods = {k: v for k, v in vars(cls).items() if isinstance(v, Func)}
    return StructType(members, name=cls.__name__, methods=methods)


def data_oriented(cls):
    """@qd.data_oriented: a class whose methods are kernels and funcs reading its fields (self.x[i]).

    Kernels as methods take `self` as a compile-time argument; funcs as methods are inlined with it."""
    cls._qd_data_oriented = True
    return cls


