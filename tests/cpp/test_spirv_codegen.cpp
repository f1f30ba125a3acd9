// The SPIR-V codegen on hand-built kernels (valid modules, entry points, the support table's
// choices, target checks), the host-side loop length, and the Vulkan runtime end to end where a
// device exists.
#include <catch2/catch.hpp>

#include "codegen/spirv/codegen_spirv.h"
#include "codegen/spirv/spirv_tools.h"
#include "ir/builder.h"
#include "target/launch_bounds.h"
#include "runtime/vulkan/vulkan_device.h"
#include "runtime/vulkan/vulkan_runtime.h"
#include "transforms/passes.h"

using namespace qd;

namespace {

// for i in range(arg0, 2 * arg1): c[i % 4] op= 1.5 (op an atomic); then a serial store.
std::unique_ptr<KernelIR> atomic_kernel(AtomicOp op, DataType t) {
  Builder b("k", TypeConfig{});
  int begin_slot = b.add_scalar_arg("lo", DataType::i32), end_slot = b.add_scalar_arg("n", DataType::i32);
  int buf = b.add_field(0, t, {4}, "c");
  Stmt *end = b.binary(BinaryOp::Mul, b.arg(end_slot, DataType::i32), b.const_int(DataType::i32, 2));
  Stmt *loop = b.begin_range_for(b.arg(begin_slot, DataType::i32), end, false, 64);
  Stmt *cell = b.binary(BinaryOp::Mod, b.loop_index(loop), b.const_int(DataType::i32, 4));
  b.atomic(op, b.global_ptr(buf, {cell}), b.const_float(t, 1.5));
  b.end_range_for(loop);
  b.global_store(b.global_ptr(buf, {b.const_int(DataType::i32, 0)}), b.const_float(t, 2));
  return b.finish();
}

SpirvModule generate(KernelIR &k, Backend backend, const TargetFeatures &f) {
  run_passes(k, Target{backend, f});
  SpirvTarget target;
  target.backend = backend;
  target.features = f;
  return codegen_spirv(k, target);
}

bool has(const std::string &text, const std::string &what) { return text.find(what) != std::string::npos; }

}  // namespace

TEST_CASE("spirv codegen: valid modules, one entry point per task", "[spirv]") {
  auto k = atomic_kernel(AtomicOp::Add, DataType::f32);
  SpirvModule m = generate(*k, Backend::Vulkan, {{Cap::float32_atomic_add_buffer}});
  REQUIRE(spirv::validate(m.words, spirv::TargetEnv::Vulkan1_1) == "");
  // The bound 2 * n computed before the loop, the loop, the store after it.
  REQUIRE(m.tasks.size() == 3);
  CHECK_FALSE(m.tasks[0].has_effects);  // only computes a value: never launched
  CHECK(m.tasks[1].parallel);
  CHECK(m.tasks[1].block_dim == 64);
  CHECK_FALSE(m.tasks[2].parallel);
  CHECK(m.tasks[2].has_effects);
  CHECK(m.args_binding == 1);
  std::string asm_text = spirv::disassemble(m.words);
  CHECK(has(asm_text, "OpEntryPoint GLCompute %k_t1 \"k_t1\""));
  CHECK(has(asm_text, "LocalSize 64 1 1"));
  CHECK(has(asm_text, "OpAtomicFAddEXT"));
}

TEST_CASE("extract_entry_point keeps one task's function and its modes", "[spirv]") {
  auto k = atomic_kernel(AtomicOp::Add, DataType::f32);
  SpirvModule m = generate(*k, Backend::Vulkan, {{Cap::float32_atomic_add_buffer}});
  std::vector<uint32_t> one = spirv::extract_entry_point(m.words, "k_t1");
  REQUIRE(spirv::validate(one, spirv::TargetEnv::Vulkan1_1) == "");
  CHECK(one.size() < m.words.size());
  std::string text = spirv::disassemble(one);
  CHECK(has(text, "OpEntryPoint GLCompute %k_t1 \"k_t1\""));
  CHECK(has(text, "LocalSize 64 1 1"));
  CHECK(has(text, "OpAtomicFAddEXT"));
  CHECK_FALSE(has(text, "k_t0"));
  CHECK_FALSE(has(text, "k_t2"));
  CHECK(spirv::extract_entry_point(m.words, "no_such_entry") == m.words);
}

TEST_CASE("spirv codegen: the support table picks native or CAS loop", "[spirv]") {
  auto native = atomic_kernel(AtomicOp::Add, DataType::f32);
  auto cas = atomic_kernel(AtomicOp::Add, DataType::f32);
  std::string with = spirv::disassemble(generate(*native, Backend::Vulkan, {{Cap::float32_atomic_add_buffer}}).words);
  std::string without = spirv::disassemble(generate(*cas, Backend::Vulkan, {}).words);
  CHECK(has(with, "OpAtomicFAddEXT"));
  CHECK_FALSE(has(with, "OpAtomicCompareExchange"));
  CHECK_FALSE(has(without, "OpAtomicFAddEXT"));
  CHECK(has(without, "OpAtomicCompareExchange %uint"));
  auto metal = atomic_kernel(AtomicOp::Add, DataType::f32);  // Metal: CAS whatever the features say
  CHECK(has(spirv::disassemble(generate(*metal, Backend::Metal, {{Cap::float32_atomic_add_buffer}}).words),
            "OpAtomicCompareExchange"));
  auto i64 = atomic_kernel(AtomicOp::Add, DataType::i64);
  REQUIRE_THROWS_WITH(generate(*i64, Backend::Metal, {}), Catch::Contains("not portable to Metal"));
}

TEST_CASE("spirv codegen: device types are checked against the device's features", "[spirv]") {
  auto k = atomic_kernel(AtomicOp::Exchange, DataType::f64);
  run_passes(*k, Target{Backend::Vulkan, {{Cap::int64_atomics_buffer}}});
  SpirvTarget device;
  device.features.caps = {Cap::int64_atomics_buffer, Cap::shader_int64};
  device.device_features = true;
  REQUIRE_THROWS_WITH(codegen_spirv(*k, device), Catch::Contains("shader_float64"));
  device.features.caps.set(Cap::shader_float64);
  CHECK(spirv::validate(codegen_spirv(*k, device).words) == "");
  device.max_block_dim = 32;
  REQUIRE_THROWS_WITH(codegen_spirv(*k, device), Catch::Contains("block_dim 64"));
}

TEST_CASE("range_length evaluates bounds from the arguments", "[spirv]") {
  auto k = atomic_kernel(AtomicOp::Add, DataType::i32);
  run_passes(*k, Target{Backend::Vulkan, {}});
  const Task &loop_task = k->tasks[1];
  REQUIRE(loop_task.parallel);
  CHECK(range_length(loop_task, {3, 10}) == 17);  // range(3, 2 * 10)
  CHECK(range_length(loop_task, {30, 10}) == 0);
  CHECK_FALSE(range_length(k->tasks[2], {0, 0}).has_value());  // serial: no loop

  Builder b("from_memory", TypeConfig{});
  int buf = b.add_field(0, DataType::i32, {1}, "n");
  Stmt *n = b.global_load(b.global_ptr(buf, {b.const_int(DataType::i32, 0)}), false);
  Stmt *loop = b.begin_range_for(b.const_int(DataType::i32, 0), n, false, 0);
  b.end_range_for(loop);
  auto km = b.finish();
  run_passes(*km, Target{Backend::Vulkan, {}});
  CHECK_FALSE(range_length(km->tasks.back(), {}).has_value());
}

TEST_CASE("vulkan runtime runs a CAS-loop and a native atomic kernel", "[vulkan]") {
  if (!vulkan::vulkan_available()) {
    SUCCEED("no Vulkan device: not run");
    return;
  }
  for (bool masked : {false, true}) {
    RuntimeOptions o;
    if (masked) o.disabled_caps = {Cap::float32_atomic_add_buffer};
    auto rt = create_vulkan_runtime(o);
    auto compiled = rt->compile(atomic_kernel(AtomicOp::Add, DataType::f32));
    bool native = rt->features().has(Cap::float32_atomic_add_buffer);
    CHECK(has(compiled->artifacts.at("spirv_asm"), "OpAtomicFAddEXT") == native);
    uint64_t mem = rt->allocate(16);
    rt->launch(*compiled, {mem}, {0, 5000});  // 10000 iterations, 2500 per cell
    float v[4];
    rt->read(mem, 0, v, sizeof v);
    CHECK(v[0] == 2.0f);  // the serial store after the loop
    for (int i = 1; i < 4; i++) CHECK(v[i] == 2500 * 1.5f);
    rt->deallocate(mem);
  }
}
