"""Differential fuzzer, bounded run: seeded random kernels on every available arch vs the reference.

The generator (scalar programs, captured Python-scope values, nested dense layouts), the reference
semantics, the known limits (LIMITS) and the known bugs (KNOWN_BUGS) are in tests/fuzzer.py; long
runs with shrinking: `python3 benchmarks/fuzz.py --cases 2000`.
test_fuzz_differential fails on any mismatch that no open KNOWN_BUGS row explains;
test_fuzz_known_bug has one test per KNOWN_BUGS row and arch where the row is open, expected to
fail (not strict) until the fix lands.
"""
import numpy as np
import pytest

import fuzzer as F
import quadrants as qd
from test_utils import _is_available, expected_archs

CASES = 150  # per arch: ~2 s on the cpu, ~5 s on lavapipe (the captured-value cases are the heavier ones)
CONTENDED = 12  # contended-atomic kernels per arch
LAYOUTS = 8  # nested-dense layouts per arch (4 per kernel)
SEED = 2026
ARCHES = [a.name for a in expected_archs()]
_runs = {}


def _run(arch):
    """Runs the seeded cases once per arch (the tests below share the result)."""
    if not _is_available(getattr(qd, arch)):
        pytest.skip(f"{arch} is not available on this machine")
    if arch not in _runs:
        qd.init(arch=getattr(qd, arch))
        try:
            cases, regenerated = F.generate(SEED, CASES, arch=arch, size="small")
            stats = F.Stats()
            stats.regenerated = regenerated
            mismatches = F.run_cases(cases, arch, stats)
            contended = F.run_contended(arch, SEED, CONTENDED, stats)
            layouts = F.run_layouts(arch, SEED, LAYOUTS, stats)
            shrunk = None
            new = sorted((m for m in mismatches if not m.known), key=lambda m: m.cell is None)  # wrong values first
            if new:  # a minimal kernel for the message (only when failing)
                small = F.shrink(new[0].case, arch, budget_s=30, pred=lambda c, a: F.fails(c, a, F.like(new[0])))
                shrunk = F.repro(small, arch)
            layouts.sort(key=lambda lp: lp[1][0].startswith("error"))  # wrong values first
            if layouts:  # the first one shrunk to a script, for the message
                first = F.layout_script(F.shrink_layout(layouts[0][0], arch, budget_s=20), arch)
                layouts = [(first, layouts[0][1])] + [(lay.describe(), problems) for lay, problems in layouts[1:]]
            captures = sum(any(s.kind in ("clet", "call") for s in F.walk_stmts(c.stmts)) for c in cases)
        finally:
            qd.reset()
        _runs[arch] = (stats, mismatches, shrunk, contended, layouts, captures)
    return _runs[arch]


@pytest.mark.parametrize("arch", ARCHES)
def test_fuzz_differential(arch):
    stats, mismatches, shrunk, contended, layouts, captures = _run(arch)
    print(stats.report())
    assert not contended, "\n".join(f"{c.source()}{problems}" for c, problems in contended)
    new = sorted((m for m in mismatches if not m.known), key=lambda m: m.cell is None)
    errors = sum(m.cell is None for m in new)
    assert not new, (f"{len(new) - errors} value(s) differ from the reference and {errors} generated kernel(s) fail "
                     f"to compile on {arch} (seed {SEED}):\n" + "\n".join(map(repr, new[:10])) + f"\nshrunk:\n{shrunk}")
    assert not layouts, f"{len(layouts)} nested-dense layout(s) fail on {arch} (seed {SEED}); the first, shrunk:\n" + \
        "\n".join(f"{what}\n{problems}" for what, problems in layouts[:3])
    # The run really compared things, and the limits steered around stay a minority of the cases.
    assert stats.cases[arch] == CASES and stats.compared[arch] > 10 * CASES and stats.contended[arch] == CONTENDED
    assert stats.layouts[arch] == LAYOUTS and captures >= CASES // 5, captures  # captured values in many cases
    for (a, why), n in stats.avoided.items():
        assert n <= CASES // 2, f"LIMITS '{why}' steered {n} of {CASES} cases on {a}"


def _known_bug_params():
    params = []
    for name, row in F.KNOWN_BUGS.items():
        for arch in ARCHES:
            if arch in row["arches"]:
                mark = pytest.mark.xfail(reason=f"{name}: {row['why']}", strict=False)
                params.append(pytest.param(name, arch, marks=mark, id=f"{name}-{arch}"))
    return params


@pytest.mark.parametrize("bug,arch", _known_bug_params())
def test_fuzz_known_bug(bug, arch):
    _stats, mismatches, *_ = _run(arch)
    hits = [m for m in mismatches if bug in m.known]
    assert not hits, f"{len(hits)} value(s) hit {bug} on {arch}:\n" + "\n".join(map(repr, hits[:5]))


def test_reference_semantics():
    """Spot checks of the reference itself against the docs (no kernel runs)."""
    m = F.make
    assert F.binary("//", m("i32", -7), m("i32", 2)) == -4 and F.binary("%", m("i32", -7), m("i32", 2)) == 1
    assert F.binary("//", m("i32", -2 ** 31), m("i32", -1)) == -2 ** 31  # wraps
    assert isinstance(F.binary("%", m("u8", 5), m("u8", 0)), F.Unspec)
    assert F.binary("//", m("f64", 1.0), m("f64", 0.1)) == 9.0  # Python, not floor(1.0 / 0.1) = 10
    assert F.binary("%", m("f32", -1.0), m("f32", 3.0)).dtype.name == "float32"
    assert F.binary("<<", m("i8", 1), m("i32", 8)) == 0 and F.binary(">>", m("i8", -5), m("u64", 99)) == -1
    assert F.binary(">>", m("i16", -5), m("i32", -1)) == -1  # a negative amount is "too far"
    assert isinstance(F.binary("min", m("f32", 0.0), m("f32", -0.0)), F.Alts)
    assert F.binary("max", m("f64", float("nan")), m("f64", 2.0)) == 2.0
    assert F.binary("+", m("f32", 16777216.0), m("f32", 1.0)) == 16777216.0  # rounded in f32
    assert F.binary("and", m("f32", 0.5), m("i64", 2 ** 40)) == 1
    assert F.binary("**", m("i32", -1), m("i32", -3)) == -1 and F.binary("**", m("i8", 3), m("i8", 5)) == -13
    assert isinstance(F.convert(m("f32", 3e9), "i32"), F.Unspec) and isinstance(F.convert(m("f32", -2.5), "u8"), F.Unspec)
    assert F.convert(m("i64", 2 ** 62 + 1), "f32") == 2.0 ** 62 and F.convert(m("i32", -1), "u16") == 65535
    assert F.literal_type(300, "u8") == "i32" and F.literal_type(0.5, "i64") == "f32"
    assert F.literal_type(2 ** 40, "i32") == "i64" and F.literal_type(2 ** 63, "i64") == "u64"
    # captured values: a Python number is a literal (its own local: default_ip / default_fp); a typed
    # value keeps its dtype, tagged where the implementation's literal rule changes the operation's type
    assert F.default_type(5) == "i32" and F.default_type(2 ** 40) == "i64" and F.default_type(0.5) == "f32"
    cap = F.Capture("G1", "vector", {"[0]": (None, 300), "[1]": ("u8", np.uint8(200))}, {"": (2,)}, "")
    gen = F.Generator(1)
    assert gen.cap_operand(cap, "[0]", "i8", "+").dtype == "i32"  # 300 does not fit i8
    e = gen.cap_operand(cap, "[1]", "i8", "+")
    assert e.dtype == "u8" and e.op == "captured_dtype"  # G1[1] read directly: the implementation's literal is i32
    scalar = F.Capture("G2", "scalar", {"": ("u8", np.uint8(200))}, {}, "")
    e = gen.cap_operand(scalar, "", "i8", "+")
    assert e.dtype == "u8" and e.op == "captured_dtype"  # the implementation takes qd.u8(200) as a literal: i32
    assert gen.cap_operand(scalar, "", "i64", "+").op is None  # i64 either way
    # nested dense layouts: the indices are the axes in axis order, an axis used twice multiplies
    lay = F.Layout.__new__(F.Layout)
    assert lay.shape([((2,), (100,), False), ((0,), (19,), False)]) == (19, 100)
    assert lay.shape([((1,), (2,), False), ((0,), (3,), False), ((1,), (5,), False)]) == (3, 10)
    assert lay.shape([((0, 1), (4, 4), True), ((3,), (2,), False)]) == (4, 4, 2)


def test_contended_atomic_checks_catch_a_wrong_order():
    """The contended-atomics checker itself: a consistent result passes, a lost update does not."""
    import random
    gen = F.Generator(1)
    gen.case = F.Case(1)
    c = F.Contended(random.Random(5), None, gen)
    c.op, c.form, c.dtype, c.m, c.n = "add", "old", "i32", 1, 50
    c.idx = np.zeros(c.n, np.int32)
    c.vals = np.arange(1, c.n + 1, dtype=np.int32)
    c.init = np.array([7], np.int32)
    cell, old = c.init.copy(), c.vals.copy()
    for i in range(c.n):  # one serial order
        old[i] = cell[0]
        cell[0] = F.atomic_result("add", cell[0], c.vals[i], None)[0]
    assert c.check(cell, old) == []
    old[3] = old[5]  # two updates read the same value: one update lost
    assert c.check(cell, old) != []


def test_contended_atomic_checks_accept_a_cell_coming_back_to_a_value():
    """A serial order in which the cell comes back to a value (+4, -4 around it): following the
    updates greedily from the start can take the wrong one first and get stuck (the checker did,
    on lavapipe's f64 atomic adds: seed 7); the order exists, so the check passes. -0.0 and 0.0
    are different values there, and an order that none of the updates allows still fails."""
    import random
    gen = F.Generator(1)
    gen.case = F.Case(1)
    c = F.Contended(random.Random(5), None, gen)
    c.op, c.form, c.dtype, c.m = "add", "old", "f64", 1
    c.vals = np.array([1.0, 5.0, -5.0, -0.0], np.float64)
    c.n = len(c.vals)
    c.idx = np.zeros(c.n, np.int32)
    c.init = np.array([-2.0], np.float64)
    order = [1, 2, 3, 0]  # -2 -> 3 -> -2 -> -2 (adding -0.0) -> -1
    cell, old = c.init.copy(), np.zeros(c.n, np.float64)
    for i in order:
        old[i] = cell[0]
        cell[0] += c.vals[i]
    # greedy from -2 (three updates read -2) takes +1 after the -0.0 and is stuck at -1
    assert c.check(cell, old) == []
    old[2] = 4.0  # -5 read 4: nothing ever made the cell 4
    assert c.check(cell, old) != []


def test_fuzz_command_line_runs():
    """benchmarks/fuzz.py stays runnable: a tiny run on the cpu, in a child process."""
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    r = subprocess.run([sys.executable, os.path.join(root, "benchmarks", "fuzz.py"), "--cases", "20", "--arch", "cpu",
                        "--contended", "2", "--layouts", "2", "--max-shrinks", "0", "--size", "small"],
                       capture_output=True, text=True, timeout=300, env=dict(os.environ, PYTHONPATH=root))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "cpu: 20 cases in" in r.stdout and "2 contended-atomic kernels" in r.stdout, r.stdout
    assert "2 nested-dense layouts" in r.stdout, r.stdout
