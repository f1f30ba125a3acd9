// Core units: type rules, the atomic support table, the builder's checks, offloading, demotion,
// the thread pool and a CPU launch end to end.
#include <catch2/catch.hpp>

#include <atomic>
#include <vector>

#include "atomics/support_table.h"
#include "ir/builder.h"
#include "runtime/cpu/thread_pool.h"
#include "runtime/runtime.h"
#include "transforms/passes.h"

using namespace qd;

TEST_CASE("promotion follows Quadrants' rules") {
  CHECK(promoted_type(DataType::i32, DataType::f32) == DataType::f32);
  CHECK(promoted_type(DataType::f32, DataType::f64) == DataType::f64);
  CHECK(promoted_type(DataType::i32, DataType::u32) == DataType::u32);
  CHECK(promoted_type(DataType::u16, DataType::i32) == DataType::i32);
  CHECK(promoted_type(DataType::u8, DataType::u16) == DataType::u16);
  CHECK(promoted_type(DataType::i64, DataType::f16) == DataType::f16);
}

TEST_CASE("support table: the spec's columns") {
  auto L = [](Backend b, AtomicOp op, DataType t, TargetFeatures f = {}) {
    return atomic_lowering(b, op, t, MemorySpace::Global, f).kind;
  };
  CHECK(L(Backend::Cpu, AtomicOp::Add, DataType::f32) == Lowering::Native);
  CHECK(L(Backend::Cpu, AtomicOp::Add, DataType::f16) == Lowering::CasLoop);
  CHECK(L(Backend::Cpu, AtomicOp::Mul, DataType::i32) == Lowering::CasLoop);
  CHECK(L(Backend::Cpu, AtomicOp::Min, DataType::f64) == Lowering::CasLoop);
  CHECK(L(Backend::Cpu, AtomicOp::Xor, DataType::f32) == Lowering::Rejected);
  CHECK(L(Backend::Cpu, AtomicOp::Cas, DataType::f64) == Lowering::Rejected);
  CHECK(L(Backend::Cpu, AtomicOp::Add, DataType::i16) == Lowering::WordCasLoop);
  CHECK(L(Backend::Cuda, AtomicOp::Cas, DataType::u8) == Lowering::WordCasLoop);
  CHECK(L(Backend::Vulkan, AtomicOp::Exchange, DataType::f16) == Lowering::WordCasLoop);
  CHECK(L(Backend::Vulkan, AtomicOp::Add, DataType::f16, {{Cap::float16_atomic_add_buffer}}) == Lowering::Native);
  CHECK(atomic_lowering(Backend::Vulkan, AtomicOp::Cas, DataType::i8, MemorySpace::Shared, {}).kind == Lowering::Native);
  CHECK(atomic_lowering(Backend::Vulkan, AtomicOp::Add, DataType::i8, MemorySpace::Shared, {}).kind == Lowering::CasLoop);
  CHECK(L(Backend::Metal, AtomicOp::Add, DataType::u8) == Lowering::Rejected);
  CHECK(L(Backend::Cpu, AtomicOp::Or, DataType::u1) == Lowering::Rejected);
  CHECK(L(Backend::Cpu, AtomicOp::Inc, DataType::i8) == Lowering::Rejected);
  CHECK(L(Backend::Cpu, AtomicOp::Inc, DataType::u16) == Lowering::WordCasLoop);
  CHECK(L(Backend::Cuda, AtomicOp::Add, DataType::f64) == Lowering::Native);
  CHECK(L(Backend::Amdgpu, AtomicOp::Add, DataType::f32, {.amdgpu_gfx = "gfx942"}) == Lowering::Native);
  CHECK(L(Backend::Amdgpu, AtomicOp::Add, DataType::f32) == Lowering::CasLoop);  // gfx90a and others
  CHECK(L(Backend::Amdgpu, AtomicOp::Max, DataType::f64, {.amdgpu_gfx = "gfx942"}) == Lowering::Native);
  CHECK(L(Backend::Amdgpu, AtomicOp::Max, DataType::f32, {.amdgpu_gfx = "gfx942"}) == Lowering::CasLoop);
  CHECK(L(Backend::Vulkan, AtomicOp::Add, DataType::f32, {{Cap::float32_atomic_add_buffer}}) == Lowering::Native);
  CHECK(L(Backend::Vulkan, AtomicOp::Add, DataType::f32) == Lowering::CasLoop);
  CHECK(L(Backend::Vulkan, AtomicOp::Add, DataType::i64) == Lowering::Rejected);
  CHECK(L(Backend::Vulkan, AtomicOp::Add, DataType::i64, {{Cap::int64_atomics_buffer}}) == Lowering::Native);
  CHECK(L(Backend::Metal, AtomicOp::Add, DataType::u64) == Lowering::Rejected);
  CHECK(L(Backend::Metal, AtomicOp::Add, DataType::f32, {{Cap::float32_atomic_add_buffer}}) == Lowering::CasLoop);
  auto r = atomic_lowering(Backend::Metal, AtomicOp::Max, DataType::i64, MemorySpace::Global, {});
  CHECK(r.reason.find("not portable to Metal") != std::string::npos);
}

TEST_CASE("device capabilities: names and enum round trip, unknown names are errors") {
  for (size_t i = 0; i < kNumCaps; i++) {
    Cap c = static_cast<Cap>(i);
    CHECK(cap_from_name(cap_name(c)) == c);
  }
  CHECK(std::string(cap_name(Cap::int64_atomics_shared)) == "int64_atomics_shared");
  CHECK(in_shared_memory(Cap::float32_atomic_add_buffer, true) == Cap::float32_atomic_add_shared);
  CHECK_FALSE(cap_from_name("no_such_cap").has_value());
  TargetFeatures f = features_from_names({"sm_90", "gfx90a", "max_shared_memory_bytes=65536", "subgroup_size=8", "libm", "shader_int64"});
  CHECK((f.cuda_sm == 90 && f.amdgpu_gfx == "gfx90a" && f.max_shared_memory_bytes == 65536 && f.subgroup_size == 8));
  CHECK((f.has(Cap::libm) && f.has(Cap::shader_int64) && !f.has(Cap::shader_int8)));
  CHECK(feature_names(f) == std::vector<std::string>{"shader_int64", "libm", "sm_90", "gfx90a", "max_shared_memory_bytes=65536", "subgroup_size=8"});
  REQUIRE_THROWS_WITH(features_from_names({"libm", "no_such_cap"}),
                      Catch::Contains("unknown feature 'no_such_cap'") && Catch::Contains("float64_atomic_add_buffer"));
  REQUIRE_THROWS_AS(features_from_names({"sm_9x"}), RuntimeError);
  CapSet off = caps_from_names({"float32_atomic_add_buffer"});
  CHECK((off.has(Cap::float32_atomic_add_buffer) && !off.has(Cap::shader_int64)));
  REQUIRE_THROWS_WITH(caps_from_names({"shader_int64", "subgroup_size"}),
                      Catch::Contains("cannot disable 'subgroup_size': not a boolean device cap"));
}

TEST_CASE("builder type checks name the source line") {
  Builder b("k", TypeConfig{});
  b.set_loc("kernel.py", 12, "x = a & b");
  Stmt *f = b.const_float(DataType::f32, 1.5);
  Stmt *i = b.const_int(DataType::i32, 3);
  try {
    b.binary(BinaryOp::BitAnd, f, i);
    FAIL("expected a type error");
  } catch (const CompileError &e) {
    CHECK(e.kind == ErrorKind::Type);
    CHECK(std::string(e.what()).find("kernel.py:12") != std::string::npos);
    CHECK(std::string(e.what()).find("x = a & b") != std::string::npos);
  }
  Stmt *sum = b.binary(BinaryOp::Add, i, f);
  CHECK(sum->dtype == DataType::f32);
  CHECK(sum->operands[0]->kind == StmtKind::Unary);  // the i32 operand was cast
  CHECK_THROWS_AS(b.atomic(AtomicOp::Add, i, f), CompileError);  // not an lvalue
}

TEST_CASE("offload splits tasks and moves top-level variables to temps") {
  Builder b("k", TypeConfig{});
  int buf = b.add_field(0, DataType::i32, {8}, "x");
  Stmt *var = b.alloca_(DataType::i32);
  b.local_store(var, b.const_int(DataType::i32, 5));
  Stmt *loop = b.begin_range_for(b.const_int(DataType::i32, 0), b.const_int(DataType::i32, 8), false, 0);
  Stmt *idx = b.loop_index(loop);
  b.global_store(b.global_ptr(buf, {idx}), b.local_load(var));
  b.end_range_for(loop);
  auto k = b.finish();
  run_passes(*k, Target{Backend::Cpu, {}});
  REQUIRE(k->tasks.size() == 2);
  CHECK_FALSE(k->tasks[0].parallel);
  CHECK(k->tasks[1].parallel);
  CHECK(k->temps_bytes == 8);
  CHECK(k->tasks[1].prologue.stmts.size() == 2);  // the bounds were recomputed in the parallel task
}

TEST_CASE("thread pool covers every index exactly once") {
  ThreadPool pool(4);
  std::vector<std::atomic<int>> hits(100000);
  pool.parallel_for(0, 100000, 0, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; i++) hits[i]++;
  });
  for (auto &h : hits) REQUIRE(h == 1);
  pool.parallel_for(5, 5, 1, [&](int64_t, int64_t) { FAIL("empty range ran"); });
}

TEST_CASE("cpu runtime runs a parallel atomic kernel") {
  auto rt = create_runtime(Backend::Cpu, RuntimeOptions{});
  Builder b("count", TypeConfig{});
  int buf = b.add_field(0, DataType::i32, {1}, "c");
  Stmt *loop = b.begin_range_for(b.const_int(DataType::i32, 0), b.const_int(DataType::i32, 100000), false, 0);
  b.atomic(AtomicOp::Add, b.global_ptr(buf, {b.const_int(DataType::i32, 0)}), b.const_int(DataType::i32, 1));
  b.end_range_for(loop);
  auto compiled = rt->compile(b.finish());
  CHECK(compiled->artifacts.at("llvm_ir").find("atomicrmw add") != std::string::npos);
  uint64_t mem = rt->allocate(4);
  rt->launch(*compiled, {mem}, {});
  int32_t v = 0;
  rt->read(mem, 0, &v, 4);
  CHECK(v == 100000);
  rt->deallocate(mem);
}

// A pointer computed before the branch and used in it (the builder allows what the front end never
// makes): the batched compaction makes it again in the branch from the moved index, on the lane
// that stores. x[i] = slot through the load's own pointer, out[slot] = i.
TEST_CASE("batched compaction rebuilds a pointer of the loop's prefix in the branch") {
  const int n = 3001;
  for (Backend backend : {Backend::Cpu, Backend::Vulkan}) {
    std::unique_ptr<Runtime> rt;
    try {
      rt = create_runtime(backend, RuntimeOptions{});
    } catch (const std::exception &e) {
      WARN("no runtime for this backend: " << e.what());
      continue;
    }
    Builder b("k", TypeConfig{});
    int x = b.add_field(0, DataType::i32, {n}, "x");
    int out = b.add_field(1, DataType::i32, {n}, "out");
    int c = b.add_field(2, DataType::i32, {1}, "c");
    Stmt *loop = b.begin_range_for(b.const_int(DataType::i32, 0), b.const_int(DataType::i32, n), false, 0);
    Stmt *i = b.loop_index(loop);
    Stmt *p = b.global_ptr(x, {i});
    Stmt *branch = b.begin_if(b.binary(BinaryOp::Gt, b.global_load(p, false), b.const_int(DataType::i32, 0)));
    Stmt *slot = b.atomic(AtomicOp::Add, b.global_ptr(c, {b.const_int(DataType::i32, 0)}), b.const_int(DataType::i32, 1));
    b.global_store(p, slot);
    b.global_store(b.global_ptr(out, {slot}), i);
    b.end_if(branch);
    b.end_range_for(loop);
    auto compiled = rt->compile(b.finish());
    // the cpu's form is "(batched compaction, in loops)"
    CHECK(compiled->artifacts.at("ir").find("(batched compaction") != std::string::npos);
    std::vector<int32_t> xs(n);
    for (int k = 0; k < n; k++) xs[k] = (k * 7919) % 3 == 0 ? 1 : 0;
    uint64_t xb = rt->allocate(n * 4), ob = rt->allocate(n * 4), cb = rt->allocate(4);
    int32_t zero = 0;
    rt->write(xb, 0, xs.data(), n * 4);
    rt->write(cb, 0, &zero, 4);
    rt->launch(*compiled, {xb, ob, cb}, {});
    rt->sync();
    std::vector<int32_t> x_after(n), outs(n);
    int32_t count = 0;
    rt->read(xb, 0, x_after.data(), n * 4);
    rt->read(ob, 0, outs.data(), n * 4);
    rt->read(cb, 0, &count, 4);
    int passing = 0;
    for (int k = 0; k < n; k++) {
      if (!xs[k]) {
        REQUIRE(x_after[k] == 0);
        continue;
      }
      passing++;
      REQUIRE((x_after[k] >= 0 && x_after[k] < n));
      REQUIRE(outs[x_after[k]] == k);  // the element's slot, written through the rebuilt pointer
    }
    CHECK(count == passing);
    for (uint64_t h : {xb, ob, cb}) rt->deallocate(h);
  }
}

// Stmt::lanes is a hint: the LLVM codegen emits a row of copies as one vector instruction only
// where they are copies of one operation, none reading another, all inside the block; any other
// marked row runs statement by statement, with the same results.
TEST_CASE("cpu codegen: rows marked as lanes that are not copies run one by one") {
  auto rt = create_runtime(Backend::Cpu, RuntimeOptions{});
  Builder b("rows", TypeConfig{});
  int x = b.add_field(0, DataType::f32, {4}, "x");
  int out = b.add_field(1, DataType::f32, {12}, "out");
  std::vector<Stmt *> v;
  for (int k = 0; k < 4; k++) v.push_back(b.global_load(b.global_ptr(x, {b.const_int(DataType::i32, k)}), false));
  std::vector<Stmt *> r;
  // Row 1: copies of one add, marked: a vector add.
  for (int k = 0; k < 4; k++) r.push_back(b.binary(BinaryOp::Add, v[k], v[3 - k]));
  r[0]->lanes = 4;
  // Row 2: a multiplication among the adds.
  for (int k = 0; k < 4; k++) r.push_back(b.binary(k == 2 ? BinaryOp::Mul : BinaryOp::Add, v[k], v[k]));
  r[4]->lanes = 4;
  // Row 3: each copy reads the one before it.
  r.push_back(b.binary(BinaryOp::Sub, v[0], v[1]));
  for (int k = 1; k < 4; k++) r.push_back(b.binary(BinaryOp::Sub, r.back(), v[k]));
  r[8]->lanes = 4;
  for (int k = 0; k < 12; k++) b.global_store(b.global_ptr(out, {b.const_int(DataType::i32, k)}), r[k]);
  // Last in the block, marked for 8 lanes (its value unused).
  b.binary(BinaryOp::Add, v[0], v[1])->lanes = 8;
  auto compiled = rt->compile(b.finish());
  const float xs[4] = {1.5f, -2.25f, 3.0f, 0.125f};
  uint64_t xb = rt->allocate(16), ob = rt->allocate(48);
  rt->write(xb, 0, xs, 16);
  rt->launch(*compiled, {xb, ob}, {});
  rt->sync();
  float got[12];
  rt->read(ob, 0, got, 48);
  float want[12];
  for (int k = 0; k < 4; k++) want[k] = xs[k] + xs[3 - k];
  for (int k = 0; k < 4; k++) want[4 + k] = k == 2 ? xs[k] * xs[k] : xs[k] + xs[k];
  want[8] = xs[0] - xs[1];
  for (int k = 1; k < 4; k++) want[8 + k] = want[8 + k - 1] - xs[k];
  for (int k = 0; k < 12; k++) CHECK(got[k] == want[k]);
  for (uint64_t h : {xb, ob}) rt->deallocate(h);
}
