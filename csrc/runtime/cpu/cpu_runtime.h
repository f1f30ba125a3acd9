#pragma once
#include <memory>

#include "runtime/runtime.h"

namespace qd {

std::unique_ptr<Runtime> create_cpu_runtime(const RuntimeOptions &options);

// The cpu's features: Cap::libm (sin ... pow call the C library; without it, legalization builds
// them as on GPUs).
TargetFeatures cpu_features();

// The cpu artefacts of a kernel: "ir" (after the passes) and "llvm_ir" (optimised, as it runs).
std::map<std::string, std::string> cpu_artifacts(KernelIR &k, const TargetFeatures &features);

}  // namespace qd
