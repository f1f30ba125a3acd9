#!/usr/bin/env bash
# Runs the C++ unit tests and the pytest suite under AddressSanitizer + UndefinedBehaviorSanitizer.
#
#   scripts/sanitize.sh                 # everything: the Catch2 units and the whole pytest suite
#   scripts/sanitize.sh tests/python/test_atomics.py -k cas   # the Catch2 units, then these pytest args
#
# The core, the extension and the Catch2 binary are built with -fsanitize=address,undefined into
# build-asan/ (QD_ASAN_BUILD overrides it); LLVM, the Vulkan loader and the drivers stay
# uninstrumented. The Python interpreter is not instrumented either, so libasan is preloaded and the
# instrumented _core is picked up through QD_CORE_DIR. Every report (from the tests' own process or any
# subprocess they start) is written under build-asan/reports/; the script prints them and exits 1 if
# there is any, or if a test fails.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PY=${PYTHON:-python3}
B=${QD_ASAN_BUILD:-build-asan}
start=$(date +%s)

# -O1 keeps the build and the run fast; UBSan aborts on the first finding (no "recover").
SAN="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
LAUNCHER=()
if command -v ccache >/dev/null; then LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Sanitize -DQD_BUILD_TESTS=ON \
  -DCMAKE_CXX_FLAGS_SANITIZE="-O1 -g1 -DNDEBUG -D_GLIBCXX_ASSERTIONS $SAN" \
  -DCMAKE_EXE_LINKER_FLAGS="$SAN" -DCMAKE_SHARED_LINKER_FLAGS="$SAN" -DCMAKE_MODULE_LINKER_FLAGS="$SAN" \
  -DQD_CORE_OUTPUT_DIR="$ROOT/$B/core" \
  -DPython_EXECUTABLE="$(command -v "$PY")" "${LAUNCHER[@]}" >/dev/null
cmake --build "$B" -j "$(nproc)"
echo "sanitize: build $(( $(date +%s) - start ))s"

REPORTS="$ROOT/$B/reports"
rm -rf "$REPORTS" && mkdir -p "$REPORTS"
COMMON="abort_on_error=0:print_summary=1"
# Python itself leaks by design (interned objects, module state): no leak check under the interpreter.
export ASAN_OPTIONS="$COMMON:detect_leaks=0:log_path=$REPORTS/asan:exitcode=86"
export UBSAN_OPTIONS="$COMMON:halt_on_error=1:print_stacktrace=1:log_path=$REPORTS/ubsan:exitcode=87"

status=0
t=$(date +%s)
# The Catch2 units are a plain C++ program: here the leak check is on too.
ASAN_OPTIONS="$COMMON:detect_leaks=1:log_path=$REPORTS/asan-cpp:exitcode=86:suppressions=$ROOT/scripts/lsan.supp" \
LSAN_OPTIONS="suppressions=$ROOT/scripts/lsan.supp:print_suppressions=0" \
  "$B/qd_cpp_tests" >"$REPORTS/cpp-units.log" 2>&1 || { status=1; echo "sanitize: the C++ units FAILED"; }
tail -n 3 "$REPORTS/cpp-units.log"
echo "sanitize: C++ units $(( $(date +%s) - t ))s"

t=$(date +%s)
# libstdc++ too: the interpreter does not link it, and ASan resolves its __cxa_throw interceptor at start.
PRELOAD="$(g++ -print-file-name=libasan.so) $(g++ -print-file-name=libstdc++.so)"
# test_cpp_units.py runs build/qd_cpp_tests, the uninstrumented one: the units ran above.
LD_PRELOAD="$PRELOAD" QD_CORE_DIR="$ROOT/$B/core" PYTHONMALLOC=malloc \
  "$PY" -m pytest -q -p no:cacheprovider --ignore=tests/python/test_cpp_units.py "$@" || {
    status=1; echo "sanitize: pytest FAILED"; }
echo "sanitize: pytest $(( $(date +%s) - t ))s"

if compgen -G "$REPORTS/*san*" >/dev/null; then
  for f in "$REPORTS"/*san*; do echo "=== $f"; cat "$f"; done
  echo "sanitize: $(ls "$REPORTS"/*san* | wc -l) sanitizer report(s)"
  status=1
else
  echo "sanitize: no AddressSanitizer / UndefinedBehaviorSanitizer report"
fi
echo "sanitize: total $(( $(date +%s) - start ))s"
exit $status
