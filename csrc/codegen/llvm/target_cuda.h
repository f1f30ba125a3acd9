#pragma once
// CUDA: LLVM NVPTX. Relaxed device-scope atomics are atomicrmw / cmpxchg, which NVPTX lowers to
// single atom.global.* instructions (.relaxed.gpu is PTX's default); LLVM 19's NVPTX drops the
// ordering and scope of atomics, so every other order or scope, atomic loads / stores, fences and
// atom.inc / atom.dec are inline PTX with .sem and .scope qualifiers (atomics/memory_model.h); global memory in addrspace(1), so loads, stores and atomics are
// .global ones (and volatile loads ld.volatile.global, never the read-only ld.global.nc path).
#include <string>

#include "codegen/llvm/target_gpu.h"

namespace qd {

// The sm a CUDA compile targets (90 for sm_90): features.cuda_sm, else $QD_CUDA_ARCH ("sm_90" or
// "90"), else sm_75.
int cuda_sm(const TargetFeatures &features);

class CudaTarget : public GpuTarget {
 public:
  explicit CudaTarget(const TargetFeatures &features);
  Backend backend() const override { return Backend::Cuda; }
  const TargetFeatures &features() const override { return features_; }
  void configure_module(llvm::Module &m) override;
  const std::string &sm() const { return sm_; }
  llvm::Value *emit_memory_op(LlvmCodegen &cg, const Stmt &s, bool *done) override;
  llvm::Value *emit_fns(LlvmCodegen &cg, llvm::Value *mask, llvm::Value *base, llvm::Value *offset) override;

 protected:
  int default_block_dim() const override { return 128; }
  void mark_kernel(llvm::Function &fn, int block_dim) override;
  Ids ids(llvm::IRBuilderBase &b) override;
  void emit_barrier(llvm::IRBuilderBase &b) override;
  void emit_fence(llvm::IRBuilderBase &b, bool device) override;
  llvm::Value *emit_subgroup(llvm::IRBuilderBase &b, SimtOp op, const std::vector<llvm::Value *> &args) override;
  llvm::Value *emit_collective(LlvmCodegen &cg, const Stmt &s, const std::vector<llvm::Value *> &args) override;

 private:
  TargetFeatures features_;
  std::string sm_;
};

// The kernel compiled to PTX: artefacts "ir", "llvm_ir" (optimised) and "ptx".
GpuCompiled cuda_compile(KernelIR &k, const TargetFeatures &features);

}  // namespace qd
