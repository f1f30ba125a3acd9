#pragma once
// Internal to the Vulkan runtime: instance creation, device choice, and the feature chain that
// is both queried (for DeviceCaps) and passed to vkCreateDevice.
#include <string>
#include <vector>

#include "runtime/vulkan/vulkan_device.h"

namespace qd::vulkan::detail {

// Creates an instance at min(loader version, 1.3) and loads its entry points into `fns`.
// `api_version` receives the instance's version.
VkInstance create_instance(InstanceFns &fns, uint32_t &api_version);

struct PhysicalDeviceInfo {
  VkPhysicalDevice handle = VK_NULL_HANDLE;
  VkPhysicalDeviceProperties props{};
  int compute_queue_family = -1;  // -1: none
};
std::vector<PhysicalDeviceInfo> physical_devices(const InstanceFns &fns, VkInstance instance);
// Applies `selector` (else $QD_VULKAN_DEVICE) or the type preference; throws when nothing
// usable is found.
PhysicalDeviceInfo pick_physical_device(const InstanceFns &fns, VkInstance instance,
                                        const std::string &selector = "");

// The optional features Quadrants uses. Each struct is chained only when the device has it
// (by core version or extension); the extensions it needs are listed in `extensions`.
// Not copyable: the structs point at each other.
struct FeatureChain {
  VkPhysicalDeviceFeatures2 features2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  VkPhysicalDevice16BitStorageFeatures storage16{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
  VkPhysicalDevice8BitStorageFeatures storage8{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES};
  VkPhysicalDeviceShaderFloat16Int8Features float16_int8{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES};
  VkPhysicalDeviceShaderAtomicInt64Features atomic_int64{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_ATOMIC_INT64_FEATURES};
  VkPhysicalDeviceVulkanMemoryModelFeatures memory_model{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES};
  VkPhysicalDeviceShaderAtomicFloatFeaturesEXT atomic_float{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_ATOMIC_FLOAT_FEATURES_EXT};
  VkPhysicalDeviceShaderAtomicFloat2FeaturesEXT atomic_float2{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_ATOMIC_FLOAT_2_FEATURES_EXT};
  VkPhysicalDeviceShaderSubgroupExtendedTypesFeatures subgroup_types{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SUBGROUP_EXTENDED_TYPES_FEATURES};
  std::vector<const char *> extensions;
  uint32_t api_version = 0;  // min(instance, device)

  // Queries what the device supports, then keeps only the features Quadrants enables.
  FeatureChain(const InstanceFns &fns, VkPhysicalDevice device, uint32_t instance_version);
  FeatureChain(const FeatureChain &) = delete;
  FeatureChain &operator=(const FeatureChain &) = delete;

 private:
  void *tail_ = nullptr;
  void link(void *feature_struct);
  void keep_wanted_only();
};

DeviceCaps probe_caps(const InstanceFns &fns, VkPhysicalDevice device, const FeatureChain &chain);

}  // namespace qd::vulkan::detail
