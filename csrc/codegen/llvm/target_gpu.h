#pragma once
// What the CUDA and AMDGPU targets share: the task ABI and the in-module math library.
//
// Each task becomes one GPU kernel `<kernel>_t<i>(ptr addrspace(1) bufs, ptr addrspace(1) args)`:
// the buffer table (one device pointer per kernel buffer) and the 8-byte argument slots, both in
// device memory. A serial task runs on thread 0 of block 0. A parallel range-for recomputes its
// bounds from the prologue in every thread and runs a grid-stride loop, so the host needs no
// bounds and any grid size covers any range.
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "codegen/llvm/codegen_llvm.h"

namespace qd {

class GpuTarget : public LlvmTarget {
 public:
  unsigned global_address_space() const override { return 1; }
  TaskSymbols emit_task(LlvmCodegen &cg, const Task &task, int task_index) override;
  // Threads per block a task is launched with: the loop's block_dim (1..1024), else the target's
  // default; 1 for serial tasks.
  int block_dim(const Task &task) const;
  llvm::Value *emit_simt(LlvmCodegen &cg, const Stmt &s) override;

 protected:
  struct Ids {
    llvm::Value *thread, *block, *block_dim, *grid_dim;  // x dimension, i32
  };
  virtual int default_block_dim() const = 0;
  virtual void mark_kernel(llvm::Function &fn, int block_dim) = 0;
  virtual Ids ids(llvm::IRBuilderBase &b) = 0;
  // A barrier of the block (with a block-scope fence), and a fence at block or device scope.
  virtual void emit_barrier(llvm::IRBuilderBase &b) = 0;
  virtual void emit_fence(llvm::IRBuilderBase &b, bool device) = 0;
  // A subgroup operation (ir/ops.h) on its operands' values; `t` is the moved value's type.
  // f applied to v's 32-bit words (a 64-bit value is two words), the result of v's type.
  static llvm::Value *per_word(llvm::IRBuilderBase &b, llvm::Value *v,
                               const std::function<llvm::Value *(llvm::Value *)> &f);
  virtual llvm::Value *emit_subgroup(llvm::IRBuilderBase &b, SimtOp op, const std::vector<llvm::Value *> &args) = 0;
  // SubgroupElect / SubgroupReduce / SubgroupExclusiveScan (ir/ops.h): over the active lanes.
  virtual llvm::Value *emit_collective(LlvmCodegen &cg, const Stmt &s, const std::vector<llvm::Value *> &args) = 0;
  // The identity of an integer subgroup scan's op (s.ival) on s.dtype.
  static llvm::Value *scan_identity(LlvmCodegen &cg, const Stmt &s);
};

// A kernel's GPU module after the passes and codegen, before the target's backend runs.
struct GpuModule {
  std::unique_ptr<llvm::LLVMContext> ctx;
  std::unique_ptr<llvm::Module> module;
  std::vector<std::string> task_symbols;
  std::vector<int> block_dims;
  std::vector<int64_t> dynamic_shared_bytes;  // per task: dynamic shared memory to launch with (CUDA), else 0
};

// Runs the passes for the target's backend and features on `k`, then the shared LLVM codegen.
GpuModule generate_gpu_module(KernelIR &k, GpuTarget &target);

// A kernel compiled for a GPU: the artefacts ("ir", "llvm_ir", "ptx" / "amdgcn"), the code object
// when asked (AMDGPU runtime), and per task its kernel's name and block size.
struct GpuCompiled {
  std::map<std::string, std::string> artifacts;
  std::vector<uint8_t> code_object;
  std::vector<std::string> symbols;
  std::vector<int> block_dims;
  std::vector<int64_t> dynamic_shared_bytes;
};

// The printed LLVM IR of a module (the "llvm_ir" artefact).
std::string llvm_ir_text(const llvm::Module &m);

}  // namespace qd
