"""The Python package in layers (pyproject.toml's import-linter contract, docs/architecture.md):
each layer imports only those below it, no two modules import each other (directly or around a
longer circle), and every import inside a function that reaches another module of the package says
why in a comment on its line."""
import ast
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "quadrants"

grimp = pytest.importorskip("grimp", reason="import-linter (pip install import-linter) checks the layers")

# Reach-ups the contract ignores (pyproject.toml): not part of the module graph's cycles either.
_IGNORED = {("quadrants.types", "quadrants.memory.struct"), ("quadrants.types.annotations", "quadrants.memory.field"),
            ("quadrants.types.annotations", "quadrants.memory.ndarray"),
            ("quadrants.types.annotations", "quadrants.lang.matrix"), ("quadrants.lang.matrix", "quadrants.linalg"),
            ("quadrants._lib", "quadrants")}


def test_the_import_linter_contract_is_kept():
    pytest.importorskip("importlinter", reason="pip install import-linter")
    r = subprocess.run([sys.executable, "-c", "from importlinter.cli import lint_imports_command; "
                        "lint_imports_command()", "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]


def _graph():
    sys.path.insert(0, str(ROOT))
    try:
        g = grimp.build_graph("quadrants", cache_dir=None)
    finally:
        sys.path.remove(str(ROOT))
    edges = {m: {t for t in g.find_modules_directly_imported_by(m) if (m, t) not in _IGNORED} for m in g.modules}
    return edges


def _cycles(edges):
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10000))
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_no_two_modules_import_each_other():
    edges = _graph()
    # The public namespace (quadrants/__init__.py) imports everything; nothing may import it back.
    importers = sorted(m for m, ts in edges.items() if "quadrants" in ts and m != "quadrants")
    assert not importers, f"modules importing the top-level namespace `quadrants`: {importers}"
    assert _cycles(edges) == []


def test_the_cycle_check_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def _function_level_imports(path):
    tree = ast.parse(path.read_text())
    lines = path.read_text().splitlines()
    found = []

    def walk(node, in_function):
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if in_function and isinstance(child, (ast.Import, ast.ImportFrom)):
                names = [child.module or ""] if isinstance(child, ast.ImportFrom) else [a.name for a in child.names]
                if isinstance(child, ast.ImportFrom) and child.level or any(n.startswith("quadrants") for n in names):
                    found.append((child.lineno, lines[child.lineno - 1]))
            walk(child, inside)

    walk(tree, False)
    return found


def test_every_function_level_import_of_the_package_says_why():
    silent = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for lineno, line in _function_level_imports(path):
            if "#" not in line:
                silent.append(f"{path.relative_to(ROOT)}:{lineno}: {line.strip()}")
    assert not silent, "function-level imports without a comment saying why:\n" + "\n".join(silent)
