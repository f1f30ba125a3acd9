#include "runtime/vulkan/vulkan_device.h"

#include <cstdlib>
#include <string>

#include "runtime/vulkan/vulkan_setup.h"

namespace qd::vulkan {

namespace {

uint64_t timeout_from_env() {
  double seconds = 300;
  if (const char *env = std::getenv("QD_VULKAN_TIMEOUT_S"); env && *env) {
    char *end = nullptr;
    double v = std::strtod(env, &end);
    if (end != env && v > 0) seconds = v;
  }
  return uint64_t(seconds * 1e9);
}

bool has_memory_type(const VkPhysicalDeviceMemoryProperties &m, VkMemoryPropertyFlags flags) {
  for (uint32_t i = 0; i < m.memoryTypeCount; ++i)
    if ((m.memoryTypes[i].propertyFlags & flags) == flags) return true;
  return false;
}

}  // namespace

VulkanDevice::VulkanDevice(const std::string &selector) : timeout_ns_(timeout_from_env()) {
  const char *staging = std::getenv("QD_VULKAN_FORCE_STAGING");
  force_staging_ = staging && *staging && std::string(staging) != "0";
  uint32_t instance_version = 0;
  instance_ = detail::create_instance(ifn_, instance_version);
  try {
    detail::PhysicalDeviceInfo picked = detail::pick_physical_device(ifn_, instance_, selector);
    physical_ = picked.handle;
    queue_family_ = uint32_t(picked.compute_queue_family);
    detail::FeatureChain chain(ifn_, physical_, instance_version);
    caps_ = detail::probe_caps(ifn_, physical_, chain);
    create_device(chain);
    ifn_.vkGetPhysicalDeviceMemoryProperties(physical_, &memory_props_);
    const VkMemoryPropertyFlags mapped = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                         VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    caps_.flags.set(Cap::host_visible_buffers,
        !force_staging_ &&
        (has_memory_type(memory_props_, mapped | VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) ||
         !has_memory_type(memory_props_, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)));
    create_command_objects();
  } catch (...) {
    destroy();
    throw;
  }
}

VulkanDevice::~VulkanDevice() { destroy(); }

void VulkanDevice::create_device(const detail::FeatureChain &chain) {
  float priority = 1.0f;
  VkDeviceQueueCreateInfo queue{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  queue.queueFamilyIndex = queue_family_;
  queue.queueCount = 1;
  queue.pQueuePriorities = &priority;
  VkDeviceCreateInfo info{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  info.pNext = &chain.features2;  // features go through the chain, not pEnabledFeatures
  info.queueCreateInfoCount = 1;
  info.pQueueCreateInfos = &queue;
  info.enabledExtensionCount = uint32_t(chain.extensions.size());
  info.ppEnabledExtensionNames = chain.extensions.data();
  check(ifn_.vkCreateDevice(physical_, &info, nullptr, &device_), "vkCreateDevice");
  try {
    dfn_.load(ifn_, device_);
  } catch (...) {  // destroy() needs the device functions, so drop the device here
    auto destroy_device = reinterpret_cast<PFN_vkDestroyDevice>(
        ifn_.vkGetDeviceProcAddr(device_, "vkDestroyDevice"));
    if (destroy_device) destroy_device(device_, nullptr);
    device_ = VK_NULL_HANDLE;
    throw;
  }
  dfn_.vkGetDeviceQueue(device_, queue_family_, 0, &queue_);
}

void VulkanDevice::create_command_objects() {
  VkCommandPoolCreateInfo pool{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pool.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pool.queueFamilyIndex = queue_family_;
  check(dfn_.vkCreateCommandPool(device_, &pool, nullptr, &cmd_pool_), "vkCreateCommandPool");
  VkCommandBufferAllocateInfo alloc{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  alloc.commandPool = cmd_pool_;
  alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  alloc.commandBufferCount = 1;
  check(dfn_.vkAllocateCommandBuffers(device_, &alloc, &cmd_), "vkAllocateCommandBuffers");
  VkFenceCreateInfo fence{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  check(dfn_.vkCreateFence(device_, &fence, nullptr, &fence_), "vkCreateFence");
}

// Also cleans up after a constructor that failed half-way. After a hang nothing is destroyed:
// the driver may still be using every object, and waiting for it would hang again.
void VulkanDevice::destroy() {
  if (hung_) return;
  if (device_) {
    dfn_.vkDeviceWaitIdle(device_);
    for (auto &[id, k] : kernels_) {
      dfn_.vkDestroyPipeline(device_, k.pipeline, nullptr);
      dfn_.vkDestroyShaderModule(device_, k.module, nullptr);
    }
    for (auto &[n, l] : layouts_) {
      dfn_.vkDestroyPipelineLayout(device_, l.pipeline_layout, nullptr);
      dfn_.vkDestroyDescriptorSetLayout(device_, l.set_layout, nullptr);
    }
    for (auto &[id, b] : buffers_) release(b);
    kernels_.clear(), layouts_.clear(), buffers_.clear(), kernel_cache_.clear();
    for (VkDescriptorPool p : set_pools_) dfn_.vkDestroyDescriptorPool(device_, p, nullptr);
    set_pools_.clear(), sets_.clear();
    if (open_) idle_.push_back(open_sub_), open_ = false;
    for (auto &list : {std::vector<Submission>(pending_.begin(), pending_.end()), idle_})
      for (const Submission &sub : list) dfn_.vkDestroyFence(device_, sub.fence, nullptr);
    pending_.clear(), idle_.clear();  // (the command buffers go with the pool)
    if (fence_) dfn_.vkDestroyFence(device_, fence_, nullptr);
    if (cmd_pool_) dfn_.vkDestroyCommandPool(device_, cmd_pool_, nullptr);
    dfn_.vkDestroyDevice(device_, nullptr);
    device_ = VK_NULL_HANDLE;
  }
  if (instance_) ifn_.vkDestroyInstance(instance_, nullptr);
  instance_ = VK_NULL_HANDLE;
}

spirv::TargetEnv VulkanDevice::target_env() const {
  if (caps_.api_version >= VK_API_VERSION_1_3) return spirv::TargetEnv::Vulkan1_3;
  if (caps_.api_version >= VK_API_VERSION_1_2) return spirv::TargetEnv::Vulkan1_2;
  return spirv::TargetEnv::Vulkan1_1;
}

// Makes compute and transfer writes recorded (or submitted) earlier visible to `dst_stage`.
void VulkanDevice::memory_barrier(VkCommandBuffer cmd, VkPipelineStageFlags dst_stage,
                                  VkAccessFlags dst_access) {
  VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  barrier.dstAccessMask = dst_access;
  dfn_.vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                            dst_stage, 0, 1, &barrier, 0, nullptr, 0, nullptr);
}

void VulkanDevice::wait_fence(VkFence fence) {
  VkResult r = dfn_.vkWaitForFences(device_, 1, &fence, VK_TRUE, timeout_ns_);
  if (r == VK_TIMEOUT) {
    hung_ = true;
    fail("a submission did not finish within " + std::to_string(timeout_ns_ / 1000000000) +
         " s (QD_VULKAN_TIMEOUT_S); the device can no longer be used");
  }
  if (r == VK_ERROR_DEVICE_LOST) hung_ = true;
  check(r, "vkWaitForFences");
}

void VulkanDevice::wait_for(uint64_t serial) {
  std::lock_guard<std::mutex> lock(mu_);
  wait_locked(serial);
}

void VulkanDevice::submit_open() {
  if (!open_) return;
  open_ = false;
  VkCommandBuffer cmd = open_sub_.cmd;
  memory_barrier(cmd, VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);  // for the host, after the fence
  check(dfn_.vkEndCommandBuffer(cmd), "vkEndCommandBuffer");
  check(dfn_.vkResetFences(device_, 1, &open_sub_.fence), "vkResetFences");
  VkSubmitInfo submit{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  submit.commandBufferCount = 1;
  submit.pCommandBuffers = &cmd;
  pending_.push_back(open_sub_);  // (waited for even if the submit fails: the fence stays unsignalled)
  VkResult r = dfn_.vkQueueSubmit(queue_, 1, &submit, open_sub_.fence);
  if (r != VK_SUCCESS) pending_.pop_back(), idle_.push_back(open_sub_);
  check(r, "vkQueueSubmit");
}

size_t VulkanDevice::busy_submissions() {
  while (!pending_.empty()) {
    VkResult r = dfn_.vkGetFenceStatus(device_, pending_.front().fence);
    if (r == VK_NOT_READY) break;
    if (r != VK_SUCCESS) return pending_.size();  // (an error: the next wait reports it)
    idle_.push_back(pending_.front());
    pending_.pop_front();
  }
  return pending_.size();
}

bool VulkanDevice::finished(uint64_t serial) {
  std::lock_guard<std::mutex> lock(mu_);
  if (open_ && open_sub_.serial <= serial) return false;
  busy_submissions();
  return pending_.empty() || pending_.front().serial > serial;
}

void VulkanDevice::wait_locked(uint64_t serial) {
  if (open_ && open_sub_.serial <= serial) submit_open();
  while (!pending_.empty() && pending_.front().serial <= serial) {
    if (hung_) fail("the device is unusable: an earlier submission never finished");
    wait_fence(pending_.front().fence);
    idle_.push_back(pending_.front());
    pending_.pop_front();
  }
}

void VulkanDevice::submit_and_wait(const std::function<void(VkCommandBuffer)> &record) {
  if (hung_) fail("the device is unusable: an earlier submission never finished");
  wait_locked(UINT64_MAX);  // (ordered after them anyway; waiting keeps one command buffer busy at a time)
  check(dfn_.vkResetCommandBuffer(cmd_, 0), "vkResetCommandBuffer");
  VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  check(dfn_.vkBeginCommandBuffer(cmd_, &begin), "vkBeginCommandBuffer");
  // Earlier submissions' writes (already waited for) become visible to this one, and this
  // one's writes to the host: a fence wait alone makes them available, not visible.
  memory_barrier(cmd_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                 VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                     VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT);
  record(cmd_);
  memory_barrier(cmd_, VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
  check(dfn_.vkEndCommandBuffer(cmd_), "vkEndCommandBuffer");
  check(dfn_.vkResetFences(device_, 1, &fence_), "vkResetFences");
  VkSubmitInfo submit{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  submit.commandBufferCount = 1;
  submit.pCommandBuffers = &cmd_;
  check(dfn_.vkQueueSubmit(queue_, 1, &submit, fence_), "vkQueueSubmit");
  wait_fence(fence_);
}

// ---- free functions ----

bool vulkan_available(std::string *why) noexcept {
  static std::once_flag once;
  static bool ok = false;
  static std::string reason;
  try {
    std::call_once(once, [] {
      try {
        InstanceFns fns;
        uint32_t version = 0;
        VkInstance instance = detail::create_instance(fns, version);
        try {
          detail::pick_physical_device(fns, instance);
        } catch (...) {
          fns.vkDestroyInstance(instance, nullptr);
          throw;
        }
        fns.vkDestroyInstance(instance, nullptr);
        ok = true;
      } catch (const std::exception &e) {
        reason = e.what();
      } catch (...) {
        reason = "unknown error while probing Vulkan";
      }
    });
    if (why) *why = reason;
  } catch (...) {
  }
  return ok;
}

std::vector<std::string> list_devices() {
  InstanceFns fns;
  uint32_t version = 0;
  VkInstance instance = detail::create_instance(fns, version);
  std::vector<std::string> names;
  try {
    for (const auto &d : detail::physical_devices(fns, instance)) names.push_back(d.props.deviceName);
  } catch (...) {
    fns.vkDestroyInstance(instance, nullptr);
    throw;
  }
  fns.vkDestroyInstance(instance, nullptr);
  return names;
}

std::vector<std::pair<std::string, CapValue>> caps_list(const DeviceCaps &c) {
  std::vector<std::pair<std::string, CapValue>> out;
#define QD_FACT(f) out.emplace_back(#f, CapValue(c.f));
#define QD_INT(f) out.emplace_back(#f, CapValue(int64_t(c.f)));
  QD_FACT(device_name) QD_FACT(device_type) QD_INT(vendor_id) QD_INT(api_version) QD_INT(spirv_version)
  QD_INT(max_loop_iterations) QD_INT(subgroup_size) QD_INT(subgroup_ops) QD_INT(max_workgroup_size_x)
  QD_INT(max_workgroup_invocations) QD_INT(max_workgroup_count_x) QD_INT(max_shared_memory_bytes)
  QD_INT(max_storage_buffer_range) QD_INT(max_storage_buffers_per_stage)
#undef QD_FACT
#undef QD_INT
#define QD_CAP(x) out.emplace_back(#x, CapValue(c.has(Cap::x)));
#define QD_SPACED(x) QD_CAP(x##_buffer) QD_CAP(x##_shared)
  QD_VULKAN_CAPS(QD_CAP, QD_SPACED)
#undef QD_CAP
#undef QD_SPACED
  return out;
}

void VulkanDevice::disable_caps(const CapSet &caps) {
  std::lock_guard<std::mutex> lock(mu_);
  caps_.flags.bits &= ~caps.bits;
}

}  // namespace qd::vulkan
