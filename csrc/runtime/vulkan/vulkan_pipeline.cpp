// Compute pipelines (cached per SPIR-V module) and launches of one or more dispatches.
#include <algorithm>
#include <cstring>

#include "runtime/vulkan/vulkan_device.h"

namespace qd::vulkan {

namespace {

std::string cache_key(const std::vector<uint32_t> &spirv, uint32_t num_buffers, const std::string &entry) {
  std::string key(reinterpret_cast<const char *>(spirv.data()), spirv.size() * sizeof(uint32_t));
  key += '\0' + entry + '\0' + std::to_string(num_buffers);
  return key;
}

}  // namespace

const VulkanDevice::Layout &VulkanDevice::layout_for(uint32_t num_buffers) {
  auto it = layouts_.find(num_buffers);
  if (it != layouts_.end()) return it->second;
  std::vector<VkDescriptorSetLayoutBinding> bindings(num_buffers);
  for (uint32_t i = 0; i < num_buffers; ++i) {
    bindings[i].binding = i;
    bindings[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    bindings[i].descriptorCount = 1;
    bindings[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  Layout l;
  VkDescriptorSetLayoutCreateInfo set_info{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  set_info.bindingCount = num_buffers;
  set_info.pBindings = bindings.data();
  check(dfn_.vkCreateDescriptorSetLayout(device_, &set_info, nullptr, &l.set_layout),
        "vkCreateDescriptorSetLayout");
  VkPipelineLayoutCreateInfo layout_info{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  layout_info.setLayoutCount = 1;
  layout_info.pSetLayouts = &l.set_layout;
  VkResult r = dfn_.vkCreatePipelineLayout(device_, &layout_info, nullptr, &l.pipeline_layout);
  if (r != VK_SUCCESS) dfn_.vkDestroyDescriptorSetLayout(device_, l.set_layout, nullptr);
  check(r, "vkCreatePipelineLayout");
  return layouts_[num_buffers] = l;
}

KernelId VulkanDevice::create_kernel(const std::vector<uint32_t> &spirv, uint32_t num_buffers,
                                     const std::string &entry) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string key = cache_key(spirv, num_buffers, entry);
  if (auto it = kernel_cache_.find(key); it != kernel_cache_.end()) {
    kernels_.at(it->second).refs++;
    return it->second;
  }
  // Drivers may crash on malformed SPIR-V, so nothing reaches them unvalidated.
  std::string error = spirv::validate(spirv, target_env());
  if (!error.empty()) fail("invalid SPIR-V for entry point '" + entry + "': " + error);

  Kernel k;
  k.num_buffers = num_buffers;
  const Layout &l = layout_for(num_buffers);
  k.layout = l.pipeline_layout;
  k.set_layout = l.set_layout;
  VkShaderModuleCreateInfo module_info{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  module_info.codeSize = spirv.size() * sizeof(uint32_t);
  module_info.pCode = spirv.data();
  check(dfn_.vkCreateShaderModule(device_, &module_info, nullptr, &k.module), "vkCreateShaderModule");
  VkComputePipelineCreateInfo info{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  info.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  info.stage.module = k.module;
  info.stage.pName = entry.c_str();
  info.layout = k.layout;
  VkResult r = dfn_.vkCreateComputePipelines(device_, VK_NULL_HANDLE, 1, &info, nullptr, &k.pipeline);
  if (r != VK_SUCCESS) dfn_.vkDestroyShaderModule(device_, k.module, nullptr);
  check(r, "vkCreateComputePipelines");
  KernelId id = next_kernel_++;
  k.refs = 1;
  k.cache_key = key;
  kernels_[id] = k;
  kernel_cache_[key] = id;
  return id;
}

void VulkanDevice::release_kernel(KernelId id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = kernels_.find(id);
  if (it == kernels_.end()) fail("release_kernel: no kernel with id " + std::to_string(id));
  if (--it->second.refs > 0 || hung_) return;  // after a hang the driver may still use it
  wait_locked(UINT64_MAX);  // a submitted launch may still use the pipeline
  dfn_.vkDestroyPipeline(device_, it->second.pipeline, nullptr);
  dfn_.vkDestroyShaderModule(device_, it->second.module, nullptr);
  kernel_cache_.erase(it->second.cache_key);
  kernels_.erase(it);
}

void VulkanDevice::validate_dispatches(const std::vector<Dispatch> &dispatches) {
  for (const Dispatch &d : dispatches) {
    auto it = kernels_.find(d.kernel);
    if (it == kernels_.end()) fail("launch: no kernel with id " + std::to_string(d.kernel));
    if (d.buffers.size() != it->second.num_buffers)
      fail("launch: kernel " + std::to_string(d.kernel) + " takes " +
           std::to_string(it->second.num_buffers) + " buffers, got " + std::to_string(d.buffers.size()));
    for (BufferId b : d.buffers) buffer(b);  // throws on an unknown id
    if (d.groups_x > caps_.max_workgroup_count_x)
      fail("launch: " + std::to_string(d.groups_x) + " workgroups exceed the device limit of " +
           std::to_string(caps_.max_workgroup_count_x));
  }
}

void VulkanDevice::record_dispatches(VkCommandBuffer cmd, const std::vector<Dispatch> &dispatches,
                                     const std::vector<VkDescriptorSet> &sets) {
  for (size_t i = 0; i < dispatches.size(); ++i) {
    const Kernel &k = kernels_.at(dispatches[i].kernel);
    if (i > 0)  // each dispatch sees the writes of the ones before it
      memory_barrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                     VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
    dfn_.vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, k.pipeline);
    dfn_.vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, k.layout, 0, 1, &sets[i], 0,
                                 nullptr);
    dfn_.vkCmdDispatch(cmd, dispatches[i].groups_x, 1, 1);
  }
}

VkDescriptorSet VulkanDevice::descriptor_set(const std::vector<BufferId> &buffers, VkDescriptorSetLayout layout) {
  auto it = sets_.find(buffers);
  if (it != sets_.end()) return it->second.set;
  VkDescriptorSet set = VK_NULL_HANDLE;
  VkDescriptorSetAllocateInfo alloc{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
  alloc.descriptorSetCount = 1;
  alloc.pSetLayouts = &layout;
  if (!set_pools_.empty()) {
    alloc.descriptorPool = set_pools_.back();
    if (dfn_.vkAllocateDescriptorSets(device_, &alloc, &set) != VK_SUCCESS) set = VK_NULL_HANDLE;
  }
  if (!set) {  // the last pool is full (or fragmented): a new one
    constexpr uint32_t kSets = 256;
    VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                              std::max<uint32_t>(kSets * 8, uint32_t(buffers.size()))};
    VkDescriptorPoolCreateInfo info{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
    info.flags = VK_DESCRIPTOR_POOL_CREATE_FREE_DESCRIPTOR_SET_BIT;
    info.maxSets = kSets;
    info.poolSizeCount = 1;
    info.pPoolSizes = &size;
    VkDescriptorPool pool = VK_NULL_HANDLE;
    check(dfn_.vkCreateDescriptorPool(device_, &info, nullptr, &pool), "vkCreateDescriptorPool");
    set_pools_.push_back(pool);
    alloc.descriptorPool = pool;
    check(dfn_.vkAllocateDescriptorSets(device_, &alloc, &set), "vkAllocateDescriptorSets");
  }
  std::vector<VkDescriptorBufferInfo> infos(buffers.size());
  std::vector<VkWriteDescriptorSet> writes(buffers.size());
  for (size_t j = 0; j < buffers.size(); ++j) {
    infos[j] = {buffer(buffers[j]).buffer, 0, VK_WHOLE_SIZE};
    VkWriteDescriptorSet &w = writes[j];
    w = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    w.dstSet = set;
    w.dstBinding = uint32_t(j);
    w.descriptorCount = 1;
    w.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    w.pBufferInfo = &infos[j];
  }
  dfn_.vkUpdateDescriptorSets(device_, uint32_t(writes.size()), writes.data(), 0, nullptr);
  sets_[buffers] = {set, alloc.descriptorPool};
  return set;
}

// With every launch finished (free_buffer waits): the sets binding `freed` go back to their pools.
void VulkanDevice::drop_descriptor_sets(BufferId freed) {
  for (auto it = sets_.begin(); it != sets_.end();) {
    if (std::find(it->first.begin(), it->first.end(), freed) == it->first.end()) {
      ++it;
      continue;
    }
    dfn_.vkFreeDescriptorSets(device_, it->second.pool, 1, &it->second.set);
    it = sets_.erase(it);
  }
}

uint64_t VulkanDevice::launch(const std::vector<Dispatch> &dispatches) {
  std::lock_guard<std::mutex> lock(mu_);
  if (dispatches.empty()) return last_serial_;
  if (hung_) fail("the device is unusable: an earlier submission never finished");
  validate_dispatches(dispatches);
  std::vector<VkDescriptorSet> sets;
  for (const Dispatch &d : dispatches) sets.push_back(descriptor_set(d.buffers, kernels_.at(d.kernel).set_layout));
  if (!open_) {
    // A bounded number in flight: beyond it, wait for the oldest and reuse its command buffer.
    constexpr size_t kMaxInFlight = 16;
    if (idle_.empty() && pending_.size() >= kMaxInFlight) wait_locked(pending_.front().serial);
    if (idle_.empty()) {
      Submission sub;
      VkCommandBufferAllocateInfo alloc{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
      alloc.commandPool = cmd_pool_;
      alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
      alloc.commandBufferCount = 1;
      check(dfn_.vkAllocateCommandBuffers(device_, &alloc, &sub.cmd), "vkAllocateCommandBuffers");
      VkFenceCreateInfo fence{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
      check(dfn_.vkCreateFence(device_, &fence, nullptr, &sub.fence), "vkCreateFence");
      idle_.push_back(sub);
    }
    open_sub_ = idle_.back();
    idle_.pop_back();
    open_sub_.serial = ++last_serial_;
    open_launches_ = 0;
    check(dfn_.vkResetCommandBuffer(open_sub_.cmd, 0), "vkResetCommandBuffer");
    VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    if (VkResult r = dfn_.vkBeginCommandBuffer(open_sub_.cmd, &begin); r != VK_SUCCESS) {
      idle_.push_back(open_sub_);
      check(r, "vkBeginCommandBuffer");
    }
    open_ = true;
  }
  // Earlier launches' and transfers' writes become visible to this one (and, after the host
  // barrier at the end of the command buffer, to the host once its fence is waited for).
  memory_barrier(open_sub_.cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                 VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                     VK_ACCESS_TRANSFER_WRITE_BIT);
  record_dispatches(open_sub_.cmd, dispatches, sets);
  uint64_t serial = open_sub_.serial;
  if (++open_launches_ >= kMaxBatch || busy_submissions() == 0) submit_open();
  return serial;
}

}  // namespace qd::vulkan
