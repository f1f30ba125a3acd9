"""Builds instances of kernel-argument dataclasses for tests: every member gets a small object of its
annotated type (ndarray annotation: a 10-per-axis qd.ndarray; template: a qd.field(qd.i32, 10);
a nested dataclass: built the same way)."""
import dataclasses

from quadrants import language as qd  # the kernel language namespace (nothing imports `quadrants` back)


def _make_child_obj(obj_type):
    if isinstance(obj_type, qd.types.ndarray):
        ndim = obj_type.ndim if obj_type.ndim is not None else 1
        return qd.ndarray(obj_type.dtype, shape=(10,) * ndim)
    if dataclasses.is_dataclass(obj_type):
        return build_struct(obj_type)
    if obj_type is qd.Template or isinstance(obj_type, qd.Template):
        return qd.field(qd.i32, (10,))
    raise TypeError(f"dataclass_test_tools: no object to build for annotation {obj_type!r}")


def build_struct(struct_type):
    """An instance of the dataclass `struct_type`, each member built from its annotation."""
    return struct_type(**{f.name: _make_child_obj(f.type) for f in dataclasses.fields(struct_type)})


def build_obj_tuple_from_type_dict(name_to_type):
    """One built object per annotation of {name: annotation}, in order."""
    return tuple(_make_child_obj(t) for t in name_to_type.values())
