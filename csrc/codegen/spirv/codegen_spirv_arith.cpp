// SPIR-V codegen, part 3: types, constants, conversions, unary and binary operations: the
// primitives legalization leaves (transforms/legalize.cpp), minNum / maxNum for float min / max.
#include <cmath>
#include <cstdint>

#include "codegen/spirv/codegen_spirv_impl.h"

namespace qd {

using spirv::GLSLstd450;
using spirv::Op;
using Id = spirv::Id;

Id SpirvCodegen::type(DataType t) {
  if (t == DataType::u1) return b_.t_bool();
  if (is_real(t)) return b_.t_float(bit_width(t));
  return b_.t_int(bit_width(t), is_signed(t));
}

Id SpirvCodegen::mem_type(DataType t) { return t == DataType::u1 ? b_.t_int(8, false) : type(t); }

Id SpirvCodegen::int_type(DataType t) { return b_.t_int(bit_width(t), false); }

Id SpirvCodegen::to_bool(Id v, DataType t) {
  if (t == DataType::u1) return v;
  return b_.convert(b_.t_bool(), type(t), v);  // != 0 (unordered for floats, as in LLVM)
}

Id SpirvCodegen::from_bool(Id v, DataType t) { return t == DataType::u1 ? v : b_.convert(type(t), b_.t_bool(), v); }

Id SpirvCodegen::constant(const Stmt &s) {
  if (s.dtype == DataType::u1) return b_.c_bool(s.ival != 0);
  if (is_real(s.dtype)) return b_.c_float(type(s.dtype), s.fval);
  return b_.c_int(type(s.dtype), s.ival);
}

Id SpirvCodegen::math(GLSLstd450 inst, DataType t, const std::vector<Id> &args) {
  return b_.glsl(inst, type(t), args);
}

Id SpirvCodegen::unary(const Stmt &s) {
  Id x = value(s.operands[0]);
  DataType t = s.dtype;
  Id ty = type(t);
  switch (static_cast<UnaryOp>(s.op)) {
    case UnaryOp::Neg: return b_.neg(ty, x);
    case UnaryOp::Not: return from_bool(b_.logical_not(to_bool(x, s.operands[0]->dtype)), t);
    case UnaryOp::BitNot: return b_.bit_not(ty, x);
    case UnaryOp::Cast: return b_.convert(ty, type(s.cast_from), x);
    case UnaryOp::Bitcast: return b_.bitcast(ty, x);
    case UnaryOp::Abs:
      if (is_real(t)) return b_.glsl(GLSLstd450::FAbs, ty, {x});
      return is_signed(t) ? b_.glsl(GLSLstd450::SAbs, ty, {x}) : x;
    case UnaryOp::Sqrt: return math(GLSLstd450::Sqrt, t, {x});
    case UnaryOp::Floor: return math(GLSLstd450::Floor, t, {x});
    case UnaryOp::Ceil: return math(GLSLstd450::Ceil, t, {x});
    case UnaryOp::Round: return math(GLSLstd450::RoundEven, t, {x});  // rint: ties to even
    case UnaryOp::Trunc: return math(GLSLstd450::Trunc, t, {x});
    case UnaryOp::Sin: return math(GLSLstd450::Sin, t, {x});
    case UnaryOp::Cos: return math(GLSLstd450::Cos, t, {x});
    case UnaryOp::Tan: return math(GLSLstd450::Tan, t, {x});
    case UnaryOp::Exp: return math(GLSLstd450::Exp, t, {x});
    case UnaryOp::Log: return math(GLSLstd450::Log, t, {x});
    case UnaryOp::Tanh: return math(GLSLstd450::Tanh, t, {x});
    case UnaryOp::Asin: return math(GLSLstd450::Asin, t, {x});
    case UnaryOp::Acos: return math(GLSLstd450::Acos, t, {x});
    case UnaryOp::Atan: return math(GLSLstd450::Atan, t, {x});
    // 32-bit only (legalization widens or splits the others): OpBitCount; 31 - FindUMsb (FindUMsb(0)
    // is -1, so 32); FindILsb with its -1 for 0 taken as unsigned and clamped to 32.
    case UnaryOp::PopCount: return b_.emit(Op::BitCount, ty, x);
    case UnaryOp::Clz: return b_.emit(Op::ISub, ty, b_.c_int(ty, 31), b_.glsl(GLSLstd450::FindUMsb, ty, {x}));
    case UnaryOp::Ctz: return b_.glsl(GLSLstd450::UMin, ty, {b_.glsl(GLSLstd450::FindILsb, ty, {x}), b_.c_int(ty, 32)});
  }
  return x;
}

Id SpirvCodegen::compare(const Stmt &s) {
  DataType ot = s.operands[0]->dtype;
  Id a = value(s.operands[0]), c = value(s.operands[1]), t = type(ot);
  Id r = 0;
  switch (static_cast<BinaryOp>(s.op)) {
    case BinaryOp::Eq: r = b_.eq(t, a, c); break;
    case BinaryOp::Ne: r = b_.ne(t, a, c); break;
    case BinaryOp::Lt: r = b_.lt(t, a, c); break;
    case BinaryOp::Le: r = b_.le(t, a, c); break;
    case BinaryOp::Gt: r = b_.gt(t, a, c); break;
    default: r = b_.ge(t, a, c); break;
  }
  return from_bool(r, s.dtype);
}

// GLSL's Pow is undefined for x < 0 and for x == 0, y <= 0, and drivers differ for |x| == 1 and
// an infinite or NaN y: give C's pow results there (16 / 32-bit: f64 is transforms/math_library.cpp).
Id SpirvCodegen::float_pow(DataType t, Id a, Id b) {
  Id ty = type(t), zero = b_.c_float(ty, 0), one = b_.c_float(ty, 1);
  Id inf = b_.c_float(ty, INFINITY), nan = b_.c_float(ty, std::nan(""));
  Id abs_a = b_.glsl(GLSLstd450::FAbs, ty, {a});
  Id mag = math(GLSLstd450::Pow, t, {abs_a, b});
  mag = b_.select(ty, b_.eq(ty, abs_a, one), one, mag);
  mag = b_.select(ty, b_.eq(ty, abs_a, zero), b_.select(ty, b_.lt(ty, b, zero), inf, zero), mag);
  Id integral = b_.eq(ty, math(GLSLstd450::Trunc, t, {b}), b);
  Id half = b_.mul(ty, b, b_.c_float(ty, 0.5));
  Id odd = b_.logical_and(integral, b_.ne(ty, math(GLSLstd450::Trunc, t, {half}), half));
  // The sign bit of a, -0.0 included (1 / -0.0 is -inf).
  Id sign = b_.logical_or(b_.lt(ty, a, zero), b_.lt(ty, b_.div(ty, one, a), zero));
  Id r = b_.select(ty, b_.logical_and(sign, odd), b_.neg(ty, mag), mag);
  Id finite_negative = b_.logical_and(b_.lt(ty, a, zero), b_.ne(ty, a, b_.neg(ty, inf)));
  r = b_.select(ty, b_.logical_and(finite_negative, b_.logical_not(integral)), nan, r);
  return b_.select(ty, b_.eq(ty, b, zero), one, r);
}

// Floats: NMin / NMax, i.e. minNum / maxNum (a NaN operand loses), like LLVM's minnum.
Id SpirvCodegen::minmax(bool is_min, DataType t, Id a, Id b) {
  GLSLstd450 inst = is_real(t)    ? (is_min ? GLSLstd450::NMin : GLSLstd450::NMax)
                    : is_signed(t) ? (is_min ? GLSLstd450::SMin : GLSLstd450::SMax)
                                   : (is_min ? GLSLstd450::UMin : GLSLstd450::UMax);
  return math(inst, t, {a, b});
}

Id SpirvCodegen::binary(const Stmt &s) {
  auto op = static_cast<BinaryOp>(s.op);
  if (is_comparison(op)) return compare(s);
  DataType ot = s.operands[0]->dtype;
  Id a = value(s.operands[0]), c = value(s.operands[1]), ty = type(ot);
  switch (op) {
    case BinaryOp::Add: return b_.add(ty, a, c);
    case BinaryOp::Sub: return b_.sub(ty, a, c);
    case BinaryOp::Mul: return b_.mul(ty, a, c);
    case BinaryOp::Div: return b_.div(ty, a, c);
    case BinaryOp::Rem: return b_.rem(ty, a, c);
    case BinaryOp::Pow: return float_pow(ot, a, c);
    case BinaryOp::Min: return minmax(true, ot, a, c);
    case BinaryOp::Max: return minmax(false, ot, a, c);
    case BinaryOp::BitAnd: return b_.bit_and(ty, a, c);
    case BinaryOp::BitOr: return b_.bit_or(ty, a, c);
    case BinaryOp::BitXor: return b_.bit_xor(ty, a, c);
    case BinaryOp::Shl: return b_.shl(ty, a, c);
    case BinaryOp::Shr: return b_.shr(ty, a, c);
    case BinaryOp::Atan2: return math(GLSLstd450::Atan2, ot, {a, c});
    case BinaryOp::LogicalAnd:
      return from_bool(b_.logical_and(to_bool(a, ot), to_bool(c, s.operands[1]->dtype)), s.dtype);
    case BinaryOp::LogicalOr:
      return from_bool(b_.logical_or(to_bool(a, ot), to_bool(c, s.operands[1]->dtype)), s.dtype);
    default: break;
  }
  throw CompileError(ErrorKind::Codegen, std::string("internal: ") + binary_op_name(op) + " reached the SPIR-V codegen unlegalized", s.loc);
}

}  // namespace qd
