// SPIR-V codegen, part 4: the atomic primitives. Legalization has decided each atomic (the support
// table's verdict) and expanded CAS loops into IR loops around compare-exchange, so each atomic
// here is one instruction, at the statement's scope and memory semantics (atomics/memory_model.h:
// the default, Relaxed at Device scope, orders only the location itself). Atomic loads, stores and
// fences too.
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

spirv::Scope SpirvCodegen::scope_of(const Stmt &s) {
  return static_cast<spirv::Scope>(spirv_scope(s.scope, b_.memory_model() == spirv::MemoryModelKind::Vulkan));
}

// A temps slot as an element of type t; for an array in the temps buffer (deterministic mode), plus
// the element index.
Id SpirvCodegen::temps_index(const Address &a, DataType t) {
  Id slot = b_.c_i32(static_cast<int32_t>(a.byte_offset / byte_size(t)));
  return a.index ? b_.add(b_.t_i32(), slot, a.index) : slot;
}

// qd.atomic_load / atomic_store: OpAtomicLoad / OpAtomicStore through the integer view (a float's
// bits), so no float atomic capability is needed.
Id SpirvCodegen::atomic_access(const Stmt &s) {
  const Stmt *target = s.operands[0];
  Address a = addresses_.at(target);
  if (k_.buffers[a.buffer].kind == BufferKind::Temps) a.index = temps_index(a, target->dtype);
  DataType t = target->dtype;
  const StorageBuffer &cell = int_cell(a, t);
  Id ct = cell.elem_type, ty = type(t), ptr = element_ptr(cell, a);
  spirv::Scope scope = is_shared(a.buffer) ? spirv::Scope::Workgroup : scope_of(s);
  if (s.kind == StmtKind::GlobalLoad) {
    Id raw = b_.atomic_load(ct, ptr, scope, semantics_at(a, s.order));
    return ct == ty ? raw : b_.bitcast(ty, raw);
  }
  Id v = value(s.operands[1]);
  b_.atomic_store(ptr, ct == ty ? v : b_.bitcast(ct, v), scope, semantics_at(a, s.order));
  return 0;
}

// The memory semantics of an access at `order`: the storage-class bit of the memory it touches.
uint32_t SpirvCodegen::semantics_at(const Address &a, MemoryOrder order) {
  uint32_t sem = spirv_semantics(order);
  if (is_shared(a.buffer) && sem) sem = (sem & ~spirv::semantics::UniformMemory) | spirv::semantics::WorkgroupMemory;
  return sem;
}

void SpirvCodegen::fence(const Stmt &s) { b_.memory_barrier(scope_of(s), spirv_fence_semantics(s.order)); }

Id SpirvCodegen::atomic(const Stmt &s) {
  const Stmt *target = s.operands[0];
  if (target->kind != StmtKind::GlobalPtr)
    throw CompileError(ErrorKind::Codegen, "internal: an atomic on a variable reached the SPIR-V codegen", s.loc);
  Address a = addresses_.at(target);
  if (k_.buffers[a.buffer].kind == BufferKind::Temps)  // a kernel-scope variable: its slot as an element
    a.index = temps_index(a, s.dtype);
  AtomicOp op = s.atomic_op();
  DataType t = s.dtype;
  Id ty = type(t), val = value(s.operands[1]);
  // Shared arrays: Workgroup scope (only the block sees them; Device scope on workgroup memory
  // breaks Metal), and the WorkgroupMemory storage-class bit.
  spirv::Scope scope = is_shared(a.buffer) ? spirv::Scope::Workgroup : scope_of(s);
  uint32_t sem = semantics_at(a, s.order);
  if (is_real(t)) {  // add / min / max with the device's float atomic capability
    Op inst = op == AtomicOp::Add ? Op::AtomicFAddEXT : op == AtomicOp::Min ? Op::AtomicFMinEXT : Op::AtomicFMaxEXT;
    return b_.atomic(inst, ty, element_ptr(float_view(a.buffer, t), a), val, scope, sem);
  }
  // Integers, also the bits of a float (exchange, and the compare-exchange of CAS loops). The
  // opcode, not the type, says whether min / max are signed.
  const StorageBuffer &cell = int_cell(a, t);
  Id ct = cell.elem_type;
  bool wide = widened(a.buffer);  // a narrow element's bits, zero-extended in a 32-bit word
  auto in = [&](Id v) {
    if (wide) return to_word(v, t);
    return ct == ty ? v : b_.bitcast(ct, v);
  };
  auto out = [&](Id v) {
    if (wide) return from_word(v, t);
    return ct == ty ? v : b_.bitcast(ty, v);
  };
  Id ptr = element_ptr(cell, a), old;
  if (op == AtomicOp::Cas)  // OpAtomicCompareExchange takes (desired, expected)
    // The unequal case only reads: it keeps the acquire part of the order.
    old = b_.atomic_cas(ct, ptr, in(value(s.operands[2])), in(val), scope, sem,
                        semantics_at(a, s.order == MemoryOrder::Acquire || s.order == MemoryOrder::AcqRel
                                            ? MemoryOrder::Acquire : MemoryOrder::Relaxed));
  else
    old = b_.atomic(int_rmw(op, t), ct, ptr, in(val), scope, sem);
  return out(old);
}

// Block barriers and fences, thread indices. A block barrier also orders the block's accesses to
// global memory, as CUDA's bar.sync does.
Id SpirvCodegen::simt(const Stmt &s) {
  using spirv::Scope;
  namespace sem = spirv::semantics;
  uint32_t all = sem::AcquireRelease | sem::WorkgroupMemory | sem::UniformMemory;
  switch (static_cast<SimtOp>(s.op)) {
    case SimtOp::BlockSync: b_.control_barrier(Scope::Workgroup, Scope::Workgroup, all); return 0;
    case SimtOp::BlockMemFence: b_.memory_barrier(Scope::Workgroup, all); return 0;
    case SimtOp::GridMemFence: b_.memory_barrier(Scope::Device, all); return 0;
    case SimtOp::ThreadIdx: return b_.bitcast(b_.t_i32(), b_.load_builtin(spirv::BuiltIn::LocalInvocationId, 0));
    case SimtOp::GlobalThreadIdx:
      return b_.bitcast(b_.t_i32(), b_.load_builtin(spirv::BuiltIn::GlobalInvocationId, 0));
    case SimtOp::GridThreads: {
      Id groups = b_.load_builtin(spirv::BuiltIn::NumWorkgroups, 0);
      return b_.bitcast(b_.t_i32(), b_.mul(b_.t_u32(), groups, b_.c_u32(block_dim_)));
    }
    default: return subgroup(s);
  }
}

// Subgroup operations: OpGroupNonUniform* at Subgroup scope, each needing the device's subgroup
// feature (VkPhysicalDeviceSubgroupProperties::supportedOperations, probed at init).
Id SpirvCodegen::subgroup(const Stmt &s) {
  using spirv::Capability;
  using spirv::Op;
  using spirv::Scope;
  SimtOp op = static_cast<SimtOp>(s.op);
  auto need = [&](Cap feature, Capability cap) {
    if (target_.device_features && !target_.features.has(feature))
      type_error(std::string("qd.simt.") + simt_op_name(op) + " needs the Vulkan subgroup feature '" + cap_name(feature) +
                     "', which this device lacks",
                 s.loc);
    b_.capability(Capability::GroupNonUniform);
    b_.capability(cap);
  };
  Id scope = b_.c_scope(Scope::Subgroup);
  auto arg = [&](int i) { return value(s.operands[i]); };
  auto truth = [&] { return b_.emit(Op::INotEqual, b_.t_bool(), arg(0), b_.c_i32(0)); };
  auto to_i32 = [&](Id cond) { return b_.select(b_.t_i32(), cond, b_.c_i32(1), b_.c_i32(0)); };
  // A value moved between lanes (operand 0; the lane, offset or mask in operand 1 if `lane`): one
  // instruction, on a 64-bit value's bits as a uvec2 where the driver needs it (lavapipe crashed on
  // chained 64-bit ShuffleUp; two scalar u32 shuffles of the halves it got wrong at 4 lanes).
  auto move = [&](Op o, bool lane) {
    auto one = [&](Id type, Id v) { return lane ? b_.emit(o, type, scope, v, arg(1)) : b_.emit(o, type, scope, v); };
    if (bit_width(s.dtype) != 64 || !target_.features.has(Cap::splits_64bit_shuffles)) return one(type(s.dtype), arg(0));
    Id pair = b_.t_vector(b_.t_u32(), 2);
    return b_.bitcast(type(s.dtype), one(pair, b_.bitcast(pair, arg(0))));
  };
  switch (op) {
    case SimtOp::SubgroupInvocationId:
      return b_.bitcast(b_.t_i32(), b_.load_builtin(spirv::BuiltIn::SubgroupLocalInvocationId));
    case SimtOp::SubgroupSync: b_.control_barrier(Scope::Subgroup, Scope::Subgroup, 0); return 0;
    case SimtOp::SubgroupMemFence:
      b_.memory_barrier(Scope::Subgroup, spirv::semantics::AcquireRelease | spirv::semantics::WorkgroupMemory |
                                             spirv::semantics::UniformMemory);
      return 0;
    case SimtOp::SubgroupShuffle:
      need(Cap::subgroup_shuffle, Capability::GroupNonUniformShuffle);
      return move(Op::GroupNonUniformShuffle, true);
    case SimtOp::SubgroupShuffleXor:
      need(Cap::subgroup_shuffle, Capability::GroupNonUniformShuffle);
      return move(Op::GroupNonUniformShuffleXor, true);
    case SimtOp::SubgroupShuffleUp:
      need(Cap::subgroup_shuffle_relative, Capability::GroupNonUniformShuffleRelative);
      return move(Op::GroupNonUniformShuffleUp, true);
    case SimtOp::SubgroupShuffleDown:
      need(Cap::subgroup_shuffle_relative, Capability::GroupNonUniformShuffleRelative);
      return move(Op::GroupNonUniformShuffleDown, true);
    case SimtOp::SubgroupBroadcast:
      need(Cap::subgroup_ballot, Capability::GroupNonUniformBallot);
      return move(Op::GroupNonUniformBroadcast, true);
    case SimtOp::SubgroupBroadcastFirst:
      need(Cap::subgroup_ballot, Capability::GroupNonUniformBallot);
      return move(Op::GroupNonUniformBroadcastFirst, false);
    case SimtOp::SubgroupBallot: {
      need(Cap::subgroup_ballot, Capability::GroupNonUniformBallot);
      Id u32 = b_.t_u32(), u64 = type(DataType::u64);
      Id mask = b_.emit(Op::GroupNonUniformBallot, b_.t_vector(u32, 4), scope, truth());
      Id lo = b_.emit(Op::UConvert, u64, b_.emit(Op::CompositeExtract, u32, mask, 0u));
      Id hi = b_.emit(Op::UConvert, u64, b_.emit(Op::CompositeExtract, u32, mask, 1u));
      return b_.bit_or(u64, lo, b_.emit(Op::ShiftLeftLogical, u64, hi, b_.c_u32(32)));
    }
    case SimtOp::SubgroupAll:
      need(Cap::subgroup_vote, Capability::GroupNonUniformVote);
      return to_i32(b_.emit(Op::GroupNonUniformAll, b_.t_bool(), scope, truth()));
    case SimtOp::SubgroupAny:
      need(Cap::subgroup_vote, Capability::GroupNonUniformVote);
      return to_i32(b_.emit(Op::GroupNonUniformAny, b_.t_bool(), scope, truth()));
    case SimtOp::SubgroupElect:
      need(Cap::subgroup_basic, Capability::GroupNonUniform);
      return to_i32(b_.emit(Op::GroupNonUniformElect, b_.t_bool(), scope));
    case SimtOp::SubgroupReduce: case SimtOp::SubgroupExclusiveScan: {
      need(Cap::subgroup_arithmetic, Capability::GroupNonUniformArithmetic);
      bool fp = is_real(s.dtype), sg = is_signed(s.dtype);
      Op group_op;
      switch (static_cast<BinaryOp>(s.ival)) {
        case BinaryOp::Add: group_op = fp ? Op::GroupNonUniformFAdd : Op::GroupNonUniformIAdd; break;
        case BinaryOp::Min: group_op = fp ? Op::GroupNonUniformFMin : sg ? Op::GroupNonUniformSMin : Op::GroupNonUniformUMin; break;
        case BinaryOp::Max: group_op = fp ? Op::GroupNonUniformFMax : sg ? Op::GroupNonUniformSMax : Op::GroupNonUniformUMax; break;
        case BinaryOp::BitAnd: group_op = Op::GroupNonUniformBitwiseAnd; break;
        case BinaryOp::BitOr: group_op = Op::GroupNonUniformBitwiseOr; break;
        case BinaryOp::BitXor: group_op = Op::GroupNonUniformBitwiseXor; break;
        default: throw std::logic_error("internal: not a subgroup reduction");
      }
      uint32_t group_operation = op == SimtOp::SubgroupReduce ? 0u : 2u;  // Reduce / ExclusiveScan
      return b_.emit(group_op, type(s.dtype), scope, group_operation, arg(0));
    }
    default: throw std::logic_error("internal: unknown simt op");
  }
}

// The view an integer atomic goes through: the element type of an integer buffer; the integer of
// the same width for a float buffer's bits, and in the temps buffer, whose 32 / 64-bit slots are
// reached as unsigned words (one view per width, so Metal sees no aliases).
const StorageBuffer &SpirvCodegen::int_cell(const Address &a, DataType t) {
  const BufferDesc &d = k_.buffers[a.buffer];
  if (is_real(d.dtype) || d.kind == BufferKind::Temps) return int_view(a.buffer, t);
  return plain_view(a.buffer, t);
}

}  // namespace qd
