#include "codegen/llvm/target_gpu.h"

#include <llvm/Support/raw_ostream.h>

#include <algorithm>
#include <cstdlib>

#include "transforms/passes.h"

namespace qd {

namespace {

constexpr int kMaxBlockDim = 1024;  // CUDA's limit, and what AMDGPU kernels are marked for

}  // namespace

int GpuTarget::block_dim(const Task &task) const {
  if (!task.parallel) return 1;
  const Stmt &loop = *task.loop();
  if (loop.block_dim < 0 || loop.block_dim > kMaxBlockDim)
    syntax_error("block_dim=" + std::to_string(loop.block_dim) + " is out of range on " + backend_name(backend()) +
                     ": a block has 1 to " + std::to_string(kMaxBlockDim) + " threads",
                 loop.loc);
  return loop.block_dim > 0 ? loop.block_dim : default_block_dim();
}

TaskSymbols GpuTarget::emit_task(LlvmCodegen &cg, const Task &task, int task_index) {
  auto &b = cg.b();
  auto &ctx = cg.ctx();
  std::string name = cg.kernel().name + "_t" + std::to_string(task_index);
  llvm::Type *global_ptr = llvm::PointerType::get(ctx, global_address_space());
  llvm::Function *fn = cg.new_function(name, {global_ptr, global_ptr});
  mark_kernel(*fn, block_dim(task));
  cg.begin_function(fn);
  Ids id = ids(b);
  if (!task.parallel) {
    // Launched as one thread; the guard keeps it serial under any launch shape.
    llvm::Value *first = b.CreateAnd(b.CreateICmpEQ(id.thread, b.getInt32(0)), b.CreateICmpEQ(id.block, b.getInt32(0)));
    auto *body = llvm::BasicBlock::Create(ctx, "serial", fn);
    auto *done = llvm::BasicBlock::Create(ctx, "done", fn);
    b.CreateCondBr(first, body, done);
    b.SetInsertPoint(body);
    cg.emit_block(task.body);
    b.CreateBr(done);
    b.SetInsertPoint(done);
    b.CreateRetVoid();
    return {name, ""};
  }
  const Stmt &loop = *task.loop();
  cg.emit_block(task.prologue);  // ends with the thread's first index (legalization's grid-stride loop)
  cg.emit_index_loop(loop, cg.value(loop.first_index), cg.value(loop.operands[1]));
  b.CreateRetVoid();
  return {name, ""};
}

llvm::Value *GpuTarget::emit_simt(LlvmCodegen &cg, const Stmt &s) {
  auto &b = cg.b();
  SimtOp op = static_cast<SimtOp>(s.op);
  switch (op) {
    case SimtOp::BlockSync: emit_barrier(b); return nullptr;
    case SimtOp::BlockMemFence: emit_fence(b, false); return nullptr;
    case SimtOp::GridMemFence: emit_fence(b, true); return nullptr;
    case SimtOp::ThreadIdx: return ids(b).thread;
    case SimtOp::GlobalThreadIdx: {
      Ids id = ids(b);
      return b.CreateAdd(b.CreateMul(id.block, id.block_dim), id.thread);
    }
    case SimtOp::GridThreads: {
      Ids id = ids(b);
      return b.CreateMul(id.grid_dim, id.block_dim);
    }
    default: break;
  }
  std::vector<llvm::Value *> args;
  for (const Stmt *o : s.operands) args.push_back(cg.value(o));
  if (op == SimtOp::SubgroupElect || op == SimtOp::SubgroupReduce || op == SimtOp::SubgroupExclusiveScan)
    return emit_collective(cg, s, args);
  return emit_subgroup(b, op, args);
}

llvm::Value *GpuTarget::scan_identity(LlvmCodegen &cg, const Stmt &s) {
  unsigned bits = bit_width(s.dtype);
  bool sg = is_signed(s.dtype);
  llvm::APInt v(bits, 0);
  switch (static_cast<BinaryOp>(s.ival)) {
    case BinaryOp::BitAnd: v = llvm::APInt::getAllOnes(bits); break;
    case BinaryOp::Min: v = sg ? llvm::APInt::getSignedMaxValue(bits) : llvm::APInt::getMaxValue(bits); break;
    case BinaryOp::Max: v = sg ? llvm::APInt::getSignedMinValue(bits) : llvm::APInt::getMinValue(bits); break;
    default: break;  // add, or, xor: 0
  }
  return llvm::ConstantInt::get(cg.ctx(), v);
}

llvm::Value *GpuTarget::per_word(llvm::IRBuilderBase &b, llvm::Value *v,
                                 const std::function<llvm::Value *(llvm::Value *)> &f) {
  llvm::Type *t = v->getType();
  unsigned bits = t->getPrimitiveSizeInBits();
  llvm::Value *x = b.CreateBitCast(v, b.getIntNTy(bits));
  if (bits == 32) return b.CreateBitCast(f(x), t);
  llvm::Value *lo = f(b.CreateTrunc(x, b.getInt32Ty()));
  llvm::Value *hi = f(b.CreateTrunc(b.CreateLShr(x, 32), b.getInt32Ty()));
  llvm::Value *r = b.CreateOr(b.CreateZExt(lo, b.getInt64Ty()), b.CreateShl(b.CreateZExt(hi, b.getInt64Ty()), 32));
  return b.CreateBitCast(r, t);
}

GpuModule generate_gpu_module(KernelIR &k, GpuTarget &target) {
  run_passes(k, Target{target.backend(), target.features()});
  GpuModule g;
  g.ctx = std::make_unique<llvm::LLVMContext>();
  for (Task &t : k.tasks) {
    g.block_dims.push_back(target.block_dim(t));
    g.dynamic_shared_bytes.push_back(t.dynamic_shared ? t.shared_bytes : 0);
  }
  LlvmCodegen cg(k, target, *g.ctx);
  std::vector<TaskSymbols> symbols;
  g.module = cg.run(&symbols);
  for (const TaskSymbols &s : symbols) g.task_symbols.push_back(s.body);
  return g;
}

std::string llvm_ir_text(const llvm::Module &m) {
  std::string s;
  llvm::raw_string_ostream os(s);
  m.print(os, nullptr);
  return s;
}

}  // namespace qd
