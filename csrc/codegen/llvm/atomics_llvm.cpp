// LLVM lowering of the atomic family: the support table picks a single atomicrmw / cmpxchg or a
// CAS loop; this file only spells out each.
#include "codegen/llvm/codegen_llvm.h"

namespace qd {

using llvm::Value;

namespace {
using RMW = llvm::AtomicRMWInst::BinOp;

RMW rmw_op(AtomicOp op, DataType t) {
  bool fp = is_real(t), sg = is_signed(t);
  switch (op) {
    case AtomicOp::Add: case AtomicOp::Sub: return fp ? RMW::FAdd : RMW::Add;
    case AtomicOp::Min: return fp ? RMW::FMin : (sg ? RMW::Min : RMW::UMin);
    case AtomicOp::Max: return fp ? RMW::FMax : (sg ? RMW::Max : RMW::UMax);
    case AtomicOp::And: return RMW::And;
    case AtomicOp::Or: return RMW::Or;
    case AtomicOp::Xor: return RMW::Xor;
    case AtomicOp::Exchange: return RMW::Xchg;
    default: return RMW::BAD_BINOP;
  }
}
}  // namespace

Value *LlvmCodegen::atomic(const Stmt &s) {
  Value *ptr = value(s.operands[0]);
  Value *val = value(s.operands[1]);
  AtomicOp op = s.atomic_op();
  if (s.privatized) {
    // A per-thread partial result (transforms/reductions.cpp); emit_index_loop flushes it.
    Value *acc = private_slot(s);
    AtomicOp accumulate = op == AtomicOp::Sub ? AtomicOp::Add : op;
    b_.CreateStore(combine(accumulate, s.dtype, b_.CreateLoad(type(s.dtype), acc), val), acc);
    return nullptr;
  }
  if (op == AtomicOp::Cas) {
    auto seq = llvm::AtomicOrdering::SequentiallyConsistent;
    auto *cx = b_.CreateAtomicCmpXchg(ptr, val, value(s.operands[2]), llvm::MaybeAlign(), seq, seq,
                                      target_.atomic_scope(ctx_));
    return b_.CreateExtractValue(cx, 0);
  }
  return atomic_rmw(op, s.dtype, ptr, val);
}

Value *LlvmCodegen::atomic_rmw(AtomicOp op, DataType t, Value *ptr, Value *val) {
  auto lowering = atomic_lowering(target_.backend(), op, t, MemorySpace::Global, target_.features());
  if (lowering.kind == Lowering::Native) return atomic_native(op, t, ptr, val);
  return atomic_cas_loop(ptr, t, [&](Value *old) { return combine(op, t, old, val); });
}

Value *LlvmCodegen::atomic_native(AtomicOp op, DataType t, Value *ptr, Value *val) {
  auto seq = llvm::AtomicOrdering::SequentiallyConsistent;
  // atomic_sub(x, y) is atomic_add(x, -y): integer `sub` is the same wrap-around operation, and
  // floats use fadd so that targets with a native float add (PTX atom.add.f32) select it.
  if (op == AtomicOp::Sub) {
    if (!is_real(t)) return b_.CreateAtomicRMW(RMW::Sub, ptr, val, llvm::MaybeAlign(), seq, target_.atomic_scope(ctx_));
    val = b_.CreateFNeg(val);
  }
  return b_.CreateAtomicRMW(rmw_op(op, t), ptr, val, llvm::MaybeAlign(), seq, target_.atomic_scope(ctx_));
}

// The value a CAS-loop op writes back, given the current one.
Value *LlvmCodegen::combine(AtomicOp op, DataType t, Value *old, Value *val) {
  bool fp = is_real(t), sg = is_signed(t);
  switch (op) {
    case AtomicOp::Add: return fp ? b_.CreateFAdd(old, val) : b_.CreateAdd(old, val);
    case AtomicOp::Sub: return fp ? b_.CreateFAdd(old, b_.CreateFNeg(val)) : b_.CreateSub(old, val);
    case AtomicOp::Mul: return fp ? b_.CreateFMul(old, val) : b_.CreateMul(old, val);
    // minnum/maxnum: one NaN operand -> the other; both NaN -> NaN (the spec's minNum/maxNum).
    case AtomicOp::Min:
      return b_.CreateBinaryIntrinsic(fp ? llvm::Intrinsic::minnum : (sg ? llvm::Intrinsic::smin : llvm::Intrinsic::umin), old, val);
    case AtomicOp::Max:
      return b_.CreateBinaryIntrinsic(fp ? llvm::Intrinsic::maxnum : (sg ? llvm::Intrinsic::smax : llvm::Intrinsic::umax), old, val);
    case AtomicOp::And: return b_.CreateAnd(old, val);
    case AtomicOp::Or: return b_.CreateOr(old, val);
    case AtomicOp::Xor: return b_.CreateXor(old, val);
    case AtomicOp::Exchange: return val;
    case AtomicOp::Cas: break;
  }
  throw std::runtime_error("internal: no CAS-loop form for this atomic");
}

// load; loop { new = update(old); (seen, ok) = cmpxchg(ptr, old, new); old = seen } until ok.
// The comparison is on the integer bits, so a NaN in memory still compares equal to itself and the
// loop ends as soon as no other thread wrote in between.
Value *LlvmCodegen::atomic_cas_loop(Value *ptr, DataType t, const std::function<Value *(Value *)> &update) {
  llvm::Type *ity = b_.getIntNTy(bit_width(t));
  llvm::Type *vty = type(t);
  auto seq = llvm::AtomicOrdering::SequentiallyConsistent;
  auto *initial = b_.CreateLoad(ity, ptr);
  initial->setAtomic(llvm::AtomicOrdering::Monotonic, target_.atomic_scope(ctx_));
  initial->setAlignment(llvm::Align(byte_size(t)));
  llvm::BasicBlock *pre = b_.GetInsertBlock();
  auto *loop = llvm::BasicBlock::Create(ctx_, "cas.loop", fn_);
  auto *done = llvm::BasicBlock::Create(ctx_, "cas.done", fn_);
  b_.CreateBr(loop);
  b_.SetInsertPoint(loop);
  auto *old_bits = b_.CreatePHI(ity, 2);
  old_bits->addIncoming(initial, pre);
  Value *old = b_.CreateBitCast(old_bits, vty);
  Value *new_bits = b_.CreateBitCast(update(old), ity);
  auto *cx = b_.CreateAtomicCmpXchg(ptr, old_bits, new_bits, llvm::MaybeAlign(), seq, seq, target_.atomic_scope(ctx_));
  Value *seen = b_.CreateExtractValue(cx, 0);
  old_bits->addIncoming(seen, b_.GetInsertBlock());
  b_.CreateCondBr(b_.CreateExtractValue(cx, 1), done, loop);
  b_.SetInsertPoint(done);
  return old;
}

}  // namespace qd
