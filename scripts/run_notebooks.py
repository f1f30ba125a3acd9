#!/usr/bin/env python3
"""Executes every notebook under examples/ (or those named) in a fresh Jupyter kernel; fails on any error.

    python3 scripts/run_notebooks.py [NOTEBOOK ...]

Needs nbclient and ipykernel (scripts/setup.sh installs them). Each notebook runs with examples/ as
its working directory; the text a cell prints is echoed, so CI logs show what ran.
"""
import pathlib
import sys
import time

import nbclient
import nbformat

ROOT = pathlib.Path(__file__).resolve().parent.parent


def run(path):
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(path.parent)}})
    try:
        client.execute()
    except nbclient.exceptions.CellExecutionError as e:
        print(f"FAILED {path.relative_to(ROOT)}:\n{e}", file=sys.stderr)
        return False
    code_cells = [c for c in nb.cells if c.cell_type == "code"]
    print(f"executed {path.relative_to(ROOT)}: {len(code_cells)} code cells in {time.perf_counter() - start:.1f}s")
    for c in code_cells:
        kinds = []
        for out in c.get("outputs", []):
            if out.output_type == "stream":
                for line in out.text.splitlines():
                    if line.strip():
                        print(f"  [{c.execution_count}] {line}")
            else:
                kinds += list(out.get("data", {}))
        if kinds:
            print(f"  [{c.execution_count}] (displayed {', '.join(sorted(set(kinds)))})")
    return True


def main(argv):
    paths = [pathlib.Path(a).resolve() for a in argv] or sorted((ROOT / "examples").glob("*.ipynb"))
    if not paths:
        print("no notebooks found", file=sys.stderr)
        return 1
    ok = all([run(p) for p in paths])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
