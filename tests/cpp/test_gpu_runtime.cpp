// The GPU runtimes' shared launch sequence (runtime/gpu/gpu_runtime), driven through a fake
// device that records every call: real PTX is generated for each kernel, but nothing runs.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <tuple>
#include <memory>
#include <vector>

#include "codegen/llvm/target_cuda.h"
#include "ir/builder.h"
#include "runtime/gpu/gpu_runtime.h"

using namespace qd;

namespace {

struct Launched {
  void *fn;
  unsigned grid, block, dynamic_shared;
  std::vector<uint64_t> table;
  std::vector<int64_t> args;
};

// Device memory is host memory keyed by fake addresses; launches are recorded, and one may be
// given an effect (writing a return value, as a kernel would).
class FakeDevice : public GpuDevice {
 public:
  explicit FakeDevice(size_t *left_at_exit) : left_at_exit_(left_at_exit) {}
  ~FakeDevice() override { *left_at_exit_ = memory.size(); }  // the runtime owns and destroys it
  uint64_t alloc(size_t bytes) override {
    uint64_t p = next_;
    next_ += (bytes + 255) / 256 * 256 + 256;
    memory[p].assign(bytes, 0xAB);  // garbage: the runtime must zero what it hands out
    return p;
  }
  void free(uint64_t p) override {
    REQUIRE(memory.erase(p) == 1);
    frees++;
  }
  void to_device(uint64_t dst, const void *src, size_t n) override { std::memcpy(at(dst, n), src, n); }
  void to_host(void *dst, uint64_t src, size_t n) override { std::memcpy(dst, at(src, n), n); }
  void zero(uint64_t dst, size_t n) override { std::memset(at(dst, n), 0, n); }
  void launch(void *fn, unsigned grid, unsigned block, unsigned dynamic_shared, uint64_t table,
              uint64_t args) override {
    Launched l{fn, grid, block, dynamic_shared, {}, {}};
    for (size_t i = 0; i < memory.at(table).size() / 8; i++) l.table.push_back(word(table, i));
    if (args)
      for (size_t i = 0; i < memory.at(args).size() / 8; i++) l.args.push_back(static_cast<int64_t>(word(args, i)));
    launches.push_back(l);
    if (on_launch) on_launch(l);
  }
  void synchronize() override { syncs++; }
  unsigned resident_blocks(int block) override { return 1000; }

  uint64_t word(uint64_t base, size_t i) {
    uint64_t w;
    std::memcpy(&w, at(base + 8 * i, 8), 8);
    return w;
  }
  uint8_t *at(uint64_t addr, size_t n) {
    auto it = memory.upper_bound(addr);
    REQUIRE(it != memory.begin());
    --it;
    REQUIRE(addr + n <= it->first + it->second.size());
    return it->second.data() + (addr - it->first);
  }

  std::map<uint64_t, std::vector<uint8_t>> memory;
  std::vector<Launched> launches;
  std::function<void(const Launched &)> on_launch;
  int frees = 0, syncs = 0;

 private:
  uint64_t next_ = 0x10000;
  size_t *left_at_exit_;
};

class FakeCudaRuntime : public GpuRuntime {
 public:
  explicit FakeCudaRuntime(std::unique_ptr<FakeDevice> d, TargetFeatures features = {.cuda_sm = 75})
      : GpuRuntime(Backend::Cuda, std::move(d), std::move(features)) {}

 protected:
  Loaded load_kernel(KernelIR &k) override {
    Loaded out{cuda_compile(k, features()), {}};
    for (size_t i = 0; i < out.compiled.symbols.size(); i++) out.functions.push_back(reinterpret_cast<void *>(i + 1));
    return out;
  }
};

// k(n: i32) -> i32 over field f[1000]: f[0] = n (serial); for i in range(1000): f[i] += 1;
// qd.loop_config(block_dim=64); for i in range(n): f[i] += 2; return f[0].
std::unique_ptr<KernelIR> example_kernel() {
  Builder b("k", TypeConfig{});
  int n_slot = b.add_scalar_arg("n", DataType::i32);
  int f = b.add_field(7, DataType::i32, {1000}, "f");
  b.set_returns({DataType::i32});
  Stmt *n = b.arg(n_slot, DataType::i32);
  Stmt *zero = b.const_int(DataType::i32, 0);
  b.global_store(b.global_ptr(f, {zero}), n);
  for (auto [end, block_dim, add] : {std::tuple{b.const_int(DataType::i32, 1000), 0, 1}, std::tuple{n, 64, 2}}) {
    Stmt *loop = b.begin_range_for(b.const_int(DataType::i32, 0), end, false, block_dim);
    Stmt *p = b.global_ptr(f, {b.loop_index(loop)});
    b.global_store(p, b.binary(BinaryOp::Add, b.global_load(p, false), b.const_int(DataType::i32, add)));
    b.end_range_for(loop);
  }
  b.return_({b.global_load(b.global_ptr(f, {b.const_int(DataType::i32, 0)}), false)});
  return b.finish();
}

}  // namespace

TEST_CASE("GPU launch sequence: tasks in order, table and slots in device memory", "[gpu][runtime]") {
  size_t left = 1;
  {
    auto owned = std::make_unique<FakeDevice>(&left);
    FakeDevice &dev = *owned;
    FakeCudaRuntime rt(std::move(owned));
    uint64_t field = rt.allocate(4000);
    CHECK(dev.word(field, 0) == 0);  // zero-filled
    auto k = rt.compile(example_kernel());
    REQUIRE(k->artifacts.count("ptx"));
    CHECK(k->artifacts.at("ptx").find(".entry k_t") != std::string::npos);

    dev.on_launch = [&](const Launched &l) {  // the serial task writes the return slot
      if (l.grid == 1 && l.block == 1) std::memcpy(dev.at(l.table.back(), 8), "\x2a\0\0\0\0\0\0\0", 8);
    };
    std::vector<uint64_t> buffers(k->buffers.size(), 0);
    buffers[0] = field;
    auto ret = rt.launch(*k, buffers, {5});
    REQUIRE(ret.size() == 1);
    CHECK(ret[0] == 42);
    // Parallel tasks: bounds known on the host at the launch size the grid: range(1000) with 128
    // threads a block, range(n) for n = 5 with 64.
    std::vector<std::pair<unsigned, unsigned>> shapes;
    for (auto &l : dev.launches) shapes.push_back({l.grid, l.block});
    CHECK(std::count(shapes.begin(), shapes.end(), std::pair{8u, 128u}) == 1);
    CHECK(std::count(shapes.begin(), shapes.end(), std::pair{1u, 64u}) == 1);
    for (auto &l : dev.launches) {
      CHECK(l.table[0] == field);
      CHECK(l.args.at(0) == 5);
    }
    // Fns are in task order; a serial task without effects is not launched at all.
    for (size_t i = 1; i < dev.launches.size(); i++) CHECK(dev.launches[i - 1].fn < dev.launches[i].fn);
    CHECK(dev.launches.size() <= static_cast<size_t>(k->num_tasks));

    size_t before = dev.launches.size();
    rt.launch(*k, buffers, {6});
    CHECK(dev.launches.size() == 2 * before);
    CHECK(dev.launches.back().args.at(0) == 6);
    // A range past what fills the device is capped there (the grid-stride loop covers the rest).
    size_t from = dev.launches.size();
    rt.launch(*k, buffers, {1 << 30});
    auto big = std::find_if(dev.launches.begin() + from, dev.launches.end(), [](auto &l) { return l.block == 64; });
    REQUIRE(big != dev.launches.end());
    CHECK(big->grid == 1000);
    rt.sync();
    CHECK(dev.syncs == 1);
    rt.deallocate(field);
    rt.deallocate(field);  // a second free of the same handle is ignored
  }
  CHECK(left == 0);  // everything the runtime allocated is freed with it
}

TEST_CASE("GPU launch sequence: no launch for a task without effects or an empty range", "[gpu][runtime]") {
  size_t left = 1;
  auto owned = std::make_unique<FakeDevice>(&left);
  FakeDevice &dev = *owned;
  FakeCudaRuntime rt(std::move(owned));
  Builder b("k", TypeConfig{});
  int n_slot = b.add_scalar_arg("n", DataType::i32);
  int f = b.add_field(7, DataType::i32, {8}, "f");
  Stmt *n = b.arg(n_slot, DataType::i32);  // read where the kernel starts: a serial task of its own
  for (auto end : {n, b.const_int(DataType::i32, 0)}) {
    Stmt *loop = b.begin_range_for(b.const_int(DataType::i32, 0), end, false, 0);
    b.global_store(b.global_ptr(f, {b.loop_index(loop)}), b.const_int(DataType::i32, 1));
    b.end_range_for(loop);
  }
  auto k = rt.compile(b.finish());
  REQUIRE(k->num_tasks >= 3);  // serial ones hold just the constants and the argument read
  rt.launch(*k, {rt.allocate(32)}, {8});
  REQUIRE(dev.launches.size() == 1);  // only the loop over range(n)
  CHECK(dev.launches[0].grid == 1);   // n = 8: one block
  CHECK(dev.launches[0].fn == reinterpret_cast<void *>(2));
  rt.launch(*k, {rt.allocate(32)}, {0});  // range(0): nothing launched
  CHECK(dev.launches.size() == 1);
}

TEST_CASE("GPU launch sequence: bounds read from memory fill the device", "[gpu][runtime]") {
  size_t left = 1;
  auto owned = std::make_unique<FakeDevice>(&left);
  FakeDevice &dev = *owned;
  FakeCudaRuntime rt(std::move(owned));
  Builder b("k", TypeConfig{});
  int f = b.add_field(7, DataType::i32, {8}, "f");
  Stmt *n = b.global_load(b.global_ptr(f, {b.const_int(DataType::i32, 0)}), false);
  Stmt *loop = b.begin_range_for(b.const_int(DataType::i32, 0), n, false, 0);
  b.global_store(b.global_ptr(f, {b.loop_index(loop)}), b.const_int(DataType::i32, 1));
  b.end_range_for(loop);
  auto k = rt.compile(b.finish());
  rt.launch(*k, {rt.allocate(32)}, {});
  REQUIRE(dev.launches.size() == 1);
  CHECK(dev.launches[0].grid == 1000);
}

// Per loop: shared arrays of these many f32 elements, each written and read by every thread.
std::unique_ptr<KernelIR> shared_kernel(const std::vector<std::vector<int64_t>> &loops) {
  Builder b("k", TypeConfig{});
  int out = b.add_field(7, DataType::f32, {256}, "out");
  for (const auto &arrays : loops) {
    Stmt *loop = b.begin_range_for(b.const_int(DataType::i32, 0), b.const_int(DataType::i32, 256), false, 256);
    Stmt *i = b.loop_index(loop);
    for (int64_t n : arrays) {
      int s = b.add_shared(DataType::f32, {n}, "s");
      Stmt *p = b.global_ptr(s, {i});
      b.global_store(p, b.const_float(DataType::f32, 1.0));
      b.simt(SimtOp::BlockSync);
      b.global_store(b.global_ptr(out, {i}), b.global_load(b.global_ptr(s, {b.const_int(DataType::i32, 0)}), false));
    }
    b.end_range_for(loop);
  }
  return b.finish();
}

TEST_CASE("CUDA: shared arrays above 48 KiB launch with dynamic shared memory", "[gpu][runtime][shared]") {
  size_t left = 1;
  auto owned = std::make_unique<FakeDevice>(&left);
  FakeDevice &dev = *owned;
  FakeCudaRuntime rt(std::move(owned), {.cuda_sm = 90});
  // Loop 1: 80000 + 40000 bytes (two arrays above 48 KiB together, each 16-byte aligned); loop 2:
  // 1 KiB, static.
  auto k = rt.compile(shared_kernel({{20000, 10000}, {256}}));
  const std::string &ptx = k->artifacts.at("ptx");
  CHECK(ptx.find(".extern .shared .align 16 .b8 qd_dynamic_shared[];") != std::string::npos);
  CHECK(ptx.find(".shared .align 16 .b8 s[1024]") != std::string::npos);  // loop 2's array stays static
  std::vector<uint64_t> buffers(k->buffers.size(), 0);  // shared arrays get no memory
  buffers[0] = rt.allocate(1024);
  rt.launch(*k, buffers, {});
  REQUIRE(dev.launches.size() == 2);
  CHECK(dev.launches[0].dynamic_shared == 120000);
  CHECK(dev.launches[1].dynamic_shared == 0);
}

TEST_CASE("Shared arrays above the target's limit are a RuntimeError naming the sizes", "[gpu][runtime][shared]") {
  size_t left = 1;
  FakeCudaRuntime rt(std::make_unique<FakeDevice>(&left), {.cuda_sm = 75});
  try {
    rt.compile(shared_kernel({{16384, 4}}));  // 65536 + 16 bytes > 64 KiB on sm_75
    FAIL("no error");
  } catch (const RuntimeError &e) {
    std::string m = e.what();
    CHECK(m.find("kernel 'k'") != std::string::npos);
    CHECK(m.find("65552 bytes") != std::string::npos);
    CHECK(m.find("65536 bytes (64 KiB) of shared memory one block can use on cuda sm_75") != std::string::npos);
  }
  // The device's own limit, when the runtime reports it, wins over the architecture's.
  FakeCudaRuntime small(std::make_unique<FakeDevice>(&left), {.cuda_sm = 90, .max_shared_memory_bytes = 65536});
  CHECK_THROWS_AS(small.compile(shared_kernel({{16384, 4}})), RuntimeError);
  FakeCudaRuntime big(std::make_unique<FakeDevice>(&left), {.cuda_sm = 90});
  CHECK_NOTHROW(big.compile(shared_kernel({{16384, 4}})));
}
