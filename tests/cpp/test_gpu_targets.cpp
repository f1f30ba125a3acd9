// The NVPTX / AMDGPU back ends and the dlopen'ed GPU drivers. Kernels are built by hand with
// IRBuilder so these tests do not depend on the Quadrants IR. The instruction checks follow the
// spec's atomics tables (docs: atomics.md, "Native instruction vs CAS fallback").
#include <catch2/catch.hpp>

#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <llvm/IR/Function.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Object/ObjectFile.h>
#include <llvm/Support/MemoryBuffer.h>

#include "atomics/support_table.h"
#include "codegen/llvm/gpu_targets.h"
#include "common/error.h"
#include "runtime/amdgpu/hip_driver.h"
#include "runtime/cuda/cuda_driver.h"

namespace gpu = qd::llvm_gpu;

namespace {

enum class Gpu { Nvptx, Amdgpu };

bool contains(const std::string &text, const std::string &what) {
  return text.find(what) != std::string::npos;
}

struct Kernel {
  std::unique_ptr<llvm::Module> module;
  llvm::Function *fn = nullptr;
};

// An empty kernel `k` with `n` global (addrspace 1) pointer parameters, marked for `gpu`,
// with the builder positioned in its entry block.
Kernel make_kernel(llvm::LLVMContext &ctx, Gpu gpu, unsigned n, llvm::IRBuilder<> &b) {
  Kernel k;
  k.module = std::make_unique<llvm::Module>("test", ctx);
  if (gpu == Gpu::Nvptx)
    gpu::set_nvptx_target(*k.module);
  else
    gpu::set_amdgpu_target(*k.module);
  std::vector<llvm::Type *> params(n, llvm::PointerType::get(ctx, 1));
  auto *ty = llvm::FunctionType::get(b.getVoidTy(), params, false);
  k.fn = llvm::Function::Create(ty, llvm::Function::ExternalLinkage, "k", *k.module);
  if (gpu == Gpu::Nvptx)
    gpu::mark_nvptx_kernel(*k.fn);
  else
    gpu::mark_amdgpu_kernel(*k.fn);
  b.SetInsertPoint(llvm::BasicBlock::Create(ctx, "entry", k.fn));
  return k;
}

llvm::SyncScope::ID scope_for(llvm::LLVMContext &ctx, Gpu gpu) {
  // Spec, "Atomic visibility scope": system scope on CUDA, agent scope on AMDGPU.
  return gpu == Gpu::Amdgpu ? gpu::amdgpu_agent_scope(ctx) : llvm::SyncScope::System;
}

llvm::Value *atomic(llvm::IRBuilder<> &b, Gpu gpu, llvm::AtomicRMWInst::BinOp op, llvm::Value *ptr,
                    llvm::Value *v) {
  return b.CreateAtomicRMW(op, ptr, v, llvm::MaybeAlign(),
                           llvm::AtomicOrdering::SequentiallyConsistent,
                           scope_for(b.getContext(), gpu));
}

llvm::Value *thread_idx(llvm::IRBuilder<> &b, Gpu gpu) {
  return gpu == Gpu::Nvptx ? gpu::nvptx_thread_idx(b, gpu::Dim::X)
                           : gpu::amdgpu_workitem_id(b, gpu::Dim::X);
}

// k(i32* ints, f32* floats, f64* doubles, i32* out), every thread:
//   atomic_add(floats[0], 1.0f); atomic_add(ints[0], 1); atomic_cas(ints[1], 0, tid + 1);
//   volatile_load(ints[2]); atomic_add / min / max on doubles[0..2] with 1.0;
//   out[tid] = (a sum of the integer results, so nothing is dead).
Kernel build_atomics_kernel(llvm::LLVMContext &ctx, Gpu gpu) {
  llvm::IRBuilder<> b(ctx);
  Kernel k = make_kernel(ctx, gpu, 4, b);
  llvm::Value *ints = k.fn->getArg(0), *floats = k.fn->getArg(1), *doubles = k.fn->getArg(2);
  llvm::Value *out = k.fn->getArg(3);
  auto at = [&](llvm::Type *ty, llvm::Value *base, int i) {
    return b.CreateConstInBoundsGEP1_64(ty, base, i);
  };
  llvm::Type *i32 = b.getInt32Ty(), *f64 = b.getDoubleTy();
  llvm::Value *tid = thread_idx(b, gpu);
  llvm::Value *old_f = atomic(b, gpu, llvm::AtomicRMWInst::FAdd, floats,
                              llvm::ConstantFP::get(b.getFloatTy(), 1.0));
  llvm::Value *old_i = atomic(b, gpu, llvm::AtomicRMWInst::Add, ints, b.getInt32(1));
  llvm::Value *cas = b.CreateAtomicCmpXchg(
      at(i32, ints, 1), b.getInt32(0), b.CreateAdd(tid, b.getInt32(1)), llvm::MaybeAlign(),
      llvm::AtomicOrdering::SequentiallyConsistent, llvm::AtomicOrdering::SequentiallyConsistent,
      scope_for(ctx, gpu));
  llvm::Value *vol = b.CreateLoad(i32, at(i32, ints, 2), /*isVolatile=*/true);
  llvm::Value *one = llvm::ConstantFP::get(f64, 1.0);
  llvm::Value *d_add = atomic(b, gpu, llvm::AtomicRMWInst::FAdd, doubles, one);
  llvm::Value *d_min = atomic(b, gpu, llvm::AtomicRMWInst::FMin, at(f64, doubles, 1), one);
  llvm::Value *d_max = atomic(b, gpu, llvm::AtomicRMWInst::FMax, at(f64, doubles, 2), one);
  llvm::Value *d_sum = b.CreateFAdd(b.CreateFAdd(d_add, d_min), d_max);
  llvm::Value *sum = b.CreateAdd(old_i, b.CreateExtractValue(cas, 0));
  sum = b.CreateAdd(sum, vol);
  sum = b.CreateAdd(sum, b.CreateFPToSI(old_f, i32));
  sum = b.CreateAdd(sum, b.CreateFPToSI(d_sum, i32));
  b.CreateStore(sum, b.CreateInBoundsGEP(i32, out, b.CreateZExt(tid, b.getInt64Ty())));
  b.CreateRetVoid();
  return k;
}

// k(T* p, T* out): out[0] = atomic op(p[0], 1), for a look at one atomic alone.
Kernel build_single_atomic(llvm::LLVMContext &ctx, Gpu gpu, llvm::AtomicRMWInst::BinOp op,
                           llvm::Type *ty) {
  llvm::IRBuilder<> b(ctx);
  Kernel k = make_kernel(ctx, gpu, 2, b);
  llvm::Value *one = ty->isFloatingPointTy() ? llvm::ConstantFP::get(ty, 1.0)
                                             : llvm::ConstantInt::get(ty, 1);
  b.CreateStore(atomic(b, gpu, op, k.fn->getArg(0), one), k.fn->getArg(1));
  b.CreateRetVoid();
  return k;
}

std::string gfx_asm_of(llvm::AtomicRMWInst::BinOp op, bool dbl, const std::string &gfx) {
  llvm::LLVMContext ctx;
  llvm::Type *ty = dbl ? llvm::Type::getDoubleTy(ctx) : llvm::Type::getFloatTy(ctx);
  Kernel k = build_single_atomic(ctx, Gpu::Amdgpu, op, ty);
  return gpu::amdgpu_assembly(*k.module, gfx);
}

uint16_t read_u16(const std::vector<uint8_t> &b, size_t at) { return b[at] | (b[at + 1] << 8); }

}  // namespace

// ============================================================================ NVPTX

TEST_CASE("PTX for sm_75 and sm_90 has native atomics and a volatile load", "[gpu][nvptx]") {
  for (const std::string sm : {"sm_75", "sm_90"}) {
    INFO(sm);
    llvm::LLVMContext ctx;
    Kernel k = build_atomics_kernel(ctx, Gpu::Nvptx);
    std::string ptx = gpu::emit_ptx(*k.module, sm);
    CHECK(contains(ptx, ".version 7.8"));
    CHECK(contains(ptx, ".target " + sm));
    CHECK(contains(ptx, ".entry k("));
    CHECK(contains(ptx, "atom.global.add.f32"));
    CHECK(contains(ptx, "atom.global.add.u32"));
    CHECK(contains(ptx, "atom.global.cas.b32"));
    CHECK(contains(ptx, "atom.global.add.f64"));  // native from sm_60
    CHECK(contains(ptx, "ld.volatile.global"));
    CHECK(contains(ptx, "%tid.x"));
    if (gpu::ptxas_available()) {
      CHECK(gpu::run_ptxas(ptx, sm) == "");
    } else {
      WARN("ptxas not found: PTX not assembled");
    }
  }
}

TEST_CASE("emit_ptx can be called twice on one module", "[gpu][nvptx]") {
  llvm::LLVMContext ctx;
  Kernel k = build_atomics_kernel(ctx, Gpu::Nvptx);
  std::string first = gpu::emit_ptx(*k.module, "sm_75");
  std::string second = gpu::emit_ptx(*k.module, "sm_75");
  CHECK(contains(second, "atom.global.add.f32"));
  CHECK(contains(second, ".entry k("));
}

TEST_CASE("NVPTX id helpers read the special registers", "[gpu][nvptx]") {
  llvm::LLVMContext ctx;
  llvm::IRBuilder<> b(ctx);
  Kernel k = make_kernel(ctx, Gpu::Nvptx, 1, b);
  using gpu::Dim;
  llvm::Value *v = b.CreateAdd(gpu::nvptx_thread_idx(b, Dim::Y), gpu::nvptx_block_idx(b, Dim::Z));
  v = b.CreateAdd(v, gpu::nvptx_block_dim(b, Dim::X));
  v = b.CreateAdd(v, gpu::nvptx_grid_dim(b, Dim::Y));
  b.CreateStore(v, k.fn->getArg(0));
  b.CreateRetVoid();
  std::string ptx = gpu::emit_ptx(*k.module);
  for (const char *reg : {"%tid.y", "%ctaid.z", "%ntid.x", "%nctaid.y"}) CHECK(contains(ptx, reg));
}

TEST_CASE("run_ptxas reports ptxas errors", "[gpu][nvptx]") {
  if (!gpu::ptxas_available()) {
    CHECK_FALSE(gpu::run_ptxas(".version 7.8\n", "sm_75").empty());
    return;
  }
  std::string err = gpu::run_ptxas(".version 7.8\n.target sm_75\n.address_size 64\nnonsense;\n",
                                   "sm_75");
  CHECK_FALSE(err.empty());
}

TEST_CASE("unknown GPU names and broken modules throw RuntimeError", "[gpu]") {
  llvm::LLVMContext ctx;
  {
    Kernel k = build_atomics_kernel(ctx, Gpu::Nvptx);
    CHECK_THROWS_AS(gpu::emit_ptx(*k.module, "sm_9999"), qd::RuntimeError);
  }
  {
    Kernel k = build_atomics_kernel(ctx, Gpu::Amdgpu);
    CHECK_THROWS_AS(gpu::amdgpu_assembly(*k.module, "gfx9999"), qd::RuntimeError);
  }
  llvm::IRBuilder<> b(ctx);
  Kernel k = make_kernel(ctx, Gpu::Nvptx, 0, b);  // its entry block has no terminator
  CHECK_THROWS_WITH(gpu::emit_ptx(*k.module), Catch::Contains("invalid LLVM module"));
}

TEST_CASE("PTX emission is thread-safe", "[gpu][nvptx]") {
  std::vector<std::string> ptx(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < ptx.size(); ++i) {
    threads.emplace_back([&ptx, i] {
      llvm::LLVMContext ctx;  // one context per thread, as LLVM requires
      Kernel k = build_atomics_kernel(ctx, Gpu::Nvptx);
      ptx[i] = gpu::emit_ptx(*k.module, i % 2 ? "sm_90" : "sm_75");
    });
  }
  for (auto &t : threads) t.join();
  for (const auto &p : ptx) CHECK(contains(p, "atom.global.add.f32"));
}

// ============================================================================ AMDGPU

TEST_CASE("gfx942 assembly has native int and float atomics", "[gpu][amdgpu]") {
  llvm::LLVMContext ctx;
  Kernel k = build_atomics_kernel(ctx, Gpu::Amdgpu);
  std::string s = gpu::amdgpu_assembly(*k.module, "gfx942");
  CHECK(contains(s, ".amdhsa_kernel k"));
  CHECK(contains(s, "global_atomic_add_f32"));
  CHECK(contains(s, "global_atomic_add_f64"));
  CHECK(contains(s, "global_atomic_min_f64"));
  CHECK(contains(s, "global_atomic_max_f64"));
  CHECK(contains(s, "global_atomic_add v"));  // the i32 add
  CHECK(contains(s, "global_atomic_cmpswap v"));
  CHECK_FALSE(contains(s, "global_atomic_cmpswap_x2"));  // no f64 CAS loop
  CHECK(contains(s, "global_load_dword"));              // the volatile load survives O3
}

TEST_CASE("gfx942 f32 min/max stay CAS loops", "[gpu][amdgpu]") {
  std::string s = gfx_asm_of(llvm::AtomicRMWInst::FMin, false, "gfx942");
  CHECK(contains(s, "global_atomic_cmpswap"));
  CHECK(contains(s, "s_cbranch_execnz"));  // the retry loop's back edge
}

TEST_CASE("gfx90a float atomics are CAS loops", "[gpu][amdgpu]") {
  std::string f32_add = gfx_asm_of(llvm::AtomicRMWInst::FAdd, false, "gfx90a");
  CHECK_FALSE(contains(f32_add, "global_atomic_add_f32"));
  CHECK(contains(f32_add, "global_atomic_cmpswap v"));
  CHECK(contains(f32_add, "s_cbranch_execnz"));
  std::string f64_add = gfx_asm_of(llvm::AtomicRMWInst::FAdd, true, "gfx90a");
  CHECK_FALSE(contains(f64_add, "global_atomic_add_f64"));
  CHECK(contains(f64_add, "global_atomic_cmpswap_x2"));
  std::string f64_max = gfx_asm_of(llvm::AtomicRMWInst::FMax, true, "gfx90a");
  CHECK_FALSE(contains(f64_max, "global_atomic_max_f64"));
  CHECK(contains(f64_max, "global_atomic_cmpswap_x2"));
}

TEST_CASE("the unsafe-fp-atomics attribute is set where the support table says native", "[gpu][amdgpu]") {
  CHECK(gpu::amdgpu_uses_unsafe_fp_atomics("gfx942"));
  for (const char *gfx : {"gfx90a", "gfx940", "gfx941", "gfx1100"}) {  // the table: CAS loops there
    CHECK_FALSE(gpu::amdgpu_uses_unsafe_fp_atomics(gfx));
    CHECK(qd::atomic_lowering(qd::Backend::Amdgpu, qd::AtomicOp::Add, qd::DataType::f32, qd::MemorySpace::Global,
                              {.amdgpu_gfx = gfx}).kind == qd::Lowering::CasLoop);
  }
  llvm::LLVMContext ctx;
  Kernel k = build_atomics_kernel(ctx, Gpu::Amdgpu);
  gpu::apply_amdgpu_fp_atomic_policy(*k.module, "gfx90a");
  CHECK_FALSE(k.fn->hasFnAttribute("amdgpu-unsafe-fp-atomics"));
  gpu::apply_amdgpu_fp_atomic_policy(*k.module, "gfx942");
  CHECK(k.fn->getFnAttribute("amdgpu-unsafe-fp-atomics").getValueAsBool());
  // An explicit choice made by the codegen is kept.
  Kernel k2 = build_atomics_kernel(ctx, Gpu::Amdgpu);
  k2.fn->addFnAttr("amdgpu-unsafe-fp-atomics", "false");
  gpu::apply_amdgpu_fp_atomic_policy(*k2.module, "gfx942");
  CHECK_FALSE(k2.fn->getFnAttribute("amdgpu-unsafe-fp-atomics").getValueAsBool());
}

TEST_CASE("AMDGPU id helpers compile, using the dispatch packet", "[gpu][amdgpu]") {
  llvm::LLVMContext ctx;
  llvm::IRBuilder<> b(ctx);
  Kernel k = make_kernel(ctx, Gpu::Amdgpu, 1, b);
  using gpu::Dim;
  llvm::Value *v =
      b.CreateAdd(gpu::amdgpu_workitem_id(b, Dim::Y), gpu::amdgpu_workgroup_id(b, Dim::Z));
  v = b.CreateAdd(v, gpu::amdgpu_workgroup_size(b, Dim::X));
  v = b.CreateAdd(v, gpu::amdgpu_num_workgroups(b, Dim::Y));
  b.CreateStore(v, k.fn->getArg(0));
  b.CreateRetVoid();
  std::string s = gpu::amdgpu_assembly(*k.module, "gfx942");
  CHECK(contains(s, ".amdhsa_user_sgpr_dispatch_ptr 1"));
  CHECK(contains(s, ".amdhsa_system_sgpr_workgroup_id_z 1"));
  CHECK(contains(s, ".amdhsa_next_free_vgpr"));
}

TEST_CASE("gfx942 code object links into a shared ELF with the kernel", "[gpu][amdgpu]") {
  llvm::LLVMContext ctx;
  Kernel k = build_atomics_kernel(ctx, Gpu::Amdgpu);
  std::vector<uint8_t> obj = gpu::emit_amdgpu_object(*k.module, "gfx942");
  REQUIRE(obj.size() > 64);
  CHECK(std::memcmp(obj.data(), "\x7f" "ELF", 4) == 0);
  if (gpu::find_ld_lld().empty()) {
    WARN("ld.lld not found: code object not linked");
    CHECK_THROWS_AS(gpu::link_amdgpu_code_object(obj), qd::RuntimeError);
    return;
  }
  std::vector<uint8_t> hsaco = gpu::emit_amdgpu_code_object(*k.module, "gfx942");
  REQUIRE(hsaco.size() > 64);
  CHECK(std::memcmp(hsaco.data(), "\x7f" "ELF", 4) == 0);
  CHECK(read_u16(hsaco, 16) == 3);    // e_type ET_DYN
  CHECK(read_u16(hsaco, 18) == 224);  // e_machine EM_AMDGPU
  llvm::StringRef bytes(reinterpret_cast<const char *>(hsaco.data()), hsaco.size());
  auto file = llvm::object::ObjectFile::createObjectFile(llvm::MemoryBufferRef(bytes, "hsaco"));
  REQUIRE(static_cast<bool>(file));
  bool has_kernel = false, has_descriptor = false;
  for (const llvm::object::SymbolRef &sym : (*file)->symbols()) {
    llvm::Expected<llvm::StringRef> name = sym.getName();
    if (!name) {
      llvm::consumeError(name.takeError());
      continue;
    }
    has_kernel |= *name == "k";
    has_descriptor |= *name == "k.kd";  // the kernel descriptor HIP looks up
  }
  CHECK(has_kernel);
  CHECK(has_descriptor);
  CHECK_THROWS_AS(gpu::link_amdgpu_code_object({1, 2, 3}), qd::RuntimeError);
}

TEST_CASE("linking fails clearly on a call to a missing function", "[gpu][amdgpu]") {
  if (gpu::find_ld_lld().empty()) return;
  llvm::LLVMContext ctx;
  llvm::IRBuilder<> b(ctx);
  Kernel k = make_kernel(ctx, Gpu::Amdgpu, 0, b);
  llvm::FunctionCallee missing = k.module->getOrInsertFunction(
      "qd_missing_helper", llvm::FunctionType::get(b.getVoidTy(), false));
  b.CreateCall(missing);
  b.CreateRetVoid();
  CHECK_THROWS_WITH(gpu::emit_amdgpu_code_object(*k.module),
                    Catch::Contains("ld.lld failed") && Catch::Contains("qd_missing_helper"));
}

// ============================================================================ drivers

TEST_CASE("CUDA driver: unavailable is reported, or the atomics kernel runs", "[gpu][cuda]") {
  std::string why;
  if (!qd::cuda::cuda_available(&why)) {
    CHECK_FALSE(why.empty());
    CHECK_THROWS_AS(qd::cuda::CudaDevice(), qd::RuntimeError);
    return;
  }
  qd::cuda::CudaDevice dev;
  auto [major, minor] = dev.compute_capability();
  // LLVM 19 knows sm_90 at most; the driver JIT-compiles older PTX for newer GPUs.
  std::string sm = major * 10 + minor >= 90 ? "sm_90" : dev.sm_arch();
  llvm::LLVMContext ctx;
  Kernel k = build_atomics_kernel(ctx, Gpu::Nvptx);
  qd::cuda::Module m = dev.load_module(gpu::emit_ptx(*k.module, sm));
  qd::cuda::Function fn = dev.get_function(m, "k");
  const unsigned n = 64;
  qd::cuda::DevicePtr ints = dev.alloc(16), floats = dev.alloc(4), doubles = dev.alloc(24),
                      out = dev.alloc(4 * n);
  dev.memset8(ints, 0, 16);
  dev.memset8(floats, 0, 4);
  double init[3] = {0.0, 5.0, -5.0};
  dev.copy_to_device(doubles, init, sizeof(init));
  dev.launch_with(fn, {1, 1, 1}, {n, 1, 1}, ints, floats, doubles, out);
  dev.synchronize();
  int32_t i[4];
  float f;
  double d[3];
  dev.copy_to_host(i, ints, 16);
  dev.copy_to_host(&f, floats, 4);
  dev.copy_to_host(d, doubles, 24);
  CHECK(i[0] == int32_t(n));
  CHECK(i[1] >= 1);
  CHECK(i[1] <= int32_t(n));
  CHECK(f == float(n));
  CHECK(d[0] == double(n));
  CHECK(d[1] == 1.0);
  CHECK(d[2] == 1.0);
  for (auto p : {ints, floats, doubles, out}) dev.free(p);
  CHECK_THROWS_AS(dev.get_function(m, "no_such_kernel"), qd::RuntimeError);
}

TEST_CASE("HIP runtime: unavailable is reported, or the atomics kernel runs", "[gpu][hip]") {
  std::string why;
  if (!qd::amdgpu::hip_available(&why)) {
    CHECK_FALSE(why.empty());
    CHECK_THROWS_AS(qd::amdgpu::HipDevice(), qd::RuntimeError);
    return;
  }
  if (gpu::find_ld_lld().empty()) {
    WARN("ld.lld not found: HIP kernel not run");
    return;
  }
  // The default target; a device of another gfx fails in load_module with a clear error.
  qd::amdgpu::HipDevice dev;
  llvm::LLVMContext ctx;
  Kernel k = build_atomics_kernel(ctx, Gpu::Amdgpu);
  qd::amdgpu::Module m = dev.load_module(gpu::emit_amdgpu_code_object(*k.module));
  qd::amdgpu::Function fn = dev.get_function(m, "k");
  const unsigned n = 64;
  void *ints = dev.alloc(16), *floats = dev.alloc(4), *doubles = dev.alloc(24),
       *out = dev.alloc(4 * n);
  dev.memset8(ints, 0, 16);
  dev.memset8(floats, 0, 4);
  double init[3] = {0.0, 5.0, -5.0};
  dev.copy_to_device(doubles, init, sizeof(init));
  dev.launch_with(fn, {1, 1, 1}, {n, 1, 1}, ints, floats, doubles, out);
  dev.synchronize();
  int32_t i[4];
  float f;
  double d[3];
  dev.copy_to_host(i, ints, 16);
  dev.copy_to_host(&f, floats, 4);
  dev.copy_to_host(d, doubles, 24);
  CHECK(i[0] == int32_t(n));
  CHECK(f == float(n));
  CHECK(d[0] == double(n));
  CHECK(d[1] == 1.0);
  CHECK(d[2] == 1.0);
  for (auto p : {ints, floats, doubles, out}) dev.free(p);
}
