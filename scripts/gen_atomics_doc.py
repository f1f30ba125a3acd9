#!/usr/bin/env python3
"""Regenerates the generated tables in docs/atomics.md from the core: the atomic support table and
what each memory order / scope emits per backend (csrc/atomics/memory_model.cpp).

    python3 scripts/gen_atomics_doc.py          # rewrite the generated section
    python3 scripts/gen_atomics_doc.py --check  # exit 1 if the docs are stale (the test suite runs this)
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from quadrants import _core  # noqa: E402

DOC = os.path.join(ROOT, "docs", "atomics.md")
BEGIN = "<!-- BEGIN GENERATED: atomic support table (scripts/gen_atomics_doc.py) -->"
BEGIN_MM = "<!-- BEGIN GENERATED: memory order and scope table (scripts/gen_atomics_doc.py) -->"
END = "<!-- END GENERATED -->"
SECTIONS = [(BEGIN, _core.atomic_support_markdown), (BEGIN_MM, _core.memory_model_markdown)]


def replace(text, begin, make):
    head, rest = text.split(begin, 1)
    _, tail = rest.split(END, 1)
    return head + f"{begin}\n\n{make()}{END}" + tail


def main():
    text = open(DOC).read()
    new = text
    for begin, make in SECTIONS:
        new = replace(new, begin, make)
    if "--check" in sys.argv:
        if new != text:
            print("docs/atomics.md is stale: run python3 scripts/gen_atomics_doc.py")
            return 1
        return 0
    open(DOC, "w").write(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
