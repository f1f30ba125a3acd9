"""qd.atomic_support: how each atomic op is lowered on the current device (the compiler's own table)."""
from quadrants._lib import _core
from quadrants._lib import runtime
from quadrants import types as T

ATOMIC_DTYPES = ("i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64", "f16", "f32", "f64")
_KINDS = {"native": "native", "cas": "CAS loop", "word_cas": "word CAS loop", "rejected": "rejected"}


def atomic_support(op=None, dtype=None, arch=None):
    """How `qd.atomic_<op>` on `dtype` in global memory compiles on `arch` (default: the current one).

    Returns "native" (one atomic instruction), "CAS loop" (a compare-and-swap retry loop), "word CAS
    loop" (a compare-and-swap retry loop on the aligned 32-bit word holding a narrow element) or
    "rejected" (raises QuadrantsTypeError at compile time). The current arch uses the features its
    device reported at qd.init; another arch uses the features qd.compile assumes for it.
    Without `op` (or `dtype`) returns the table: {op: {dtype name: kind}}.
    """
    prog = runtime.program()
    arch = arch or prog.config.arch
    if isinstance(arch, str):
        arch = runtime.arch_from_name(arch)
    features = list(prog.runtime.features if arch is prog.config.arch else _core.compile_features(arch.name))
    ops = [row["name"] for row in _core.atomic_ops()]

    def kind(o, t):
        name = o[len("atomic_"):] if o.startswith("atomic_") else o
        if name not in ops:
            raise ValueError(f"unknown atomic op '{o}'; choose one of {ops}")
        dt = _dtype(t)
        return _KINDS[_core.atomic_lowering(arch.name, name, dt.core, False, features)[0]]

    if op is not None and dtype is not None:
        return kind(op, dtype)
    rows = [op] if op is not None else ops
    cols = [dtype] if dtype is not None else list(ATOMIC_DTYPES)
    return {r: {_dtype(c).name: kind(r, c) for c in cols} for r in rows}


def _dtype(t):
    if isinstance(t, str):  # "f16" is a qd name here, not numpy's 16-byte float
        by_name = {d.name: d for d in T.ALL}
        if t not in by_name:
            raise ValueError(f"unknown dtype '{t}'; choose one of {sorted(by_name)}")
        return by_name[t]
    return T.to_dtype(t)
