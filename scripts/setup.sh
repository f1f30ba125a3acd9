#!/usr/bin/env bash
# Installs everything Quadrants needs on Debian 12 (apt + PyPI), builds the C++ core and installs the
# package in development mode. Safe to re-run: the build is incremental.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi

APT_PACKAGES=(
  cmake ninja-build g++ ccache
  llvm-19-dev lld-19 llvm-19-tools  # LLVM 19: codegen, ORC JIT, NVPTX/AMDGPU; lld links AMDGPU code objects
  catch2                            # C++ unit tests
  spirv-tools                       # SPIR-V validator (library and spirv-val)
  libvulkan-dev libvulkan1 mesa-vulkan-drivers  # Vulkan loader + lavapipe (a Vulkan 1.3 CPU device)
  spirv-cross libspirv-cross-c-shared-dev       # MSL from SPIR-V for Metal
)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing Debian packages: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Run time + tests (pytest, pytest-xdist: its workers isolate a driver crash) + build (pybind11,
# scikit-build-core); notebooks in CI (nbclient, ipykernel, matplotlib); the type check of examples/ (mypy);
# the layers of the package (import-linter); what the reference's tests import (psutil, scipy, autograd).
$PY -m pip install -q --disable-pip-version-check numpy pytest pytest-xdist pybind11 scikit-build-core \
  nbclient ipykernel matplotlib mypy import-linter psutil scipy autograd

LAUNCHER=()
if command -v ccache >/dev/null; then LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DQD_BUILD_TESTS=ON \
  -DPython_EXECUTABLE="$(command -v "$PY")" "${LAUNCHER[@]}" >/dev/null
cmake --build build -j "$(nproc)"

# Development install: a .pth file puts this checkout on sys.path (what `pip install -e` does).
SITE=$($PY -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$(pwd)" > "$SITE/quadrants-dev.pth"
$PY -c 'import quadrants as qd; qd.init(arch=qd.cpu); print("quadrants ready:", qd.__file__)'
