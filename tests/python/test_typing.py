"""The typed public surface: quadrants/__init__.pyi matches the runtime namespace, and mypy uses it."""
import ast
import inspect
import pathlib
import subprocess
import sys
import types

import pytest

import quadrants as qd
from quadrants import _core

ROOT = pathlib.Path(__file__).resolve().parents[2]
STUB = ROOT / "quadrants" / "__init__.pyi"


def _stub_names():
    tree = ast.parse(STUB.read_text())
    names, arity = set(), {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            names |= {a.asname for a in node.names if a.asname and a.asname == a.name}  # `X as X` re-exports
        elif isinstance(node, ast.AnnAssign):
            names.add(node.target.id)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
            if isinstance(node, ast.FunctionDef):
                arity[node.name] = [a.arg for a in node.args.args + node.args.kwonlyargs]
    return {n for n in names if not n.startswith("_")}, arity


def test_stub_declares_every_public_name():
    stub, _ = _stub_names()
    runtime = {n for n in dir(qd) if not n.startswith("_") and not isinstance(getattr(qd, n), types.ModuleType)}
    runtime |= {"ad", "math", "lang", "simt", "graph", "algorithms", "types", "cfg"}  # modules; cfg: a module __getattr__
    missing, stale = sorted(runtime - stub), sorted(stub - runtime)
    assert not missing, f"public names missing from quadrants/__init__.pyi (add a declaration): {missing}"
    assert not stale, f"quadrants/__init__.pyi declares names the package does not have: {stale}"
    assert (ROOT / "quadrants" / "py.typed").exists()


def test_stub_atomics_follow_the_core_table_and_the_runtime():
    _, arity = _stub_names()
    for row in _core.atomic_ops():
        name = f"atomic_{row['name']}"
        assert name in arity, name
        # The stub takes the parameters the runtime function takes (memory_order=, ... when they come).
        runtime_params = list(inspect.signature(getattr(qd, name)).parameters)
        assert arity[name] == runtime_params, (name, arity[name], runtime_params)
        assert runtime_params == ["x", *row["params"].split(", "), "memory_order", "memory_scope"]
        kinds = [p.kind for p in inspect.signature(getattr(qd, name)).parameters.values()]
        assert kinds[-2:] == [inspect.Parameter.KEYWORD_ONLY] * 2  # memory_order= / memory_scope= keyword-only
    for name in ("atomic_load", "atomic_store", "atomic_fence"):
        assert arity[name] == list(inspect.signature(getattr(qd, name)).parameters), name


def test_stub_init_takes_every_option():
    from quadrants._lib.options import OPTIONS

    _, arity = _stub_names()
    assert sorted(arity["init"]) == sorted(["arch", "require_version", "_test_mode", *OPTIONS])


def test_mypy_checks_calls_against_the_stub(tmp_path):
    pytest.importorskip("mypy")
    src = tmp_path / "user_code.py"
    src.write_text(
        "import numpy as np\n"
        "import quadrants as qd\n"
        "qd.init(arch=qd.cpu, debug='yes')\n"                          # 3: wrong option type
        "x = qd.field(qd.f32, shape=8)\n"
        "@qd.kernel\n"
        "def k(a: qd.types.ndarray(dtype=qd.f32, ndim=1), n: qd.i32) -> qd.f32:\n"
        "    for i in range(n):\n"
        "        qd.atomic_add(x[i])\n"                                 # 8: missing operand
        "        qd.atomic_cas(x[i], 1, 2)\n"
        "    return x[0]\n"
        "k(np.zeros(4, np.float32))\n"                                  # 11: missing argument
        "k(np.zeros(4, np.float32), 3)\n"
        "qd.atomic_nand(x[0], 1)\n"                                     # 13: no such atomic
        "s: str = qd.atomic_support('add', qd.f32)\n"
        "reveal_type(x)\n")
    out = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
                          "--cache-dir", str(tmp_path / "cache"), str(src)],
                         cwd=ROOT, capture_output=True, text=True).stdout
    lines = {int(line.split(":")[1]) for line in out.splitlines() if line.startswith(str(src)) and ": error:" in line}
    assert lines == {3, 8, 11, 13}, out
    assert 'Revealed type is "quadrants.memory.field.Field"' in out, out
