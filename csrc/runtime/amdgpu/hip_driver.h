#pragma once
// The HIP runtime (ROCm), loaded from libamdhip64.so with dlopen at run time: no link-time ROCm
// dependency and no HIP headers. Only the calls the AMDGPU runtime uses are declared.
//
// Every HipDevice failure throws qd::RuntimeError naming the HIP call and the HIP error.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace qd::amdgpu {

// Opaque HIP handles (hipModule_t, hipFunction_t); device pointers are plain addresses.
struct ihipModule_t;
struct ihipModuleSymbol_t;
using Module = ihipModule_t *;
using Function = ihipModuleSymbol_t *;
using DevicePtr = void *;

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

// True when libamdhip64 loads, hipInit succeeds and there is at least one device. Never throws;
// on false, *why (if given) says what was missing.
bool hip_available(std::string *why = nullptr);

class HipDevice {
 public:
  explicit HipDevice(int ordinal = 0);
  ~HipDevice();  // unloads the modules it loaded
  HipDevice(const HipDevice &) = delete;
  HipDevice &operator=(const HipDevice &) = delete;

  std::string name() const;

  DevicePtr alloc(size_t bytes);
  void free(DevicePtr ptr);
  void copy_to_device(DevicePtr dst, const void *src, size_t bytes);
  void copy_to_host(void *dst, DevicePtr src, size_t bytes);
  void memset8(DevicePtr dst, uint8_t value, size_t bytes);

  // Loads a linked code object (hsaco), e.g. from llvm_gpu::emit_amdgpu_code_object.
  Module load_module(const std::vector<uint8_t> &code_object);
  void unload_module(Module module);
  Function get_function(Module module, const std::string &name);

  // `args` holds one pointer per kernel parameter, pointing at its value (kernelParams).
  // Asynchronous: call synchronize() before reading results.
  void launch(Function fn, Dim3 grid, Dim3 block, const std::vector<void *> &args,
              unsigned shared_bytes = 0);
  template <typename... Args>
  void launch_with(Function fn, Dim3 grid, Dim3 block, Args... args) {
    std::vector<void *> ptrs{static_cast<void *>(&args)...};
    launch(fn, grid, block, ptrs);
  }
  void synchronize();

 private:
  void bind() const;  // the current device is per thread: select ours before each call

  struct Loaded {
    Module module;
    std::vector<uint8_t> image;  // kept alive with the module: HIP may read it lazily
  };
  int ordinal_ = 0;
  std::vector<Loaded> modules_;
};

}  // namespace qd::amdgpu
