#!/usr/bin/env bash
# The test suite: the C++ unit tests, then the kernel tests on every available arch.
set -euo pipefail
cd "$(dirname "$0")/.."
./build/qd_cpp_tests
python3 -m pytest -q "$@"
