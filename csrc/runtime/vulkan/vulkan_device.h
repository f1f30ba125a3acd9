#pragma once
// The Vulkan runtime: one logical device with a compute queue, storage buffers and compute
// pipelines made from SPIR-V. Every failure throws VulkanError (a qd::RuntimeError).
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "codegen/spirv/spirv_tools.h"
#include "runtime/vulkan/vulkan_loader.h"
#include "target/capabilities.h"

namespace qd::vulkan {

namespace detail {
struct FeatureChain;
}

// What the device can do, probed once at init: its capabilities (QD_VULKAN_CAPS in
// target/capabilities.h) and the facts that are not yes / no.
struct DeviceCaps {
  CapSet flags;
  bool has(Cap c) const { return flags.has(c); }

  std::string device_name;
  std::string device_type;  // "discrete", "integrated", "virtual", "cpu", "other"
  uint32_t vendor_id = 0;
  uint32_t api_version = 0;    // VK_MAKE_API_VERSION form
  uint32_t spirv_version = 0;  // highest SPIR-V version word accepted, e.g. 0x00010500
  // The driver stops every loop after this many iterations in total per invocation (lavapipe's loop
  // limiter: 65535); 0 for none.
  uint32_t max_loop_iterations = 0;
  uint32_t subgroup_size = 0;
  uint32_t subgroup_ops = 0;  // VkSubgroupFeatureFlags usable in compute shaders
  uint32_t max_workgroup_size_x = 0, max_workgroup_invocations = 0;
  uint32_t max_workgroup_count_x = 0, max_shared_memory_bytes = 0;
  uint64_t max_storage_buffer_range = 0;
  uint32_t max_storage_buffers_per_stage = 0;  // maxPerStageDescriptorStorageBuffers
};

using CapValue = std::variant<bool, int64_t, std::string>;
// Every fact of DeviceCaps and every Vulkan capability as (name, value), for Python.
std::vector<std::pair<std::string, CapValue>> caps_list(const DeviceCaps &caps);

// True when a Vulkan device (the one QD_VULKAN_DEVICE selects, if set) can be opened; else
// false and *why says what is missing. Never throws; the answer is cached per process.
bool vulkan_available(std::string *why = nullptr) noexcept;

// Names of the physical devices, in enumeration order (the indices QD_VULKAN_DEVICE takes).
std::vector<std::string> list_devices();

using BufferId = uint64_t;
using KernelId = uint64_t;

// One compute dispatch: binding i of descriptor set 0 is buffers[i].
struct Dispatch {
  KernelId kernel = 0;
  std::vector<BufferId> buffers;
  uint32_t groups_x = 1;
};

class VulkanDevice {
 public:
  // Picks the device: `selector` or else $QD_VULKAN_DEVICE (an index or a name substring), else
  // a discrete GPU, else an integrated, virtual or CPU one. $QD_VULKAN_FORCE_STAGING=1 keeps
  // buffers unmapped, to test the staged path on devices whose memory is all host-visible.
  explicit VulkanDevice(const std::string &selector = "");
  ~VulkanDevice();
  VulkanDevice(const VulkanDevice &) = delete;
  VulkanDevice &operator=(const VulkanDevice &) = delete;

  const DeviceCaps &caps() const { return caps_; }
  // What the codegen will see; the device keeps the features enabled.
  void disable_caps(const CapSet &caps);
  spirv::TargetEnv target_env() const;  // the validator environment matching the device

  // Host access to a buffer first waits for every launch submitted before (they may read or
  // write it), unless `wait` is false: the caller knows no pending launch uses those bytes
  // (wait_for(serial) on the launches that do).
  BufferId alloc_buffer(size_t bytes);
  void free_buffer(BufferId id);
  size_t buffer_size(BufferId id) const;
  void write_buffer(BufferId id, size_t offset, const void *data, size_t bytes, bool wait = true);
  void read_buffer(BufferId id, size_t offset, void *out, size_t bytes);
  void fill_buffer(BufferId id, size_t offset, size_t bytes, uint32_t pattern, bool wait = true);

  // Validates the module, then builds (or finds in the cache) its compute pipeline. The shader
  // declares `num_buffers` storage buffers in set 0, bindings 0 .. num_buffers-1.
  KernelId create_kernel(const std::vector<uint32_t> &spirv, uint32_t num_buffers,
                         const std::string &entry = "main");
  // Drops one create_kernel reference (each call, cached or not, is one); the pipeline is
  // destroyed with the last, so compiling kernel after kernel does not grow the device forever.
  void release_kernel(KernelId id);
  // Records the dispatches, with a compute -> compute barrier before each, into the open command
  // buffer; it is submitted (without waiting) at once when no earlier submission is still running,
  // so the device starts on it while the host prepares the next launches (which then gather in
  // the next command buffer), when it holds kMaxBatch launches, or when something waits
  // (wait_for, sync, host access). Returns the launch's serial number (for wait_for).
  // Launches run in order, each seeing the writes of those before it. Descriptor sets are made
  // once per list of buffers and kept until one of the buffers is freed.
  uint64_t launch(const std::vector<Dispatch> &dispatches);
  void dispatch(KernelId kernel, const std::vector<BufferId> &buffers, uint32_t groups_x) {
    launch({Dispatch{kernel, buffers, groups_x}});
  }
  // Waits for the submissions up to `serial` (each wait up to $QD_VULKAN_TIMEOUT_S, default
  // 300 s); sync() for all of them.
  void wait_for(uint64_t serial);
  void sync() { wait_for(UINT64_MAX); }
  // Whether the launch `serial` (and every one before it) has finished; never waits.
  bool finished(uint64_t serial);

 private:
  struct Buffer {
    VkBuffer buffer = VK_NULL_HANDLE;
    VkDeviceMemory memory = VK_NULL_HANDLE;
    size_t size = 0;
    uint8_t *mapped = nullptr;  // null: device-local, staged
  };
  struct Kernel {
    VkShaderModule module = VK_NULL_HANDLE;
    VkPipeline pipeline = VK_NULL_HANDLE;
    VkPipelineLayout layout = VK_NULL_HANDLE;
    VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
    uint32_t num_buffers = 0;
    int refs = 0;
    std::string cache_key;
  };
  struct Layout {
    VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
    VkPipelineLayout pipeline_layout = VK_NULL_HANDLE;
  };

  struct Submission {
    VkCommandBuffer cmd = VK_NULL_HANDLE;
    VkFence fence = VK_NULL_HANDLE;
    uint64_t serial = 0;
  };

  // vulkan_device.cpp
  void wait_locked(uint64_t serial);  // wait_for with mu_ held
  void submit_open();                 // submits the open command buffer, if any
  size_t busy_submissions();          // retires the finished submissions; the number still running
  void wait_fence(VkFence fence);
  void create_instance();
  void create_device(const detail::FeatureChain &chain);
  void create_command_objects();
  void destroy();
  // Records with `record` into the one command buffer, submits, waits for the fence.
  void submit_and_wait(const std::function<void(VkCommandBuffer)> &record);
  void memory_barrier(VkCommandBuffer cmd, VkPipelineStageFlags dst_stage, VkAccessFlags dst_access);
  // vulkan_memory.cpp
  Buffer make_buffer(size_t size, bool want_host_visible);
  void release(Buffer &b);
  Buffer &buffer(BufferId id);
  const Buffer &buffer(BufferId id) const;
  void check_range(const Buffer &b, size_t offset, size_t bytes, const char *what) const;
  void staged_copy(Buffer &b, size_t offset, size_t bytes, void *host, bool to_device);
  // vulkan_pipeline.cpp
  const Layout &layout_for(uint32_t num_buffers);
  void validate_dispatches(const std::vector<Dispatch> &dispatches);
  void record_dispatches(VkCommandBuffer cmd, const std::vector<Dispatch> &dispatches,
                         const std::vector<VkDescriptorSet> &sets);
  VkDescriptorSet descriptor_set(const std::vector<BufferId> &buffers, VkDescriptorSetLayout layout);
  void drop_descriptor_sets(BufferId freed);

  mutable std::mutex mu_;
  InstanceFns ifn_{};
  DeviceFns dfn_{};
  VkInstance instance_ = VK_NULL_HANDLE;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t queue_family_ = 0;
  VkCommandPool cmd_pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cmd_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  VkPhysicalDeviceMemoryProperties memory_props_{};
  DeviceCaps caps_;
  uint64_t timeout_ns_ = 0;
  bool force_staging_ = false;
  bool hung_ = false;  // a submission never finished: the device cannot be used or torn down

  static constexpr int kMaxBatch = 64;
  bool open_ = false;               // open_sub_ is recording launches
  Submission open_sub_;
  int open_launches_ = 0;
  std::deque<Submission> pending_;  // submitted, oldest first
  std::vector<Submission> idle_;     // finished: command buffers and fences to reuse
  uint64_t last_serial_ = 0;
  struct CachedSet {
    VkDescriptorSet set;
    VkDescriptorPool pool;
  };
  std::map<std::vector<BufferId>, CachedSet> sets_;  // by the buffers bound, in binding order
  std::vector<VkDescriptorPool> set_pools_;          // the last one has room (or none left)

  std::map<BufferId, Buffer> buffers_;
  BufferId next_buffer_ = 1;
  std::map<uint32_t, Layout> layouts_;
  std::map<KernelId, Kernel> kernels_;
  std::map<std::string, KernelId> kernel_cache_;
  KernelId next_kernel_ = 1;
};

}  // namespace qd::vulkan
