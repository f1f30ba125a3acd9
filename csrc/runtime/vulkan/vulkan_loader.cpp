#include "runtime/vulkan/vulkan_loader.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <vector>

namespace qd::vulkan {

const char *result_name(VkResult r) {
  switch (r) {
#define QD_VK_RESULT(name) \
  case name:               \
    return #name;
    QD_VK_RESULT(VK_SUCCESS) QD_VK_RESULT(VK_NOT_READY) QD_VK_RESULT(VK_TIMEOUT)
    QD_VK_RESULT(VK_EVENT_SET) QD_VK_RESULT(VK_EVENT_RESET) QD_VK_RESULT(VK_INCOMPLETE)
    QD_VK_RESULT(VK_ERROR_OUT_OF_HOST_MEMORY) QD_VK_RESULT(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    QD_VK_RESULT(VK_ERROR_INITIALIZATION_FAILED) QD_VK_RESULT(VK_ERROR_DEVICE_LOST)
    QD_VK_RESULT(VK_ERROR_MEMORY_MAP_FAILED) QD_VK_RESULT(VK_ERROR_LAYER_NOT_PRESENT)
    QD_VK_RESULT(VK_ERROR_EXTENSION_NOT_PRESENT) QD_VK_RESULT(VK_ERROR_FEATURE_NOT_PRESENT)
    QD_VK_RESULT(VK_ERROR_INCOMPATIBLE_DRIVER) QD_VK_RESULT(VK_ERROR_TOO_MANY_OBJECTS)
    QD_VK_RESULT(VK_ERROR_FORMAT_NOT_SUPPORTED) QD_VK_RESULT(VK_ERROR_FRAGMENTED_POOL)
    QD_VK_RESULT(VK_ERROR_UNKNOWN) QD_VK_RESULT(VK_ERROR_OUT_OF_POOL_MEMORY)
    QD_VK_RESULT(VK_ERROR_INVALID_EXTERNAL_HANDLE) QD_VK_RESULT(VK_ERROR_FRAGMENTATION)
    QD_VK_RESULT(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS) QD_VK_RESULT(VK_PIPELINE_COMPILE_REQUIRED)
    QD_VK_RESULT(VK_ERROR_INVALID_SHADER_NV)
#undef QD_VK_RESULT
    default:
      return "VkResult";
  }
}

void fail(const std::string &message) { throw VulkanError("Vulkan: " + message); }

void check(VkResult r, const char *call) {
  if (r == VK_SUCCESS) return;
  fail(std::string(call) + " failed: " + result_name(r) + " (" + std::to_string(int(r)) + ")");
}

namespace {

std::vector<std::string> library_candidates() {
  if (const char *env = std::getenv("QD_VULKAN_LIBRARY"); env && *env) return {env};
#if defined(__APPLE__)
  return {"libvulkan.1.dylib", "libvulkan.dylib", "libMoltenVK.dylib"};
#else
  return {"libvulkan.so.1", "libvulkan.so"};
#endif
}

// Loads the library or describes why not; the handle is never closed, because drivers keep
// threads and atexit hooks that outlive any VulkanDevice.
GlobalFns load_global(std::string &error) {
  GlobalFns fns;
  void *lib = nullptr;
  std::string tried;
  for (const std::string &name : library_candidates()) {
    lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib) break;
    const char *why = dlerror();
    tried += (tried.empty() ? "" : "; ") + std::string(why ? why : name.c_str());
  }
  if (!lib) {
    error = tried;
    return fns;
  }
  fns.vkGetInstanceProcAddr =
      reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(lib, "vkGetInstanceProcAddr"));
  if (!fns.vkGetInstanceProcAddr) {
    error = "the Vulkan loader has no vkGetInstanceProcAddr";
    return fns;
  }
  auto get = [&](const char *name) { return fns.vkGetInstanceProcAddr(VK_NULL_HANDLE, name); };
  fns.vkEnumerateInstanceVersion =
      reinterpret_cast<PFN_vkEnumerateInstanceVersion>(get("vkEnumerateInstanceVersion"));
#define QD_VK_LOAD(name)                                   \
  fns.name = reinterpret_cast<PFN_##name>(get(#name));     \
  if (!fns.name) error = "the Vulkan loader has no " #name;
  QD_VK_GLOBAL_FNS(QD_VK_LOAD)
#undef QD_VK_LOAD
  return fns;
}

}  // namespace

const GlobalFns &global_fns() {
  static std::string error;
  static GlobalFns fns;
  static std::once_flag once;
  std::call_once(once, [] { fns = load_global(error); });
  if (!error.empty() || !fns.vkGetInstanceProcAddr)
    fail("cannot load the Vulkan loader: " + (error.empty() ? std::string("not found") : error));
  return fns;
}

void InstanceFns::load(VkInstance instance) {
  auto gipa = global_fns().vkGetInstanceProcAddr;
#define QD_VK_LOAD(name)                                                           \
  name = reinterpret_cast<PFN_##name>(gipa(instance, #name));                       \
  if (!name) fail("the Vulkan instance has no " #name);
  QD_VK_INSTANCE_FNS(QD_VK_LOAD)
#undef QD_VK_LOAD
}

void DeviceFns::load(const InstanceFns &instance_fns, VkDevice device) {
  auto gdpa = instance_fns.vkGetDeviceProcAddr;
#define QD_VK_LOAD(name)                                                           \
  name = reinterpret_cast<PFN_##name>(gdpa(device, #name));                         \
  if (!name) fail("the Vulkan device has no " #name);
  QD_VK_DEVICE_FNS(QD_VK_LOAD)
#undef QD_VK_LOAD
}

}  // namespace qd::vulkan
