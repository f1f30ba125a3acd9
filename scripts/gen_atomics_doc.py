#!/usr/bin/env python3
"""Regenerates the support tables in docs/atomics.md from the core's atomic support table.

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
END = "<!-- END GENERATED -->"


def generated():
    return f"{BEGIN}\n\n{_core.atomic_support_markdown()}{END}"


def main():
    text = open(DOC).read()
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    new = head + generated() + tail
    if "--check" in sys.argv:
        if new != text:
            print("docs/atomics.md is stale: run python3 scripts/gen_atomics_doc.py")
            return 1
        return 0
    open(DOC, "w").write(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
