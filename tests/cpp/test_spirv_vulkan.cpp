// The SPIR-V builder and validator, and the Vulkan runtime running what the builder makes.
// Device tests pass trivially (SUCCEED) where no Vulkan device exists.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>
#include <set>

#include "codegen/spirv/spirv_builder.h"
#include "codegen/spirv/spirv_tools.h"
#include "runtime/vulkan/vulkan_device.h"

using namespace qd::spirv;
using qd::vulkan::BufferId;
using qd::vulkan::VulkanDevice;

namespace {

constexpr uint32_t kLocal = 64;

uint32_t groups_for(uint32_t n) { return (n + kLocal - 1) / kLocal; }

// One device for the whole run; null when Vulkan is unavailable.
VulkanDevice *device() {
  static std::unique_ptr<VulkanDevice> dev;
  static bool tried = false;
  if (!tried) {
    tried = true;
    std::string why;
    if (qd::vulkan::vulkan_available(&why)) dev = std::make_unique<VulkanDevice>();
    else WARN("Vulkan unavailable, device tests skipped: " << why);
  }
  return dev.get();
}

#define QD_REQUIRE_DEVICE(dev)                   \
  VulkanDevice *dev = device();                  \
  if (!dev) {                                    \
    SUCCEED("no Vulkan device: not run");        \
    return;                                      \
  }

template <class T> BufferId upload(VulkanDevice &d, const std::vector<T> &data) {
  BufferId id = d.alloc_buffer(data.size() * sizeof(T));
  d.write_buffer(id, 0, data.data(), data.size() * sizeof(T));
  return id;
}

template <class T> std::vector<T> download(VulkanDevice &d, BufferId id, size_t n) {
  std::vector<T> out(n);
  d.read_buffer(id, 0, out.data(), n * sizeof(T));
  return out;
}

void require_valid(const std::vector<uint32_t> &words) {
  std::string error = validate(words, TargetEnv::Vulkan1_2);
  INFO(disassemble(words));
  REQUIRE(error == "");
  REQUIRE(validate(words, TargetEnv::Vulkan1_3) == "");
}

// The word of the OpConstant whose result is `id`.
uint32_t constant_word(const std::vector<uint32_t> &words, Id id) {
  for (size_t i = 5; i < words.size(); i += words[i] >> 16)
    if ((words[i] & 0xffff) == uint32_t(Op::Constant) && words[i + 2] == id) return words[i + 3];
  FAIL("constant not found");
  return 0;
}

// Kernel prologue: gid = GlobalInvocationId.x, and `if (gid < n)` opened.
Id begin_guarded_kernel(Builder &b, uint32_t n) {
  b.begin_kernel("main", kLocal);
  Id gid = b.load_builtin(BuiltIn::GlobalInvocationId, 0);
  b.begin_if(b.lt(b.t_u32(), gid, b.c_u32(n)));
  return gid;
}

void end_guarded_kernel(Builder &b) {
  b.end_if();
  b.end_function();
}

// buffer[0] counts invocations with OpAtomicIAdd; buffer[1 + gid] gets the old value.
std::vector<uint32_t> counter_shader(MemoryModelKind model, uint32_t n, uint32_t version = 0x00010500) {
  Builder b(model, version);
  Id u32 = b.t_u32();
  StorageBuffer buf = b.storage_buffer(u32, 0, 0);
  Id gid = begin_guarded_kernel(b, n);
  Id old = b.atomic(Op::AtomicIAdd, u32, b.element_ptr(buf, b.c_u32(0)), b.c_u32(1));
  b.store(b.element_ptr(buf, b.add(u32, gid, b.c_u32(1))), old);
  end_guarded_kernel(b);
  return b.finish();
}

}  // namespace

TEST_CASE("spirv builder deduplicates types and constants", "[spirv]") {
  Builder b;
  REQUIRE(b.t_int(32, true) == b.t_i32());
  REQUIRE(b.t_int(32, true) != b.t_int(32, false));
  REQUIRE(b.t_vector(b.t_f32(), 3) == b.t_vector(b.t_float(32), 3));
  REQUIRE(b.t_pointer(StorageClass::StorageBuffer, b.t_u32()) ==
          b.t_pointer(StorageClass::StorageBuffer, b.t_u32()));
  REQUIRE(b.t_runtime_array(b.t_u32(), 4) != b.t_runtime_array(b.t_u32(), 8));
  REQUIRE(b.t_struct({b.t_u32()}, {0}, true) != b.t_struct({b.t_u32()}));
  REQUIRE(b.c_u32(7) == b.c_u32(7));
  REQUIRE(b.c_u32(7) != b.c_i32(7));
  REQUIRE(b.c_f32(1.5f) == b.c_float(b.t_f32(), 1.5));
  REQUIRE(b.c_bool(true) != b.c_bool(false));
  REQUIRE(b.size_of(b.t_vector(b.t_float(64), 2)) == 16);
  std::vector<uint32_t> words = b.finish();
  REQUIRE(words[0] == 0x07230203);
  REQUIRE(words[1] == 0x00010500);
}

TEST_CASE("spirv builder encodes f16 and narrow int constants", "[spirv]") {
  Builder b;
  Id half = b.t_float(16);
  std::vector<std::pair<double, uint32_t>> cases{
      {1.0, 0x3c00}, {-2.0, 0xc000}, {65504.0, 0x7bff}, {70000.0, 0x7c00}, {0.1, 0x2e66},
      {6e-8, 0x0001}, {1e-8, 0x0000}, {-0.0, 0x8000}};
  std::vector<Id> ids;
  for (auto &[v, bits] : cases) ids.push_back(b.c_float(half, v));
  Id minus_one_i8 = b.c_int(b.t_int(8, true), -1);
  Id u16_max = b.c_int(b.t_int(16, false), 0xffff);
  std::vector<uint32_t> words = b.finish();
  for (size_t i = 0; i < cases.size(); ++i) {
    INFO("value " << cases[i].first);
    REQUIRE(constant_word(words, ids[i]) == cases[i].second);
  }
  REQUIRE(constant_word(words, minus_one_i8) == 0xffffffffu);  // sign-extended
  REQUIRE(constant_word(words, u16_max) == 0x0000ffffu);       // zero-extended
}

TEST_CASE("spirv atomic counter shader is valid under both memory models", "[spirv]") {
  for (MemoryModelKind model : {MemoryModelKind::GLSL450, MemoryModelKind::Vulkan}) {
    std::vector<uint32_t> words = counter_shader(model, 1000);
    require_valid(words);
    std::string text = disassemble(words);
    REQUIRE(text.find("OpAtomicIAdd") != std::string::npos);
    REQUIRE(text.find("LocalSize 64 1 1") != std::string::npos);
  }
}

TEST_CASE("spirv builder targets SPIR-V 1.3 (Vulkan 1.1) to 1.6 (Vulkan 1.3)", "[spirv]") {
  for (MemoryModelKind model : {MemoryModelKind::GLSL450, MemoryModelKind::Vulkan}) {
    std::vector<uint32_t> v13 = counter_shader(model, 10, 0x00010300);
    INFO(disassemble(v13));
    REQUIRE(validate(v13, TargetEnv::Vulkan1_1) == "");
    REQUIRE(validate(counter_shader(model, 10, 0x00010600), TargetEnv::Vulkan1_3) == "");
  }
  REQUIRE(validate(counter_shader(MemoryModelKind::GLSL450, 10, 0x00010600), TargetEnv::Vulkan1_2) != "");
  REQUIRE_THROWS_AS(Builder(MemoryModelKind::GLSL450, 0x00010200), std::logic_error);
}

TEST_CASE("spirv sequentially consistent atomics validate under both memory models", "[spirv]") {
  for (MemoryModelKind model : {MemoryModelKind::GLSL450, MemoryModelKind::Vulkan}) {
    Builder b(model);
    Id u32 = b.t_u32();
    StorageBuffer buf = b.storage_buffer(u32, 0, 0);
    b.begin_kernel("main", 1);
    Id p = b.element_ptr(buf, b.c_u32(0));
    uint32_t sc = semantics::SequentiallyConsistent | semantics::UniformMemory;
    Id v = b.atomic(Op::AtomicIAdd, u32, p, b.c_u32(1), Scope::Device, sc);
    v = b.atomic_cas(u32, p, v, b.c_u32(3), Scope::Device, sc, sc);
    b.atomic_store(p, b.atomic_load(u32, p, Scope::Device, sc), Scope::Device, sc);
    b.memory_barrier(Scope::Device, sc);
    b.control_barrier(Scope::Workgroup, Scope::Device, sc);
    b.end_function();
    require_valid(b.finish());
  }
}

TEST_CASE("spirv invalid modules give a validator message", "[spirv]") {
  REQUIRE(validate({}) != "");
  std::vector<uint32_t> garbage{0x07230203, 0x00010500, 0, 10, 0, 0xdeadbeef, 0x12345678};
  REQUIRE(validate(garbage) != "");
  REQUIRE(disassemble(garbage).rfind("error: ", 0) == 0);

  Builder b;  // stores a u32 through a float pointer
  StorageBuffer buf = b.storage_buffer(b.t_f32(), 0, 0);
  b.begin_kernel("main", 1);
  b.store(b.element_ptr(buf, b.c_u32(0)), b.c_u32(1));
  b.end_function();
  std::string error = validate(b.finish());
  INFO(error);
  REQUIRE(error.find("OpStore") != std::string::npos);
}

TEST_CASE("spirv builder rejects misuse with logic_error", "[spirv]") {
  Builder b;
  REQUIRE_THROWS_AS(b.end_if(), std::logic_error);
  REQUIRE_THROWS_AS(b.emit(Op::IAdd, b.t_u32(), b.c_u32(1), b.c_u32(2)), std::logic_error);
  b.begin_kernel("main", 1);
  REQUIRE_THROWS_AS(b.break_loop(), std::logic_error);
  REQUIRE_THROWS_AS(b.add(b.t_bool(), b.c_bool(true), b.c_bool(false)), std::logic_error);
  b.begin_loop();
  REQUIRE_THROWS_AS(b.end_function(), std::logic_error);
}

TEST_CASE("vulkan atomic counter: every invocation gets a distinct old value", "[vulkan]") {
  QD_REQUIRE_DEVICE(dev);
  const uint32_t n = 1000;  // not a multiple of the workgroup size: the guard matters
  for (MemoryModelKind model : {MemoryModelKind::GLSL450, MemoryModelKind::Vulkan}) {
    if (model == MemoryModelKind::Vulkan && !dev->caps().has(qd::Cap::vulkan_memory_model)) continue;
    std::vector<uint32_t> words = counter_shader(model, n);
    require_valid(words);
    auto kernel = dev->create_kernel(words, 1);
    REQUIRE(dev->create_kernel(words, 1) == kernel);  // cached
    BufferId buf = dev->alloc_buffer((n + 1) * 4);
    dev->dispatch(kernel, {buf}, groups_for(n));
    std::vector<uint32_t> out = download<uint32_t>(*dev, buf, n + 1);
    REQUIRE(out[0] == n);
    std::vector<uint32_t> olds(out.begin() + 1, out.end());
    std::sort(olds.begin(), olds.end());
    std::vector<uint32_t> expected(n);
    std::iota(expected.begin(), expected.end(), 0u);
    REQUIRE(olds == expected);
    // Two references: the pipeline outlives the first release and goes with the second.
    dev->release_kernel(kernel);
    dev->dispatch(kernel, {buf}, groups_for(n));
    dev->release_kernel(kernel);
    REQUIRE_THROWS_AS(dev->dispatch(kernel, {buf}, groups_for(n)), qd::vulkan::VulkanError);
    REQUIRE(dev->create_kernel(words, 1) != kernel);  // built afresh
    dev->free_buffer(buf);
  }
}

namespace {

// Every integer RMW atomic on its own cell, with results the host can predict.
std::vector<uint32_t> int_ops_shader(uint32_t n) {
  Builder b;
  Id u32 = b.t_u32(), i32 = b.t_i32();
  StorageBuffer cells = b.storage_buffer(u32, 0, 0);
  StorageBuffer olds = b.storage_buffer(u32, 0, 1);
  StorageBuffer icells = b.storage_buffer(i32, 0, 2);
  Id gid = begin_guarded_kernel(b, n);
  auto cell = [&](uint32_t i) { return b.element_ptr(cells, b.c_u32(i)); };
  Id bit = b.shl(u32, b.c_u32(1), b.bit_and(u32, gid, b.c_u32(31)));
  b.atomic(Op::AtomicIAdd, u32, cell(0), b.c_u32(1));
  b.atomic(Op::AtomicISub, u32, cell(1), b.c_u32(1));
  b.atomic(Op::AtomicUMin, u32, cell(2), gid);
  b.atomic(Op::AtomicUMax, u32, cell(3), gid);
  b.atomic(Op::AtomicAnd, u32, cell(4), b.bit_not(u32, bit));
  b.atomic(Op::AtomicOr, u32, cell(5), bit);
  b.atomic(Op::AtomicXor, u32, cell(6), gid);
  Id gid1 = b.add(u32, gid, b.c_u32(1));
  b.store(b.element_ptr(olds, gid), b.atomic(Op::AtomicExchange, u32, cell(7), gid1));
  Id prior = b.atomic_cas(u32, cell(8), gid1, b.c_u32(0));
  Id won = b.select(u32, b.eq(u32, prior, b.c_u32(0)), b.c_u32(1), b.c_u32(0));
  b.atomic(Op::AtomicIAdd, u32, cell(9), won);
  b.atomic_store(cell(11), b.add(u32, b.atomic_load(u32, cell(10)), b.c_u32(1)));
  Id centered = b.sub(i32, b.bitcast(i32, gid), b.c_i32(500));
  b.atomic(Op::AtomicSMin, i32, b.element_ptr(icells, b.c_u32(0)), centered);
  b.atomic(Op::AtomicSMax, i32, b.element_ptr(icells, b.c_u32(1)), centered);
  end_guarded_kernel(b);
  return b.finish();
}

}  // namespace

TEST_CASE("vulkan integer atomics: add sub min max and or xor exchange cas load store", "[vulkan]") {
  const uint32_t n = 777;
  std::vector<uint32_t> words = int_ops_shader(n);
  require_valid(words);
  QD_REQUIRE_DEVICE(dev);
  std::vector<uint32_t> init(12, 0);
  init[2] = init[4] = 0xffffffffu;
  init[10] = 42;
  BufferId cells = upload(*dev, init);
  BufferId olds = dev->alloc_buffer(n * 4);
  BufferId icells = upload(*dev, std::vector<int32_t>{0, -1000});
  dev->dispatch(dev->create_kernel(words, 3), {cells, olds, icells}, groups_for(n));

  std::vector<uint32_t> c = download<uint32_t>(*dev, cells, 12);
  uint32_t xor_all = 0;
  for (uint32_t i = 0; i < n; ++i) xor_all ^= i;
  CHECK(c[0] == n);
  CHECK(c[1] == uint32_t(-int64_t(n)));
  CHECK(c[2] == 0);
  CHECK(c[3] == n - 1);
  CHECK(c[4] == 0);
  CHECK(c[5] == 0xffffffffu);
  CHECK(c[6] == xor_all);
  CHECK(c[8] >= 1);
  CHECK(c[8] <= n);
  CHECK(c[9] == 1);  // exactly one compare-exchange found the initial 0
  CHECK(c[11] == 43);
  // Exchange: the olds plus the final value are exactly 0..n.
  std::vector<uint32_t> seen = download<uint32_t>(*dev, olds, n);
  seen.push_back(c[7]);
  std::sort(seen.begin(), seen.end());
  std::vector<uint32_t> expected(n + 1);
  std::iota(expected.begin(), expected.end(), 0u);
  CHECK(seen == expected);
  std::vector<int32_t> ic = download<int32_t>(*dev, icells, 2);
  CHECK(ic[0] == -500);
  CHECK(ic[1] == int32_t(n) - 1 - 500);
  for (BufferId id : {cells, olds, icells}) dev->free_buffer(id);
}

TEST_CASE("vulkan int64 atomics", "[vulkan]") {
  const uint32_t n = 300;
  Builder b;
  Id i64 = b.t_int(64, true), u32 = b.t_u32();
  StorageBuffer cells = b.storage_buffer(i64, 0, 0);
  Id gid = begin_guarded_kernel(b, n);
  b.atomic(Op::AtomicIAdd, i64, b.element_ptr(cells, b.c_u32(0)), b.c_i64((int64_t(1) << 33) + 1));
  Id wide = b.convert(i64, u32, gid);
  b.atomic(Op::AtomicSMin, i64, b.element_ptr(cells, b.c_u32(1)), b.sub(i64, wide, b.c_i64(int64_t(1) << 40)));
  end_guarded_kernel(b);
  std::vector<uint32_t> words = b.finish();
  require_valid(words);
  QD_REQUIRE_DEVICE(dev);
  if (!dev->caps().has(qd::Cap::int64_atomics_buffer) || !dev->caps().has(qd::Cap::shader_int64)) {
    SUCCEED("device lacks int64 buffer atomics");
    return;
  }
  BufferId buf = upload(*dev, std::vector<int64_t>{0, 0});
  dev->dispatch(dev->create_kernel(words, 1), {buf}, groups_for(n));
  std::vector<int64_t> out = download<int64_t>(*dev, buf, 2);
  CHECK(out[0] == int64_t(n) * ((int64_t(1) << 33) + 1));
  CHECK(out[1] == -(int64_t(1) << 40));
  dev->free_buffer(buf);
}

namespace {

// fbuf[0] += 0.5 (OpAtomicFAddEXT); with min/max, fbuf[1] = max(gid), fbuf[2] = min(gid).
std::vector<uint32_t> float_atomics_shader(uint32_t n, bool minmax) {
  Builder b;
  Id f32 = b.t_f32(), u32 = b.t_u32();
  StorageBuffer fbuf = b.storage_buffer(f32, 0, 0);
  Id gid = begin_guarded_kernel(b, n);
  b.atomic(Op::AtomicFAddEXT, f32, b.element_ptr(fbuf, b.c_u32(0)), b.c_f32(0.5f));
  if (minmax) {
    Id g = b.convert(f32, u32, gid);
    b.atomic(Op::AtomicFMaxEXT, f32, b.element_ptr(fbuf, b.c_u32(1)), g);
    b.atomic(Op::AtomicFMinEXT, f32, b.element_ptr(fbuf, b.c_u32(2)), g);
  }
  end_guarded_kernel(b);
  return b.finish();
}

}  // namespace

TEST_CASE("vulkan f32 atomic add with OpAtomicFAddEXT", "[vulkan]") {
  const uint32_t n = 4096;
  for (bool minmax : {false, true}) {
    std::vector<uint32_t> words = float_atomics_shader(n, minmax);
    require_valid(words);
    REQUIRE(disassemble(words).find("OpAtomicFAddEXT") != std::string::npos);
  }
  QD_REQUIRE_DEVICE(dev);
  if (!dev->caps().has(qd::Cap::float32_atomic_add_buffer)) {
    SUCCEED("device lacks shaderBufferFloat32AtomicAdd");
    return;
  }
  bool minmax = dev->caps().has(qd::Cap::float32_atomic_minmax_buffer);
  BufferId buf = upload(*dev, std::vector<float>{0.0f, -1.0f, 1e9f});
  dev->dispatch(dev->create_kernel(float_atomics_shader(n, minmax), 1), {buf}, groups_for(n));
  std::vector<float> out = download<float>(*dev, buf, 3);
  CHECK(out[0] == 0.5f * n);  // exact: every partial sum is a multiple of 0.5 below 2^24
  if (minmax) {
    CHECK(out[1] == float(n - 1));
    CHECK(out[2] == 0.0f);
  }
  dev->free_buffer(buf);
}

namespace {

// out[gid] = 2 * volatile_load(in[gid]).
std::vector<uint32_t> volatile_shader(MemoryModelKind model, uint32_t n) {
  Builder b(model);
  Id u32 = b.t_u32();
  StorageBuffer in = b.storage_buffer(u32, 0, 0);
  StorageBuffer out = b.storage_buffer(u32, 0, 1);
  Id gid = begin_guarded_kernel(b, n);
  Id v = b.load_volatile(u32, b.element_ptr(in, gid));
  b.store(b.element_ptr(out, gid), b.mul(u32, v, b.c_u32(2)));
  end_guarded_kernel(b);
  return b.finish();
}

}  // namespace

TEST_CASE("vulkan volatile load", "[vulkan]") {
  const uint32_t n = 200;
  std::vector<uint32_t> glsl = volatile_shader(MemoryModelKind::GLSL450, n);
  std::vector<uint32_t> vmm = volatile_shader(MemoryModelKind::Vulkan, n);
  require_valid(glsl);
  require_valid(vmm);
  REQUIRE(disassemble(glsl).find("Volatile") != std::string::npos);
  REQUIRE(disassemble(vmm).find("Volatile|MakePointerVisible|NonPrivatePointer") != std::string::npos);
  QD_REQUIRE_DEVICE(dev);
  std::vector<uint32_t> input(n);
  std::iota(input.begin(), input.end(), 5u);
  for (const std::vector<uint32_t> *words : {&glsl, &vmm}) {
    if (words == &vmm && !dev->caps().has(qd::Cap::vulkan_memory_model)) continue;
    BufferId in = upload(*dev, input), out = dev->alloc_buffer(n * 4);
    dev->dispatch(dev->create_kernel(*words, 2), {in, out}, groups_for(n));
    std::vector<uint32_t> got = download<uint32_t>(*dev, out, n);
    for (uint32_t i = 0; i < n; ++i) REQUIRE(got[i] == 2 * (i + 5));
    dev->free_buffer(in);
    dev->free_buffer(out);
  }
}

namespace {

// out[gid] = sum over i < gid % 20 (and i < 100), skipping multiples of 3, of i + 2, where the
// + 2 comes from an inner loop of two iterations.
std::vector<uint32_t> loop_shader(uint32_t n) {
  Builder b;
  Id u32 = b.t_u32();
  StorageBuffer out = b.storage_buffer(u32, 0, 0);
  b.begin_kernel("main", kLocal);
  Id acc = b.local_var(u32, b.c_u32(0));
  Id i = b.local_var(u32, b.c_u32(0));
  Id j = b.local_var(u32);
  Id gid = b.load_builtin(BuiltIn::GlobalInvocationId, 0);
  b.begin_if(b.ge(u32, gid, b.c_u32(n)));
  b.ret();
  b.end_if();
  Id limit = b.rem(u32, gid, b.c_u32(20));
  b.begin_loop();
  Id iv = b.load(u32, i);
  b.loop_condition(b.lt(u32, iv, b.c_u32(100)));
  b.begin_if(b.ge(u32, iv, limit));
  b.break_loop();
  b.end_if();
  b.begin_if(b.eq(u32, b.rem(u32, iv, b.c_u32(3)), b.c_u32(0)));
  b.continue_loop();
  b.end_if();
  b.store(acc, b.add(u32, b.load(u32, acc), iv));
  b.store(j, b.c_u32(0));
  b.begin_loop();  // inner: two iterations, each adding 1
  b.loop_condition(b.lt(u32, b.load(u32, j), b.c_u32(2)));
  b.store(acc, b.add(u32, b.load(u32, acc), b.c_u32(1)));
  b.begin_continue();
  b.store(j, b.add(u32, b.load(u32, j), b.c_u32(1)));
  b.end_loop();
  b.begin_continue();
  b.store(i, b.add(u32, b.load(u32, i), b.c_u32(1)));
  b.end_loop();
  b.store(b.element_ptr(out, gid), b.load(u32, acc));
  b.end_function();
  return b.finish();
}

}  // namespace

TEST_CASE("vulkan structured loops with break and continue", "[vulkan]") {
  const uint32_t n = 100;
  std::vector<uint32_t> words = loop_shader(n);
  require_valid(words);
  QD_REQUIRE_DEVICE(dev);
  BufferId out = dev->alloc_buffer(n * 4);
  dev->dispatch(dev->create_kernel(words, 1), {out}, groups_for(n));
  std::vector<uint32_t> got = download<uint32_t>(*dev, out, n);
  for (uint32_t g = 0; g < n; ++g) {
    uint32_t acc = 0;
    for (uint32_t i = 0; i < g % 20; ++i)
      if (i % 3 != 0) acc += i + 2;
    INFO("gid " << g);
    REQUIRE(got[g] == acc);
  }
  dev->free_buffer(out);
}

TEST_CASE("vulkan launch of several dispatches sees earlier writes", "[vulkan]") {
  const uint32_t n = 500;
  Builder b;  // buf[gid] = buf[gid] * 2 + 1, non-atomically
  Id u32 = b.t_u32();
  StorageBuffer buf = b.storage_buffer(u32, 0, 0);
  Id gid = begin_guarded_kernel(b, n);
  Id p = b.element_ptr(buf, gid);
  b.store(p, b.add(u32, b.mul(u32, b.load(u32, p), b.c_u32(2)), b.c_u32(1)));
  end_guarded_kernel(b);
  QD_REQUIRE_DEVICE(dev);
  auto kernel = dev->create_kernel(b.finish(), 1);
  BufferId id = dev->alloc_buffer(n * 4);
  qd::vulkan::Dispatch d{kernel, {id}, groups_for(n)};
  dev->launch({d, d, d});
  for (uint32_t v : download<uint32_t>(*dev, id, n)) REQUIRE(v == 7);
  dev->free_buffer(id);
}

TEST_CASE("vulkan buffers: zeroed, offsets, fills, and errors", "[vulkan]") {
  QD_REQUIRE_DEVICE(dev);
  BufferId id = dev->alloc_buffer(10);
  REQUIRE(dev->buffer_size(id) == 10);
  REQUIRE(download<uint8_t>(*dev, id, 10) == std::vector<uint8_t>(10, 0));
  uint8_t src[3] = {1, 2, 3};
  dev->write_buffer(id, 7, src, 3);
  dev->fill_buffer(id, 1, 5, 0xababababu);
  std::vector<uint8_t> expect{0, 0xab, 0xab, 0xab, 0xab, 0xab, 0, 1, 2, 3};
  REQUIRE(download<uint8_t>(*dev, id, 10) == expect);
  dev->fill_buffer(id, 0, 6, 0x04030201u);  // a word pattern, in memory order; the last word cut short
  expect = {1, 2, 3, 4, 1, 2, 0, 1, 2, 3};
  REQUIRE(download<uint8_t>(*dev, id, 10) == expect);
  uint8_t two[2];
  dev->read_buffer(id, 8, two, 2);
  REQUIRE((two[0] == 2 && two[1] == 3));
  REQUIRE_THROWS_AS(dev->write_buffer(id, 9, src, 3), qd::vulkan::VulkanError);
  REQUIRE_THROWS_AS(dev->read_buffer(id, 11, two, 0), qd::RuntimeError);
  dev->free_buffer(id);
  REQUIRE_THROWS_AS(dev->read_buffer(id, 0, two, 1), qd::vulkan::VulkanError);
  REQUIRE_THROWS_AS(dev->free_buffer(id), qd::vulkan::VulkanError);
}

TEST_CASE("vulkan rejects invalid kernels and launches with clear errors", "[vulkan]") {
  QD_REQUIRE_DEVICE(dev);
  Builder b;
  StorageBuffer buf = b.storage_buffer(b.t_f32(), 0, 0);
  b.begin_kernel("main", 1);
  b.store(b.element_ptr(buf, b.c_u32(0)), b.c_u32(1));
  b.end_function();
  REQUIRE_THROWS_WITH(dev->create_kernel(b.finish(), 1), Catch::Contains("invalid SPIR-V"));
  auto kernel = dev->create_kernel(counter_shader(MemoryModelKind::GLSL450, 4), 1);
  REQUIRE_THROWS_WITH(dev->dispatch(kernel, {}, 1), Catch::Contains("takes 1 buffers"));
  BufferId id = dev->alloc_buffer(64);
  REQUIRE_THROWS_WITH(dev->dispatch(kernel, {id}, dev->caps().max_workgroup_count_x + 1u),
                      Catch::Contains("device limit"));
  REQUIRE_THROWS_AS(dev->dispatch(kernel + 1000, {id}, 1), qd::vulkan::VulkanError);
  dev->free_buffer(id);
}

TEST_CASE("vulkan caps are probed and listed", "[vulkan]") {
  std::string why;
  bool available = qd::vulkan::vulkan_available(&why);
  REQUIRE(available == qd::vulkan::vulkan_available());  // cached, stable
  if (!available) REQUIRE(!why.empty());
  QD_REQUIRE_DEVICE(dev);
  const qd::vulkan::DeviceCaps &caps = dev->caps();
  REQUIRE(!caps.device_name.empty());
  REQUIRE(caps.subgroup_size > 0);
  REQUIRE(caps.max_workgroup_count_x > 0);
  auto list = qd::vulkan::caps_list(caps);
  std::set<std::string> names;
  for (auto &[name, value] : list) {
    names.insert(name);
    INFO(name);
  }
  REQUIRE(names.size() == list.size());
  for (const char *name : {"device_name", "float32_atomic_add_buffer", "int64_atomics_buffer",
                           "vulkan_memory_model", "subgroup_size", "subgroup_ops"})
    REQUIRE(names.count(name) == 1);
  REQUIRE(std::get<std::string>(list.front().second) == caps.device_name);
  REQUIRE(!qd::vulkan::list_devices().empty());
}

TEST_CASE("vulkan staged buffers (device-local memory the host cannot map)", "[vulkan]") {
  QD_REQUIRE_DEVICE(shared);
  setenv("QD_VULKAN_FORCE_STAGING", "1", 1);
  std::unique_ptr<VulkanDevice> dev;
  try {
    dev = std::make_unique<VulkanDevice>();
  } catch (...) {
    unsetenv("QD_VULKAN_FORCE_STAGING");
    throw;
  }
  unsetenv("QD_VULKAN_FORCE_STAGING");
  REQUIRE(!dev->caps().has(qd::Cap::host_visible_buffers));
  BufferId id = dev->alloc_buffer(10);
  REQUIRE(download<uint8_t>(*dev, id, 10) == std::vector<uint8_t>(10, 0));
  uint8_t src[3] = {1, 2, 3};
  dev->write_buffer(id, 7, src, 3);
  dev->fill_buffer(id, 1, 5, 0xababababu);  // unaligned: staged write
  dev->fill_buffer(id, 4, 0, 0xcdcdcdcdu);
  std::vector<uint8_t> expect{0, 0xab, 0xab, 0xab, 0xab, 0xab, 0, 1, 2, 3};
  REQUIRE(download<uint8_t>(*dev, id, 10) == expect);
  dev->fill_buffer(id, 0, 8, 0x44332211u);  // aligned: vkCmdFillBuffer
  expect = {0x11, 0x22, 0x33, 0x44, 0x11, 0x22, 0x33, 0x44, 2, 3};
  REQUIRE(download<uint8_t>(*dev, id, 10) == expect);
  dev->free_buffer(id);

  const uint32_t n = 300;
  auto kernel = dev->create_kernel(counter_shader(MemoryModelKind::GLSL450, n), 1);
  BufferId buf = dev->alloc_buffer((n + 1) * 4);
  dev->dispatch(kernel, {buf}, groups_for(n));
  std::vector<uint32_t> out = download<uint32_t>(*dev, buf, n + 1);
  REQUIRE(out[0] == n);
  REQUIRE(std::set<uint32_t>(out.begin() + 1, out.end()).size() == n);
  dev->free_buffer(buf);
}

namespace {

// Per workgroup: a shared counter, zeroed by invocation 0, gets one atomic add per invocation
// between two barriers; invocation 0 then adds it to out[0] and writes SubgroupSize to out[1].
std::vector<uint32_t> shared_counter_shader(MemoryModelKind model) {
  Builder b(model);
  Id u32 = b.t_u32();
  StorageBuffer out = b.storage_buffer(u32, 0, 0);
  Id shared = b.workgroup_array(u32, 1);
  Id shared_ptr = b.t_pointer(StorageClass::Workgroup, u32);
  b.begin_kernel("main", kLocal);
  Id lid = b.load_builtin(BuiltIn::LocalInvocationId, 0);
  Id first = b.eq(u32, lid, b.c_u32(0));
  Id counter = b.access_chain(shared_ptr, shared, {b.c_u32(0)});
  uint32_t sem = semantics::AcquireRelease | semantics::WorkgroupMemory;
  b.begin_if(first);
  b.store(counter, b.c_u32(0));
  b.end_if();
  b.control_barrier(Scope::Workgroup, Scope::Workgroup, sem);
  b.atomic(Op::AtomicIAdd, u32, counter, b.c_u32(1), Scope::Workgroup);
  b.control_barrier(Scope::Workgroup, Scope::Workgroup, sem);
  b.begin_if(first);
  Id total = b.atomic_load(u32, counter, Scope::Workgroup);
  b.atomic(Op::AtomicIAdd, u32, b.element_ptr(out, b.c_u32(0)), total);
  b.store(b.element_ptr(out, b.c_u32(1)), b.load_builtin(BuiltIn::SubgroupSize));
  b.end_if();
  b.end_function();
  return b.finish();
}

}  // namespace

TEST_CASE("vulkan workgroup memory atomics and barriers", "[vulkan]") {
  for (MemoryModelKind model : {MemoryModelKind::GLSL450, MemoryModelKind::Vulkan})
    require_valid(shared_counter_shader(model));
  QD_REQUIRE_DEVICE(dev);
  const uint32_t groups = 37;
  for (MemoryModelKind model : {MemoryModelKind::GLSL450, MemoryModelKind::Vulkan}) {
    if (model == MemoryModelKind::Vulkan && !dev->caps().has(qd::Cap::vulkan_memory_model)) continue;
    BufferId out = dev->alloc_buffer(8);
    dev->dispatch(dev->create_kernel(shared_counter_shader(model), 1), {out}, groups);
    std::vector<uint32_t> got = download<uint32_t>(*dev, out, 2);
    CHECK(got[0] == groups * kLocal);
    CHECK(got[1] == dev->caps().subgroup_size);
    dev->free_buffer(out);
  }
}
