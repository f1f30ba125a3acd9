#include "analysis/type_rules.h"

namespace qd {

namespace {
bool is_bitwise(BinaryOp op) {
  return op == BinaryOp::BitAnd || op == BinaryOp::BitOr || op == BinaryOp::BitXor || op == BinaryOp::Shl ||
         op == BinaryOp::Shr;
}
bool is_float_math(UnaryOp op) {
  return op == UnaryOp::Sqrt || (op >= UnaryOp::Sin && op <= UnaryOp::Log) || op == UnaryOp::Tanh ||
         op == UnaryOp::Asin || op == UnaryOp::Acos || op == UnaryOp::Atan;
}
}  // namespace

BinaryTyping binary_typing(BinaryOp op, DataType a, DataType b, const TypeConfig &cfg, const SourceLoc &loc) {
  if (a == DataType::none || b == DataType::none)
    type_error(std::string("operator '") + binary_op_name(op) + "' needs two values", loc);
  if (is_bitwise(op) && (is_real(a) || is_real(b)))
    type_error(std::string("operator '") + binary_op_name(op) + "' takes integer operands, got " +
                   dtype_name(a) + " and " + dtype_name(b),
               loc);
  if (op == BinaryOp::Shl || op == BinaryOp::Shr) return {a, a};  // the shift amount follows the value
  if (op == BinaryOp::LogicalAnd || op == BinaryOp::LogicalOr) return {DataType::i32, DataType::i32};
  DataType t = promoted_type(a, b);
  if (t == DataType::u1) t = DataType::i32;
  if (op == BinaryOp::Div && !is_real(t)) t = cfg.default_fp;  // `/` is true division
  if (op == BinaryOp::Atan2 && !is_real(t)) t = cfg.default_fp;
  if (op == BinaryOp::Pow && is_real(t) != (is_real(a) || is_real(b))) t = cfg.default_fp;
  if (is_comparison(op)) return {t, DataType::i32};
  return {t, t};
}

DataType unary_result(UnaryOp op, DataType x, const TypeConfig &cfg, const SourceLoc &loc) {
  if (x == DataType::none) type_error(std::string("'") + unary_op_name(op) + "' needs a value", loc);
  if (op == UnaryOp::BitNot && is_real(x))
    type_error(std::string("'~' takes integral inputs only, got ") + dtype_name(x), loc);
  if (op == UnaryOp::Not) return DataType::i32;
  if ((op == UnaryOp::PopCount || op == UnaryOp::Clz || op == UnaryOp::Ctz) && is_real(x))
    type_error(std::string("'") + unary_op_name(op) + "' takes integral inputs only, got " + dtype_name(x), loc);
  if (is_float_math(op) && !is_real(x)) return cfg.default_fp;
  if ((op == UnaryOp::Floor || op == UnaryOp::Ceil || op == UnaryOp::Round) && !is_real(x)) return cfg.default_fp;
  return x == DataType::u1 ? DataType::i32 : x;
}

void check_atomic_operands(AtomicOp op, DataType target, const SourceLoc &loc) {
  const auto &info = atomic_op_info(op);
  if (info.dtypes == DtypeClass::UnsignedOnly && (!is_unsigned(target) || target == DataType::u1))
    type_error(std::string("qd.atomic_") + info.name + " takes unsigned targets (u8/u16/u32/u64), got " +
                   dtype_name(target), loc);
  if (info.dtypes == DtypeClass::IntOnly && is_real(target))
    type_error(std::string("qd.atomic_") + info.name + " takes integer targets (i8/u8/i16/u16/i32/u32/i64/u64), got " +
                   dtype_name(target) + ": float " + (op == AtomicOp::Cas ? "CAS" : "bitwise atomics") +
                   " are rejected at compile time",
               loc);
}

}  // namespace qd
