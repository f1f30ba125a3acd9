// Storage buffers: mapped (device-local and host-visible where the device has such memory,
// as lavapipe and resizable-BAR GPUs do), else device-local with staged reads and writes.
#include <algorithm>
#include <cstring>
#include <vector>

#include "runtime/vulkan/vulkan_device.h"

namespace qd::vulkan {

namespace {

constexpr VkMemoryPropertyFlags kMapped =
    VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
constexpr VkMemoryPropertyFlags kLocal = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;

int memory_type(const VkPhysicalDeviceMemoryProperties &m, uint32_t allowed, VkMemoryPropertyFlags flags) {
  for (uint32_t i = 0; i < m.memoryTypeCount; ++i)
    if ((allowed & (1u << i)) && (m.memoryTypes[i].propertyFlags & flags) == flags) return int(i);
  return -1;
}

size_t round_up4(size_t n) { return n < 4 ? 4 : (n + 3) / 4 * 4; }

}  // namespace

VulkanDevice::Buffer VulkanDevice::make_buffer(size_t size, bool host_only) {
  Buffer b;
  b.size = size;
  VkBufferCreateInfo info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  info.size = round_up4(size);  // fills and copies work on whole words
  info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
               VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  check(dfn_.vkCreateBuffer(device_, &info, nullptr, &b.buffer), "vkCreateBuffer");
  VkMemoryRequirements req;
  dfn_.vkGetBufferMemoryRequirements(device_, b.buffer, &req);
  // A small host-visible device-local heap (a 256 MiB BAR) runs out: then fall back.
  std::vector<VkMemoryPropertyFlags> prefs{kMapped};
  if (!host_only) prefs = {kLocal | kMapped, kLocal, kMapped};
  if (!host_only && force_staging_) prefs = {kLocal};
  VkResult last = VK_ERROR_OUT_OF_DEVICE_MEMORY;
  VkMemoryPropertyFlags got = 0;
  for (VkMemoryPropertyFlags flags : prefs) {
    int type = memory_type(memory_props_, req.memoryTypeBits, flags);
    if (type < 0) continue;
    VkMemoryAllocateInfo alloc{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    alloc.allocationSize = req.size;
    alloc.memoryTypeIndex = uint32_t(type);
    last = dfn_.vkAllocateMemory(device_, &alloc, nullptr, &b.memory);
    if (last == VK_SUCCESS) {
      got = memory_props_.memoryTypes[type].propertyFlags;
      break;
    }
    b.memory = VK_NULL_HANDLE;
  }
  try {
    check(last, ("vkAllocateMemory (" + std::to_string(size) + " bytes)").c_str());
    check(dfn_.vkBindBufferMemory(device_, b.buffer, b.memory, 0), "vkBindBufferMemory");
    if ((got & kMapped) == kMapped && !(force_staging_ && !host_only)) {
      void *p = nullptr;
      check(dfn_.vkMapMemory(device_, b.memory, 0, VK_WHOLE_SIZE, 0, &p), "vkMapMemory");
      b.mapped = static_cast<uint8_t *>(p);
    }
  } catch (...) {
    release(b);
    throw;
  }
  return b;
}

void VulkanDevice::release(Buffer &b) {
  if (b.mapped) dfn_.vkUnmapMemory(device_, b.memory);
  if (b.buffer) dfn_.vkDestroyBuffer(device_, b.buffer, nullptr);
  if (b.memory) dfn_.vkFreeMemory(device_, b.memory, nullptr);
  b = Buffer{};
}

VulkanDevice::Buffer &VulkanDevice::buffer(BufferId id) {
  auto it = buffers_.find(id);
  if (it == buffers_.end()) fail("no buffer with id " + std::to_string(id) + " (freed already?)");
  return it->second;
}

const VulkanDevice::Buffer &VulkanDevice::buffer(BufferId id) const {
  return const_cast<VulkanDevice *>(this)->buffer(id);
}

void VulkanDevice::check_range(const Buffer &b, size_t offset, size_t bytes, const char *what) const {
  if (offset > b.size || bytes > b.size - offset)
    fail(std::string(what) + ": bytes [" + std::to_string(offset) + ", " +
         std::to_string(offset + bytes) + ") are outside a buffer of " + std::to_string(b.size));
}

// Copies through a temporary host-visible buffer, for buffers the host cannot map.
void VulkanDevice::staged_copy(Buffer &b, size_t offset, size_t bytes, void *host, bool to_device) {
  Buffer staging = make_buffer(bytes, true);
  try {
    if (to_device) std::memcpy(staging.mapped, host, bytes);
    submit_and_wait([&](VkCommandBuffer cmd) {
      VkBufferCopy region{to_device ? 0 : offset, to_device ? offset : 0, bytes};
      dfn_.vkCmdCopyBuffer(cmd, to_device ? staging.buffer : b.buffer,
                           to_device ? b.buffer : staging.buffer, 1, &region);
    });
    if (!to_device) std::memcpy(host, staging.mapped, bytes);
  } catch (...) {
    if (!hung_) release(staging);
    throw;
  }
  release(staging);
}

BufferId VulkanDevice::alloc_buffer(size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  Buffer b = make_buffer(bytes, false);
  BufferId id = next_buffer_++;
  buffers_[id] = b;
  try {  // zeroed, so fresh fields and ndarrays read as 0 on every device
    if (b.mapped) std::memset(b.mapped, 0, round_up4(bytes));
    else submit_and_wait([&](VkCommandBuffer cmd) { dfn_.vkCmdFillBuffer(cmd, b.buffer, 0, VK_WHOLE_SIZE, 0); });
  } catch (...) {
    if (!hung_) release(buffers_[id]);
    buffers_.erase(id);
    throw;
  }
  return id;
}

void VulkanDevice::free_buffer(BufferId id) {
  std::lock_guard<std::mutex> lock(mu_);
  Buffer &b = buffer(id);
  if (hung_) return;  // the driver may still use it
  wait_locked(UINT64_MAX);  // a queued launch may still use it
  drop_descriptor_sets(id);
  release(b);
  buffers_.erase(id);
}

size_t VulkanDevice::buffer_size(BufferId id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return buffer(id).size;
}

void VulkanDevice::write_buffer(BufferId id, size_t offset, const void *data, size_t bytes, bool wait) {
  std::lock_guard<std::mutex> lock(mu_);
  Buffer &b = buffer(id);
  check_range(b, offset, bytes, "write_buffer");
  if (bytes == 0) return;
  if (wait) wait_locked(UINT64_MAX);
  if (b.mapped) std::memcpy(b.mapped + offset, data, bytes);
  else staged_copy(b, offset, bytes, const_cast<void *>(data), true);
}

void VulkanDevice::read_buffer(BufferId id, size_t offset, void *out, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  Buffer &b = buffer(id);
  check_range(b, offset, bytes, "read_buffer");
  if (bytes == 0) return;
  wait_locked(UINT64_MAX);
  if (b.mapped) std::memcpy(out, b.mapped + offset, bytes);
  else staged_copy(b, offset, bytes, out, false);
}

void VulkanDevice::fill_buffer(BufferId id, size_t offset, size_t bytes, uint32_t pattern, bool wait) {
  std::lock_guard<std::mutex> lock(mu_);
  Buffer &b = buffer(id);
  check_range(b, offset, bytes, "fill_buffer");
  if (bytes == 0) return;
  if (wait) wait_locked(UINT64_MAX);
  if (offset % 4 == 0 && b.mapped) {
    std::fill_n(reinterpret_cast<uint32_t *>(b.mapped + offset), bytes / 4, pattern);
    std::memcpy(b.mapped + offset + bytes / 4 * 4, &pattern, bytes % 4);  // (a pool buffer's size need not be whole words)
  } else if (offset % 4 == 0 && bytes % 4 == 0) {  // vkCmdFillBuffer works on whole words
    submit_and_wait([&](VkCommandBuffer cmd) { dfn_.vkCmdFillBuffer(cmd, b.buffer, offset, bytes, pattern); });
  } else {
    std::vector<uint32_t> words((bytes + 3) / 4, pattern);
    if (b.mapped) std::memcpy(b.mapped + offset, words.data(), bytes);
    else staged_copy(b, offset, bytes, words.data(), true);
  }
}

}  // namespace qd::vulkan
