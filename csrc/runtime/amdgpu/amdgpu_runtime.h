#pragma once
#include <memory>

#include "runtime/runtime.h"

namespace qd {

// The AMDGPU runtime: the HIP runtime (libamdhip64) loaded at run time; code objects for
// $QD_AMDGPU_ARCH (default gfx942), linked with ld.lld. Throws RuntimeError when there is no HIP
// runtime or no GPU. options.device: the device ordinal.
std::unique_ptr<Runtime> create_amdgpu_runtime(const RuntimeOptions &options);

}  // namespace qd
