#pragma once
#include "codegen/llvm/codegen_llvm.h"

namespace qd {

// x86_64 / host CPU: tasks are plain functions the thread pool calls with index ranges.
class CpuTarget : public LlvmTarget {
 public:
  explicit CpuTarget(const TargetFeatures &features) : features_(features) {}
  Backend backend() const override { return Backend::Cpu; }
  const TargetFeatures &features() const override { return features_; }
  TaskSymbols emit_task(LlvmCodegen &cg, const Task &task, int task_index) override;
  bool shared_on_stack() const override { return true; }
  // Block and subgroup operations are rewritten by transforms/cpu_blocks.cpp; grid.mem_fence stays.
  llvm::Value *emit_simt(LlvmCodegen &cg, const Stmt &s) override;

 private:
  TargetFeatures features_;
};

}  // namespace qd
