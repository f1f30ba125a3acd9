// LLVM lowering of the atomic primitives. Legalization has decided each atomic (the support
// table's verdict) and expanded CAS loops into IR loops around compare-exchange, so what reaches
// here maps to one atomicrmw or cmpxchg, at the statement's memory order (atomics/memory_model.h:
// Relaxed is monotonic) and the target's syncscope for its scope. Atomic loads, stores and fences
// too. A target may emit them itself (CUDA: inline PTX).
#include "codegen/llvm/codegen_llvm.h"

namespace qd {

using llvm::Value;

namespace {
using RMW = llvm::AtomicRMWInst::BinOp;
using AO = llvm::AtomicOrdering;

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
    case AtomicOp::Inc: return RMW::UIncWrap;
    case AtomicOp::Dec: return RMW::UDecWrap;
    default: throw std::logic_error("internal: no atomicrmw for this atomic");
  }
}

// The names match llvm_ordering() in atomics/memory_model.cpp, which the docs' table prints.
AO ordering(MemoryOrder o) {
  switch (o) {
    case MemoryOrder::Relaxed: return AO::Monotonic;
    case MemoryOrder::Acquire: return AO::Acquire;
    case MemoryOrder::Release: return AO::Release;
    case MemoryOrder::AcqRel: return AO::AcquireRelease;
  }
  return AO::Monotonic;
}

AO failure_ordering(MemoryOrder o) {
  return o == MemoryOrder::Acquire || o == MemoryOrder::AcqRel ? AO::Acquire : AO::Monotonic;
}

}  // namespace

Value *LlvmCodegen::atomic(const Stmt &s) {
  bool done = false;
  if (Value *v = target_.emit_memory_op(*this, s, &done); done) return v;
  Value *ptr = value(s.operands[0]);
  Value *val = value(s.operands[1]);
  if (s.atomic_op() == AtomicOp::Cas) {
    auto *cx = b_.CreateAtomicCmpXchg(ptr, val, value(s.operands[2]), llvm::MaybeAlign(), ordering(s.order),
                                      failure_ordering(s.order), target_.atomic_scope(ctx_, s.scope));
    return b_.CreateExtractValue(cx, 0);
  }
  return atomic_rmw(s, ptr, val);
}

Value *LlvmCodegen::atomic_rmw(const Stmt &s, Value *ptr, Value *val) {
  return b_.CreateAtomicRMW(rmw_op(s.atomic_op(), s.dtype), ptr, val, llvm::MaybeAlign(), ordering(s.order),
                            target_.atomic_scope(ctx_, s.scope));
}

Value *LlvmCodegen::atomic_load(const Stmt &s) {
  bool done = false;
  if (Value *v = target_.emit_memory_op(*this, s, &done); done) return v;
  auto *load = b_.CreateAlignedLoad(type(s.dtype), value(s.operands[0]), llvm::Align(byte_size(s.dtype)));
  load->setAtomic(ordering(s.order), target_.atomic_scope(ctx_, s.scope));
  return load;
}

void LlvmCodegen::atomic_store(const Stmt &s) {
  bool done = false;
  target_.emit_memory_op(*this, s, &done);
  if (done) return;
  auto *st = b_.CreateAlignedStore(value(s.operands[1]), value(s.operands[0]),
                                   llvm::Align(byte_size(s.operands[1]->dtype)));
  st->setAtomic(ordering(s.order), target_.atomic_scope(ctx_, s.scope));
}

void LlvmCodegen::fence(const Stmt &s) {
  bool done = false;
  target_.emit_memory_op(*this, s, &done);
  if (done) return;
  // AcqRel is a full fence (atomics/memory_model.h: llvm_fence_ordering)
  b_.CreateFence(s.order == MemoryOrder::AcqRel ? AO::SequentiallyConsistent : ordering(s.order),
                 target_.atomic_scope(ctx_, s.scope));
}

}  // namespace qd
