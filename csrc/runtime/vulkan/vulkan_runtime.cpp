#include "runtime/vulkan/vulkan_runtime.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <thread>

#include "codegen/spirv/codegen_spirv.h"
#include "codegen/spirv/spirv_tools.h"
#include "target/launch_bounds.h"
#include "target/shared_memory.h"
#include "transforms/passes.h"

namespace qd {

namespace {

using vulkan::BufferId;
using vulkan::VulkanDevice;

struct VulkanTask {
  vulkan::KernelId pipeline = 0;
  const Task *task = nullptr;  // the IR, kept for the loop bounds
  uint32_t block_dim = 1;
};

struct VulkanKernel : CompiledKernel {
  std::weak_ptr<VulkanDevice> device;  // weak: a kernel cached across qd.init must not keep a device
  std::unique_ptr<KernelIR> ir;
  std::vector<VulkanTask> tasks;
  BufferId args = 0, temps = 0, result = 0;  // per kernel: written before a launch...
  uint64_t last_launch = 0;                   // ... once the kernel's previous launch is done
  bool launched = false;  // since then, the temps' ranges KernelIR::temps_left_zero are zero
  int num_slots = 0;
  // The argument buffers (the first is where `args` starts), each with the launch last reading it:
  // a kernel without temps or results writes its arguments into the next one whose launch is done
  // (or a new one, up to kArgsRing), so launching it again need not wait for the launch before
  // (k(dt) in a loop). `args` is the one the current launch binds.
  struct ArgsBuffer {
    BufferId id = 0;
    uint64_t serial = 0;
  };
  std::vector<ArgsBuffer> args_ring;
  size_t ring_next = 0;

  ~VulkanKernel() override {
    if (auto d = device.lock()) {
      try {  // (frees wait for queued launches; a failure there is reported by the next wait)
        for (const ArgsBuffer &a : args_ring) d->free_buffer(a.id);
        for (BufferId id : {temps, result})
          if (id) d->free_buffer(id);
        for (const VulkanTask &t : tasks) d->release_kernel(t.pipeline);
      } catch (...) {
      }
    }
  }
};

// The buffers the codegen binds that are not the user's ndarrays and fields.
uint32_t internal_buffers(const KernelIR &k) {
  return uint32_t(std::count_if(k.buffers.begin(), k.buffers.end(), [](const BufferDesc &b) {
    return b.kind != BufferKind::Field && b.kind != BufferKind::Ndarray;
  }));
}

std::string words_as_bytes(const std::vector<uint32_t> &words) {
  return std::string(reinterpret_cast<const char *>(words.data()), words.size() * sizeof(uint32_t));
}

class VulkanRuntime : public Runtime {
 public:
  explicit VulkanRuntime(const RuntimeOptions &o) : device_(std::make_shared<VulkanDevice>(o.device)) {
    device_->disable_caps(o.disabled_caps);
    const vulkan::DeviceCaps &caps = device_->caps();
    features_.caps = caps.flags;
    // maxComputeSharedMemorySize: kernels whose shared arrays need more are refused at compile time.
    features_.max_shared_memory_bytes = caps.max_shared_memory_bytes;
    features_.subgroup_size = static_cast<int>(caps.subgroup_size);
    features_.subgroup_aggregation = o.subgroup_aggregation;
    features_.constant_folding = o.constant_folding;
    target_.backend = Backend::Vulkan;
    target_.features = features_;
    target_.device_features = true;
    target_.fast_math = o.fast_math;
    target_.max_block_dim = std::min(caps.max_workgroup_size_x, caps.max_workgroup_invocations);
    // A CPU device (lavapipe) pays per workgroup (each is set up and run on its own by one of its
    // threads, one per host core), and a privatized reduction per thread (one flush per subgroup):
    // it gets a few workgroups per core, each invocation running many grid-stride steps (2^18
    // iterations on 2 cores, 32 workgroups against 1024: benchmarks/autodiff.py's loss x*x forward
    // 3.7 -> 2.5 ms CPU time, broadcast s backward 9.7 -> 8.1 ms; the gathers within the noise).
    bool cpu = caps.device_type == "cpu";
    uint32_t cores = std::max(1u, std::thread::hardware_concurrency());
    max_groups_ = std::min<uint32_t>(caps.max_workgroup_count_x, cpu ? std::min(1024u, 16 * cores) : 65535);
    fill_groups_ = std::min<uint32_t>(max_groups_, cpu ? 64 : 4096);
  }

  Backend backend() const override { return Backend::Vulkan; }
  const TargetFeatures &features() const override { return features_; }
  const vulkan::DeviceCaps &caps() const { return device_->caps(); }

  // Freed buffers are kept for reuse by size: numpy arrays passed to kernels are staged through a
  // fresh buffer on every call, and a new device allocation costs far more than zeroing an old one.
  uint64_t allocate(size_t bytes) override {
    uint64_t limit = device_->caps().max_storage_buffer_range;
    if (limit && bytes > limit)
      throw RuntimeError("cannot allocate " + std::to_string(bytes) + " bytes: a kernel can only bind buffers up to " +
                         std::to_string(limit) + " bytes on this Vulkan device (maxStorageBufferRange)");
    {
      std::lock_guard<std::mutex> lock(pool_mu_);
      auto it = pool_.find(bytes);
      if (it != pool_.end()) {
        BufferId id = it->second;
        pool_.erase(it);
        pooled_bytes_ -= bytes;
        device_->fill_buffer(id, 0, bytes, 0);
        return id;
      }
    }
    return device_->alloc_buffer(bytes);
  }
  void deallocate(uint64_t h) override {
    size_t bytes = device_->buffer_size(h);
    std::lock_guard<std::mutex> lock(pool_mu_);
    if (pooled_bytes_ + bytes > kMaxPooledBytes) return device_->free_buffer(h);
    pool_.emplace(bytes, h);
    pooled_bytes_ += bytes;
  }
  void write(uint64_t h, size_t off, const void *src, size_t n) override { device_->write_buffer(h, off, src, n); }
  void read(uint64_t h, size_t off, void *dst, size_t n) override { device_->read_buffer(h, off, dst, n); }
  void fill(uint64_t h, size_t off, size_t n, uint32_t pattern) override { device_->fill_buffer(h, off, n, pattern); }
  void sync() override { device_->sync(); }

  std::shared_ptr<CompiledKernel> compile(std::unique_ptr<KernelIR> k) override {
    run_passes(*k, Target{Backend::Vulkan, features_});
    SpirvModule m = codegen_spirv(*k, target_);
    // Every buffer is one storage-buffer binding (plus the argument buffer): beyond the device's
    // per-stage limit the pipeline is invalid (lavapipe crashed at launch), so it is refused here.
    uint32_t bindings = m.args_binding + 1, limit = caps().max_storage_buffers_per_stage;
    if (limit && bindings > limit) {
      uint32_t user = m.args_binding - internal_buffers(*k);
      throw RuntimeError("kernel '" + k->name + "' binds " + std::to_string(bindings) + " storage buffers (" +
                         std::to_string(user) + " ndarrays and fields, " + std::to_string(bindings - user) +
                         " for arguments and temporaries); this Vulkan device allows " + std::to_string(limit) +
                         " per shader (maxPerStageDescriptorStorageBuffers): pass fewer ndarrays to one kernel "
                         "(split it, or stack arrays of one dtype into one ndarray)");
    }
    auto out = std::make_shared<VulkanKernel>();
    out->describe(*k);
    out->artifacts["spirv"] = words_as_bytes(m.words);
    out->artifacts["spirv_asm"] = spirv::disassemble(m.words);
    out->num_slots = k->num_arg_slots;
    out->device = device_;
    for (size_t i = 0; i < k->tasks.size(); i++) {
      if (!m.tasks[i].has_effects) continue;  // e.g. reading the scalar arguments, for nothing
      auto words = k->tasks.size() > 1 ? spirv::extract_entry_point(m.words, m.tasks[i].entry) : m.words;
      out->tasks.push_back({device_->create_kernel(words, m.args_binding + 1, m.tasks[i].entry), &k->tasks[i],
                            m.tasks[i].block_dim});
    }
    out->args = device_->alloc_buffer(8 * std::max(out->num_slots, 1));
    out->args_ring.push_back({out->args, 0});
    if (k->temps_bytes) out->temps = device_->alloc_buffer(k->temps_bytes);
    if (!k->returns.empty()) out->result = device_->alloc_buffer(8 * k->returns.size());
    out->ir = std::move(k);
    return out;
  }

  std::vector<uint64_t> launch(CompiledKernel &ck, const std::vector<uint64_t> &buffers,
                               const std::vector<int64_t> &args) override {
    auto &k = static_cast<VulkanKernel &>(ck);
    if (k.device.lock() != device_) throw RuntimeError("kernel '" + k.name + "' was compiled for an earlier qd.init()");
    std::lock_guard<std::mutex> lock(mu_);  // the kernel's args / temps / result buffers
    // Launches are asynchronous: a host read (or qd.sync()) waits for them. Only this kernel's
    // own earlier launches use its args / temps / result buffers: with temps or results the
    // launch waits for the one before; else only when all kArgsRing argument buffers are in use.
    size_t slots = std::min(args.size(), static_cast<size_t>(k.num_slots));
    VulkanKernel::ArgsBuffer *ab = &k.args_ring[0];
    if (k.temps || k.result) {
      device_->wait_for(k.last_launch);
    } else if (slots) {  // the next argument buffer of the ring that no queued launch reads
      ab = &k.args_ring[k.ring_next];
      if (!device_->finished(ab->serial)) {
        if (k.args_ring.size() < kArgsRing) {
          k.args_ring.insert(k.args_ring.begin() + k.ring_next, {device_->alloc_buffer(8 * k.num_slots), 0});
          ab = &k.args_ring[k.ring_next];
        } else {
          device_->wait_for(ab->serial);
        }
      }
      k.ring_next = (k.ring_next + 1) % k.args_ring.size();
    }
    k.args = ab->id;
    if (slots) device_->write_buffer(k.args, 0, args.data(), 8 * slots, /*wait=*/false);
    if (k.temps) {  // zero, but for the ranges the last launch left zero
      std::vector<std::pair<int64_t, int64_t>> clean = k.launched ? k.ir->temps_left_zero : decltype(clean){};
      std::sort(clean.begin(), clean.end());
      int64_t from = 0;  // (in 8-byte slots)
      for (auto [first, count] : clean) {
        if (first > from) device_->fill_buffer(k.temps, 8 * from, 8 * (first - from), 0, false);
        from = std::max(from, first + count);
      }
      if (8 * from < static_cast<int64_t>(k.temps_bytes)) device_->fill_buffer(k.temps, 8 * from, k.temps_bytes - 8 * from, 0, false);
    }
    if (k.result) device_->fill_buffer(k.result, 0, 8 * k.returns.size(), 0, false);  // debug mode's error slots
    std::vector<BufferId> table = binding_table(k, buffers);
    std::vector<vulkan::Dispatch> dispatches;
    for (const VulkanTask &t : k.tasks) {
      uint32_t groups = grid_size(k, t, args);
      if (groups) dispatches.push_back({t.pipeline, table, groups});
    }
    k.last_launch = ab->serial = device_->launch(dispatches);
    k.launched = true;  // (submitted: its fill, then its tasks)
    std::vector<uint64_t> result(k.returns.size());
    if (k.result) device_->read_buffer(k.result, 0, result.data(), 8 * result.size());
    return result;
  }

 private:
  std::vector<BufferId> binding_table(const VulkanKernel &k, const std::vector<uint64_t> &buffers) const {
    std::vector<BufferId> table(k.buffers.size() + 1);
    for (size_t i = 0; i < k.buffers.size(); i++) {
      switch (k.buffers[i].kind) {
        case BufferKind::Temps: table[i] = k.temps; break;
        case BufferKind::Result: table[i] = k.result; break;
        case BufferKind::Private: case BufferKind::Shared: table[i] = k.args; break;  // no memory: unused binding
        default:
          if (i >= buffers.size() || !buffers[i])
            throw RuntimeError("kernel '" + k.name + "': no memory given for buffer '" + k.buffers[i].name + "'");
          table[i] = buffers[i];
      }
    }
    table.back() = k.args;
    return table;
  }

  // Workgroups for a task: a parallel task gets enough for one iteration per invocation, capped
  // (the grid-stride loop does the rest), or a device-filling grid when the bounds are not known
  // here. On a device that stops every loop after `max_loop_iterations` iterations per invocation
  // (lavapipe), the grid is made large enough that no loop reaches that, or the launch fails
  // naming the loop: never a silently truncated loop.
  uint32_t grid_size(const VulkanKernel &k, const VulkanTask &t, const std::vector<int64_t> &args) const {
    int64_t limit = caps().max_loop_iterations;
    LoopLoad inner = limit ? heaviest_serial_loop(*t.task, args) : LoopLoad{};
    if (inner.iterations > limit) loop_limit_error(k, *inner.loop, inner.iterations, "");
    if (!t.task->parallel) return 1;
    std::optional<int64_t> n = range_length(*t.task, args);
    int64_t block = t.block_dim;
    int64_t groups = n ? std::min<int64_t>((*n + block - 1) / block, max_groups_) : fill_groups_;
    if (!limit) return static_cast<uint32_t>(groups);
    // Each invocation runs ceil(n / (groups * block)) grid-stride steps, each with up to `inner`
    // iterations of the heaviest inner loop.
    int64_t steps = limit / std::max<int64_t>(1, inner.iterations);
    int64_t span = n ? *n : int64_t(1) << 31;  // unknown bounds: any i32 range
    int64_t needed = (span + block * steps - 1) / (block * steps);
    if (needed > caps().max_workgroup_count_x) {
      if (n)
        loop_limit_error(k, *t.task->loop(), (*n + block * caps().max_workgroup_count_x - 1) / (block * caps().max_workgroup_count_x) *
                                                  std::max<int64_t>(1, inner.iterations),
                         " (raise block_dim, or split the range)");
      needed = caps().max_workgroup_count_x;
    }
    return static_cast<uint32_t>(std::max(groups, needed));
  }

  [[noreturn]] void loop_limit_error(const VulkanKernel &k, const Stmt &loop, int64_t iterations,
                                     const std::string &hint) const {
    throw RuntimeError(CompileError::format(
        "kernel '" + k.name + "': this loop would run " + std::to_string(iterations) +
            " iterations in one invocation, but this Vulkan device (" + caps().device_name +
            ") stops every loop after " + std::to_string(caps().max_loop_iterations) +
            " iterations per invocation, which would silently give wrong results; run it on qd.cpu or "
            "another device" + hint,
        loop.loc));
  }

  static constexpr size_t kMaxPooledBytes = size_t(256) << 20;
  static constexpr size_t kArgsRing = 8;  // argument buffers per kernel at most

  std::shared_ptr<VulkanDevice> device_;
  TargetFeatures features_;
  std::mutex pool_mu_;
  std::multimap<size_t, BufferId> pool_;
  size_t pooled_bytes_ = 0;
  SpirvTarget target_;
  uint32_t max_groups_ = 1, fill_groups_ = 1;
  std::mutex mu_;
};

}  // namespace

std::unique_ptr<Runtime> create_vulkan_runtime(const RuntimeOptions &options) {
  return std::make_unique<VulkanRuntime>(options);
}

const vulkan::DeviceCaps *vulkan_caps(const Runtime &r) {
  auto *v = dynamic_cast<const VulkanRuntime *>(&r);
  return v ? &v->caps() : nullptr;
}

}  // namespace qd
