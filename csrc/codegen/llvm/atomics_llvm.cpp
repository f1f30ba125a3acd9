// LLVM lowering of the atomic primitives. Legalization has decided each atomic (the support
// table's verdict) and expanded CAS loops into IR loops around compare-exchange, so what reaches
// here maps to one atomicrmw or cmpxchg.
#include "codegen/llvm/codegen_llvm.h"

namespace qd {

using llvm::Value;

namespace {
using RMW = llvm::AtomicRMWInst::BinOp;

RMW rmw_op(AtomicOp op, DataType t) {
  bool fp = is_real(t), sg = is_signed(t);
  switch (op) {
    case AtomicOp::Add: return fp ? RMW::FAdd : RMW::Add;
    case AtomicOp::Sub: return fp ? RMW::FSub : RMW::Sub;
    case AtomicOp::Min: return fp ? RMW::FMin : (sg ? RMW::Min : RMW::UMin);
    case AtomicOp::Max: return fp ? RMW::FMax : (sg ? RMW::Max : RMW::UMax);
    case AtomicOp::And: return RMW::And;
    case AtomicOp::Or: return RMW::Or;
    case AtomicOp::Xor: return RMW::Xor;
    case AtomicOp::Exchange: return RMW::Xchg;
    default: throw std::logic_error("internal: no atomicrmw for this atomic");
  }
}
}  // namespace

Value *LlvmCodegen::atomic(const Stmt &s) {
  Value *ptr = value(s.operands[0]);
  Value *val = value(s.operands[1]);
  AtomicOp op = s.atomic_op();
  if (op == AtomicOp::Cas) {
    auto seq = llvm::AtomicOrdering::SequentiallyConsistent;
    auto *cx = b_.CreateAtomicCmpXchg(ptr, val, value(s.operands[2]), llvm::MaybeAlign(), seq, seq,
                                      target_.atomic_scope(ctx_));
    return b_.CreateExtractValue(cx, 0);
  }
  return atomic_rmw(op, s.dtype, ptr, val);
}

Value *LlvmCodegen::atomic_rmw(AtomicOp op, DataType t, Value *ptr, Value *val) {
  auto seq = llvm::AtomicOrdering::SequentiallyConsistent;
  return b_.CreateAtomicRMW(rmw_op(op, t), ptr, val, llvm::MaybeAlign(), seq, target_.atomic_scope(ctx_));
}

}  // namespace qd
