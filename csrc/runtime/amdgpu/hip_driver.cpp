// HIP runtime through dlopen. The declarations mirror hip_runtime_api.h for the calls we use.
#include "runtime/amdgpu/hip_driver.h"

#include <mutex>

#include "common/error.h"
#include "runtime/dynamic_library.h"

namespace qd::amdgpu {

namespace {

using hipError_t = int;
constexpr hipError_t hipSuccess = 0;

struct Api {
  hipError_t (*hipInit)(unsigned);
  hipError_t (*hipGetDeviceCount)(int *);
  hipError_t (*hipSetDevice)(int);
  hipError_t (*hipDeviceGetName)(char *, int, int);
  hipError_t (*hipModuleLoadData)(Module *, const void *);
  hipError_t (*hipModuleUnload)(Module);
  hipError_t (*hipModuleGetFunction)(Function *, Module, const char *);
  hipError_t (*hipModuleLaunchKernel)(Function, unsigned, unsigned, unsigned, unsigned, unsigned,
                                      unsigned, unsigned, void *, void **, void **);
  hipError_t (*hipMalloc)(void **, size_t);
  hipError_t (*hipFree)(void *);
  hipError_t (*hipMemcpyHtoD)(void *, void *, size_t);
  hipError_t (*hipMemcpyDtoH)(void *, void *, size_t);
  hipError_t (*hipMemset)(void *, int, size_t);
  hipError_t (*hipDeviceSynchronize)();
  const char *(*hipGetErrorName)(hipError_t);
  const char *(*hipGetErrorString)(hipError_t);
};

struct Library {
  Api api{};
  std::string error;  // empty when every symbol resolved
};

template <typename F>
void resolve(void *lib, const char *symbol, F &slot, std::string &error) {
  resolve_symbol(lib, symbol, slot, "libamdhip64", error);
}

Library load_library() {
  Library l;
  // The unversioned name is a dev symlink that runtime-only installs may lack.
  void *lib = open_first_library({"libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5", "/opt/rocm/lib/libamdhip64.so"},
                                 "cannot load libamdhip64.so (no ROCm HIP runtime?)", l.error);
  if (!lib) return l;
  Api &a = l.api;
  std::string &e = l.error;
  resolve(lib, "hipInit", a.hipInit, e);
  resolve(lib, "hipGetDeviceCount", a.hipGetDeviceCount, e);
  resolve(lib, "hipSetDevice", a.hipSetDevice, e);
  resolve(lib, "hipDeviceGetName", a.hipDeviceGetName, e);
  resolve(lib, "hipModuleLoadData", a.hipModuleLoadData, e);
  resolve(lib, "hipModuleUnload", a.hipModuleUnload, e);
  resolve(lib, "hipModuleGetFunction", a.hipModuleGetFunction, e);
  resolve(lib, "hipModuleLaunchKernel", a.hipModuleLaunchKernel, e);
  resolve(lib, "hipMalloc", a.hipMalloc, e);
  resolve(lib, "hipFree", a.hipFree, e);
  resolve(lib, "hipMemcpyHtoD", a.hipMemcpyHtoD, e);
  resolve(lib, "hipMemcpyDtoH", a.hipMemcpyDtoH, e);
  resolve(lib, "hipMemset", a.hipMemset, e);
  resolve(lib, "hipDeviceSynchronize", a.hipDeviceSynchronize, e);
  resolve(lib, "hipGetErrorName", a.hipGetErrorName, e);
  resolve(lib, "hipGetErrorString", a.hipGetErrorString, e);
  return l;
}

const Library &loaded() {
  static std::once_flag once;
  static Library l;
  std::call_once(once, [] { l = load_library(); });
  return l;
}

const Api &api() {
  const Library &l = loaded();
  if (!l.error.empty()) throw RuntimeError("HIP runtime unavailable: " + l.error);
  return l.api;
}

std::string describe(hipError_t r) {
  const Api &a = loaded().api;
  const char *name = a.hipGetErrorName ? a.hipGetErrorName(r) : nullptr;
  const char *text = a.hipGetErrorString ? a.hipGetErrorString(r) : nullptr;
  std::string s = name ? name : "HIP error " + std::to_string(r);
  if (text) s += std::string(" (") + text + ")";
  return s;
}

void check(hipError_t r, const char *call) {
  if (r != hipSuccess) throw RuntimeError(std::string(call) + " failed: " + describe(r));
}

// Shared by hip_available and the HipDevice constructor; returns "" when usable.
std::string probe(int ordinal) {
  const Library &l = loaded();
  if (!l.error.empty()) return l.error;
  hipError_t r = l.api.hipInit(0);
  if (r != hipSuccess) return "hipInit failed: " + describe(r);
  int count = 0;
  r = l.api.hipGetDeviceCount(&count);
  if (r != hipSuccess) return "hipGetDeviceCount failed: " + describe(r);
  if (count <= ordinal)
    return count == 0 ? "no AMD GPU found"
                      : "no AMD GPU " + std::to_string(ordinal) + " (" + std::to_string(count) +
                            " present)";
  return "";
}

}  // namespace

bool hip_available(std::string *why) {
  try {
    std::string reason = probe(0);
    if (why) *why = reason;
    return reason.empty();
  } catch (const std::exception &e) {
    if (why) *why = e.what();
  } catch (...) {
    if (why) *why = "unknown error while probing HIP";
  }
  return false;
}

HipDevice::HipDevice(int ordinal) : ordinal_(ordinal) {
  std::string reason = probe(ordinal);
  if (!reason.empty()) throw RuntimeError("HIP unavailable: " + reason);
  bind();
}

HipDevice::~HipDevice() {
  const Api &a = loaded().api;  // only constructed when the library loaded
  if (a.hipSetDevice(ordinal_) != hipSuccess) return;
  for (const Loaded &m : modules_) a.hipModuleUnload(m.module);
}

void HipDevice::bind() const { check(api().hipSetDevice(ordinal_), "hipSetDevice"); }

std::string HipDevice::name() const {
  char buf[256] = {};
  check(api().hipDeviceGetName(buf, sizeof(buf) - 1, ordinal_), "hipDeviceGetName");
  return buf;
}

DevicePtr HipDevice::alloc(size_t bytes) {
  bind();
  void *p = nullptr;
  check(api().hipMalloc(&p, bytes == 0 ? 1 : bytes), "hipMalloc");
  return p;
}

void HipDevice::free(DevicePtr ptr) {
  if (!ptr) return;
  bind();
  check(api().hipFree(ptr), "hipFree");
}

void HipDevice::copy_to_device(DevicePtr dst, const void *src, size_t bytes) {
  if (bytes == 0) return;
  bind();
  check(api().hipMemcpyHtoD(dst, const_cast<void *>(src), bytes), "hipMemcpyHtoD");
}

void HipDevice::copy_to_host(void *dst, DevicePtr src, size_t bytes) {
  if (bytes == 0) return;
  bind();
  check(api().hipMemcpyDtoH(dst, src, bytes), "hipMemcpyDtoH");
}

void HipDevice::memset8(DevicePtr dst, uint8_t value, size_t bytes) {
  if (bytes == 0) return;
  bind();
  check(api().hipMemset(dst, value, bytes), "hipMemset");
}

Module HipDevice::load_module(const std::vector<uint8_t> &code_object) {
  bind();
  Loaded entry{nullptr, code_object};
  check(api().hipModuleLoadData(&entry.module, entry.image.data()), "hipModuleLoadData");
  Module m = entry.module;
  modules_.push_back(std::move(entry));  // moving a vector keeps its buffer where it is
  return m;
}

void HipDevice::unload_module(Module module) {
  bind();
  check(api().hipModuleUnload(module), "hipModuleUnload");
  std::erase_if(modules_, [&](const Loaded &m) { return m.module == module; });
}

Function HipDevice::get_function(Module module, const std::string &name) {
  bind();
  Function f = nullptr;
  hipError_t r = api().hipModuleGetFunction(&f, module, name.c_str());
  if (r != hipSuccess)
    throw RuntimeError("hipModuleGetFunction(\"" + name + "\") failed: " + describe(r));
  return f;
}

void HipDevice::launch(Function fn, Dim3 grid, Dim3 block, const std::vector<void *> &args,
                       unsigned shared_bytes) {
  bind();
  void **params = args.empty() ? nullptr : const_cast<void **>(args.data());
  check(api().hipModuleLaunchKernel(fn, grid.x, grid.y, grid.z, block.x, block.y, block.z,
                                    shared_bytes, nullptr, params, nullptr),
        "hipModuleLaunchKernel");
}

void HipDevice::synchronize() {
  bind();
  check(api().hipDeviceSynchronize(), "hipDeviceSynchronize");
}

}  // namespace qd::amdgpu
