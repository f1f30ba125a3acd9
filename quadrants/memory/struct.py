"""qd.types.struct(...) / @qd.dataclass: compound element types; fields of them hold one field per member."""
import numpy as np

from quadrants import types as T
from quadrants.types.exceptions import QuadrantsSyntaxError
from quadrants.types.scope import current
from quadrants.memory.field import field


class StructType:
    """A struct dtype: members name -> dtype (a scalar dtype, a vector/matrix type or another struct).

    Particle.field(shape=n) makes a StructField; Particle(x=..., v=...) makes a value (in kernels a
    StructValue, in Python scope a dict-like PyStruct); methods of a @qd.dataclass are @qd.func."""

    _qd_builtin = True

    def __init__(self, members, name="struct", methods=None):
        self.members, self._unpacked_groups = _expand_unpacked(dict(members), name)
        for k, t in self.members.items():
            if not isinstance(t, (T.DataType, T.VectorType, T.MatrixType, StructType)) and t not in (int, float):
                raise TypeError(f"struct member '{k}' has type {t!r}; use a dtype, a vector/matrix type or a struct")
        self.name = name
        self.methods = dict(methods or {})

    def __repr__(self):
        return f"<struct {self.name} {', '.join(f'{k}: {t!r}' for k, t in self.members.items())}>"

    def __getattr__(self, attr):
        methods = self.__dict__.get("methods", {})
        if attr in methods:
            return methods[attr]
        raise AttributeError(f"struct {self.__dict__.get('name')} has no attribute '{attr}'")

    def __call__(self, *args, **kwargs):
        """Particle(x, v) or Particle(x=..., v=...); members not given are zero."""
        names = list(self.members)
        if len(args) > len(names):
            raise TypeError(f"{self.name} has {len(names)} members, got {len(args)} positional values")
        values = dict(zip(names, args))
        for k, v in kwargs.items():
            if k not in self.members:
                raise TypeError(f"{self.name} has no member '{k}'")
            if k in values:
                raise TypeError(f"{self.name}: member '{k}' given twice")
            values[k] = v
        ctx = current()
        if ctx is None:
            return PyStruct(self, {k: _py_member(t, values.get(k, 0)) for k, t in self.members.items()})
        out = {}
        for k, t in self.members.items():
            v = values.get(k, 0)
            if isinstance(t, StructType):  # a struct value, a dict of members, or t's first member
                out[k] = v if isinstance(v, StructValue) else t(**v) if isinstance(v, dict) else t(v)
            elif isinstance(t, (T.VectorType, T.MatrixType)):
                out[k] = t(v)
            else:
                out[k] = ctx.cast(v, T.to_dtype(t))
        return StructValue(self, out)

    def field(self, shape=None, name=None, needs_grad=False, needs_dual=False, **_ignored):
        """A StructField: one field per member; needs_grad= / needs_dual=: grad / dual companions of the
        real members."""
        return StructField(self, shape, name, needs_grad=needs_grad, needs_dual=needs_dual)


def _expand_unpacked(members, struct_name):
    """Members with each unpacked vector member r (qd.types.vector(n, dtype, unpacked=True)) replaced
    by its scalar members _r0 .. _r{n-1}, and the groups: {r: (n, dtype, (_r0, ...))}."""
    out, groups = {}, {}
    for k, t in members.items():
        if isinstance(t, T.VectorType) and t.unpacked:
            names = tuple(f"_{k}{i}" for i in range(t.n))
            for s in names:
                if s in out:
                    raise QuadrantsSyntaxError(f"struct {struct_name}: member '{s}' collides with a member of "
                                                 f"the unpacked vector '{k}' (stored as {', '.join(names)})")
                out[s] = t.dtype
            groups[k] = (t.n, t.dtype, names)
        else:
            if k in out:  # a member named as one of an earlier unpacked vector's
                owner = next(g for g, (_, _, names) in groups.items() if k in names)
                raise QuadrantsSyntaxError(f"struct {struct_name}: member '{k}' collides with a member of the "
                                             f"unpacked vector '{owner}' (stored as {', '.join(groups[owner][2])})")
            out[k] = t
    return out, groups


class UnpackedGroup:
    """t.r of a struct value in a kernel, where r is an unpacked vector member: t.r[i] with a
    compile-time i is the scalar member _r{i}."""

    def __init__(self, value, name):
        self.value, self.name = value, name
        self.count, self.dtype, self.names = value.type._unpacked_groups[name]


def leaves(stype, prefix=()):
    """The scalar/vector/matrix members of a struct type, nested structs flattened: [(path, dtype, shape)]."""
    out = []
    for k, t in stype.members.items():
        if isinstance(t, StructType):
            out.extend(leaves(t, prefix + (k,)))
        elif isinstance(t, (T.VectorType, T.MatrixType)):
            out.append((prefix + (k,), t.dtype, t.shape))
        else:
            out.append((prefix + (k,), T.to_dtype(t), None))
    return out


def value_from_leaves(stype, leaf_values):
    """A StructValue (in kernels) from {path: value}."""
    members = {}
    for k, t in stype.members.items():
        if isinstance(t, StructType):
            members[k] = value_from_leaves(t, {p[1:]: v for p, v in leaf_values.items() if p[0] == k})
        else:
            members[k] = leaf_values[(k,)]
    return StructValue(stype, members)


def py_from_leaves(stype, leaf_values):
    members = {}
    for k, t in stype.members.items():
        if isinstance(t, StructType):
            members[k] = py_from_leaves(t, {p[1:]: v for p, v in leaf_values.items() if p[0] == k})
        else:
            members[k] = leaf_values[(k,)]
    return PyStruct(stype, members)


def get_path(v, path):
    for k in path:
        v = v[k] if isinstance(v, dict) else getattr(v, k)
    return v


def _py_member(t, v):
    if isinstance(t, StructType):
        return v if isinstance(v, PyStruct) else t(**v) if isinstance(v, dict) else t(v)
    if isinstance(t, (T.VectorType, T.MatrixType)):
        return t(v)
    d = T.to_dtype(t)
    if d.np.kind in "iu" and isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)):
        bits = 8 * d.np.itemsize  # an integer member keeps the low bits, as a C cast (and Quadrants) does
        v = int(v) & ((1 << bits) - 1)
        if d.np.kind == "i" and v >> (bits - 1):
            v -= 1 << bits
    return d.np.type(v)


class PyStruct(dict):
    """A struct value in Python scope: a dict whose members are also attributes (p.x)."""

    def __init__(self, stype, values):
        super().__init__(values)
        object.__setattr__(self, "type", stype)

    def __getattr__(self, k):
        try:
            return self[k]
        except KeyError:
            raise AttributeError(k) from None

    def __setattr__(self, k, v):
        self[k] = v


class _StructElement(PyStruct):
    """x[i] of a struct field in Python scope: its members' values (a PyStruct), and setting a
    member writes the field: x[i].b = 1, x[i].line.length = 2.0."""

    def __init__(self, sfield, key):
        super().__init__(sfield.type, {k: f[key] for k, f in sfield.fields.items()})
        object.__setattr__(self, "_element", (sfield, key))

    def __setattr__(self, k, v):
        sfield, key = self._element
        if k not in sfield.fields:
            raise AttributeError(f"struct {sfield.type.name} has no member '{k}'")
        sfield.fields[k][key] = v
        self[k] = sfield.fields[k][key]


class StructValue:
    """A struct inside a kernel: member name -> front-end value (Expr/Var/Ptr/MatrixValue/StructValue)."""

    def __init__(self, stype, members):
        self.type, self.members = stype, dict(members)


class Struct:
    """qd.Struct: a struct value without a declared type, qd.Struct(a=1, b=x) or qd.Struct({"a": 1,
    "line": {...}}): assigned to a struct target, its members are matched by name (and converted);
    in kernels its members' types are those of the values. qd.Struct.field({"a": qd.f32, ...},
    shape=...) is qd.types.struct(...).field(shape=...)."""

    _qd_builtin = True

    def __new__(cls, *args, **kwargs):
        if len(args) > 1 or (args and not isinstance(args[0], dict)):
            raise TypeError("qd.Struct takes a dict of members or keyword members")
        values = dict(args[0]) if args else {}
        values.update(kwargs)
        ctx = current()
        if ctx is None:
            return PyStruct(ANONYMOUS, {k: Struct(v) if isinstance(v, dict) else v for k, v in values.items()})
        members = {}
        for k, v in values.items():
            v = Struct(v) if isinstance(v, dict) else ctx.rvalue(v)
            members[k] = v if isinstance(v, StructValue) else ctx.new_var(v)
        return StructValue(ANONYMOUS, members)

    @staticmethod
    def field(members, shape=None, name=None, needs_grad=False, needs_dual=False, **_ignored):
        return StructType(members, name=name or "struct").field(shape=shape, name=name, needs_grad=needs_grad,
                                                                needs_dual=needs_dual)


ANONYMOUS = StructType({}, name="qd.Struct")  # the type of qd.Struct values: members matched by name


class StructField:
    """A field of structs: one Field (or StructField) per member, e.g. particles.x[i] / particles[i].x."""

    def __init__(self, stype, shape, name=None, needs_grad=False, needs_dual=False):
        self.type = stype
        self.name = name or stype.name
        self.fields = {}
        for k, t in stype.members.items():
            if isinstance(t, StructType):
                self.fields[k] = StructField(t, shape, f"{self.name}.{k}", needs_grad, needs_dual)
            else:
                self.fields[k] = field(t, shape, name=f"{self.name}.{k}", needs_grad=needs_grad, needs_dual=needs_dual)

    def __getattr__(self, k):
        fields = self.__dict__.get("fields", {})
        if k in fields:
            return fields[k]
        raise AttributeError(f"struct field {self.__dict__.get('name')} has no member '{k}'")

    @property
    def shape(self):
        return next(iter(self.fields.values())).shape

    def _place(self, shape):  # qd.root.dense(qd.i, n).place(struct_field): every member there
        for f in self.fields.values():
            f._place(shape)

    def keys(self):
        return list(self.fields)

    def __getitem__(self, key):
        return _StructElement(self, key)

    def __setitem__(self, key, value):
        for k, v in dict(value).items():
            self.fields[k][key] = v

    def to_numpy(self):
        return {k: f.to_numpy() for k, f in self.fields.items()}

    def from_numpy(self, d):
        for k, v in d.items():
            self.fields[k].from_numpy(v)

    def fill(self, value):
        for f in self.fields.values():
            f.fill(value)

    def __repr__(self):
        return f"<qd.struct_field {self.name} shape={self.shape}>"
