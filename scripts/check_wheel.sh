#!/usr/bin/env bash
# Builds the wheel with `pip wheel .` in a fresh virtual environment, installs it there and runs an
# example from outside the checkout, and type-checks it against the installed package (CI runs this
# after scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
$PY -m venv "$tmp/venv"
# Compile with the compiler the development build used, so ccache serves its objects (scikit-build-core
# would otherwise pick Python's configured CXX, often another name for the same compiler: all misses).
if [ -z "${CXX:-}" ] && [ -f build/CMakeCache.txt ]; then
  export CXX=$(sed -n 's/^CMAKE_CXX_COMPILER:FILEPATH=//p' build/CMakeCache.txt)
fi
t=$(date +%s)
"$tmp/venv/bin/pip" wheel -q --disable-pip-version-check --no-deps . -w "$tmp/dist"
echo "built $(cd "$tmp/dist" && ls quadrants-*.whl) in $(( $(date +%s) - t ))s"
"$tmp/venv/bin/pip" install -q --disable-pip-version-check "$tmp"/dist/quadrants-*.whl
cp examples/histogram.py "$tmp/"
repo=$(pwd)
cd "$tmp"
env -u PYTHONPATH venv/bin/python -c '
import os, sys, quadrants
here = os.path.dirname(quadrants.__file__)
assert here.startswith(sys.prefix), here
assert all(os.path.exists(os.path.join(here, f)) for f in ("py.typed", "__init__.pyi", "_core.pyi"))
print("installed:", quadrants.__version__, here)'
env -u PYTHONPATH venv/bin/python histogram.py
# The installed package's types (py.typed, __init__.pyi) serve a type checker outside the checkout.
if $PY -m mypy --version >/dev/null 2>&1; then
  $PY -m mypy --python-executable venv/bin/python --config-file "$repo/pyproject.toml" --cache-dir "$tmp/mypy" histogram.py
fi
