#include "runtime/cuda/cuda_runtime.h"

#include <algorithm>
#include <cstdlib>
#include <map>

#include "codegen/llvm/target_cuda.h"
#include "runtime/cuda/cuda_driver.h"
#include "runtime/gpu/gpu_runtime.h"
#include "target/shared_memory.h"

namespace qd {

namespace {

constexpr int kAttrMultiprocessorCount = 16;          // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
constexpr int kAttrMaxThreadsPerMultiprocessor = 39;  // CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR
constexpr int kAttrMaxSharedPerBlockOptin = 97;        // CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
constexpr int kNewestSm = 90;                         // LLVM 19's NVPTX knows up to sm_90

class CudaCalls : public GpuDevice {
 public:
  explicit CudaCalls(int ordinal)
      : dev(ordinal),
        sm_count(dev.attribute(kAttrMultiprocessorCount)),
        threads_per_sm(dev.attribute(kAttrMaxThreadsPerMultiprocessor)) {}

  uint64_t alloc(size_t bytes) override { return dev.alloc(bytes); }
  void free(uint64_t p) override { dev.free(p); }
  void to_device(uint64_t dst, const void *src, size_t n) override { dev.copy_to_device(dst, src, n); }
  void to_host(void *dst, uint64_t src, size_t n) override { dev.copy_to_host(dst, src, n); }
  void zero(uint64_t dst, size_t n) override { dev.memset8(dst, 0, n); }
  void launch(void *fn, unsigned grid, unsigned block, unsigned dynamic_shared, uint64_t table,
              uint64_t args) override {
    auto f = static_cast<cuda::Function>(fn);
    cuda::DevicePtr t = table, a = args;
    // Dynamic shared memory above 48 KiB needs the kernel's opt-in first (once per kernel).
    if (dynamic_shared > opted_in[f]) {
      dev.set_max_dynamic_shared_bytes(f, dynamic_shared);
      opted_in[f] = dynamic_shared;
    }
    dev.launch(f, {grid, 1, 1}, {block, 1, 1}, {&t, &a}, dynamic_shared);
  }
  void synchronize() override { dev.synchronize(); }
  unsigned resident_blocks(int block) override {
    int per_sm = std::clamp(threads_per_sm / std::max(block, 1), 1, 32);  // 32: the per-SM block limit
    return static_cast<unsigned>(std::max(sm_count, 1) * per_sm);
  }

  cuda::CudaDevice dev;
  int sm_count, threads_per_sm;
  std::map<cuda::Function, unsigned> opted_in;  // per kernel: the dynamic shared bytes it may use
};

int device_sm(const cuda::CudaDevice &dev) {
  auto [major, minor] = dev.compute_capability();
  return std::min(major * 10 + minor, kNewestSm);
}

class CudaRuntime : public GpuRuntime {
 public:
  CudaRuntime(std::unique_ptr<CudaCalls> calls, TargetFeatures features)
      : GpuRuntime(Backend::Cuda, std::move(calls), std::move(features)) {}

 protected:
  Loaded load_kernel(KernelIR &k) override {
    Loaded out{cuda_compile(k, features()), {}};
    cuda::CudaDevice &dev = static_cast<CudaCalls &>(device()).dev;
    cuda::Module m = dev.load_module(out.compiled.artifacts.at("ptx"));  // unloaded with the device
    for (const std::string &s : out.compiled.symbols) out.functions.push_back(dev.get_function(m, s));
    return out;
  }
};

}  // namespace

std::unique_ptr<Runtime> create_cuda_runtime(const RuntimeOptions &options) {
  auto calls = std::make_unique<CudaCalls>(device_ordinal(options, "cuda"));
  if (options.cuda_stack_limit > 0) calls->dev.set_stack_bytes(static_cast<size_t>(options.cuda_stack_limit));
  const char *env = std::getenv("QD_CUDA_ARCH");
  TargetFeatures f;
  f.cuda_sm = env && *env ? cuda_sm({}) : device_sm(calls->dev);
  // The device's own shared-memory limit (with the opt-in), which kernels are checked against.
  f.max_shared_memory_bytes = calls->dev.attribute(kAttrMaxSharedPerBlockOptin);
  f.subgroup_aggregation = options.subgroup_aggregation;
  f.constant_folding = options.constant_folding;
  f.fast_math = options.fast_math;
  return std::make_unique<CudaRuntime>(std::move(calls), f);
}

}  // namespace qd
