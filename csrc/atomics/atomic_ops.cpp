#include "atomics/atomic_ops.h"

#include <cmath>
#include <limits>
#include <stdexcept>

namespace qd {

const std::vector<AtomicOpInfo> &atomic_ops() {
  static const std::vector<AtomicOpInfo> rows = {
      {AtomicOp::Add, "add", 1, DtypeClass::IntOrFloat, "x = x + y", BinaryOp::Add, true},
      {AtomicOp::Sub, "sub", 1, DtypeClass::IntOrFloat, "x = x - y (exactly atomic_add(x, -y))", BinaryOp::Add, true},
      {AtomicOp::Mul, "mul", 1, DtypeClass::IntOrFloat, "x = x * y", BinaryOp::Mul, true},
      {AtomicOp::Min, "min", 1, DtypeClass::IntOrFloat, "x = min(x, y); floats are minNum (a NaN operand loses)", BinaryOp::Min, true},
      {AtomicOp::Max, "max", 1, DtypeClass::IntOrFloat, "x = max(x, y); floats are maxNum (a NaN operand loses)", BinaryOp::Max, true},
      {AtomicOp::And, "and", 1, DtypeClass::IntOnly, "x = x & y", BinaryOp::BitAnd, true},
      {AtomicOp::Or, "or", 1, DtypeClass::IntOnly, "x = x | y", BinaryOp::BitOr, true},
      {AtomicOp::Xor, "xor", 1, DtypeClass::IntOnly, "x = x ^ y", BinaryOp::BitXor, true},
      {AtomicOp::Exchange, "exchange", 1, DtypeClass::IntOrFloat, "x = y", std::nullopt, false},
      {AtomicOp::Cas, "cas", 2, DtypeClass::IntOnly, "if x == expected: x = desired", std::nullopt, false,
       "expected, desired"},
      // PTX atom.inc / atom.dec (ptx-atom.md): a counter that wraps at `bound`.
      {AtomicOp::Inc, "inc", 1, DtypeClass::UnsignedOnly, "x = 0 if x >= bound else x + 1", std::nullopt, false, "bound"},
      {AtomicOp::Dec, "dec", 1, DtypeClass::UnsignedOnly, "x = bound if x == 0 or x > bound else x - 1", std::nullopt,
       false, "bound"},
  };
  return rows;
}

const AtomicOpInfo &atomic_op_info(AtomicOp op) { return atomic_ops()[static_cast<int>(op)]; }

AtomicIdentity atomic_identity(AtomicOp op, DataType t) {
  bool fp = is_real(t);
  int bits = bit_width(t);
  // Integer extremes as 64-bit patterns; codegens truncate them to the dtype's width.
  int64_t smax = bits == 64 ? std::numeric_limits<int64_t>::max() : (int64_t(1) << (bits - 1)) - 1;
  int64_t umax = bits == 64 ? -1 : (int64_t(1) << bits) - 1;
  switch (op) {
    case AtomicOp::Add: case AtomicOp::Sub: return {0, -0.0};
    case AtomicOp::Mul: return {1, 1.0};
    case AtomicOp::Min: return fp ? AtomicIdentity{0, std::nan("")} : AtomicIdentity{is_signed(t) ? smax : umax, 0};
    case AtomicOp::Max: return fp ? AtomicIdentity{0, std::nan("")} : AtomicIdentity{is_signed(t) ? -smax - 1 : 0, 0};
    case AtomicOp::And: return {-1, 0};
    case AtomicOp::Or: case AtomicOp::Xor: return {0, 0};
    default: throw std::logic_error("internal: atomic op without an identity");
  }
}

std::optional<AtomicOp> atomic_op_from_name(const std::string &name) {
  for (auto &row : atomic_ops())
    if (name == row.name) return row.op;
  return std::nullopt;
}

}  // namespace qd
