// SPIR-V codegen, part 4: the atomic family. atomic_lowering (the support table, with the
// target's features) decides native vs CAS loop; this file only spells out each. Every atomic is
// at Scope Device, the spec's scope for SPIR-V, with relaxed semantics: qd atomics order only the
// location they touch.
#include "codegen/spirv/codegen_spirv_impl.h"

namespace qd {

using spirv::Op;
using spirv::StorageBuffer;
using Id = spirv::Id;

namespace {

Op int_rmw(AtomicOp op, DataType t) {
  switch (op) {
    case AtomicOp::Add: return Op::AtomicIAdd;
    case AtomicOp::Sub: return Op::AtomicISub;
    case AtomicOp::Min: return is_signed(t) ? Op::AtomicSMin : Op::AtomicUMin;
    case AtomicOp::Max: return is_signed(t) ? Op::AtomicSMax : Op::AtomicUMax;
    case AtomicOp::And: return Op::AtomicAnd;
    case AtomicOp::Or: return Op::AtomicOr;
    case AtomicOp::Xor: return Op::AtomicXor;
    case AtomicOp::Exchange: return Op::AtomicExchange;
    default: return Op::Nop;
  }
}

}  // namespace

Id SpirvCodegen::atomic(const Stmt &s) {
  const Stmt *target = s.operands[0];
  if (target->kind != StmtKind::GlobalPtr)
    throw CompileError(ErrorKind::Codegen, "internal: an atomic on a variable reached the SPIR-V codegen", s.loc);
  Address a = addresses_.at(target);
  if (k_.buffers[a.buffer].kind == BufferKind::Temps)  // a kernel-scope variable: its slot as an element
    a.index = b_.c_i32(static_cast<int32_t>(a.byte_offset / byte_size(s.dtype)));
  AtomicOp op = s.atomic_op();
  Id val = value(s.operands[1]);
  auto lowering = atomic_lowering(target_.backend, op, s.dtype, MemorySpace::Global, target_.features);
  switch (lowering.kind) {
    case Lowering::Rejected: type_error(lowering.reason, s.loc);
    case Lowering::Native: return atomic_native(s, a);
    case Lowering::CasLoop: break;
  }
  return atomic_cas_loop(a, s.dtype, [&](Id old) { return combine(op, s.dtype, old, val); });
}

// The view an integer atomic goes through: the element type, except in the temps buffer, whose
// 32 / 64-bit slots are reached as unsigned words (one view per width, so Metal sees no aliases).
const StorageBuffer &SpirvCodegen::int_cell(const Address &a, DataType t) {
  if (is_real(t) || k_.buffers[a.buffer].kind == BufferKind::Temps) return int_view(a.buffer, t);
  return plain_view(a.buffer, t);
}

Id SpirvCodegen::atomic_native(const Stmt &s, const Address &a) {
  AtomicOp op = s.atomic_op();
  DataType t = s.dtype;
  Id ty = type(t), val = value(s.operands[1]);
  if (is_real(t) && op != AtomicOp::Exchange) {
    // Float add with the device's capability; atomic_sub(x, y) is atomic_add(x, -y).
    if (op == AtomicOp::Sub) val = b_.neg(ty, val);
    return b_.atomic(Op::AtomicFAddEXT, ty, element_ptr(float_view(a.buffer, t), a), val);
  }
  // Integers, and float exchange through the integer of the same width (which then needs no
  // device capability). The opcode, not the type, says whether min / max are signed.
  const StorageBuffer &cell = int_cell(a, t);
  Id ct = cell.elem_type;
  auto in = [&](Id v) { return ct == ty ? v : b_.bitcast(ct, v); };
  Id ptr = element_ptr(cell, a), old;
  if (op == AtomicOp::Cas)  // OpAtomicCompareExchange takes (desired, expected)
    old = b_.atomic_cas(ct, ptr, in(value(s.operands[2])), in(val));
  else
    old = b_.atomic(int_rmw(op, t), ct, ptr, in(val));
  return ct == ty ? old : b_.bitcast(ty, old);
}

// The value a CAS-loop op writes back, given the current one.
Id SpirvCodegen::combine(AtomicOp op, DataType t, Id old, Id val) {
  Id ty = type(t);
  switch (op) {
    case AtomicOp::Add: return b_.add(ty, old, val);
    case AtomicOp::Sub: return is_real(t) ? b_.add(ty, old, b_.neg(ty, val)) : b_.sub(ty, old, val);
    case AtomicOp::Mul: return b_.mul(ty, old, val);
    // minNum / maxNum: one NaN operand -> the other one (the spec's float min / max).
    case AtomicOp::Min: return minmax(true, t, old, val);
    case AtomicOp::Max: return minmax(false, t, old, val);
    case AtomicOp::And: return b_.bit_and(ty, old, val);
    case AtomicOp::Or: return b_.bit_or(ty, old, val);
    case AtomicOp::Xor: return b_.bit_xor(ty, old, val);
    case AtomicOp::Exchange: return val;
    case AtomicOp::Cas: break;
  }
  throw std::logic_error("no CAS-loop form for atomic_cas");
}

// The one CAS loop of this backend:
//   expected = atomic load; loop { new = update(expected); seen = cas(ptr, new, expected);
//   if seen == expected: break; expected = seen }; old value = expected.
// It terminates: an exchange fails only because another invocation's succeeded in between, so
// every round some invocation finishes (on SIMT hardware too: the atomics of one subgroup are
// serialised, so one lane of it wins). The comparison is on the integer bits, so a NaN in memory
// equals itself and cannot keep the loop spinning.
Id SpirvCodegen::atomic_cas_loop(const Address &a, DataType t, const std::function<Id(Id)> &update) {
  const StorageBuffer &cell = int_cell(a, t);
  Id bits_type = cell.elem_type;
  auto to_value = [&](Id bits) { return bits_type == type(t) ? bits : b_.bitcast(type(t), bits); };
  Id ptr = element_ptr(cell, a);
  Id expected = b_.local_var(bits_type);
  b_.store(expected, b_.atomic_load(bits_type, ptr));
  b_.begin_loop();
  Id old_bits = b_.load(bits_type, expected);
  Id updated = update(to_value(old_bits));
  Id new_bits = bits_type == type(t) ? updated : b_.bitcast(bits_type, updated);
  Id seen = b_.atomic_cas(bits_type, ptr, new_bits, old_bits);
  b_.begin_if(b_.eq(bits_type, seen, old_bits));
  b_.break_loop();
  b_.end_if();
  b_.store(expected, seen);
  b_.end_loop();
  return to_value(b_.load(bits_type, expected));
}

}  // namespace qd
