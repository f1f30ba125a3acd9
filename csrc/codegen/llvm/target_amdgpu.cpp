#include "codegen/llvm/target_amdgpu.h"

#include <llvm/IR/IntrinsicsAMDGPU.h>

#include "codegen/llvm/gpu_targets.h"

namespace qd {

std::string amdgpu_gfx(const TargetFeatures &features) {
  return pick_target_name(features, "gfx", "QD_AMDGPU_ARCH", llvm_gpu::kDefaultGfx);
}

AmdgpuTarget::AmdgpuTarget(const TargetFeatures &features) : features_(features), gfx_(amdgpu_gfx(features)) {
  features_.insert(gfx_);
}

llvm::SyncScope::ID AmdgpuTarget::atomic_scope(llvm::LLVMContext &ctx, MemScope scope) const {
  std::string name = amdgpu_syncscope(scope);  // "workgroup", "agent", "" (system)
  return name.empty() ? llvm::SyncScope::System : ctx.getOrInsertSyncScopeID(name);
}

void AmdgpuTarget::configure_module(llvm::Module &m) { llvm_gpu::set_amdgpu_target(m, gfx_); }

void AmdgpuTarget::mark_kernel(llvm::Function &fn, int block_dim) {
  llvm_gpu::mark_amdgpu_kernel(fn, static_cast<unsigned>(block_dim));
}

GpuTarget::Ids AmdgpuTarget::ids(llvm::IRBuilderBase &b) {
  using llvm_gpu::Dim;
  return {llvm_gpu::amdgpu_workitem_id(b, Dim::X), llvm_gpu::amdgpu_workgroup_id(b, Dim::X),
          llvm_gpu::amdgpu_workgroup_size(b, Dim::X), llvm_gpu::amdgpu_num_workgroups(b, Dim::X)};
}

// s_barrier between a workgroup release and acquire fence, so the block's writes before the
// barrier are visible after it; fences at workgroup / agent scope.
void AmdgpuTarget::emit_barrier(llvm::IRBuilderBase &b) {
  auto wg = b.getContext().getOrInsertSyncScopeID("workgroup");
  b.CreateFence(llvm::AtomicOrdering::Release, wg);
  b.CreateIntrinsic(llvm::Intrinsic::amdgcn_s_barrier, {}, {});
  b.CreateFence(llvm::AtomicOrdering::Acquire, wg);
}

void AmdgpuTarget::emit_fence(llvm::IRBuilderBase &b, bool device) {
  b.CreateFence(llvm::AtomicOrdering::AcquireRelease,
                b.getContext().getOrInsertSyncScopeID(device ? "agent" : "workgroup"));
}

GpuCompiled amdgpu_compile(KernelIR &k, const TargetFeatures &features, bool code_object) {
  AmdgpuTarget target(features);
  GpuModule g = generate_gpu_module(k, target);
  GpuCompiled out{{}, {}, g.task_symbols, g.block_dims, g.dynamic_shared_bytes};
  // Both emitters optimise the module in place, so llvm_ir is printed after them.
  if (code_object)
    out.code_object = llvm_gpu::emit_amdgpu_code_object(*g.module, target.gfx());
  else
    out.artifacts["amdgcn"] = llvm_gpu::amdgpu_assembly(*g.module, target.gfx());
  out.artifacts["ir"] = print_ir(k);
  out.artifacts["llvm_ir"] = llvm_ir_text(*g.module);
  return out;
}

}  // namespace qd
