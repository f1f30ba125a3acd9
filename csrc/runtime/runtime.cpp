#include "runtime/runtime.h"

#include "runtime/cpu/cpu_runtime.h"

namespace qd {

std::unique_ptr<Runtime> create_runtime(Backend backend, const RuntimeOptions &options) {
  switch (backend) {
    case Backend::Cpu: return create_cpu_runtime(options);
    default: throw RuntimeError(std::string("the ") + backend_name(backend) + " backend is not available in this build");
  }
}

std::map<std::string, std::string> compile_artifacts(std::unique_ptr<KernelIR> k, Backend backend,
                                                     const TargetFeatures &features) {
  switch (backend) {
    case Backend::Cpu: return cpu_artifacts(*k);
    default: throw RuntimeError(std::string("qd.compile does not support ") + backend_name(backend) + " yet");
  }
}

}  // namespace qd
