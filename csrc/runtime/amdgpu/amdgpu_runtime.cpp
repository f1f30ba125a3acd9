#include "runtime/amdgpu/amdgpu_runtime.h"

#include <algorithm>

#include "codegen/llvm/target_amdgpu.h"
#include "runtime/amdgpu/hip_driver.h"
#include "runtime/gpu/gpu_runtime.h"

namespace qd {

namespace {

// The HIP device-attribute enum moved between ROCm releases, so the grid that fills the device
// is a fixed count of threads instead: enough for an MI300X (304 CUs).
constexpr unsigned kResidentThreads = 1u << 19;

void *ptr(uint64_t p) { return reinterpret_cast<void *>(p); }

class HipCalls : public GpuDevice {
 public:
  explicit HipCalls(int ordinal) : dev(ordinal) {}

  uint64_t alloc(size_t bytes) override { return reinterpret_cast<uint64_t>(dev.alloc(bytes)); }
  void free(uint64_t p) override { dev.free(ptr(p)); }
  void to_device(uint64_t dst, const void *src, size_t n) override { dev.copy_to_device(ptr(dst), src, n); }
  void to_host(void *dst, uint64_t src, size_t n) override { dev.copy_to_host(dst, ptr(src), n); }
  void zero(uint64_t dst, size_t n) override { dev.memset8(ptr(dst), 0, n); }
  // Shared arrays are static LDS on AMDGPU (at most 64 KiB, which every launch may use): no dynamic part.
  void launch(void *fn, unsigned grid, unsigned block, unsigned /*dynamic_shared*/, uint64_t table,
              uint64_t args) override {
    void *t = ptr(table), *a = ptr(args);
    dev.launch_with(static_cast<amdgpu::Function>(fn), {grid, 1, 1}, {block, 1, 1}, t, a);
  }
  void synchronize() override { dev.synchronize(); }
  unsigned resident_blocks(int block) override {
    return std::clamp(kResidentThreads / static_cast<unsigned>(std::max(block, 1)), 1u, 65535u);
  }

  amdgpu::HipDevice dev;
};

class AmdgpuRuntime : public GpuRuntime {
 public:
  AmdgpuRuntime(std::unique_ptr<HipCalls> calls, TargetFeatures features)
      : GpuRuntime(Backend::Amdgpu, std::move(calls), std::move(features)) {}

 protected:
  Loaded load_kernel(KernelIR &k) override {
    Loaded out{amdgpu_compile(k, features(), /*code_object=*/true), {}};
    amdgpu::HipDevice &dev = static_cast<HipCalls &>(device()).dev;
    amdgpu::Module m;
    try {
      m = dev.load_module(out.compiled.code_object);
    } catch (const RuntimeError &e) {
      throw RuntimeError(std::string(e.what()) + "\n(the code object is for " + amdgpu_gfx(features()) +
                         "; set QD_AMDGPU_ARCH to this GPU's gfx name, e.g. gfx90a)");
    }
    for (const std::string &s : out.compiled.symbols) out.functions.push_back(dev.get_function(m, s));
    return out;
  }
};

}  // namespace

std::unique_ptr<Runtime> create_amdgpu_runtime(const RuntimeOptions &options) {
  auto calls = std::make_unique<HipCalls>(device_ordinal(options, "amdgpu"));
  TargetFeatures f{.amdgpu_gfx = amdgpu_gfx({})};
  f.subgroup_aggregation = options.subgroup_aggregation;
  f.constant_folding = options.constant_folding;
  f.fast_math = options.fast_math;
  return std::make_unique<AmdgpuRuntime>(std::move(calls), f);
}

}  // namespace qd
