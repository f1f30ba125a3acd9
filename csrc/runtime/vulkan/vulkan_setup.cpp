#include "runtime/vulkan/vulkan_setup.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <set>

namespace qd::vulkan::detail {

namespace {

bool env_flag(const char *name) {
  const char *v = std::getenv(name);
  return v && *v && std::strcmp(v, "0") != 0;
}

std::set<std::string> instance_extensions() {
  const GlobalFns &g = global_fns();
  uint32_t n = 0;
  check(g.vkEnumerateInstanceExtensionProperties(nullptr, &n, nullptr),
        "vkEnumerateInstanceExtensionProperties");
  std::vector<VkExtensionProperties> props(n);
  check(g.vkEnumerateInstanceExtensionProperties(nullptr, &n, props.data()),
        "vkEnumerateInstanceExtensionProperties");
  std::set<std::string> names;
  for (uint32_t i = 0; i < n; ++i) names.insert(props[i].extensionName);
  return names;
}

bool has_layer(const char *layer) {
  const GlobalFns &g = global_fns();
  uint32_t n = 0;
  if (g.vkEnumerateInstanceLayerProperties(&n, nullptr) != VK_SUCCESS) return false;
  std::vector<VkLayerProperties> props(n);
  if (g.vkEnumerateInstanceLayerProperties(&n, props.data()) != VK_SUCCESS) return false;
  for (uint32_t i = 0; i < n; ++i)
    if (std::strcmp(props[i].layerName, layer) == 0) return true;
  return false;
}

std::set<std::string> device_extensions(const InstanceFns &fns, VkPhysicalDevice device) {
  uint32_t n = 0;
  check(fns.vkEnumerateDeviceExtensionProperties(device, nullptr, &n, nullptr),
        "vkEnumerateDeviceExtensionProperties");
  std::vector<VkExtensionProperties> props(n);
  check(fns.vkEnumerateDeviceExtensionProperties(device, nullptr, &n, props.data()),
        "vkEnumerateDeviceExtensionProperties");
  std::set<std::string> names;
  for (uint32_t i = 0; i < n; ++i) names.insert(props[i].extensionName);
  return names;
}

int type_rank(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 0;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 1;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 3;
    default: return 4;
  }
}

const char *type_name(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "cpu";
    default: return "other";
  }
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

bool usable(const PhysicalDeviceInfo &d) {
  return d.compute_queue_family >= 0 && d.props.apiVersion >= VK_API_VERSION_1_1;
}

std::string describe(const std::vector<PhysicalDeviceInfo> &devices) {
  std::string s;
  for (size_t i = 0; i < devices.size(); ++i)
    s += (i ? ", " : "") + std::to_string(i) + ": " + devices[i].props.deviceName;
  return s.empty() ? "none" : s;
}

// An index into the enumeration, or a case-insensitive name substring; `source` names where the
// choice came from, for the errors.
PhysicalDeviceInfo pick_by_selector(const std::vector<PhysicalDeviceInfo> &devices, const std::string &want,
                               const std::string &source) {
  bool is_index = !want.empty() && std::all_of(want.begin(), want.end(), ::isdigit);
  for (size_t i = 0; i < devices.size(); ++i) {
    bool match = is_index ? std::to_string(i) == want
                          : lower(devices[i].props.deviceName).find(lower(want)) != std::string::npos;
    if (!match) continue;
    if (!usable(devices[i]))
      fail(source + " selects '" + devices[i].props.deviceName + "', which lacks Vulkan 1.1 or a compute queue");
    return devices[i];
  }
  fail(source + " matches no device (devices: " + describe(devices) + ")");
}

}  // namespace

VkInstance create_instance(InstanceFns &fns, uint32_t &api_version) {
  const GlobalFns &g = global_fns();
  uint32_t loader_version = VK_API_VERSION_1_0;
  if (g.vkEnumerateInstanceVersion)
    check(g.vkEnumerateInstanceVersion(&loader_version), "vkEnumerateInstanceVersion");
  if (loader_version < VK_API_VERSION_1_1) fail("the Vulkan loader is older than Vulkan 1.1");
  api_version = std::min<uint32_t>(loader_version, VK_API_VERSION_1_3);

  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "quadrants";
  app.pEngineName = "quadrants";
  app.apiVersion = api_version;
  VkInstanceCreateInfo info{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  info.pApplicationInfo = &app;
  std::vector<const char *> exts, layers;
  // Without this, portability drivers (MoltenVK) are not enumerated.
  if (instance_extensions().count(VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME)) {
    exts.push_back(VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME);
    info.flags |= VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR;
  }
  if (env_flag("QD_VULKAN_VALIDATION") && has_layer("VK_LAYER_KHRONOS_validation"))
    layers.push_back("VK_LAYER_KHRONOS_validation");
  info.enabledExtensionCount = uint32_t(exts.size());
  info.ppEnabledExtensionNames = exts.data();
  info.enabledLayerCount = uint32_t(layers.size());
  info.ppEnabledLayerNames = layers.data();

  VkInstance instance = VK_NULL_HANDLE;
  check(g.vkCreateInstance(&info, nullptr, &instance), "vkCreateInstance");
  try {
    fns.load(instance);
  } catch (...) {
    auto destroy = reinterpret_cast<PFN_vkDestroyInstance>(
        g.vkGetInstanceProcAddr(instance, "vkDestroyInstance"));
    if (destroy) destroy(instance, nullptr);
    throw;
  }
  return instance;
}

std::vector<PhysicalDeviceInfo> physical_devices(const InstanceFns &fns, VkInstance instance) {
  uint32_t n = 0;
  check(fns.vkEnumeratePhysicalDevices(instance, &n, nullptr), "vkEnumeratePhysicalDevices");
  std::vector<VkPhysicalDevice> handles(n);
  check(fns.vkEnumeratePhysicalDevices(instance, &n, handles.data()), "vkEnumeratePhysicalDevices");
  std::vector<PhysicalDeviceInfo> out;
  for (uint32_t i = 0; i < n; ++i) {
    PhysicalDeviceInfo d;
    d.handle = handles[i];
    fns.vkGetPhysicalDeviceProperties(d.handle, &d.props);
    uint32_t nq = 0;
    fns.vkGetPhysicalDeviceQueueFamilyProperties(d.handle, &nq, nullptr);
    std::vector<VkQueueFamilyProperties> families(nq);
    fns.vkGetPhysicalDeviceQueueFamilyProperties(d.handle, &nq, families.data());
    for (uint32_t q = 0; q < nq && d.compute_queue_family < 0; ++q)
      if (families[q].queueFlags & VK_QUEUE_COMPUTE_BIT) d.compute_queue_family = int(q);
    out.push_back(d);
  }
  return out;
}

PhysicalDeviceInfo pick_physical_device(const InstanceFns &fns, VkInstance instance, const std::string &selector) {
  std::vector<PhysicalDeviceInfo> devices = physical_devices(fns, instance);
  if (!selector.empty()) return pick_by_selector(devices, selector, "device='" + selector + "'");
  if (const char *env = std::getenv("QD_VULKAN_DEVICE"); env && *env)
    return pick_by_selector(devices, env, std::string("QD_VULKAN_DEVICE='") + env + "'");
  const PhysicalDeviceInfo *best = nullptr;
  for (const PhysicalDeviceInfo &d : devices)
    if (usable(d) && (!best || type_rank(d.props.deviceType) < type_rank(best->props.deviceType)))
      best = &d;
  if (!best) fail("no device with Vulkan 1.1 and a compute queue (devices: " + describe(devices) + ")");
  return *best;
}

// ---- features ----

FeatureChain::FeatureChain(const InstanceFns &fns, VkPhysicalDevice device,
                           uint32_t instance_version) {
  VkPhysicalDeviceProperties props;
  fns.vkGetPhysicalDeviceProperties(device, &props);
  api_version = std::min(props.apiVersion, instance_version);
  std::set<std::string> exts = device_extensions(fns, device);
  tail_ = &features2;
  // A struct is usable when its version made it core, or its extension is present (and enabled).
  auto offer = [&](void *s, uint32_t core_since, const char *ext) {
    if (core_since && api_version >= core_since) return link(s);
    if (!exts.count(ext)) return;
    extensions.push_back(ext);
    link(s);
  };
  offer(&storage16, VK_API_VERSION_1_1, VK_KHR_16BIT_STORAGE_EXTENSION_NAME);
  offer(&storage8, VK_API_VERSION_1_2, VK_KHR_8BIT_STORAGE_EXTENSION_NAME);
  offer(&float16_int8, VK_API_VERSION_1_2, VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME);
  offer(&atomic_int64, VK_API_VERSION_1_2, VK_KHR_SHADER_ATOMIC_INT64_EXTENSION_NAME);
  offer(&memory_model, VK_API_VERSION_1_2, VK_KHR_VULKAN_MEMORY_MODEL_EXTENSION_NAME);
  offer(&subgroup_types, VK_API_VERSION_1_2, VK_KHR_SHADER_SUBGROUP_EXTENDED_TYPES_EXTENSION_NAME);
  offer(&atomic_float, 0, VK_EXT_SHADER_ATOMIC_FLOAT_EXTENSION_NAME);
  if (exts.count(VK_EXT_SHADER_ATOMIC_FLOAT_EXTENSION_NAME))
    offer(&atomic_float2, 0, VK_EXT_SHADER_ATOMIC_FLOAT_2_EXTENSION_NAME);
  // Portability drivers require their subset extension to be enabled when present.
  if (exts.count("VK_KHR_portability_subset")) extensions.push_back("VK_KHR_portability_subset");
  fns.vkGetPhysicalDeviceFeatures2(device, &features2);
  keep_wanted_only();
}

void FeatureChain::link(void *feature_struct) {
  static_cast<VkBaseOutStructure *>(tail_)->pNext = static_cast<VkBaseOutStructure *>(feature_struct);
  tail_ = feature_struct;
}

// Every core 1.0 feature is off except the shader types (robustBufferAccess, for one, costs
// speed); image and sparse atomics are off because they need image features we do not enable.
void FeatureChain::keep_wanted_only() {
  VkPhysicalDeviceFeatures all = features2.features, wanted{};
  wanted.shaderInt64 = all.shaderInt64;
  wanted.shaderInt16 = all.shaderInt16;
  wanted.shaderFloat64 = all.shaderFloat64;
  features2.features = wanted;
  atomic_float.shaderImageFloat32Atomics = atomic_float.shaderImageFloat32AtomicAdd = VK_FALSE;
  atomic_float.sparseImageFloat32Atomics = atomic_float.sparseImageFloat32AtomicAdd = VK_FALSE;
  atomic_float2.shaderImageFloat32AtomicMinMax = VK_FALSE;
  atomic_float2.sparseImageFloat32AtomicMinMax = VK_FALSE;
  // Device-scope availability chains are not used; leaving them on is harmless but untested.
  memory_model.vulkanMemoryModelAvailabilityVisibilityChains = VK_FALSE;
}

// ---- caps ----

namespace {

void probe_float_atomics(DeviceCaps &c, const FeatureChain &f) {
  const auto &a = f.atomic_float;
  const auto &b = f.atomic_float2;
  c.flags.set(Cap::float16_atomics_buffer, b.shaderBufferFloat16Atomics);
  c.flags.set(Cap::float16_atomics_shared, b.shaderSharedFloat16Atomics);
  c.flags.set(Cap::float16_atomic_add_buffer, b.shaderBufferFloat16AtomicAdd);
  c.flags.set(Cap::float16_atomic_add_shared, b.shaderSharedFloat16AtomicAdd);
  c.flags.set(Cap::float16_atomic_minmax_buffer, b.shaderBufferFloat16AtomicMinMax);
  c.flags.set(Cap::float16_atomic_minmax_shared, b.shaderSharedFloat16AtomicMinMax);
  c.flags.set(Cap::float32_atomics_buffer, a.shaderBufferFloat32Atomics);
  c.flags.set(Cap::float32_atomics_shared, a.shaderSharedFloat32Atomics);
  c.flags.set(Cap::float32_atomic_add_buffer, a.shaderBufferFloat32AtomicAdd);
  c.flags.set(Cap::float32_atomic_add_shared, a.shaderSharedFloat32AtomicAdd);
  c.flags.set(Cap::float32_atomic_minmax_buffer, b.shaderBufferFloat32AtomicMinMax);
  c.flags.set(Cap::float32_atomic_minmax_shared, b.shaderSharedFloat32AtomicMinMax);
  c.flags.set(Cap::float64_atomics_buffer, a.shaderBufferFloat64Atomics);
  c.flags.set(Cap::float64_atomics_shared, a.shaderSharedFloat64Atomics);
  c.flags.set(Cap::float64_atomic_add_buffer, a.shaderBufferFloat64AtomicAdd);
  c.flags.set(Cap::float64_atomic_add_shared, a.shaderSharedFloat64AtomicAdd);
  c.flags.set(Cap::float64_atomic_minmax_buffer, b.shaderBufferFloat64AtomicMinMax);
  c.flags.set(Cap::float64_atomic_minmax_shared, b.shaderSharedFloat64AtomicMinMax);
}

void probe_subgroups(DeviceCaps &c, const VkPhysicalDeviceSubgroupProperties &s) {
  c.subgroup_size = s.subgroupSize;
  c.subgroup_ops = (s.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) ? s.supportedOperations : 0;
  auto has = [&](VkSubgroupFeatureFlagBits bit) { return (c.subgroup_ops & bit) != 0; };
  c.flags.set(Cap::subgroup_basic, has(VK_SUBGROUP_FEATURE_BASIC_BIT));
  c.flags.set(Cap::subgroup_vote, has(VK_SUBGROUP_FEATURE_VOTE_BIT));
  c.flags.set(Cap::subgroup_arithmetic, has(VK_SUBGROUP_FEATURE_ARITHMETIC_BIT));
  c.flags.set(Cap::subgroup_ballot, has(VK_SUBGROUP_FEATURE_BALLOT_BIT));
  c.flags.set(Cap::subgroup_shuffle, has(VK_SUBGROUP_FEATURE_SHUFFLE_BIT));
  c.flags.set(Cap::subgroup_shuffle_relative, has(VK_SUBGROUP_FEATURE_SHUFFLE_RELATIVE_BIT));
  c.flags.set(Cap::subgroup_clustered, has(VK_SUBGROUP_FEATURE_CLUSTERED_BIT));
  c.flags.set(Cap::subgroup_quad, has(VK_SUBGROUP_FEATURE_QUAD_BIT));
}

}  // namespace

DeviceCaps probe_caps(const InstanceFns &fns, VkPhysicalDevice device, const FeatureChain &f) {
  VkPhysicalDeviceFloatControlsProperties float_controls{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FLOAT_CONTROLS_PROPERTIES};
  VkPhysicalDeviceSubgroupProperties subgroup{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  if (f.api_version >= VK_API_VERSION_1_2) subgroup.pNext = &float_controls;  // core in Vulkan 1.2
  VkPhysicalDeviceProperties2 props2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, &subgroup};
  fns.vkGetPhysicalDeviceProperties2(device, &props2);
  const VkPhysicalDeviceProperties &p = props2.properties;
  DeviceCaps c;
  c.device_name = p.deviceName;
  c.device_type = type_name(p.deviceType);
  c.vendor_id = p.vendorID;
  c.api_version = f.api_version;
  c.spirv_version = f.api_version >= VK_API_VERSION_1_3   ? 0x00010600
                    : f.api_version >= VK_API_VERSION_1_2 ? 0x00010500
                                                           : 0x00010300;
  c.flags.set(Cap::shader_int8, f.float16_int8.shaderInt8);
  c.flags.set(Cap::shader_int16, f.features2.features.shaderInt16);
  c.flags.set(Cap::shader_int64, f.features2.features.shaderInt64);
  c.flags.set(Cap::shader_float16, f.float16_int8.shaderFloat16);
  c.flags.set(Cap::shader_float64, f.features2.features.shaderFloat64);
  c.flags.set(Cap::int8_storage, f.storage8.storageBuffer8BitAccess);
  c.flags.set(Cap::float16_storage, f.storage16.storageBuffer16BitAccess);
  c.flags.set(Cap::int64_atomics_buffer, f.atomic_int64.shaderBufferInt64Atomics);
  c.flags.set(Cap::int64_atomics_shared, f.atomic_int64.shaderSharedInt64Atomics);
  probe_float_atomics(c, f);
  c.flags.set(Cap::vulkan_memory_model, f.memory_model.vulkanMemoryModel);
  c.flags.set(Cap::subgroup_extended_types, f.subgroup_types.shaderSubgroupExtendedTypes);
  c.flags.set(Cap::vulkan_memory_model_device_scope, f.memory_model.vulkanMemoryModelDeviceScope);
  c.flags.set(Cap::signed_zero_inf_nan_preserve_float16, float_controls.shaderSignedZeroInfNanPreserveFloat16);
  c.flags.set(Cap::signed_zero_inf_nan_preserve_float32, float_controls.shaderSignedZeroInfNanPreserveFloat32);
  c.flags.set(Cap::signed_zero_inf_nan_preserve_float64, float_controls.shaderSignedZeroInfNanPreserveFloat64);
  // Mesa's llvmpipe (lavapipe) compiles shaders with a loop limiter (LP_MAX_TGSI_LOOP_ITERATIONS).
  // Its gallivm also simplifies float arithmetic with a +0.0 operand without IEEE (lp_build_add,
  // lp_build_mul, lp_build_div: x + 0.0 -> x, x / 0.0 -> undefined). Its compiler (LLVM 15)
  // crashes on a 64-bit ShuffleUp of a value from another one on some hosts, and it runs an ordered
  // atomic like a workgroup control barrier (a loop around one stops early; docs/backends.md). Its
  // atomics run lane by lane on the host's cores, cheaper than combining them per subgroup; its
  // f32 asin, acos, atan, tanh, log are thousands of ulp off; it runs on the host's CPU cores.
  if (std::string(p.deviceName).find("llvmpipe") != std::string::npos) {
    c.flags.set(Cap::cpu_device);
    c.max_loop_iterations = 65535;
    c.flags.set(Cap::folds_float_zero_operands);
    c.flags.set(Cap::splits_64bit_shuffles);
    c.flags.set(Cap::ordered_atomics_act_as_barriers);
    c.flags.set(Cap::cheap_scattered_atomics);
    c.flags.set(Cap::inexact_float_math);
  }
  probe_subgroups(c, subgroup);
  c.max_workgroup_size_x = p.limits.maxComputeWorkGroupSize[0];
  c.max_workgroup_invocations = p.limits.maxComputeWorkGroupInvocations;
  c.max_workgroup_count_x = p.limits.maxComputeWorkGroupCount[0];
  c.max_shared_memory_bytes = p.limits.maxComputeSharedMemorySize;
  c.max_storage_buffer_range = p.limits.maxStorageBufferRange;
  c.max_storage_buffers_per_stage = std::min(p.limits.maxPerStageDescriptorStorageBuffers, p.limits.maxPerStageResources);
  return c;
}

}  // namespace qd::vulkan::detail
