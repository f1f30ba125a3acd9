#pragma once
// Type rules of the language, applied by the builder as each statement is created, so that a type
// error names the kernel source line that caused it.
#include "ir/ir.h"

namespace qd {

struct TypeConfig {
  DataType default_ip = DataType::i32;
  DataType default_fp = DataType::f32;
};

// The dtype both operands are cast to before `op`, and the result dtype.
struct BinaryTyping {
  DataType operand;
  DataType result;
};
BinaryTyping binary_typing(BinaryOp op, DataType a, DataType b, const TypeConfig &cfg, const SourceLoc &loc);
DataType unary_result(UnaryOp op, DataType x, const TypeConfig &cfg, const SourceLoc &loc);

// The operand check shared by every atomic: the op's dtype class (bitwise and cas take integers).
void check_atomic_operands(AtomicOp op, DataType target, const SourceLoc &loc);

}  // namespace qd
