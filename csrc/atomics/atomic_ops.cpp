#include "atomics/atomic_ops.h"

namespace qd {

const std::vector<AtomicOpInfo> &atomic_ops() {
  static const std::vector<AtomicOpInfo> rows = {
      {AtomicOp::Add, "add", 1, DtypeClass::IntOrFloat, "x = x + y"},
      {AtomicOp::Sub, "sub", 1, DtypeClass::IntOrFloat, "x = x - y (exactly atomic_add(x, -y))"},
      {AtomicOp::Mul, "mul", 1, DtypeClass::IntOrFloat, "x = x * y"},
      {AtomicOp::Min, "min", 1, DtypeClass::IntOrFloat, "x = min(x, y); floats are minNum (a NaN operand loses)"},
      {AtomicOp::Max, "max", 1, DtypeClass::IntOrFloat, "x = max(x, y); floats are maxNum (a NaN operand loses)"},
      {AtomicOp::And, "and", 1, DtypeClass::IntOnly, "x = x & y"},
      {AtomicOp::Or, "or", 1, DtypeClass::IntOnly, "x = x | y"},
      {AtomicOp::Xor, "xor", 1, DtypeClass::IntOnly, "x = x ^ y"},
      {AtomicOp::Exchange, "exchange", 1, DtypeClass::IntOrFloat, "x = y"},
      {AtomicOp::Cas, "cas", 2, DtypeClass::IntOnly, "if x == expected: x = desired"},
  };
  return rows;
}

const AtomicOpInfo &atomic_op_info(AtomicOp op) { return atomic_ops()[static_cast<int>(op)]; }

std::optional<AtomicOp> atomic_op_from_name(const std::string &name) {
  for (auto &row : atomic_ops())
    if (name == row.name) return row.op;
  return std::nullopt;
}

}  // namespace qd
