#pragma once
// AMDGPU: LLVM AMDGPU, gfx942 by default. Every atomic at syncscope("agent") (spec: "Atomic
// visibility scope"; at system scope LLVM falls back to CAS loops), global memory in
// addrspace(1) and allocas in the private addrspace(5), which the data layout set in
// configure_module gives every alloca.
#include <string>
#include <vector>

#include "codegen/llvm/target_gpu.h"

namespace qd {

// The gfx name an AMDGPU compile targets: features.amdgpu_gfx, else $QD_AMDGPU_ARCH,
// else gfx942.
std::string amdgpu_gfx(const TargetFeatures &features);

class AmdgpuTarget : public GpuTarget {
 public:
  // The features always include the gfx name: the support table keys float atomics on it.
  explicit AmdgpuTarget(const TargetFeatures &features);
  Backend backend() const override { return Backend::Amdgpu; }
  const TargetFeatures &features() const override { return features_; }
  llvm::SyncScope::ID atomic_scope(llvm::LLVMContext &ctx, MemScope scope) const override;
  void configure_module(llvm::Module &m) override;
  const std::string &gfx() const { return gfx_; }

 protected:
  int default_block_dim() const override { return 256; }
  void mark_kernel(llvm::Function &fn, int block_dim) override;
  Ids ids(llvm::IRBuilderBase &b) override;
  void emit_barrier(llvm::IRBuilderBase &b) override;
  void emit_fence(llvm::IRBuilderBase &b, bool device) override;
  llvm::Value *emit_subgroup(llvm::IRBuilderBase &b, SimtOp op, const std::vector<llvm::Value *> &args) override;
  llvm::Value *emit_collective(LlvmCodegen &cg, const Stmt &s, const std::vector<llvm::Value *> &args) override;

 private:
  TargetFeatures features_;
  std::string gfx_;
};

// The kernel compiled for AMDGPU: artefacts "ir", "llvm_ir" (optimised) and either "amdgcn" (the
// assembly) or, with `code_object`, the linked code object (hsaco) hipModuleLoadData takes.
GpuCompiled amdgpu_compile(KernelIR &k, const TargetFeatures &features, bool code_object);

}  // namespace qd
