// Privatized reductions (transforms/reductions.cpp): each thread accumulates into registers or a
// private copy of a small field during its share of the parallel loop, then applies one atomic per
// touched location.
#include "codegen/llvm/codegen_llvm.h"

namespace qd {

using llvm::Value;

// The value that leaves `x` unchanged under `op`: where a thread's partial result starts.
Value *LlvmCodegen::identity(AtomicOp op, DataType t) {
  llvm::Type *ty = type(t);
  bool fp = is_real(t), sg = is_signed(t);
  int bits = bit_width(t);
  switch (op) {
    case AtomicOp::Add: case AtomicOp::Sub:  // -0.0: x + -0.0 is x for every x, -0.0 included
      return fp ? llvm::ConstantFP::get(ty, -0.0) : llvm::ConstantInt::get(ty, 0);
    case AtomicOp::Mul: return fp ? llvm::ConstantFP::get(ty, 1.0) : llvm::ConstantInt::get(ty, 1);
    // NaN is minNum/maxNum's identity: a NaN operand loses, and all-NaN stays NaN as it would
    // without privatization (+-inf would turn a NaN in memory into inf).
    case AtomicOp::Min:
      if (fp) return llvm::ConstantFP::getNaN(ty);
      return llvm::ConstantInt::get(ty, sg ? llvm::APInt::getSignedMaxValue(bits) : llvm::APInt::getMaxValue(bits));
    case AtomicOp::Max:
      if (fp) return llvm::ConstantFP::getNaN(ty);
      return llvm::ConstantInt::get(ty, sg ? llvm::APInt::getSignedMinValue(bits) : llvm::APInt::getMinValue(bits));
    case AtomicOp::And: return llvm::ConstantInt::get(ty, llvm::APInt::getAllOnes(bits));
    case AtomicOp::Or: case AtomicOp::Xor: return llvm::ConstantInt::get(ty, 0);
    default: throw std::runtime_error("internal: atomic op without an identity");
  }
}

// The private accumulator a privatized atomic updates: its own register, or its element of the
// thread's copy of the field.
Value *LlvmCodegen::private_slot(const Stmt &s) {
  auto it = reduction_accs_.find(&s);
  if (it != reduction_accs_.end()) return it->second;
  const Stmt &ptr = *s.operands[0];
  Value *base = buffer_base(static_cast<int>(ptr.ival));
  // The element index, from the address the codegen computed (LLVM folds this back to the index).
  Value *offset = b_.CreateSub(b_.CreatePtrToInt(value(&ptr), b_.getInt64Ty()), b_.CreatePtrToInt(base, b_.getInt64Ty()));
  Value *index = b_.CreateExactUDiv(offset, b_.getInt64(byte_size(s.dtype)));
  return b_.CreateGEP(type(s.dtype), array_accs_.at(static_cast<int>(ptr.ival)), index);
}

const Task *LlvmCodegen::parallel_task_of(const Stmt &loop) const {
  for (const Task &t : k_.tasks)
    if (t.parallel && t.loop() == &loop) return &t;
  return nullptr;
}

void LlvmCodegen::begin_reductions(const Stmt &loop) {
  const Task *t = parallel_task_of(loop);
  if (!t) return;
  llvm::IRBuilder<> eb(entry_, entry_->begin());
  for (const Stmt *r : t->reductions) {
    Value *acc = eb.CreateAlloca(type(r->dtype));
    b_.CreateStore(identity(r->atomic_op(), r->dtype), acc);
    reduction_accs_[r] = acc;
  }
  for (const auto &a : t->array_reductions) {
    Value *copy = eb.CreateAlloca(type(a.dtype), b_.getInt64(a.size));
    Value *id = identity(a.op, a.dtype);
    emit_counted_loop(a.size, [&](Value *j) { b_.CreateStore(id, b_.CreateGEP(type(a.dtype), copy, j)); });
    array_accs_[a.buffer] = copy;
  }
}

// One real atomic per reduction and thread, after its share of the loop; a private element still
// at the identity had no update and is skipped.
void LlvmCodegen::flush_reductions(const Stmt &loop) {
  const Task *t = parallel_task_of(loop);
  if (!t) return;
  for (const Stmt *r : t->reductions) {
    Value *acc = b_.CreateLoad(type(r->dtype), reduction_accs_.at(r));
    atomic_rmw(r->atomic_op(), r->dtype, value(r->operands[0]), acc);
  }
  for (const auto &a : t->array_reductions) {
    llvm::Type *ty = type(a.dtype), *bits = b_.getIntNTy(bit_width(a.dtype));
    Value *identity_bits = b_.CreateBitCast(identity(a.op, a.dtype), bits);
    Value *base = buffer_base(a.buffer);
    emit_counted_loop(a.size, [&](Value *j) {
      Value *v = b_.CreateLoad(ty, b_.CreateGEP(ty, array_accs_.at(a.buffer), j));
      auto *touched = llvm::BasicBlock::Create(ctx_, "flush", fn_);
      auto *next = llvm::BasicBlock::Create(ctx_, "flush.next", fn_);
      b_.CreateCondBr(b_.CreateICmpNE(b_.CreateBitCast(v, bits), identity_bits), touched, next);
      b_.SetInsertPoint(touched);
      atomic_rmw(a.op, a.dtype, b_.CreateGEP(ty, base, j), v);
      b_.CreateBr(next);
      b_.SetInsertPoint(next);
    });
  }
}

void LlvmCodegen::emit_counted_loop(int64_t n, const std::function<void(Value *)> &body) {
  llvm::BasicBlock *pre = b_.GetInsertBlock();
  auto *loop = llvm::BasicBlock::Create(ctx_, "count", fn_);
  auto *done = llvm::BasicBlock::Create(ctx_, "count.done", fn_);
  b_.CreateBr(loop);
  b_.SetInsertPoint(loop);
  auto *j = b_.CreatePHI(b_.getInt64Ty(), 2);
  j->addIncoming(b_.getInt64(0), pre);
  body(j);
  Value *next = b_.CreateAdd(j, b_.getInt64(1));
  j->addIncoming(next, b_.GetInsertBlock());
  b_.CreateCondBr(b_.CreateICmpULT(next, b_.getInt64(n)), loop, done);
  b_.SetInsertPoint(done);
}

}  // namespace qd
