#pragma once
// The Vulkan loader, opened with dlopen so the core has no link-time Vulkan dependency; every
// entry point is resolved through vkGetInstanceProcAddr / vkGetDeviceProcAddr.
#ifndef VK_NO_PROTOTYPES
#define VK_NO_PROTOTYPES
#endif
#include <vulkan/vulkan_core.h>

#include <string>

#include "common/error.h"

namespace qd::vulkan {

class VulkanError : public qd::RuntimeError {
 public:
  using qd::RuntimeError::RuntimeError;
};

const char *result_name(VkResult r);
// Throws VulkanError "<call> failed: VK_ERROR_... (code)" unless r is VK_SUCCESS.
void check(VkResult r, const char *call);
[[noreturn]] void fail(const std::string &message);

// vkEnumerateInstanceVersion may be missing (a Vulkan 1.0 loader); it is checked where used.
#define QD_VK_GLOBAL_FNS(X) \
  X(vkCreateInstance)       \
  X(vkEnumerateInstanceExtensionProperties) X(vkEnumerateInstanceLayerProperties)

#define QD_VK_INSTANCE_FNS(X)                                                            \
  X(vkDestroyInstance) X(vkEnumeratePhysicalDevices) X(vkGetPhysicalDeviceProperties)     \
  X(vkGetPhysicalDeviceProperties2) X(vkGetPhysicalDeviceFeatures2)                       \
  X(vkGetPhysicalDeviceQueueFamilyProperties) X(vkGetPhysicalDeviceMemoryProperties)      \
  X(vkEnumerateDeviceExtensionProperties) X(vkCreateDevice) X(vkGetDeviceProcAddr)

#define QD_VK_DEVICE_FNS(X)                                                                 \
  X(vkDestroyDevice) X(vkGetDeviceQueue) X(vkDeviceWaitIdle) X(vkCreateBuffer)               \
  X(vkDestroyBuffer) X(vkGetBufferMemoryRequirements) X(vkAllocateMemory) X(vkFreeMemory)     \
  X(vkBindBufferMemory) X(vkMapMemory) X(vkUnmapMemory) X(vkCreateShaderModule)               \
  X(vkDestroyShaderModule) X(vkCreateDescriptorSetLayout) X(vkDestroyDescriptorSetLayout)     \
  X(vkCreatePipelineLayout) X(vkDestroyPipelineLayout) X(vkCreateComputePipelines)            \
  X(vkDestroyPipeline) X(vkCreateDescriptorPool) X(vkDestroyDescriptorPool)                   \
  X(vkAllocateDescriptorSets) X(vkUpdateDescriptorSets) X(vkCreateCommandPool)                \
  X(vkDestroyCommandPool) X(vkAllocateCommandBuffers) X(vkBeginCommandBuffer)                 \
  X(vkEndCommandBuffer) X(vkResetCommandBuffer) X(vkCmdBindPipeline)                          \
  X(vkCmdBindDescriptorSets) X(vkCmdDispatch) X(vkCmdPipelineBarrier) X(vkCmdCopyBuffer)      \
  X(vkCmdFillBuffer) X(vkQueueSubmit) X(vkCreateFence) X(vkDestroyFence) X(vkWaitForFences)   \
  X(vkResetFences) X(vkFreeDescriptorSets) X(vkGetFenceStatus)

#define QD_VK_DECLARE_FN(name) PFN_##name name = nullptr;

struct GlobalFns {
  PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr = nullptr;
  PFN_vkEnumerateInstanceVersion vkEnumerateInstanceVersion = nullptr;
  QD_VK_GLOBAL_FNS(QD_VK_DECLARE_FN)
};

struct InstanceFns {
  QD_VK_INSTANCE_FNS(QD_VK_DECLARE_FN)
  void load(VkInstance instance);  // throws VulkanError naming a missing entry point
};

struct DeviceFns {
  QD_VK_DEVICE_FNS(QD_VK_DECLARE_FN)
  void load(const InstanceFns &instance_fns, VkDevice device);
};

#undef QD_VK_DECLARE_FN

// Opens the loader once per process ($QD_VULKAN_LIBRARY, else the platform's usual names);
// throws VulkanError when it cannot be found.
const GlobalFns &global_fns();

}  // namespace qd::vulkan
