#!/usr/bin/env bash
# Builds the wheel with `pip wheel .` in a fresh virtual environment, installs it there and runs an
# example from outside the checkout (CI runs this after scripts/setup.sh).
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
cd "$tmp"
env -u PYTHONPATH venv/bin/python -c 'import quadrants, sys; assert quadrants.__file__.startswith(sys.prefix), quadrants.__file__; print("installed:", quadrants.__version__, quadrants.__file__)'
env -u PYTHONPATH venv/bin/python histogram.py
