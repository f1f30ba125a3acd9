#pragma once
// What the CUDA and AMDGPU runtimes share: device memory bookkeeping, each kernel's buffer table
// and argument slots in device memory, and the launch sequence (the tasks in order on the
// default stream, which keeps them ordered; results read back at the end). A backend supplies
// the device calls (GpuDevice) and the compiler (GpuRuntime::load_kernel).
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "codegen/llvm/target_gpu.h"
#include "runtime/runtime.h"

namespace qd {

// The few device calls a GPU runtime makes; addresses are device pointers as integers.
class GpuDevice {
 public:
  virtual ~GpuDevice() = default;
  virtual uint64_t alloc(size_t bytes) = 0;
  virtual void free(uint64_t ptr) = 0;
  virtual void to_device(uint64_t dst, const void *src, size_t bytes) = 0;
  virtual void to_host(void *dst, uint64_t src, size_t bytes) = 0;
  virtual void zero(uint64_t dst, size_t bytes) = 0;
  // Launches fn(table, args) asynchronously on the default stream, with `dynamic_shared` bytes of
  // dynamic shared memory per block (CUDA kernels whose shared arrays exceed 48 KiB; else 0).
  virtual void launch(void *fn, unsigned grid, unsigned block, unsigned dynamic_shared, uint64_t table,
                      uint64_t args) = 0;
  virtual void synchronize() = 0;
  // Blocks of `block` threads that fill the device: the grid of a parallel task whose trip count
  // is only known on the device (the grid-stride loop covers the rest).
  virtual unsigned resident_blocks(int block) = 0;
};

struct GpuKernel : CompiledKernel {
  struct Launch {
    void *fn;
    unsigned block;
    const Task *task;  // in `ir`: its bounds size the grid at each launch (target/launch_bounds.h)
    bool runs;         // false for a serial task without effects
    unsigned dynamic_shared = 0;  // bytes of dynamic shared memory per block
  };
  std::unique_ptr<KernelIR> ir;  // after the passes
  std::vector<Launch> launches;  // one per task, in order
  // Device memory, owned by the runtime: the buffer table, the argument slots, temps and result.
  uint64_t table = 0, args = 0, temps = 0, result = 0;
  size_t args_bytes = 0;
  // What the table and argument slots hold now, so that unchanged ones are not copied again.
  std::vector<uint64_t> table_now;
  std::vector<int64_t> args_now;
};

class GpuRuntime : public Runtime {
 public:
  GpuRuntime(Backend backend, std::unique_ptr<GpuDevice> device, TargetFeatures features);
  ~GpuRuntime() override;  // frees every allocation it made

  Backend backend() const override { return backend_; }
  const TargetFeatures &features() const override { return features_; }
  uint64_t allocate(size_t bytes) override;
  void deallocate(uint64_t handle) override;
  void write(uint64_t handle, size_t offset, const void *src, size_t bytes) override;
  void read(uint64_t handle, size_t offset, void *dst, size_t bytes) override;
  void fill(uint64_t handle, size_t offset, size_t bytes, uint32_t pattern) override;
  std::shared_ptr<CompiledKernel> compile(std::unique_ptr<KernelIR> k) override;
  std::vector<uint64_t> launch(CompiledKernel &k, const std::vector<uint64_t> &buffers,
                               const std::vector<int64_t> &args) override;
  void sync() override;

 protected:
  // Compiles `k` for this device (passes included) and loads the code: returns the artefacts and
  // per task its loaded kernel function, block size and trip count.
  struct Loaded {
    GpuCompiled compiled;
    std::vector<void *> functions;
  };
  virtual Loaded load_kernel(KernelIR &k) = 0;
  GpuDevice &device() { return *device_; }

 private:
  uint64_t allocate_locked(size_t bytes);
  // The grid of a task at this launch: 0 (nothing to run), 1 for a serial task; a parallel one gets
  // one thread per iteration when its bounds are known on the host, capped at a device-filling
  // grid (the grid-stride loop does the rest), which is also what unknown bounds get.
  unsigned grid_for(const GpuKernel::Launch &l, const std::vector<int64_t> &args);

  Backend backend_;
  std::unique_ptr<GpuDevice> device_;
  TargetFeatures features_;
  std::mutex mutex_;  // launches rewrite a kernel's table and slots; allocations bookkeeping
  std::set<uint64_t> allocations_;
};

// The device ordinal RuntimeOptions::device names ("" -> 0); throws RuntimeError otherwise.
int device_ordinal(const RuntimeOptions &options, const char *backend);

}  // namespace qd
