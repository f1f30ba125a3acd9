// The instruction half of the builder: generic emission, arithmetic and conversions, memory
// access, atomics and barriers.
#include <cmath>

#include "codegen/spirv/spirv_builder.h"

namespace qd::spirv {

namespace {

bool is_terminator(Op op) {
  switch (op) {
    case Op::Branch: case Op::BranchConditional: case Op::Switch: case Op::Return:
    case Op::ReturnValue: case Op::Unreachable:
      return true;
    default:
      return false;
  }
}

}  // namespace

// ---- instructions ----

Id Builder::emit(Op op, Id result_type, const std::vector<uint32_t> &operands) {
  require_block("instruction");
  Id id = new_id();
  std::vector<uint32_t> ops;
  ops.reserve(operands.size() + 2);
  if (result_type) ops.push_back(result_type);
  ops.push_back(id);
  ops.insert(ops.end(), operands.begin(), operands.end());
  inst(fn_body_, op, ops);
  if (result_type) value_types_[id] = result_type;
  if ((ieee_ || exact_) && (op == Op::FAdd || op == Op::FSub || op == Op::FMul || op == Op::FDiv || op == Op::FRem ||
                op == Op::FMod || op == Op::FNegate))
    decorate(id, Decoration::NoContraction);
  return id;
}

void Builder::emit_void(Op op, const std::vector<uint32_t> &operands) {
  require_block("instruction");
  inst(fn_body_, op, operands);
  if (is_terminator(op)) block_open_ = false;
}

Op Builder::pick(Id type, Op for_signed, Op for_unsigned, Op for_float) const {
  const TypeInfo &t = scalar_info(type);
  Op op = t.kind == TypeInfo::Float ? for_float
          : t.kind == TypeInfo::Int ? (t.is_signed ? for_signed : for_unsigned)
                                    : Op::Nop;
  if (op == Op::Nop) misuse("operation not defined for type %" + std::to_string(type));
  return op;
}

Id Builder::add(Id type, Id a, Id b) { return emit(pick(type, Op::IAdd, Op::IAdd, Op::FAdd), type, a, b); }
Id Builder::sub(Id type, Id a, Id b) { return emit(pick(type, Op::ISub, Op::ISub, Op::FSub), type, a, b); }
Id Builder::mul(Id type, Id a, Id b) { return emit(pick(type, Op::IMul, Op::IMul, Op::FMul), type, a, b); }
Id Builder::div(Id type, Id a, Id b) { return emit(pick(type, Op::SDiv, Op::UDiv, Op::FDiv), type, a, b); }
Id Builder::rem(Id type, Id a, Id b) { return emit(pick(type, Op::SRem, Op::UMod, Op::FRem), type, a, b); }
Id Builder::neg(Id type, Id a) { return emit(pick(type, Op::SNegate, Op::SNegate, Op::FNegate), type, a); }
Id Builder::shr(Id type, Id a, Id b) {
  return emit(pick(type, Op::ShiftRightArithmetic, Op::ShiftRightLogical, Op::Nop), type, a, b);
}

Id Builder::glsl(GLSLstd450 inst_id, Id type, const std::vector<Id> &args) {
  std::vector<uint32_t> ops{glsl_std_450(), uint32_t(inst_id)};
  ops.insert(ops.end(), args.begin(), args.end());
  return emit(Op::ExtInst, type, ops);
}

Id Builder::like(Id shape, Id scalar) {
  const TypeInfo &t = type_info(shape);
  return t.kind == TypeInfo::Vector ? t_vector(scalar, t.count) : scalar;
}

// Float != is unordered so that NaN != x holds, as in C; the other comparisons are ordered.
#define QD_SPIRV_COMPARE(NAME, S, U, F, LOGICAL)                                  \
  Id Builder::NAME(Id operand_type, Id a, Id b) {                                 \
    Id result = like(operand_type, t_bool());                                     \
    if (scalar_info(operand_type).kind == TypeInfo::Bool && LOGICAL != Op::Nop)   \
      return emit(LOGICAL, result, a, b);                                         \
    return emit(pick(operand_type, S, U, F), result, a, b);                       \
  }
QD_SPIRV_COMPARE(eq, Op::IEqual, Op::IEqual, Op::FOrdEqual, Op::LogicalEqual)
QD_SPIRV_COMPARE(ne, Op::INotEqual, Op::INotEqual, Op::FUnordNotEqual, Op::LogicalNotEqual)
QD_SPIRV_COMPARE(lt, Op::SLessThan, Op::ULessThan, Op::FOrdLessThan, Op::Nop)
QD_SPIRV_COMPARE(le, Op::SLessThanEqual, Op::ULessThanEqual, Op::FOrdLessThanEqual, Op::Nop)
QD_SPIRV_COMPARE(gt, Op::SGreaterThan, Op::UGreaterThan, Op::FOrdGreaterThan, Op::Nop)
QD_SPIRV_COMPARE(ge, Op::SGreaterThanEqual, Op::UGreaterThanEqual, Op::FOrdGreaterThanEqual, Op::Nop)
#undef QD_SPIRV_COMPARE

// A constant of `type` (scalar or vector) with every component equal to v.
Id Builder::splat(Id type, double v) {
  const TypeInfo &t = type_info(type);
  if (t.kind == TypeInfo::Vector) return c_composite(type, std::vector<Id>(t.count, splat(t.elem, v)));
  if (t.kind == TypeInfo::Float) return c_float(type, v);
  if (t.kind == TypeInfo::Bool) return c_bool(v != 0);
  return c_int(type, int64_t(v));
}

namespace {

// v (an integer-valued double: a power of two, or one past it) rounded to a float of `width` bits:
// 11, 24 or 53 significant bits; beyond f16's largest finite value, infinity.
double in_float(double v, int width) {
  if (width == 64) return v;
  if (width == 32) return double(float(v));
  if (std::fabs(v) > 65504.0) return std::copysign(INFINITY, v);
  int e = 0;
  double m = std::frexp(v, &e);
  return std::ldexp(std::nearbyint(std::ldexp(m, 11)), e - 11);
}

}  // namespace

// `value` (floats of from_type) where its conversion to the integer type `to` is defined, else 0.
// OpConvertFToS / FToU of NaN or of a value whose integer part does not fit is undefined, which a
// driver may take for poison: lavapipe ran the body of a zero-trip loop that a branch on such a
// value guarded. The language leaves the value unspecified but single (docs/language.md).
Id Builder::in_int_range(Id from_type, Id value, const TypeInfo &to) {
  int w = scalar_info(from_type).width, n = to.width;
  double lo = to.is_signed ? -std::ldexp(1.0, n - 1) : 0.0, hi = std::ldexp(1.0, to.is_signed ? n - 1 : n);
  // lowest: x > lo - 1 where that is a float of its own, else x >= lo, or x > -inf past the range
  double below = in_float(lo - 1, w), least = in_float(lo, w);
  Id low = below != least ? gt(from_type, value, splat(from_type, below))
           : std::isinf(least) ? gt(from_type, value, splat(from_type, -INFINITY))
                               : ge(from_type, value, splat(from_type, least));
  Id high = lt(from_type, value, splat(from_type, in_float(hi, w)));  // ordered: false for NaN
  Id ok = emit(Op::LogicalAnd, like(from_type, t_bool()), low, high);
  return select(from_type, ok, value, splat(from_type, 0));
}

Id Builder::convert(Id to_type, Id from_type, Id value) {
  if (to_type == from_type) return value;
  const TypeInfo to = scalar_info(to_type), from = scalar_info(from_type);
  if (from.kind == TypeInfo::Bool) return select(to_type, value, splat(to_type, 1), splat(to_type, 0));
  if (to.kind == TypeInfo::Bool) return ne(from_type, value, splat(from_type, 0));
  if (from.kind == TypeInfo::Float) {
    if (to.kind == TypeInfo::Float) return emit(Op::FConvert, to_type, value);
    return emit(to.is_signed ? Op::ConvertFToS : Op::ConvertFToU, to_type, in_int_range(from_type, value, to));
  }
  if (to.kind == TypeInfo::Float)
    return emit(from.is_signed ? Op::ConvertSToF : Op::ConvertUToF, to_type, value);
  if (to.width == from.width) return bitcast(to_type, value);
  if (from.is_signed && to.width == 64) {
    // lavapipe miscompiles comparisons of an OpSConvert'ed value against a constant (x > 5 is always
    // true): sign-extend by hand, (zext(x) ^ 2^(w-1)) - 2^(w-1).
    Id u_from = like(from_type, t_int(from.width, false)), u_to = like(to_type, t_int(64, false));
    Id wide = emit(Op::UConvert, u_to, bitcast(u_from, value));
    Id bias = splat(u_to, uint64_t(1) << (from.width - 1));
    Id r = emit(Op::ISub, u_to, bit_xor(u_to, wide, bias), bias);
    return u_to == to_type ? r : bitcast(to_type, r);
  }
  if (from.is_signed) return emit(Op::SConvert, to_type, value);
  // UConvert's result must be unsigned in shaders; reinterpret afterwards if needed.
  Id unsigned_type = like(to_type, t_int(to.width, false));
  Id v = emit(Op::UConvert, unsigned_type, value);
  return unsigned_type == to_type ? v : bitcast(to_type, v);
}

// ---- memory ----

// Under the Vulkan memory model a plain access is private (not ordered by other invocations'
// atomics and barriers) unless NonPrivatePointer: accesses to workgroup memory always are
// non-private (block barriers publish them), and to storage buffers when the buffers would be
// Coherent under GLSL450 (set_coherent_buffers: the kernel synchronizes through memory).
uint32_t Builder::non_private(Id ptr, uint32_t access) const {
  if (model_ != MemoryModelKind::Vulkan) return access;
  Id ptr_type = type_of(ptr);
  if (!ptr_type || type_info(ptr_type).kind != TypeInfo::Pointer) return access;
  StorageClass sc = type_info(ptr_type).storage;
  if (sc == StorageClass::Workgroup || (sc == StorageClass::StorageBuffer && coherent_))
    access |= memory_access::NonPrivatePointer;
  return access;
}

Id Builder::load(Id type, Id ptr, uint32_t access) {
  if (access & memory_access::Aligned) misuse("load: use emit() for Aligned access");
  access = non_private(ptr, access);
  std::vector<uint32_t> ops{ptr};
  if (access) ops.push_back(access);
  if (access & memory_access::MakePointerVisible) {
    use_scope(Scope::Device);
    ops.push_back(c_scope(Scope::Device));
  }
  return emit(Op::Load, type, ops);
}

Id Builder::load_volatile(Id type, Id ptr) {
  uint32_t access = memory_access::Volatile;
  if (model_ == MemoryModelKind::Vulkan)
    access |= memory_access::MakePointerVisible | memory_access::NonPrivatePointer;
  return load(type, ptr, access);
}

void Builder::store(Id ptr, Id value, uint32_t access) {
  if (access & memory_access::Aligned) misuse("store: use emit_void() for Aligned access");
  access = non_private(ptr, access);
  std::vector<uint32_t> ops{ptr, value};
  if (access) ops.push_back(access);
  if (access & memory_access::MakePointerAvailable) {
    use_scope(Scope::Device);
    ops.push_back(c_scope(Scope::Device));
  }
  emit_void(Op::Store, ops);
}

Id Builder::access_chain(Id ptr_type, Id base, const std::vector<Id> &indices) {
  std::vector<uint32_t> ops{base};
  ops.insert(ops.end(), indices.begin(), indices.end());
  return emit(Op::AccessChain, ptr_type, ops);
}

Id Builder::element_ptr(const StorageBuffer &buf, Id index) {
  if (buf.workgroup) return access_chain(buf.elem_ptr_type, buf.var, {index});
  return access_chain(buf.elem_ptr_type, buf.var, {c_u32(0), index});
}

// ---- atomics and barriers ----

void Builder::use_scope(Scope s) {
  if (model_ == MemoryModelKind::Vulkan && s == Scope::Device)
    capability(Capability::VulkanMemoryModelDeviceScope);
}

Id Builder::sem_operand(uint32_t bits, uint32_t seq_cst_as, bool always) {
  if (model_ == MemoryModelKind::Vulkan) return c_u32(semantics::vulkan_model(bits, seq_cst_as));
  if (always && (bits & semantics::SequentiallyConsistent))
    bits = (bits & ~semantics::SequentiallyConsistent) | seq_cst_as;
  return c_u32(bits);
}

void Builder::atomic_capabilities(Op op, Id type) {
  const TypeInfo &t = type_info(type);
  if (t.kind == TypeInfo::Int && t.width == 64) capability(Capability::Int64Atomics);
  if (t.kind != TypeInfo::Float) return;
  if (op == Op::AtomicFAddEXT) {
    if (t.width == 16) {
      capability(Capability::AtomicFloat16AddEXT);
      extension("SPV_EXT_shader_atomic_float16_add");
    } else {
      capability(t.width == 32 ? Capability::AtomicFloat32AddEXT : Capability::AtomicFloat64AddEXT);
      extension("SPV_EXT_shader_atomic_float_add");
    }
  } else if (op == Op::AtomicFMinEXT || op == Op::AtomicFMaxEXT) {
    capability(t.width == 16   ? Capability::AtomicFloat16MinMaxEXT
               : t.width == 32 ? Capability::AtomicFloat32MinMaxEXT
                               : Capability::AtomicFloat64MinMaxEXT);
    extension("SPV_EXT_shader_atomic_float_min_max");
  }
}

Id Builder::atomic(Op op, Id type, Id ptr, Id value, Scope scope, uint32_t sem) {
  atomic_capabilities(op, type);
  use_scope(scope);
  return emit(op, type, ptr, c_scope(scope), sem_operand(sem, semantics::AcquireRelease), value);
}

Id Builder::atomic_cas(Id type, Id ptr, Id desired, Id expected, Scope scope, uint32_t sem_equal,
                       uint32_t sem_unequal) {
  atomic_capabilities(Op::AtomicCompareExchange, type);
  use_scope(scope);
  return emit(Op::AtomicCompareExchange, type, ptr, c_scope(scope),
              sem_operand(sem_equal, semantics::AcquireRelease),
              sem_operand(sem_unequal, semantics::Acquire),
              desired, expected);
}

Id Builder::atomic_load(Id type, Id ptr, Scope scope, uint32_t sem) {
  atomic_capabilities(Op::AtomicLoad, type);
  use_scope(scope);
  return emit(Op::AtomicLoad, type, ptr, c_scope(scope), sem_operand(sem, semantics::Acquire, true));
}

void Builder::atomic_store(Id ptr, Id value, Scope scope, uint32_t sem) {
  Id ptr_type = type_of(ptr);
  if (!ptr_type) misuse("atomic_store: pointer of unknown type");
  atomic_capabilities(Op::AtomicStore, type_info(ptr_type).elem);
  use_scope(scope);
  emit_void(Op::AtomicStore, {ptr, c_scope(scope), sem_operand(sem, semantics::Release, true), value});
}

void Builder::control_barrier(Scope exec, Scope mem, uint32_t sem) {
  use_scope(exec);
  use_scope(mem);
  emit_void(Op::ControlBarrier,
            {c_scope(exec), c_scope(mem), sem_operand(sem, semantics::AcquireRelease)});
}

void Builder::memory_barrier(Scope mem, uint32_t sem) {
  use_scope(mem);
  emit_void(Op::MemoryBarrier, {c_scope(mem), sem_operand(sem, semantics::AcquireRelease)});
}

}  // namespace qd::spirv
