#pragma once
// The operations of Unary / Binary statements. The front end builds the language's operations
// (Python's //, %, **, shifts with any amount); legalization (transforms/legalize.cpp) rewrites
// them into primitives whose meaning every codegen maps one-to-one to an instruction.
namespace qd {

enum class UnaryOp {
  Neg, Not, BitNot, Cast, Bitcast, Abs, Sqrt, Sin, Cos, Tan, Exp, Log, Floor, Ceil, Round, Tanh,
  Asin, Acos, Atan, Trunc,
  // Bit counting on an integer's own width (the result has the operand's type): set bits, leading
  // zeros and trailing zeros, the width for 0 (LLVM's ctpop / ctlz / cttz with zero defined).
  PopCount, Clz, Ctz,
};
enum class BinaryOp {
  Add, Sub, Mul, Div, FloorDiv, Mod, Pow, Min, Max, BitAnd, BitOr, BitXor, Shl, Shr, Atan2,
  Eq, Ne, Lt, Le, Gt, Ge, LogicalAnd, LogicalOr,
  Rem,  // primitive: C's truncated remainder (fmod for floats); made only by legalization
};
// After legalization: integer Div / Rem never see a zero divisor or MIN / -1, shift amounts are
// in [0, bits) and have the shifted value's type, FloorDiv / Mod / integer Pow are gone.

// Block and grid operations (Simt statements). ThreadIdx / GlobalThreadIdx / GridThreads (the
// threads of the whole grid; made only by legalization) are i32 values; the others have no value.
// BlockSync is a barrier of the block with a block-scope memory fence.
enum class SimtOp { BlockSync, BlockMemFence, GridMemFence, ThreadIdx, GlobalThreadIdx, GridThreads };
const char *simt_op_name(SimtOp op);

const char *unary_op_name(UnaryOp op);
const char *binary_op_name(BinaryOp op);
inline bool is_comparison(BinaryOp op) { return op >= BinaryOp::Eq && op <= BinaryOp::Ge; }

}  // namespace qd
