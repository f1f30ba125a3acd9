// The target registry: per backend, its name, the features qd.compile assumes without a device,
// how a kernel compiles to artefacts (one entry point for qd.compile), and its runtime factory.
#include "target/target.h"

#include "codegen/llvm/target_amdgpu.h"
#include "codegen/llvm/target_cuda.h"
#include "codegen/spirv/codegen_spirv.h"
#include "runtime/amdgpu/amdgpu_runtime.h"
#include "runtime/cpu/cpu_runtime.h"
#include "runtime/cuda/cuda_runtime.h"
#include "runtime/vulkan/vulkan_runtime.h"

namespace qd {

namespace {

std::unique_ptr<Runtime> no_metal_runtime(const RuntimeOptions &) {
  throw RuntimeError("metal needs macOS: Metal kernels run only on Apple's Metal framework, which this build "
                     "does not have; qd.compile(kernel, ..., arch=qd.metal) still produces their MSL here");
}

// qd.compile for vulkan without a device: a capable desktop GPU (atomics/support_table.cpp's
// default features), whose subgroups also have every basic operation (for subgroup aggregation).
TargetFeatures vulkan_compile_features() {
  TargetFeatures f = default_features(Backend::Vulkan);
  for (Cap c : {Cap::subgroup_basic, Cap::subgroup_vote, Cap::subgroup_arithmetic, Cap::subgroup_ballot,
                Cap::subgroup_shuffle, Cap::subgroup_shuffle_relative, Cap::subgroup_extended_types})
    f.caps.set(c);
  return f;
}

const std::vector<TargetEntry> &registry() {
  static const std::vector<TargetEntry> entries = {
      {Backend::Cpu, cpu_features, [](KernelIR &k, const Target &t) { return cpu_artifacts(k, t.features); },
       create_cpu_runtime},
      {Backend::Cuda, [] { return TargetFeatures{.cuda_sm = cuda_sm({})}; },
       [](KernelIR &k, const Target &t) { return cuda_compile(k, t.features).artifacts; }, create_cuda_runtime},
      {Backend::Amdgpu, [] { return TargetFeatures{.amdgpu_gfx = amdgpu_gfx({})}; },
       [](KernelIR &k, const Target &t) { return amdgpu_compile(k, t.features, /*code_object=*/false).artifacts; },
       create_amdgpu_runtime},
      {Backend::Vulkan, vulkan_compile_features, spirv_artifacts, create_vulkan_runtime},
      {Backend::Metal, [] { return default_features(Backend::Metal); }, spirv_artifacts, no_metal_runtime},
  };
  return entries;
}

}  // namespace

const TargetEntry &target_entry(Backend backend) {
  for (const TargetEntry &e : registry())
    if (e.backend == backend) return e;
  throw RuntimeError(std::string("the ") + backend_name(backend) + " backend is not available in this build");
}

std::unique_ptr<Runtime> create_runtime(Backend backend, const RuntimeOptions &options) {
  return target_entry(backend).create_runtime(options);
}

TargetFeatures compile_features(Backend backend) { return target_entry(backend).compile_features(); }

std::map<std::string, std::string> compile_artifacts(std::unique_ptr<KernelIR> k, const Target &target) {
  return target_entry(target.backend).artifacts(*k, target);
}

}  // namespace qd
