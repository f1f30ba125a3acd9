#include "codegen/llvm/target_cpu.h"

namespace qd {

llvm::Value *CpuTarget::emit_simt(LlvmCodegen &cg, const Stmt &s) {
  if (static_cast<SimtOp>(s.op) == SimtOp::GridMemFence) {
    cg.b().CreateFence(llvm::AtomicOrdering::SequentiallyConsistent);
    return nullptr;
  }
  throw std::logic_error(std::string("internal: qd.simt.") + simt_op_name(static_cast<SimtOp>(s.op)) +
                         " reached the cpu codegen (transforms/cpu_blocks.cpp rewrites it)");
}

TaskSymbols CpuTarget::emit_task(LlvmCodegen &cg, const Task &task, int task_index) {
  auto &b = cg.b();
  std::string base = cg.kernel().name + "_t" + std::to_string(task_index);
  llvm::Type *ptr = b.getPtrTy();
  if (!task.parallel) {
    cg.begin_function(cg.new_function(base, {ptr, ptr}));
    cg.emit_block(task.body);
    cg.end_streaming();
    b.CreateRetVoid();
    return {base, ""};
  }
  const Stmt &loop = *task.loop();
  // bounds(bufs, args, i64 out[3]): the thread pool splits [begin, end) before the body runs; out[2]:
  // Task::scratch_items where the task has it.
  llvm::Function *bounds = cg.new_function(base + "_bounds", {ptr, ptr, ptr});
  cg.begin_function(bounds);
  cg.emit_block(task.prologue);
  llvm::Value *out = bounds->getArg(2);
  b.CreateStore(b.CreateSExt(cg.value(loop.operands[0]), b.getInt64Ty()), out);
  b.CreateStore(b.CreateSExt(cg.value(loop.operands[1]), b.getInt64Ty()), b.CreateConstGEP1_64(b.getInt64Ty(), out, 1));
  if (task.scratch_items)  // out[2]: the items the kernel's scratch buffers are sized for (ir.h)
    b.CreateStore(b.CreateSExt(cg.value(task.scratch_items), b.getInt64Ty()), b.CreateConstGEP1_64(b.getInt64Ty(), out, 2));
  b.CreateRetVoid();
  // body(bufs, args, lo, hi): runs iterations [lo, hi).
  llvm::Function *body = cg.new_function(base, {ptr, ptr, b.getInt64Ty(), b.getInt64Ty()});
  cg.begin_function(body);
  cg.emit_block(task.prologue);
  cg.emit_index_loop(loop, b.CreateTrunc(body->getArg(2), b.getInt32Ty()), b.CreateTrunc(body->getArg(3), b.getInt32Ty()));
  cg.end_streaming();
  b.CreateRetVoid();
  return {base, base + "_bounds"};
}

}  // namespace qd
