#!/usr/bin/env bash
# Runs the C++ unit tests and the pytest suite under AddressSanitizer + UndefinedBehaviorSanitizer.
#
#   scripts/sanitize.sh                 # everything: the Catch2 units and the whole pytest suite
#   scripts/sanitize.sh --ci            # the Catch2 units and the subset CI runs (CI_TESTS below)
#   scripts/sanitize.sh tests/python/test_atomics.py -k cas   # the Catch2 units, then these pytest args
#
# The core, the extension and the Catch2 binary are built with -fsanitize=address,undefined into
# build-asan/ (QD_ASAN_BUILD overrides it); LLVM, the Vulkan loader and the drivers stay
# uninstrumented. The Python interpreter is not instrumented either, so libasan is preloaded and the
# instrumented _core is picked up through QD_CORE_DIR. An ASan report (from the tests' own process or
# any subprocess they start) is written under build-asan/reports/; UBSan (which, linked with ASan,
# writes only its summary line there) stops the process that hits it with an error status and prints
# the report to its stderr, which pytest leaves uncaptured (--capture=sys) and the script keeps in
# build-asan/reports/*.log.
# Exit status 1 on any report or failed test. The Catch2 units also run LeakSanitizer (scripts/lsan.supp).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PY=${PYTHON:-python3}
B=$(realpath -m "${QD_ASAN_BUILD:-build-asan}")
start=$(date +%s)

# CI's subset: the core and the passes (the C++ units, atomic lowering, the front end, data and
# execution, the disk cache) and every codegen: LLVM for the cpu and SPIR-V for vulkan (kernel tests on
# both), PTX and AMDGCN (test_gpu_codegen, compile-only, without its re-run of the whole suite), MSL
# (test_spirv), and contended atomics on cpu and vulkan (test_stress).
CI_TESTS=(tests/python/test_atomic_lowering.py tests/python/test_language.py tests/python/test_errors.py
          tests/python/test_data_and_execution.py tests/python/test_frontend.py tests/python/test_offline_cache.py
          tests/python/test_spirv.py tests/python/test_stress.py tests/python/test_gpu_codegen.py
          --deselect tests/python/test_gpu_codegen.py::test_every_kernel_of_the_suite_compiles_for_gpus)
# The Catch2 units run below, directly. The leak test measures the process's RSS, which ASan's
# quarantine and shadow memory inflate: leaks are LeakSanitizer's job (the Catch2 units).
SKIP=(--ignore=tests/python/test_cpp_units.py
      --deselect "tests/python/test_frontend.py::test_no_leak_of_dropped_kernels_and_fields")
ARGS=("$@")
if [ "${1:-}" = "--ci" ]; then ARGS=("${CI_TESTS[@]}" "${@:2}"); fi

# -O1 keeps the build and the run fast; UBSan aborts on the first finding (no "recover");
# _GLIBCXX_ASSERTIONS checks std::vector / std::string indices and the like.
SAN="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
LAUNCHER=()
if command -v ccache >/dev/null; then LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Sanitize -DQD_BUILD_TESTS=ON \
  -DCMAKE_CXX_FLAGS_SANITIZE="-O1 -g1 -DNDEBUG -D_GLIBCXX_ASSERTIONS $SAN" \
  -DCMAKE_EXE_LINKER_FLAGS="$SAN" -DCMAKE_SHARED_LINKER_FLAGS="$SAN" -DCMAKE_MODULE_LINKER_FLAGS="$SAN" \
  -DQD_CORE_OUTPUT_DIR="$B/core" \
  -DPython_EXECUTABLE="$(command -v "$PY")" "${LAUNCHER[@]}" >/dev/null
cmake --build "$B" -j "$(nproc)"
echo "sanitize: build $(( $(date +%s) - start ))s"

REPORTS="$B/reports"
rm -rf "$REPORTS" && mkdir -p "$REPORTS"
COMMON="abort_on_error=0:print_summary=1"
# Python itself leaks by design (interned objects, module state): no leak check under the interpreter.
export ASAN_OPTIONS="$COMMON:detect_leaks=0:log_path=$REPORTS/asan:exitcode=86"
export UBSAN_OPTIONS="$COMMON:halt_on_error=1:print_stacktrace=1:log_path=$REPORTS/ubsan:exitcode=87"

status=0
t=$(date +%s)
# The Catch2 units are a plain C++ program: here the leak check is on too. The Vulkan loader unloads
# the driver at vkDestroyInstance; lavapipe keeps once-initialised state (pthread_once, 2 x 128 bytes
# per instance on an AMD EPYC Zen 4 host, Mesa 22.3.6) that LeakSanitizer then can neither scan nor
# name ("<unknown module>"), so it reported leaks in every Vulkan test. Preloaded, the driver stays
# mapped: its memory is scanned and nothing leaks.
LVP=$(ls /usr/lib/*-linux-gnu/libvulkan_lvp.so 2>/dev/null | head -n 1 || true)
ASAN_LIB="$(g++ -print-file-name=libasan.so)"
ASAN_OPTIONS="$COMMON:detect_leaks=1:log_path=$REPORTS/asan-cpp:exitcode=86" \
LSAN_OPTIONS="suppressions=$ROOT/scripts/lsan.supp:print_suppressions=0" \
LD_PRELOAD="${LVP:+$ASAN_LIB $LVP}" \
  "$B/qd_cpp_tests" >"$REPORTS/cpp-units.log" 2>&1 || { status=1; echo "sanitize: the C++ units FAILED"; }
tail -n 3 "$REPORTS/cpp-units.log"
echo "sanitize: C++ units $(( $(date +%s) - t ))s"

t=$(date +%s)
# libstdc++ too: the interpreter does not link it, and ASan resolves its __cxa_throw interceptor at start.
PRELOAD="$(g++ -print-file-name=libasan.so) $(g++ -print-file-name=libstdc++.so)"
LD_PRELOAD="$PRELOAD" QD_CORE_DIR="$B/core" PYTHONMALLOC=malloc \
  "$PY" -m pytest -q -p no:cacheprovider -p no:xdist --capture=sys "${SKIP[@]}" "${ARGS[@]}" 2>&1 | tee "$REPORTS/pytest.log" \
  || { status=1; echo "sanitize: pytest FAILED"; }
echo "sanitize: pytest $(( $(date +%s) - t ))s"

PATTERN="runtime error: |ERROR: AddressSanitizer|ERROR: LeakSanitizer|AddressSanitizer: CHECK failed|Assertion .* failed"
if compgen -G "$REPORTS/*san*" >/dev/null || grep -qE "$PATTERN" "$REPORTS"/*.log; then
  for f in "$REPORTS"/*san*; do [ -e "$f" ] && { echo "=== $f"; cat "$f"; }; done
  grep -nE -A12 "$PATTERN" "$REPORTS"/*.log || true
  echo "sanitize: sanitizer report(s): $(ls "$REPORTS"/*san* 2>/dev/null | wc -l) file(s), $(grep -cE "$PATTERN" "$REPORTS"/*.log | awk -F: '{s += $2} END {print s}') in the logs"
  status=1
else
  echo "sanitize: no AddressSanitizer / UndefinedBehaviorSanitizer / libstdc++ assertion report"
fi
echo "sanitize: total $(( $(date +%s) - start ))s"
exit $status
