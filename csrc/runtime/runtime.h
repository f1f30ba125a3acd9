#pragma once
// What every backend's runtime offers the Python layer: memory, compilation and launches.
#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "atomics/support_table.h"
#include "ir/ir.h"
#include "target/target.h"

namespace qd {

struct CompiledKernel {
  virtual ~CompiledKernel() = default;
  std::string name;
  std::map<std::string, std::string> artifacts;  // "ir", "llvm_ir", "ptx", "spirv_asm", ...
  std::vector<BufferDesc> buffers;
  std::vector<DataType> returns;
  int64_t temps_bytes = 0;
  std::vector<std::pair<int64_t, int64_t>> temps_zeroed_by_tasks;  // (KernelIR's)
  int num_tasks = 0;
  int error_slot = -1;  // debug mode: result slots [error_slot, +1] = (message index + 1, bad index)
  std::vector<std::string> error_messages;

  // Copies what every backend records about a compiled kernel from its IR (after the passes).
  void describe(const KernelIR &k) {
    name = k.name;
    artifacts["ir"] = print_ir(k);
    buffers = k.buffers;
    returns = k.returns;
    temps_bytes = k.temps_bytes;
    temps_zeroed_by_tasks = k.temps_zeroed_by_tasks;
    num_tasks = static_cast<int>(k.tasks.size());
    error_slot = k.error_slot;
    error_messages = k.error_messages;
  }
};

class Runtime {
 public:
  virtual ~Runtime() = default;
  virtual Backend backend() const = 0;
  virtual const TargetFeatures &features() const = 0;
  // Memory: handles are opaque (the address on cpu). New memory is zero-filled.
  virtual uint64_t allocate(size_t bytes) = 0;
  virtual void deallocate(uint64_t handle) = 0;
  virtual void write(uint64_t handle, size_t offset, const void *src, size_t bytes) = 0;
  virtual void read(uint64_t handle, size_t offset, void *dst, size_t bytes) = 0;
  // Sets `bytes` (a multiple of 4, as `offset` is) to copies of the 4-byte `pattern` (a field's
  // fill()). This default writes the pattern from a small host block, piece by piece.
  virtual void fill(uint64_t handle, size_t offset, size_t bytes, uint32_t pattern) {
    const std::vector<uint32_t> block(std::min<size_t>(bytes / 4, size_t(1) << 14), pattern);
    for (size_t done = 0; done < bytes;) {
      size_t piece = std::min(bytes - done, 4 * block.size());
      write(handle, offset + done, block.data(), piece);
      done += piece;
    }
  }
  // Takes a freshly built kernel: runs the passes for this backend, generates and loads code.
  virtual std::shared_ptr<CompiledKernel> compile(std::unique_ptr<KernelIR> k) = 0;
  // `buffers` has one handle per kernel buffer (temps/result slots are ignored); `args` are the
  // 8-byte argument slots. Returns the raw 8-byte return slots.
  virtual std::vector<uint64_t> launch(CompiledKernel &k, const std::vector<uint64_t> &buffers,
                                       const std::vector<int64_t> &args) = 0;
  virtual void sync() {}
  // The on-disk kernel cache (csrc/cache/disk_cache.h) under `dir`, its keys salted with `salt` (the
  // compiler's identity). Returns whether this backend caches there; "" turns it off.
  virtual bool set_offline_cache(const std::string &dir, const std::string &salt) { return false; }
  // Writes the entries compiled since the last flush (they are written at the end of a program).
  virtual void flush_offline_cache() {}
  // {"hits", "misses", "writes"} of that cache in this runtime (empty where the backend has none).
  virtual std::map<std::string, int64_t> offline_cache_stats() const { return {}; }
};

struct RuntimeOptions {
  int cpu_max_num_threads = 0;  // 0: all cores
  CapSet disabled_caps;  // capabilities to pretend the device lacks
  std::string device;  // backend-specific device selector
  bool fast_math = false;  // float arithmetic may be contracted and reassociated (TargetFeatures::fast_math)
  // GPU backends: atomics on a uniform address are combined over each subgroup first
  // (transforms/subgroup_atomics.cpp); false: TargetFeatures::subgroup_aggregation off.
  bool subgroup_aggregation = true;
  // Constant folding (transforms/fold.cpp); false: TargetFeatures::constant_folding off.
  bool constant_folding = true;
  // cuda: the bytes of stack per thread (qd.init(cuda_stack_limit=...)); 0: the driver's default.
  int64_t cuda_stack_limit = 0;
  // cpu: all-pairs loops interleaved (transforms/interleave.cpp); false: TargetFeatures::interleave_iterations off.
  bool interleave_iterations = true;
};

std::unique_ptr<Runtime> create_runtime(Backend backend, const RuntimeOptions &options);

}  // namespace qd
