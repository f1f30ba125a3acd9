"""@qd.dataclass and @qd.data_oriented: classes whose methods are funcs and kernels."""
from quadrants.kernels.kernel import Func
from quadrants.memory.struct import StructType


def dataclass(cls):
    """@qd.dataclass: a struct type from a class's annotated members; its @qd.func methods stay methods."""
    members = {k: v for k, v in getattr(cls, "__annotations__", {}).items()}
    methods = {k: v for k, v in vars(cls).items() if isinstance(v, Func)}
    return StructType(members, name=cls.__name__, methods=methods)


def data_oriented(cls=None, *, template_primitives=True):
    """@qd.data_oriented: a class whose methods are kernels and funcs reading its fields (self.x[i]).

    Kernels as methods take `self` as a compile-time argument; funcs as methods are inlined with it.
    The int / float / bool members a kernel reads are compile-time values keyed by value, so a changed
    member always takes effect (by compiling a specialisation for the new value).
    @qd.data_oriented(template_primitives=False) is accepted and computes the same results: Quadrants
    reads such members as run-time arguments instead (no recompilation); here they stay keyed values."""
    if cls is None:
        return lambda c: data_oriented(c, template_primitives=template_primitives)
    cls._qd_data_oriented = True
    cls._qd_template_primitives = bool(template_primitives)
    return cls


