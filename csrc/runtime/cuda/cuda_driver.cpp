// CUDA driver API through dlopen. The declarations below mirror cuda.h for the calls we use;
// the versioned names (_v2) are the ones cuda.h's macros select since CUDA 4 / 11.
#include "runtime/cuda/cuda_driver.h"

#include <mutex>

#include "common/error.h"
#include "runtime/dynamic_library.h"

namespace qd::cuda {

namespace {

using CUresult = int;
using CUdevice = int;
constexpr CUresult CUDA_SUCCESS = 0;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
constexpr int CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8;
constexpr int CU_JIT_ERROR_LOG_BUFFER = 5;
constexpr int CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6;

struct Api {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDeviceGetCount)(int *);
  CUresult (*cuDeviceGet)(CUdevice *, int);
  CUresult (*cuDeviceGetAttribute)(int *, int, CUdevice);
  CUresult (*cuDeviceGetName)(char *, int, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(Context *, CUdevice);
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice);
  CUresult (*cuCtxSetCurrent)(Context);
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuCtxSetLimit)(int, size_t);
  CUresult (*cuModuleLoadDataEx)(Module *, const void *, unsigned, int *, void **);
  CUresult (*cuModuleUnload)(Module);
  CUresult (*cuModuleGetFunction)(Function *, Module, const char *);
  CUresult (*cuLaunchKernel)(Function, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, void *, void **, void **);
  CUresult (*cuFuncSetAttribute)(Function, int, int);
  CUresult (*cuMemAlloc)(DevicePtr *, size_t);
  CUresult (*cuMemFree)(DevicePtr);
  CUresult (*cuMemcpyHtoD)(DevicePtr, const void *, size_t);
  CUresult (*cuMemcpyDtoH)(void *, DevicePtr, size_t);
  CUresult (*cuMemsetD8)(DevicePtr, unsigned char, size_t);
  CUresult (*cuGetErrorName)(CUresult, const char **);
  CUresult (*cuGetErrorString)(CUresult, const char **);
};

struct Library {
  Api api{};
  std::string error;  // empty when every symbol resolved
};

template <typename F>
void resolve(void *lib, const char *symbol, F &slot, std::string &error) {
  resolve_symbol(lib, symbol, slot, "libcuda", error);
}

Library load_library() {
  Library l;
  void *lib = open_first_library({"libcuda.so.1", "libcuda.so"}, "cannot load libcuda.so.1 (no NVIDIA driver?)", l.error);
  if (!lib) return l;
  Api &a = l.api;
  std::string &e = l.error;
  resolve(lib, "cuInit", a.cuInit, e);
  resolve(lib, "cuDeviceGetCount", a.cuDeviceGetCount, e);
  resolve(lib, "cuDeviceGet", a.cuDeviceGet, e);
  resolve(lib, "cuDeviceGetAttribute", a.cuDeviceGetAttribute, e);
  resolve(lib, "cuDeviceGetName", a.cuDeviceGetName, e);
  resolve(lib, "cuDevicePrimaryCtxRetain", a.cuDevicePrimaryCtxRetain, e);
  resolve(lib, "cuDevicePrimaryCtxRelease_v2", a.cuDevicePrimaryCtxRelease, e);
  resolve(lib, "cuCtxSetCurrent", a.cuCtxSetCurrent, e);
  resolve(lib, "cuCtxSynchronize", a.cuCtxSynchronize, e);
  resolve(lib, "cuCtxSetLimit", a.cuCtxSetLimit, e);
  resolve(lib, "cuModuleLoadDataEx", a.cuModuleLoadDataEx, e);
  resolve(lib, "cuModuleUnload", a.cuModuleUnload, e);
  resolve(lib, "cuModuleGetFunction", a.cuModuleGetFunction, e);
  resolve(lib, "cuLaunchKernel", a.cuLaunchKernel, e);
  resolve(lib, "cuFuncSetAttribute", a.cuFuncSetAttribute, e);
  resolve(lib, "cuMemAlloc_v2", a.cuMemAlloc, e);
  resolve(lib, "cuMemFree_v2", a.cuMemFree, e);
  resolve(lib, "cuMemcpyHtoD_v2", a.cuMemcpyHtoD, e);
  resolve(lib, "cuMemcpyDtoH_v2", a.cuMemcpyDtoH, e);
  resolve(lib, "cuMemsetD8_v2", a.cuMemsetD8, e);
  resolve(lib, "cuGetErrorName", a.cuGetErrorName, e);
  resolve(lib, "cuGetErrorString", a.cuGetErrorString, e);
  return l;
}

// Loaded once per process; a failed load is remembered, not retried.
const Library &loaded() {
  static std::once_flag once;
  static Library l;
  std::call_once(once, [] { l = load_library(); });
  return l;
}

const Api &api() {
  const Library &l = loaded();
  if (!l.error.empty()) throw RuntimeError("CUDA driver unavailable: " + l.error);
  return l.api;
}

std::string describe(CUresult r) {
  const Api &a = loaded().api;
  const char *name = nullptr, *text = nullptr;
  if (a.cuGetErrorName) a.cuGetErrorName(r, &name);
  if (a.cuGetErrorString) a.cuGetErrorString(r, &text);
  std::string s = name ? name : "CUDA error " + std::to_string(r);
  if (text) s += std::string(" (") + text + ")";
  return s;
}

void check(CUresult r, const char *call) {
  if (r != CUDA_SUCCESS) throw RuntimeError(std::string(call) + " failed: " + describe(r));
}

// The checks cuda_available and the CudaDevice constructor share; returns "" when usable.
std::string probe(int ordinal) {
  const Library &l = loaded();
  if (!l.error.empty()) return l.error;
  CUresult r = l.api.cuInit(0);
  if (r != CUDA_SUCCESS) return "cuInit failed: " + describe(r);
  int count = 0;
  r = l.api.cuDeviceGetCount(&count);
  if (r != CUDA_SUCCESS) return "cuDeviceGetCount failed: " + describe(r);
  if (count <= ordinal)
    return count == 0 ? "no CUDA device found"
                      : "no CUDA device " + std::to_string(ordinal) + " (" +
                            std::to_string(count) + " present)";
  return "";
}

}  // namespace

bool cuda_available(std::string *why) {
  try {
    std::string reason = probe(0);
    if (why) *why = reason;
    return reason.empty();
  } catch (const std::exception &e) {
    if (why) *why = e.what();
  } catch (...) {
    if (why) *why = "unknown error while probing CUDA";
  }
  return false;
}

CudaDevice::CudaDevice(int ordinal) : ordinal_(ordinal) {
  std::string reason = probe(ordinal);
  if (!reason.empty()) throw RuntimeError("CUDA unavailable: " + reason);
  check(api().cuDeviceGet(&device_, ordinal), "cuDeviceGet");
  check(api().cuDevicePrimaryCtxRetain(&context_, device_), "cuDevicePrimaryCtxRetain");
  try {
    bind();
  } catch (...) {
    api().cuDevicePrimaryCtxRelease(device_);  // the destructor will not run
    throw;
  }
}

CudaDevice::~CudaDevice() {
  // Errors are ignored: a destructor must not throw, and a dead context frees everything anyway.
  const Api &a = loaded().api;
  if (!context_) return;
  a.cuCtxSetCurrent(context_);
  for (Module m : modules_) a.cuModuleUnload(m);
  a.cuDevicePrimaryCtxRelease(device_);
}

// The current context is per thread; binding before every call lets any thread use the device.
void CudaDevice::bind() const { check(api().cuCtxSetCurrent(context_), "cuCtxSetCurrent"); }

std::string CudaDevice::name() const {
  char buf[256] = {};
  check(api().cuDeviceGetName(buf, sizeof(buf) - 1, device_), "cuDeviceGetName");
  return buf;
}

int CudaDevice::attribute(int cu_device_attribute) const {
  int value = 0;
  check(api().cuDeviceGetAttribute(&value, cu_device_attribute, device_), "cuDeviceGetAttribute");
  return value;
}

std::pair<int, int> CudaDevice::compute_capability() const {
  return {attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
          attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)};
}

std::string CudaDevice::sm_arch() const {
  auto [major, minor] = compute_capability();
  return "sm_" + std::to_string(major) + std::to_string(minor);
}

DevicePtr CudaDevice::alloc(size_t bytes) {
  bind();
  DevicePtr p = 0;
  check(api().cuMemAlloc(&p, bytes == 0 ? 1 : bytes), "cuMemAlloc_v2");  // 0 bytes is an error
  return p;
}

void CudaDevice::free(DevicePtr ptr) {
  if (!ptr) return;
  bind();
  check(api().cuMemFree(ptr), "cuMemFree_v2");
}

void CudaDevice::copy_to_device(DevicePtr dst, const void *src, size_t bytes) {
  if (bytes == 0) return;
  bind();
  check(api().cuMemcpyHtoD(dst, src, bytes), "cuMemcpyHtoD_v2");
}

void CudaDevice::copy_to_host(void *dst, DevicePtr src, size_t bytes) {
  if (bytes == 0) return;
  bind();
  check(api().cuMemcpyDtoH(dst, src, bytes), "cuMemcpyDtoH_v2");
}

void CudaDevice::memset8(DevicePtr dst, uint8_t value, size_t bytes) {
  if (bytes == 0) return;
  bind();
  check(api().cuMemsetD8(dst, value, bytes), "cuMemsetD8_v2");
}

Module CudaDevice::load_module(const std::string &ptx) {
  bind();
  std::vector<char> log(8192, '\0');
  int options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *values[] = {log.data(), reinterpret_cast<void *>(static_cast<uintptr_t>(log.size() - 1))};
  Module m = nullptr;
  CUresult r = api().cuModuleLoadDataEx(&m, ptx.c_str(), 2, options, values);
  if (r != CUDA_SUCCESS) {
    std::string msg = "cuModuleLoadDataEx failed: " + describe(r);
    if (log[0]) msg += "\nPTX JIT log:\n" + std::string(log.data());
    throw RuntimeError(msg);
  }
  modules_.push_back(m);
  return m;
}

void CudaDevice::unload_module(Module module) {
  std::erase(modules_, module);
  bind();
  check(api().cuModuleUnload(module), "cuModuleUnload");
}

Function CudaDevice::get_function(Module module, const std::string &name) {
  bind();
  Function f = nullptr;
  CUresult r = api().cuModuleGetFunction(&f, module, name.c_str());
  if (r != CUDA_SUCCESS)
    throw RuntimeError("cuModuleGetFunction(\"" + name + "\") failed: " + describe(r));
  return f;
}

void CudaDevice::launch(Function fn, Dim3 grid, Dim3 block, const std::vector<void *> &args,
                        unsigned shared_bytes) {
  bind();
  void **params = args.empty() ? nullptr : const_cast<void **>(args.data());
  check(api().cuLaunchKernel(fn, grid.x, grid.y, grid.z, block.x, block.y, block.z, shared_bytes,
                             nullptr, params, nullptr),
        "cuLaunchKernel");
}

void CudaDevice::set_max_dynamic_shared_bytes(Function fn, unsigned bytes) {
  bind();
  check(api().cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(bytes)),
        "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
}

void CudaDevice::set_stack_bytes(size_t bytes) {
  bind();
  constexpr int CU_LIMIT_STACK_SIZE = 0;
  check(api().cuCtxSetLimit(CU_LIMIT_STACK_SIZE, bytes), "cuCtxSetLimit(STACK_SIZE)");
}

void CudaDevice::synchronize() {
  bind();
  check(api().cuCtxSynchronize(), "cuCtxSynchronize");
}

}  // namespace qd::cuda
