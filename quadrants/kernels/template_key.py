"""How a kernel's template arguments select a compiled specialisation.

A template value is keyed by what the kernel can read from it, never by a reusable address:
numbers, strings, tuples, lists, dicts and numpy arrays by value; fields, ndarrays, functions,
modules and classes by identity (the cache watches them with weak references and forgets the
specialisation when one dies). A plain object passed as a template argument (a config, the `self`
of a kernel written as a method) is keyed by the attributes the kernel reads: while the kernel
compiles, every `obj.attr` read is recorded as a guard (the path from the argument and the value's
key); a later call reuses the compilation when every guard still holds. An object the kernel uses
in any other way (a method call, passing it to a Python function, indexing it) is guarded by all
of its attributes, recursively.
"""
import functools
import types as pytypes

import numpy as np

from quadrants import types as T
from quadrants._lib import runtime
from quadrants.memory.field import Field
from quadrants.memory.ndarray import Ndarray

_IDENTITY = (pytypes.FunctionType, pytypes.BuiltinFunctionType, pytypes.MethodType, pytypes.ModuleType, type,
             T.DataType, functools.partial)


def _by_identity(v):
    return (isinstance(v, (Field, Ndarray) + _IDENTITY) or getattr(type(v), "_qd_identity", False)
            or not hasattr(v, "__dict__"))  # _qd_identity: kernels and funcs


_VALUES = (bool, int, float, str, bytes, type(None), np.generic, tuple, list, dict, np.ndarray)


def is_plain_object(v):
    """An object keyed by its attributes (not a value type, not keyed by identity)."""
    return not isinstance(v, _VALUES) and not _by_identity(v)


def value_key(v, idents, seen=None):
    """A hashable key for a compile-time value; identity-keyed objects are appended to `idents`."""
    seen = {} if seen is None else seen
    if isinstance(v, (bool, int, str, bytes, type(None), np.integer, np.bool_)):
        return (type(v), v)
    if isinstance(v, (float, np.floating)):
        if runtime.config().raise_on_templated_floats:
            raise ValueError(f"a float ({v!r}) in a template argument: each value compiles a kernel of its own; "
                             f"pass it as a run-time argument (or qd.init(raise_on_templated_floats=False))")
        return (type(v), float(v).hex())  # keeps -0.0 and nan apart from 0.0 / each other
    if isinstance(v, (tuple, list)):
        return (type(v),) + tuple(value_key(e, idents, seen) for e in v)
    if isinstance(v, dict):
        return (dict,) + tuple((value_key(k, idents, seen), value_key(e, idents, seen)) for k, e in v.items())
    if isinstance(v, np.ndarray):
        return (np.ndarray, v.dtype.str, v.shape, v.tobytes())
    if _by_identity(v):
        idents.append(v)
        return ("id", id(v))
    if id(v) in seen:  # a cycle of objects
        return ("cycle", seen[id(v)])
    seen[id(v)] = len(seen)
    return (type(v),) + tuple((k, value_key(a, idents, seen)) for k, a in sorted(vars(v).items()))


def argument_key(v, idents):
    """The first-level cache key of a template argument: plain objects by type (guards do the rest)."""
    if is_plain_object(v):
        if runtime.config().raise_on_templated_floats:
            value_key(v, [])  # a float anywhere in it raises, as its attributes are compile-time values
        return ("object", type(v))
    return value_key(v, idents)


def _resolve(values, path):
    v = values[path[0]]
    for attr in path[1:]:
        v = getattr(v, attr)
    return v


def _unbound(v, owner):
    """A @qd.func method read from its own object (obj.f) is keyed as the func itself: the body,
    inlined, reads obj's attributes through the tracker (guarding all of obj instead would cost
    every launch a walk over it)."""
    return v.func if getattr(type(v), "_qd_bound", False) and v.obj is owner else v


def guards_hold(guards, values):
    """Whether every guard still holds. It runs before each launch, so the common guards take short
    ways: an attribute of the argument itself is read directly; an identity key (a field of `self`)
    is an id compare; an immutable value (a number, a tuple of numbers) that is the very object
    which last held is not keyed again. (Only a @qd.func method needs _unbound: its key is the func.)"""
    for path, kind, expected, last in guards:
        try:
            if len(path) == 1:
                owner, v = None, values[path[0]]
            else:
                owner = values[path[0]] if len(path) == 2 else _resolve(values, path[:-1])
                v = getattr(owner, path[-1])
        except AttributeError:
            return False
        if kind == "type":
            if type(_unbound(v, owner)) is not expected:
                return False
        elif expected[0] == "id":  # value_key(v) is ("id", id(v)) exactly when v is this object
            if id(v) != expected[1] and id(_unbound(v, owner)) != expected[1]:
                return False
        elif v is not last[0]:
            v = _unbound(v, owner)
            if value_key(v, []) != expected:
                return False
            if _immutable(v):
                last[0] = v
    return True


_SCALARS = (bool, int, float, str, bytes, type(None))
_UNSET = object()  # no value has held yet


def _immutable(v):
    """A value whose key cannot change while it lives: a Python scalar or a tuple of them."""
    return type(v) in _SCALARS or (type(v) is tuple and all(_immutable(e) for e in v))


class Tracker:
    """Records what a kernel being compiled reads from its plain-object template arguments."""

    def __init__(self):
        self.tracked = {}   # id(obj) -> [obj, [paths], escaped?]
        self.guards = []    # (path, "type" | "key", expected, [the last immutable value that held])
        self.guarded = set()
        self.idents = []    # identity-keyed objects met in guards: the cache entry watches them

    def root(self, obj, index):
        self._track(obj, (index,))

    def is_tracked(self, v):
        t = self.tracked.get(id(v))
        return t is not None and t[0] is v

    def _track(self, obj, path):
        t = self.tracked.get(id(obj))
        if t is not None and t[0] is obj:
            if path not in t[1]:
                t[1].append(path)  # reached another way: its value must match along each way
                self.escape(obj)
            return
        self.tracked[id(obj)] = [obj, [path], False]
        if len(path) > 1:
            self._guard(path, "type", type(obj))

    def _guard(self, path, kind, expected):
        if (path, kind) not in self.guarded:
            self.guarded.add((path, kind))
            self.guards.append((path, kind, expected, [_UNSET]))

    def read_attribute(self, base, attr, value):
        obj, paths, escaped = self.tracked[id(base)]
        if escaped:
            return  # guarded whole
        if isinstance(value, pytypes.MethodType) and value.__self__ is base:
            self.escape(base)  # a method can read anything
            return
        path = paths[0] + (attr,)
        value = _unbound(value, base)
        if is_plain_object(value):
            self._track(value, path)
        else:
            self._guard(path, "key", value_key(value, self.idents))

    def escape(self, obj):
        t = self.tracked[id(obj)]
        if t[2]:
            return
        t[2] = True
        for path in t[1]:
            self._guard(path, "key", value_key(obj, self.idents))
