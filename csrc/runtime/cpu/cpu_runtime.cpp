#include "runtime/cpu/cpu_runtime.h"

#include <llvm/Support/raw_ostream.h>

#include <cstdlib>
#include <cstring>
#include <thread>

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
  int64_t min_chunk;  // private field copies are set up per chunk: keep chunks long enough
};

struct CpuKernel : CompiledKernel {
  // The JIT outlives its kernels (a kernel can outlive its runtime); the kernel's code is freed
  // with the kernel.
  std::shared_ptr<CpuJit> jit;
  llvm::orc::JITDylib *code = nullptr;  // the kernel's own JITDylib
  ~CpuKernel() override {
    if (code) jit->remove(*code);
  }
  std::vector<CpuTask> tasks;
  std::vector<int64_t> temps;    // 8-byte slots
  std::vector<uint64_t> result;  // 8-byte slots
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

Generated generate(KernelIR &k, const TargetFeatures &features) {
  CpuTarget target;
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
  }

  Backend backend() const override { return Backend::Cpu; }
  const TargetFeatures &features() const override { return features_; }

  uint64_t allocate(size_t bytes) override {
    void *p = std::aligned_alloc(64, (std::max<size_t>(bytes, 1) + 63) / 64 * 64);
    if (!p) throw RuntimeError("out of host memory allocating " + std::to_string(bytes) + " bytes");
    std::memset(p, 0, bytes);
    return reinterpret_cast<uint64_t>(p);
  }
  void deallocate(uint64_t h) override { std::free(reinterpret_cast<void *>(h)); }
  void write(uint64_t h, size_t off, const void *src, size_t n) override {
    std::memcpy(reinterpret_cast<char *>(h) + off, src, n);
  }
  void read(uint64_t h, size_t off, void *dst, size_t n) override {
    std::memcpy(dst, reinterpret_cast<char *>(h) + off, n);
  }

  bool set_offline_cache(const std::string &dir, const std::string &salt) override {
    cache_ = DiskCache(dir, salt + "\n" + CpuJit::host_id());
    return cache_.enabled();
  }
  std::map<std::string, int64_t> offline_cache_stats() const override {
    return {{"hits", cache_.stats().hits}, {"misses", cache_.stats().misses}, {"writes", cache_.stats().writes}};
  }

  std::shared_ptr<CompiledKernel> compile(std::unique_ptr<KernelIR> k) override {
    auto g = generate(*k, features_);
    auto out = std::make_shared<CpuKernel>();
    out->describe(*k);
    out->temps.assign(k->temps_bytes / 8, 0);
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
                 t.min_chunk};
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
        case BufferKind::Temps: table[i] = k.temps.data(); break;
        case BufferKind::Result: table[i] = k.result.data(); break;
        default: table[i] = reinterpret_cast<void *>(buffers.at(i));
      }
    }
    std::fill(k.temps.begin(), k.temps.end(), 0);
    std::fill(k.result.begin(), k.result.end(), 0);
    void **bufs = table.data();
    int64_t *a = const_cast<int64_t *>(args.data());
    for (const CpuTask &t : k.tasks) {
      if (!t.parallel) {
        reinterpret_cast<SerialFn>(t.body)(bufs, a);
        continue;
      }
      int64_t range[2];
      t.bounds(bufs, a, range);
      auto body = reinterpret_cast<BodyFn>(t.body);
      int64_t n = range[1] - range[0];
      int64_t grain = t.block_dim ? t.block_dim
                                  : std::max(t.min_chunk, n / (8 * static_cast<int64_t>(pool_.num_threads())));
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
