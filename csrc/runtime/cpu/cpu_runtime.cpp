#include "runtime/cpu/cpu_runtime.h"

#include <llvm/Support/raw_ostream.h>

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "cache/disk_cache.h"
#include "codegen/llvm/target_cpu.h"
#include "runtime/cpu/cpu_jit.h"
#include "runtime/cpu/thread_pool.h"
#include "transforms/passes.h"

namespace qd {

namespace {

using SerialFn = void (*)(void **, int64_t *);
using BoundsFn = void (*)(void **, int64_t *, int64_t *);
using BodyFn = void (*)(void **, int64_t *, int64_t, int64_t);

struct CpuTask {
  bool parallel;
  void *body;
  BoundsFn bounds;
  int block_dim;
  int cpu_block_dim;  // a loop run block by block: chunks are whole blocks
  int64_t min_chunk;  // private field copies are set up per chunk: keep chunks long enough
  bool sizes_scratch;  // its bounds give the items the scratch buffers are sized for (Task::scratch_items)
  Task::When when;
};

// Scratch buffers (BufferKind::Scratch) of one kernel: at most 1 GiB (QD_CPU_MAX_SCRATCH_BYTES in
// the environment when the runtime starts: another limit, for tests), at most 2^31 - 2^16 items
// (their indices are i32); beyond, the kernel runs its fallback tasks.
int64_t max_scratch_bytes() {
  const char *v = std::getenv("QD_CPU_MAX_SCRATCH_BYTES");
  return v && *v ? std::strtoll(v, nullptr, 10) : int64_t(1) << 30;
}
constexpr int64_t kMaxScratchItems = (int64_t(1) << 31) - (int64_t(1) << 16);

struct CpuKernel : CompiledKernel {
  // The JIT outlives its kernels (a kernel can outlive its runtime); the kernel's code is freed
  // with the kernel.
  std::shared_ptr<CpuJit> jit;
  llvm::orc::JITDylib *code = nullptr;  // the kernel's own JITDylib
  ~CpuKernel() override {
    if (code) jit->remove(*code);
  }
  std::vector<CpuTask> tasks;
  // 8-byte slots, from temps_base(); calloc'ed (the OS's fresh pages of a large one read as zero and
  // take no memory until written: a bucketed scatter's fallback slots, KernelIR::temps_zeroed_by_tasks,
  // are written only by launches without scratch memory).
  std::unique_ptr<int64_t, decltype(&std::free)> temps{nullptr, &std::free};
  // The temps from a 64-byte boundary (deterministic sums keep a field element's slots in one
  // cache line); 8 slots more than the kernel's are allocated.
  int64_t *temps_base() {
    auto p = reinterpret_cast<uintptr_t>(temps.get());
    return reinterpret_cast<int64_t *>((p + 63) & ~uintptr_t(63));
  }
  std::vector<uint64_t> result;  // 8-byte slots
  // Scratch memory, kept between launches (grown when a launch needs more) and freed with the kernel.
  std::unique_ptr<char, decltype(&std::free)> scratch{nullptr, &std::free};
  int64_t scratch_bytes = 0;

  // Points the table's scratch buffers into scratch memory sized for `items`; false when that is
  // too much (or cannot be had).
  bool bind_scratch(std::vector<void *> &table, int64_t items, int64_t max_bytes) {
    if (items < 0 || items > kMaxScratchItems) return false;
    std::vector<int64_t> offsets(buffers.size(), -1);
    int64_t bytes = 0;
    for (size_t i = 0; i < buffers.size(); i++) {
      const BufferDesc &d = buffers[i];
      if (d.kind != BufferKind::Scratch) continue;
      offsets[i] = bytes;
      bytes += ((d.shape.at(0) + d.scratch_per_item * items) * byte_size(d.dtype) + 63) / 64 * 64;
      if (bytes > max_bytes) return false;
    }
    if (bytes > scratch_bytes) {
      scratch.reset(static_cast<char *>(std::aligned_alloc(64, static_cast<size_t>(bytes))));
      scratch_bytes = scratch ? bytes : 0;
      if (!scratch) return false;
    }
    for (size_t i = 0; i < buffers.size(); i++)
      if (offsets[i] >= 0) table[i] = scratch.get() + offsets[i];
    return true;
  }
};

std::string module_text(const llvm::Module &m) {
  std::string s;
  llvm::raw_string_ostream os(s);
  m.print(os, nullptr);
  return s;
}

struct Generated {
  std::unique_ptr<llvm::LLVMContext> ctx;
  std::unique_ptr<llvm::Module> module;
  std::vector<TaskSymbols> symbols;
};

Generated generate(KernelIR &k, const TargetFeatures &given) {
  TargetFeatures features = given;
  features.vector_bits = CpuJit::host_vector_bits();  // (in the module text, so in the cache's key)
  CpuTarget target(features);
  run_passes(k, Target{Backend::Cpu, features});
  Generated g;
  g.ctx = std::make_unique<llvm::LLVMContext>();
  LlvmCodegen cg(k, target, *g.ctx);
  g.module = cg.run(&g.symbols);
  return g;  // not optimised yet: its text is the on-disk cache's key
}

class CpuRuntime : public Runtime {
 public:
  explicit CpuRuntime(const RuntimeOptions &o)
      : pool_(o.cpu_max_num_threads > 0 ? o.cpu_max_num_threads
                                        : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))),
        features_(cpu_features()) {
    features_.caps.bits &= ~o.disabled_caps.bits;
    features_.subgroup_aggregation = o.subgroup_aggregation;  // the cpu has batched compaction (compaction.cpp)
    features_.constant_folding = o.constant_folding;
    features_.interleave_iterations = o.interleave_iterations;
    features_.fast_math = o.fast_math;
  }
  ~CpuRuntime() override { cache_.flush(); }  // entries not yet written (the program ended without qd.reset())

  Backend backend() const override { return Backend::Cpu; }
  const TargetFeatures &features() const override { return features_; }

  // Zeroed memory, 64-byte aligned. A large buffer is mapped from the OS, whose fresh pages read
  // as zero: nothing is written until the program does (300 ndarrays of 256 MiB made and dropped
  // took 111 s with memset, the reference's test_ndarray_in_python_func). From kHugeBytes on the
  // mapping asks for transparent huge pages (as NumPy does for its large arrays): a kernel writing
  // to many places of it at once (a radix sort's scatter: 256 streams) then misses the TLB far
  // less (the sort's 2^22-key scatter by the top byte 13 -> 9 ms in a C model of it on this host).
  uint64_t allocate(size_t bytes) override {
    size_t size = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
    if (size >= kMapBytes) {
      void *p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) throw RuntimeError("out of host memory allocating " + std::to_string(bytes) + " bytes");
#ifdef MADV_HUGEPAGE
      if (size >= kHugeBytes) madvise(p, size, MADV_HUGEPAGE);  // advice only: ignored where THP is off
#endif
      std::lock_guard<std::mutex> lock(mapped_mutex_);
      mapped_[reinterpret_cast<uint64_t>(p)] = size;
      return reinterpret_cast<uint64_t>(p);
    }
    void *p = std::aligned_alloc(64, size);
    if (!p) throw RuntimeError("out of host memory allocating " + std::to_string(bytes) + " bytes");
    std::memset(p, 0, bytes);
    return reinterpret_cast<uint64_t>(p);
  }
  void deallocate(uint64_t h) override {
    {
      std::lock_guard<std::mutex> lock(mapped_mutex_);
      auto it = mapped_.find(h);
      if (it != mapped_.end()) {
        munmap(reinterpret_cast<void *>(h), it->second);
        mapped_.erase(it);
        return;
      }
    }
    std::free(reinterpret_cast<void *>(h));
  }
  void write(uint64_t h, size_t off, const void *src, size_t n) override {
    std::memcpy(reinterpret_cast<char *>(h) + off, src, n);
  }
  void read(uint64_t h, size_t off, void *dst, size_t n) override {
    std::memcpy(dst, reinterpret_cast<char *>(h) + off, n);
  }
  void fill(uint64_t h, size_t off, size_t n, uint32_t pattern) override {
    std::fill_n(reinterpret_cast<uint32_t *>(h + off), n / 4, pattern);
  }

  bool set_offline_cache(const std::string &dir, const std::string &salt) override {
    cache_.flush();
    cache_ = DiskCache(dir, salt + "\n" + CpuJit::host_id());
    return cache_.enabled();
  }
  void flush_offline_cache() override { cache_.flush(); }
  std::map<std::string, int64_t> offline_cache_stats() const override {
    return {{"hits", cache_.stats().hits}, {"misses", cache_.stats().misses}, {"writes", cache_.stats().writes}};
  }

  std::shared_ptr<CompiledKernel> compile(std::unique_ptr<KernelIR> k) override {
    auto g = generate(*k, features_);
    auto out = std::make_shared<CpuKernel>();
    out->describe(*k);
    out->temps.reset(static_cast<int64_t *>(std::calloc(static_cast<size_t>(k->temps_bytes / 8 + 8), 8)));
    if (!out->temps) throw RuntimeError("out of host memory allocating " + std::to_string(k->temps_bytes) + " bytes of temps");
    out->result.assign(k->returns.size(), 0);
    // The object code is a function of the generated module and the host (in the cache's salt).
    std::string key = cache_.enabled() ? cache_.key(module_text(*g.module)) : "";
    std::optional<std::string> object = key.empty() ? std::nullopt : cache_.load(key);
    if (!object) {
      CpuJit::optimize_for_host(*g.module);
      object = CpuJit::emit_object(*g.module);
      if (!key.empty()) cache_.store(key, *object);
    }
    out->artifacts["llvm_ir"] = module_text(*g.module);  // as optimised; as generated on a cache hit
    out->jit = jit_;
    out->code = &jit_->add_object(*object);
    auto &lib = *out->code;
    for (size_t i = 0; i < k->tasks.size(); i++) {
      const Task &t = k->tasks[i];
      CpuTask ct{t.parallel, jit_->lookup(lib, g.symbols[i].body), nullptr, t.parallel ? t.loop()->block_dim : 0,
                 t.cpu_block_dim, t.min_chunk, t.scratch_items != nullptr, t.when};
      if (t.parallel) ct.bounds = reinterpret_cast<BoundsFn>(jit_->lookup(lib, g.symbols[i].bounds));
      out->tasks.push_back(ct);
    }
    return out;
  }

  std::vector<uint64_t> launch(CompiledKernel &ck, const std::vector<uint64_t> &buffers,
                               const std::vector<int64_t> &args) override {
    auto &k = static_cast<CpuKernel &>(ck);
    std::vector<void *> table(k.buffers.size());
    for (size_t i = 0; i < k.buffers.size(); i++) {
      switch (k.buffers[i].kind) {
        case BufferKind::Temps: table[i] = k.temps_base(); break;
        case BufferKind::Result: table[i] = k.result.data(); break;
        // on the task's stack (codegen): nothing bound, and the caller need not pass a handle for
        // one a transform added (a compaction's index list, a privatized field copy)
        case BufferKind::Private: case BufferKind::Shared: table[i] = nullptr; break;
        default: table[i] = reinterpret_cast<void *>(buffers.at(i));
      }
    }
    // (Large temps, deterministic sums' accumulators: zeroed by the workers, in parallel; not the
    // ranges the kernel's tasks zero themselves, which the passes reserve in ascending order.)
    int64_t *temps = k.temps_base();
    auto zero = [&](int64_t lo, int64_t hi) { std::fill(temps + lo, temps + hi, 0); };
    auto zero_slots = [&](int64_t lo, int64_t hi) {
      if (hi - lo >= (int64_t(1) << 20)) pool_.parallel_for(lo, hi, int64_t(1) << 17, zero);
      else zero(lo, hi);
    };
    int64_t from = 0;
    for (auto [first, count] : k.temps_zeroed_by_tasks) {
      zero_slots(from, first);
      from = first + count;
    }
    zero_slots(from, k.temps_bytes / 8);
    std::fill(k.result.begin(), k.result.end(), 0);
    void **bufs = table.data();
    int64_t *a = const_cast<int64_t *>(args.data());
    bool scratch = false;
    for (const CpuTask &t : k.tasks) {
      int64_t range[3] = {0, 0, 0};
      if (t.sizes_scratch) {
        t.bounds(bufs, a, range);
        scratch = k.bind_scratch(table, range[2], max_scratch_bytes_);
      }
      if (t.when == Task::When::WithScratch && !scratch) continue;
      if (t.when == Task::When::WithoutScratch && scratch) continue;
      if (!t.parallel) {
        reinterpret_cast<SerialFn>(t.body)(bufs, a);
        continue;
      }
      if (!t.sizes_scratch) t.bounds(bufs, a, range);
      auto body = reinterpret_cast<BodyFn>(t.body);
      int64_t n = range[1] - range[0];
      int64_t grain = t.block_dim ? t.block_dim
                                  : std::max(t.min_chunk, n / (8 * static_cast<int64_t>(pool_.num_threads())));
      if (t.cpu_block_dim) {  // whole blocks, about 8 chunks per worker
        int64_t blocks = (n + t.cpu_block_dim - 1) / t.cpu_block_dim;
        grain = t.cpu_block_dim * std::max<int64_t>(1, blocks / (8 * static_cast<int64_t>(pool_.num_threads())));
      }
      pool_.parallel_for(range[0], range[1], grain,
                         [&](int64_t lo, int64_t hi) { body(bufs, a, lo, hi); });
    }
    return k.result;
  }

 private:
  ThreadPool pool_;
  std::shared_ptr<CpuJit> jit_ = std::make_shared<CpuJit>();
  TargetFeatures features_;
  DiskCache cache_;
  int64_t max_scratch_bytes_ = max_scratch_bytes();
  static constexpr size_t kMapBytes = size_t(1) << 20;  // buffers from here on are mapped (allocate)
  static constexpr size_t kHugeBytes = size_t(4) << 20;  // mapped buffers from here on ask for huge pages
  std::mutex mapped_mutex_;
  std::unordered_map<uint64_t, size_t> mapped_;  // handle -> bytes mapped
};

}  // namespace

std::unique_ptr<Runtime> create_cpu_runtime(const RuntimeOptions &options) {
  return std::make_unique<CpuRuntime>(options);
}

TargetFeatures cpu_features() { return {.caps = {Cap::libm}}; }

std::map<std::string, std::string> cpu_artifacts(KernelIR &k, const TargetFeatures &features) {
  auto g = generate(k, features);
  CpuJit::optimize_for_host(*g.module);
  return {{"ir", print_ir(k)}, {"llvm_ir", module_text(*g.module)}};
}

}  // namespace qd
