#pragma once
// SPIR-V codegen: the core IR, after run_passes, lowered straight to one SPIR-V module with a
// compute entry point per task. Used by the Vulkan runtime and, through SPIRV-Cross, for Metal.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "atomics/support_table.h"
#include "ir/ir.h"
#include "target/target.h"

namespace qd {

// What a module is generated for.
struct SpirvTarget {
  Backend backend = Backend::Vulkan;  // Vulkan or Metal: which rows of the support table apply
  TargetFeatures features;            // the device's capabilities
  // The features are a real device's: shader types (f64, i8, ...) are checked against its
  // shader_* / *_storage capabilities, so a kernel the device cannot run fails to compile.
  bool device_features = false;
  uint32_t max_block_dim = 1024;
  bool fast_math = false;  // else IEEE arithmetic: NoContraction, and inf / NaN / -0.0 preserved
};

struct SpirvTaskInfo {
  std::string entry;   // the entry point's name
  bool parallel = false;
  uint32_t block_dim = 1;  // the workgroup size (1 for serial tasks)
  bool has_effects = true;  // false: a serial task that only computes values (nothing to launch)
};

// Bindings of descriptor set 0: the kernel's buffers in order (fields, ndarrays, temps, result),
// then the 8-byte argument slots at `args_binding`.
struct SpirvModule {
  std::vector<uint32_t> words;
  std::vector<SpirvTaskInfo> tasks;
  uint32_t args_binding = 0;
};

// The workgroup size of a parallel loop whose block_dim is not given.
constexpr uint32_t kDefaultBlockDim = 128;

// Generates and validates the module; a module that fails validation is a CompileError naming
// the kernel, so nothing invalid ever reaches a driver.
SpirvModule codegen_spirv(const KernelIR &k, const SpirvTarget &target);

// qd.compile's artefacts for vulkan / metal: "ir", "spirv" (the binary), "spirv_asm", and for
// metal "msl". Runs the passes on `k` first.
std::map<std::string, std::string> spirv_artifacts(KernelIR &k, const Target &target);

}  // namespace qd
