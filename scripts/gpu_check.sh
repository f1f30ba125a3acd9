#!/usr/bin/env bash
# On a machine with an NVIDIA GPU and its driver: builds Quadrants, then runs the C++ GPU tests,
# the kernel tests on qd.cuda and (when present) benchmarks/atomics.py --arch cuda, within about
# 8 minutes. Everything goes to a log (gpu_check.log, or $QD_GPU_LOG); the exit status is 0 only
# when every step passed.
#
#     scripts/gpu_check.sh                  # QD_GPU_BUDGET=470 seconds in all, by default
#
# The build uses cmake directly when cmake, LLVM 19 and pybind11 are already installed (fast, no
# network); otherwise it runs scripts/setup.sh, the README's set-up command (apt + pip).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
LOG=${QD_GPU_LOG:-$ROOT/gpu_check.log}
PY=${PYTHON:-python3}
BUDGET=${QD_GPU_BUDGET:-470}
START=$(date +%s)
exec > >(tee "$LOG") 2>&1

elapsed() { echo $(( $(date +%s) - START )); }
left() { echo $(( BUDGET - $(elapsed) )); }
declare -a RESULTS=()
FAILED=0

# run NAME MAX_SECONDS CMD...: runs CMD under a timeout (at most what is left of the budget).
run() {
  local name=$1 max=$2
  shift 2
  local limit
  limit=$(left)
  (( limit > max )) && limit=$max
  if (( limit < 10 )); then
    echo "== $name: skipped, the time budget is spent"
    RESULTS+=("$name: skipped (no time left)")
    FAILED=1
    return
  fi
  echo "== $name (limit ${limit}s, at $(elapsed)s): $*"
  local t0=$(date +%s) rc
  timeout --kill-after=10 "$limit" "$@"
  rc=$?
  local took=$(( $(date +%s) - t0 ))
  if (( rc == 0 )); then
    RESULTS+=("$name: ok (${took}s)")
  else
    (( rc == 124 || rc == 137 )) && RESULTS+=("$name: TIMED OUT after ${took}s") || RESULTS+=("$name: FAILED, exit $rc (${took}s)")
    FAILED=1
  fi
}

build() {
  local jobs
  jobs=$(nproc 2>/dev/null || echo 4)
  if command -v cmake >/dev/null && [ -d /usr/lib/llvm-19/lib/cmake/llvm ] && "$PY" -m pybind11 --cmakedir >/dev/null 2>&1; then
    local gen=()
    command -v ninja >/dev/null && gen=(-G Ninja)
    cmake -S . -B build "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DQD_BUILD_TESTS=ON \
      -DPython_EXECUTABLE="$(command -v "$PY")" >/dev/null &&
      cmake --build build -j "$jobs"
  else
    echo "cmake / LLVM 19 / pybind11 missing: running scripts/setup.sh"
    scripts/setup.sh
  fi
}

export PY
export -f build

echo "Quadrants GPU check, $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "== machine"
nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv 2>&1 || echo "nvidia-smi: not available"
"$PY" --version

run build 300 bash -c build
if [ ! -x build/qd_cpp_tests ]; then
  echo "the build failed: nothing to test"
  RESULTS+=("tests: not run (no build)")
  FAILED=1
else
  export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH}
  run "cuda available" 60 "$PY" -c 'import quadrants as qd; qd.init(arch=qd.cuda); print("cuda is available")'
  run "C++ GPU tests" 60 build/qd_cpp_tests "[gpu]"
  run "kernel tests on cuda" 300 env QD_WANTED_ARCHS=cuda "$PY" -m pytest -q -p no:cacheprovider tests/python
  if [ -f benchmarks/atomics.py ]; then
    run "benchmarks/atomics.py --arch cuda" 90 "$PY" benchmarks/atomics.py --arch cuda
  else
    RESULTS+=("benchmarks/atomics.py: not present, not run")
  fi
fi

echo
echo "== summary ($(elapsed)s in all; log: $LOG)"
printf '  %s\n' "${RESULTS[@]}"
exit $FAILED
