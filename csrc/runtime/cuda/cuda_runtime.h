#pragma once
#include <memory>

#include "runtime/runtime.h"

namespace qd {

// The CUDA runtime: libcuda loaded at run time; PTX for the device's sm (capped at the newest
// LLVM 19 knows, sm_90: the driver JIT-compiles it for newer GPUs), or for $QD_CUDA_ARCH.
// Throws RuntimeError when there is no driver or no GPU. options.device: the device ordinal.
std::unique_ptr<Runtime> create_cuda_runtime(const RuntimeOptions &options);

}  // namespace qd
