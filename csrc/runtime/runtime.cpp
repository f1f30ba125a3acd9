#include "runtime/runtime.h"

#include "codegen/llvm/target_amdgpu.h"
#include "codegen/llvm/target_cuda.h"
#include "runtime/amdgpu/amdgpu_runtime.h"
#include "runtime/cpu/cpu_runtime.h"
#include "runtime/cuda/cuda_runtime.h"

namespace qd {

std::unique_ptr<Runtime> create_runtime(Backend backend, const RuntimeOptions &options) {
  switch (backend) {
    case Backend::Cpu: return create_cpu_runtime(options);
    case Backend::Cuda: return create_cuda_runtime(options);
    case Backend::Amdgpu: return create_amdgpu_runtime(options);
    default: throw RuntimeError(std::string("the ") + backend_name(backend) + " backend is not available in this build");
  }
}

std::map<std::string, std::string> compile_artifacts(std::unique_ptr<KernelIR> k, Backend backend,
                                                     const TargetFeatures &features) {
  switch (backend) {
    case Backend::Cpu: return cpu_artifacts(*k);
    case Backend::Cuda: return cuda_compile(*k, features).artifacts;
    case Backend::Amdgpu: return amdgpu_compile(*k, features, /*code_object=*/false).artifacts;
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
