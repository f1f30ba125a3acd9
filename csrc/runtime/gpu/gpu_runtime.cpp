#include "runtime/gpu/gpu_runtime.h"

#include <algorithm>
#include <cstdlib>
#include <optional>

#include "target/launch_bounds.h"

namespace qd {

GpuRuntime::GpuRuntime(Backend backend, std::unique_ptr<GpuDevice> device, TargetFeatures features)
    : backend_(backend), device_(std::move(device)), features_(std::move(features)) {}

GpuRuntime::~GpuRuntime() {
  // A destructor must not throw; a device that faulted frees everything with its context anyway.
  for (uint64_t p : allocations_) {
    try {
      device_->free(p);
    } catch (...) {
    }
  }
}

uint64_t GpuRuntime::allocate_locked(size_t bytes) {
  // Whole 32-bit words: a narrow element's atomic is a CAS loop on the word holding it.
  size_t padded = (std::max<size_t>(bytes, 1) + 3) / 4 * 4;
  uint64_t p = device_->alloc(padded);
  allocations_.insert(p);
  device_->zero(p, padded);
  return p;
}

uint64_t GpuRuntime::allocate(size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  return allocate_locked(bytes);
}

void GpuRuntime::deallocate(uint64_t handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!allocations_.erase(handle)) return;  // not ours (or freed already): ignore, as free(NULL)
  device_->free(handle);
}

void GpuRuntime::write(uint64_t handle, size_t offset, const void *src, size_t bytes) {
  device_->to_device(handle + offset, src, bytes);
}

void GpuRuntime::fill(uint64_t handle, size_t offset, size_t bytes, uint32_t pattern) {
  if (pattern == 0) device_->zero(handle + offset, bytes);  // a device memset, no host data (gradients)
  else Runtime::fill(handle, offset, bytes, pattern);
}

void GpuRuntime::read(uint64_t handle, size_t offset, void *dst, size_t bytes) {
  device_->to_host(dst, handle + offset, bytes);  // waits for the kernels before it
}

unsigned GpuRuntime::grid_for(const GpuKernel::Launch &l, const std::vector<int64_t> &args) {
  if (!l.runs) return 0;
  if (!l.task->parallel) return 1;
  int block = static_cast<int>(l.block);
  unsigned full = std::max(1u, device_->resident_blocks(block));
  std::optional<int64_t> n = range_length(*l.task, args);
  if (!n) return full;
  return static_cast<unsigned>(std::clamp<int64_t>((*n + block - 1) / block, 0, full));
}

std::shared_ptr<CompiledKernel> GpuRuntime::compile(std::unique_ptr<KernelIR> k) {
  Loaded loaded = load_kernel(*k);
  const GpuCompiled &c = loaded.compiled;
  auto out = std::make_shared<GpuKernel>();
  out->describe(*k);
  for (const auto &[key, text] : c.artifacts) out->artifacts[key] = text;
  for (size_t i = 0; i < k->tasks.size(); i++)
    out->launches.push_back({loaded.functions[i], static_cast<unsigned>(c.block_dims[i]), &k->tasks[i],
                             has_effects(k->tasks[i]),
                             static_cast<unsigned>(c.dynamic_shared_bytes[i])});
  std::lock_guard<std::mutex> lock(mutex_);
  out->table = allocate_locked(8 * std::max<size_t>(k->buffers.size(), 1));
  if (k->temps_bytes) out->temps = allocate_locked(static_cast<size_t>(k->temps_bytes));
  if (!k->returns.empty()) out->result = allocate_locked(8 * k->returns.size());
  out->ir = std::move(k);
  return out;
}

std::vector<uint64_t> GpuRuntime::launch(CompiledKernel &ck, const std::vector<uint64_t> &buffers,
                                         const std::vector<int64_t> &args) {
  auto &k = static_cast<GpuKernel &>(ck);
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<uint64_t> table(k.buffers.size());
  for (size_t i = 0; i < table.size(); i++) {
    switch (k.buffers[i].kind) {
      case BufferKind::Temps: table[i] = k.temps; break;
      case BufferKind::Result: table[i] = k.result; break;
      default: table[i] = buffers.at(i);
    }
  }
  // Synchronous copies from host memory wait for the kernels before them, so rewriting the table
  // and slots of a kernel that may still be running is safe.
  if (table != k.table_now) {
    device_->to_device(k.table, table.data(), 8 * table.size());
    k.table_now = table;
  }
  if (8 * args.size() > k.args_bytes) {
    if (k.args) {
      allocations_.erase(k.args);
      device_->free(k.args);
    }
    k.args_bytes = 8 * std::max<size_t>(args.size(), 1);
    k.args = allocate_locked(k.args_bytes);
    k.args_now.clear();
  }
  if (args != k.args_now) {
    device_->to_device(k.args, args.data(), 8 * args.size());
    k.args_now = args;
  }
  if (k.temps) device_->zero(k.temps, static_cast<size_t>(k.temps_bytes));
  if (k.result) device_->zero(k.result, 8 * k.returns.size());  // debug mode's error slots start clear
  for (const GpuKernel::Launch &l : k.launches)
    if (unsigned grid = grid_for(l, args)) device_->launch(l.fn, grid, l.block, l.dynamic_shared, k.table, k.args);
  std::vector<uint64_t> result(k.returns.size());
  if (!result.empty()) device_->to_host(result.data(), k.result, 8 * result.size());
  return result;
}

void GpuRuntime::sync() { device_->synchronize(); }

int device_ordinal(const RuntimeOptions &options, const char *backend) {
  if (options.device.empty()) return 0;
  char *end = nullptr;
  long n = std::strtol(options.device.c_str(), &end, 10);
  if (*end || n < 0 || n > 1024)
    throw RuntimeError(std::string("device='") + options.device + "' is not a " + backend +
                       " device ordinal (0, 1, ...)");
  return static_cast<int>(n);
}

}  // namespace qd
