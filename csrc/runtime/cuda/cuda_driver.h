#pragma once
// The CUDA driver API, loaded from libcuda.so.1 with dlopen at run time: Quadrants has no
// link-time CUDA dependency and needs no CUDA headers, so it builds and imports on machines
// without a GPU. Only the handful of types and calls the runtime uses are declared here.
//
// Every CudaDevice failure throws qd::RuntimeError naming the driver call and the CUDA error
// (name and description).
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace qd::cuda {

// Opaque driver handles (the driver API's CUcontext, CUmodule, CUfunction).
struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;
using Context = CUctx_st *;
using Module = CUmod_st *;
using Function = CUfunc_st *;
using DevicePtr = unsigned long long;  // CUdeviceptr (the _v2 API's 64-bit pointer)

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

// True when libcuda loads, cuInit succeeds and there is at least one device. Never throws;
// on false, *why (if given) says what was missing.
bool cuda_available(std::string *why = nullptr);

class CudaDevice {
 public:
  // Initialises the driver and makes the primary context of device `ordinal` current.
  explicit CudaDevice(int ordinal = 0);
  ~CudaDevice();  // unloads the modules it loaded and releases the primary context
  CudaDevice(const CudaDevice &) = delete;
  CudaDevice &operator=(const CudaDevice &) = delete;

  std::string name() const;
  std::pair<int, int> compute_capability() const;  // (major, minor)
  std::string sm_arch() const;                      // "sm_90" for compute capability 9.0
  int attribute(int cu_device_attribute) const;     // cuDeviceGetAttribute, raw enum value

  DevicePtr alloc(size_t bytes);
  void free(DevicePtr ptr);
  void copy_to_device(DevicePtr dst, const void *src, size_t bytes);
  void copy_to_host(void *dst, DevicePtr src, size_t bytes);
  void memset8(DevicePtr dst, uint8_t value, size_t bytes);

  // JIT-compiles PTX text; a failure's message carries the JIT error log.
  Module load_module(const std::string &ptx);
  void unload_module(Module module);
  Function get_function(Module module, const std::string &name);

  // `args` holds one pointer per kernel parameter, pointing at its value (cuLaunchKernel's
  // kernelParams). Asynchronous: call synchronize() before reading results.
  void launch(Function fn, Dim3 grid, Dim3 block, const std::vector<void *> &args,
              unsigned shared_bytes = 0);
  template <typename... Args>
  void launch_with(Function fn, Dim3 grid, Dim3 block, Args... args) {
    std::vector<void *> ptrs{static_cast<void *>(&args)...};
    launch(fn, grid, block, ptrs);  // the driver copies the values before returning
  }
  // cuFuncSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES): lets `fn` launch with up
  // to `bytes` of dynamic shared memory (needed above 48 KiB).
  void set_max_dynamic_shared_bytes(Function fn, unsigned bytes);
  // The stack of each thread (recursive real functions need more than the driver's default).
  void set_stack_bytes(size_t bytes);
  void synchronize();

 private:
  void bind() const;  // makes this device's context current on the calling thread

  int ordinal_ = 0;
  int device_ = 0;  // CUdevice
  Context context_ = nullptr;
  std::vector<Module> modules_;
};

}  // namespace qd::cuda
