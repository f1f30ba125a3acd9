"""print() in kernels: each call appends a record (format number, then its run-time values as 32-bit
words) to a program-wide buffer; the host formats and prints the records after the launch.

Order: records of one thread in program order; between threads, unspecified. A launch printing more
than the buffer holds (PRINT_WORDS words) loses the records that do not fit, and says how many."""
import re
import string
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


# A printf conversion spec without its '%': flags, width, .precision, a length modifier (ignored)
# and the conversion. A format spec of this shape prints as C's printf prints it (as Quadrants
# does); any other spec (">4", ",") is Python's format mini-language.
_PRINTF = re.compile(r"([-+ #0]*)(\d*)(?:\.(\d*))?(?:hh|h|ll|l|L|j|z|t)?([csdioxXufFeEaAgGnp]?)")
_REAL, _SIGNED, _UNSIGNED = "fFeEaAgG", "di", "oxXu"


def check_spec(ctx, spec, dtype):
    """A printf spec's conversion must suit the value's dtype: 'd' / 'i' a signed integer, 'u' / 'o' / 'x'
    an unsigned one, 'f' / 'e' / 'g' / 'a' a real (QuadrantsTypeError naming the line otherwise)."""
    m = _PRINTF.fullmatch(spec)
    conv = m.group(4) if m else ""
    if not conv:
        return
    if conv in "csnp":
        ctx.type_error(f"conversion '{conv}' is not supported.")
    signed_int = dtype.np.kind == "i"
    unsigned_int = dtype.np.kind in "ub"
    if (conv in _REAL and not dtype.is_real) or (conv in _SIGNED and not signed_int) or \
            (conv in _UNSIGNED and not unsigned_int):
        ctx.type_error(f"'{spec}' doesn't match '{dtype}'.")


def format_value(v, name, conv, spec):
    """One value of dtype `name` ("f32", "i64", ...) as a spec formats it: printf's rules for a
    printf spec (no spec: %d for integers, %f for f16 / f32, %.12f for f64), else Python's."""
    m = _PRINTF.fullmatch(spec)
    if conv or m is None:
        return ("{" + conv + (":" + spec if spec else "") + "}").format(v)
    flags, width, prec, c = m.groups()
    real = name.startswith("f")
    if not c:
        c = "f" if real else "d"
        if name == "f64" and prec is None:
            prec = "12"
    if c in "aA":
        text = float(v).hex()
        return text.upper() if c == "A" else text
    text = ("%" + flags + width + ("." + prec if prec is not None else "") + c) % (float(v) if c in _REAL else int(v))
    if c == "o" and "#" in flags and "0o" in text:  # C's alternate octal is 052, Python's 0o52
        text = text.replace("0o", "0", 1)
        if len(text) < int(width or 0):
            text = text + " " if "-" in flags else "0" + text if "0" in flags else " " + text
    return text


def hole(ctx, value, conv, spec):
    """A replacement field of an f-string or str.format in a kernel: (value, conversion, spec) for a
    run-time value (its spec checked against its dtype), the text itself for a compile-time value."""
    if "{" in spec:
        ctx.syntax_error("a format spec in a kernel must be known at compile time")
    value = ctx.rvalue(value)
    if isinstance(value, (Expr, MatrixValue)):
        if spec:
            first = ctx.scalar(value.entries[0]) if isinstance(value, MatrixValue) else value
            check_spec(ctx, spec, first.dtype)
        return (value, conv, spec)
    if not spec or conv or _PRINTF.fullmatch(spec) is None or isinstance(value, str) or \
            not isinstance(value, (bool, int, float, np.integer, np.floating)):
        return ("{" + conv + (":" + spec if spec else "") + "}").format(value)
    dtype = T.f64 if isinstance(value, np.float64) else T.primitive_types.defaults[
        "fp" if isinstance(value, (float, np.floating)) else "ip"]
    check_spec(ctx, spec, dtype)
    return format_value(value, dtype.name, conv, spec)


def str_format(ctx, fmt, args, kwargs):
    """"...".format(*args, **kwargs) in a kernel: a Format. Automatic ({}) and manual ({0}) field
    numbers may mix (the automatic ones count from 0 on their own); every positional and keyword
    argument must be used, every field given (QuadrantsSyntaxError naming the line otherwise)."""
    fields = []
    auto = 0
    try:
        parsed = list(string.Formatter().parse(fmt))
    except ValueError as e:
        ctx.syntax_error(f"str.format: {e}")
    for literal, name, spec, conv in parsed:
        if name is None:
            fields.append((literal, None))
            continue
        if name == "":
            key, auto = auto, auto + 1
        elif name.isdigit():
            key = int(name)
        elif name.isidentifier():
            key = name
        else:
            ctx.syntax_error(f"str.format in a kernel takes plain field names ({{0}}, {{name}}), got '{{{name}}}'")
        fields.append((literal, (key, "!" + conv if conv else "", spec or "")))
    numbers = [f[1][0] for f in fields if f[1] is not None and isinstance(f[1][0], int)]
    expected = max(numbers) + 1 if numbers else 0
    if expected != len(args):
        ctx.syntax_error(f"Expected {expected} positional argument(s), but received {len(args)} instead.")
    names = {f[1][0] for f in fields if f[1] is not None and isinstance(f[1][0], str)}
    for k in names:
        if k not in kwargs:
            ctx.syntax_error(f"Keyword '{k}' not found.")
    for k in kwargs:
        if k not in names:
            ctx.syntax_error(f"Keyword '{k}' not used.")
    parts = []
    for literal, field in fields:
        if literal:
            parts.append(literal)
        if field is not None:
            key, conv, spec = field
            parts.append(hole(ctx, args[key] if isinstance(key, int) else kwargs[key], conv, spec))
    return Format.of(parts)


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
        pieces.append((slots, conv, spec, shape, items[0].dtype.name))

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


def _nested(texts, shape):
    if len(shape) == 1:
        return "[" + ", ".join(texts) + "]"
    m = shape[1]
    return "[" + ", ".join(_nested(texts[r * m:(r + 1) * m], shape[1:]) for r in range(shape[0])) + "]"


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
            slots, conv, spec, shape, name = p
            texts = [format_value(values[i], name, conv, spec) for i in slots]
            text.append(texts[0] if shape is None else _nested(texts, shape))
        out.append("".join(text))
    if used > PRINT_WORDS:
        out.append(f"[quadrants] print buffer full: {used - PRINT_WORDS} words of kernel print() output lost\n")
    sys.stdout.write("".join(out))
    sys.stdout.flush()
