"""print() in kernels: each call appends a record (format number, then its run-time values as 32-bit
words) to a program-wide buffer; the host formats and prints the records after the launch.

Order: records of one thread in program order; between threads, unspecified. A launch printing more
than the buffer holds (PRINT_WORDS words) loses the records that do not fit, and says how many."""
import struct
import sys

import numpy as np

from quadrants import types as T
from quadrants.lang.ast.values import Expr, MatrixValue
from quadrants.memory.field import program_field
from quadrants._lib import runtime

PRINT_WORDS = 1 << 18  # 1 MiB of i32 words


class Format:
    """A string with run-time holes: parts are str or (value, conversion, format spec)."""

    def __init__(self, parts):
        self.parts = parts

    @property
    def values(self):
        return [p for p in self.parts if not isinstance(p, str)]

    @staticmethod
    def of(parts):
        if all(isinstance(p, str) for p in parts):
            return "".join(parts)
        return Format(parts)


def _words(ctx, v):
    """The 32-bit words holding scalar Expr v, and how to decode them: (dtype name, number of words)."""
    def bit_cast(x, dtype):
        return ctx.expr(ctx.b.bitcast(ctx.scalar(x).stmt, dtype.core))

    d = v.dtype
    if d in (T.f16, T.f32):
        return [bit_cast(ctx.cast(v, T.f32), T.i32)], ("f32", 1)
    if d is T.f64:
        bits = bit_cast(v, T.i64)
        return [ctx.cast(bits, T.i32), ctx.cast(ctx.binary("shr", bits, 32), T.i32)], ("f64", 2)
    if d.bits == 64:
        return [ctx.cast(v, T.i32), ctx.cast(ctx.binary("shr", v, 32), T.i32)], (d.name, 2)
    return [ctx.cast(v, T.i32)], (d.name, 1)


def kernel_print(ctx, args, kwargs):

    sep, end = kwargs.pop("sep", " "), kwargs.pop("end", "\n")
    if kwargs or not isinstance(sep, str) or not isinstance(end, str):
        ctx.syntax_error("print() in a kernel takes values and the keywords sep= and end= (strings)")
    pieces, words, layout = [], [], []   # pieces: str or (slot index, conversion, spec, shape)

    def hole(value, conv="", spec=""):
        value = ctx.rvalue(value)
        if isinstance(value, MatrixValue):
            items = [ctx.scalar(e) for e in value.entries]
            shape = value.shape
        else:
            items, shape = [ctx.scalar(value)], None
        slots = []
        for it in items:
            w, how = _words(ctx, it)
            slots.append(len(layout))
            layout.append(how)
            words.extend(w)
        pieces.append((slots, conv, spec, shape))

    for k, a in enumerate(args):
        if k:
            pieces.append(sep)
        a = ctx.rvalue(a)
        if isinstance(a, Format):
            for p in a.parts:
                if isinstance(p, str):
                    pieces.append(p)
                else:
                    hole(*p)
        elif isinstance(a, (Expr, MatrixValue)):
            hole(a)
        else:
            pieces.append(str(a))  # compile-time values print as Python prints them
    pieces.append(end)
    prog = runtime.program()
    buf, cursor = print_buffer(prog)
    ctx.print_formats.append((pieces, layout))
    n = len(words) + 1
    base = ctx.atomic("add", ctx.element(cursor, [0]), n)
    fits = ctx.binary("le", ctx.binary("add", base, n), PRINT_WORDS)
    s = ctx.b.begin_if(fits.stmt)
    ctx.store(ctx.element(buf, [base]), len(ctx.print_formats))
    for k, w in enumerate(words):
        ctx.store(ctx.element(buf, [ctx.binary("add", base, k + 1)]), w)
    ctx.b.end_if(s)


_BITS = {"i8": 8, "i16": 16, "i32": 32, "u1": 1, "u8": 8, "u16": 16, "u32": 32}


def _decode(words, how):
    name, n = how
    lo = int(words[0]) & 0xFFFFFFFF
    if name == "f32":  # numpy's f32 prints its shortest form: 0.1, not 0.10000000149011612
        return np.frombuffer(lo.to_bytes(4, "little"), dtype=np.float32)[0]
    if n == 2:
        raw = lo | ((int(words[1]) & 0xFFFFFFFF) << 32)
        if name == "f64":
            return struct.unpack("<d", raw.to_bytes(8, "little"))[0]
        return raw - (1 << 64) if name == "i64" and raw >= 1 << 63 else raw
    bits = _BITS[name]
    v = lo & ((1 << bits) - 1)
    return v - (1 << bits) if name.startswith("i") and v >= 1 << (bits - 1) else v


def _nested(vals, shape):
    if len(shape) == 1:
        return "[" + ", ".join(str(v) for v in vals) + "]"
    m = shape[1]
    return "[" + ", ".join(_nested(vals[r * m:(r + 1) * m], shape[1:]) for r in range(shape[0])) + "]"


def print_buffer(prog):
    """(words, cursor): the i32 fields kernel print() records go to, one pair per program."""
    return (program_field(prog, "print", T.i32, (PRINT_WORDS,), "__qd_print"),
            program_field(prog, "print_cursor", T.i32, (1,), "__qd_print_cursor"))


def flush(prog, formats):
    """Prints the records the last launch wrote, then empties the buffer."""
    buf, cursor = print_buffer(prog)
    used = int(cursor[0])
    if not used:
        return
    cursor[0] = 0
    data = buf.to_numpy()[:min(used, PRINT_WORDS)]
    out, k = [], 0
    while k < len(data):
        pieces, layout = formats[int(data[k]) - 1]
        k += 1
        values = []
        for how in layout:
            values.append(_decode(data[k:k + how[1]], how))
            k += how[1]
        text = []
        for p in pieces:
            if isinstance(p, str):
                text.append(p)
                continue
            slots, conv, spec, shape = p
            vals = [values[i] for i in slots]
            if shape is not None and not spec:
                text.append(_nested(vals, shape))
                continue
            v = vals[0] if shape is None else np.array(vals).reshape(shape)
            text.append(("{" + conv + (":" + spec if spec else "") + "}").format(v))
        out.append("".join(text))
    if used > PRINT_WORDS:
        out.append(f"[quadrants] print buffer full: {used - PRINT_WORDS} words of kernel print() output lost\n")
    sys.stdout.write("".join(out))
    sys.stdout.flush()
