#include "runtime/runtime.h"

#include "codegen/llvm/target_amdgpu.h"
#include "codegen/llvm/target_cuda.h"
#include "codegen/spirv/codegen_spirv.h"
#include "runtime/amdgpu/amdgpu_runtime.h"
#include "runtime/cpu/cpu_runtime.h"
#include "runtime/cuda/cuda_runtime.h"
#include "runtime/vulkan/vulkan_runtime.h"

namespace qd {

std::unique_ptr<Runtime> create_runtime(Backend backend, const RuntimeOptions &options) {
  switch (backend) {
    case Backend::Cpu: return create_cpu_runtime(options);
    case Backend::Cuda: return create_cuda_runtime(options);
    case Backend::Amdgpu: return create_amdgpu_runtime(options);
    case Backend::Vulkan: return create_vulkan_runtime(options);
    case Backend::Metal:
      throw RuntimeError("metal needs macOS: Metal kernels run only on Apple's Metal framework, which this build "
                         "does not have; qd.compile(kernel, ..., arch=qd.metal) still produces their MSL here");
    default: throw RuntimeError(std::string("the ") + backend_name(backend) + " backend is not available in this build");
  }
}

std::map<std::string, std::string> compile_artifacts(std::unique_ptr<KernelIR> k, Backend backend,
                                                     const TargetFeatures &features) {
  switch (backend) {
    case Backend::Cpu: return cpu_artifacts(*k);
    case Backend::Cuda: return cuda_compile(*k, features).artifacts;
    case Backend::Amdgpu: return amdgpu_compile(*k, features, /*code_object=*/false).artifacts;
    case Backend::Vulkan:
    case Backend::Metal: return spirv_artifacts(*k, backend, features);
    default: throw RuntimeError(std::string("qd.compile does not support ") + backend_name(backend) + " yet");
  }
}

TargetFeatures compile_features(Backend backend) {
  switch (backend) {
    case Backend::Cuda: return {cuda_sm({})};
    case Backend::Amdgpu: return {amdgpu_gfx({})};
    default: return default_features(backend);
  }
}

}  // namespace qd
