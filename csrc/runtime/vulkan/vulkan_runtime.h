#pragma once
#include <memory>

#include "runtime/runtime.h"
#include "runtime/vulkan/vulkan_device.h"

namespace qd {

// The Vulkan backend: kernels compiled to SPIR-V and run on a VulkanDevice (lavapipe on any CPU
// machine, any Vulkan 1.1 GPU elsewhere). options.device picks the device like $QD_VULKAN_DEVICE;
// options.disabled_caps hides device capabilities from the codegen (e.g. to run CAS fallbacks).
std::unique_ptr<Runtime> create_vulkan_runtime(const RuntimeOptions &options);

// The device's capabilities as the codegen sees them (disabled ones false); null when `r` is not
// a Vulkan runtime.
const vulkan::DeviceCaps *vulkan_caps(const Runtime &r);

}  // namespace qd
