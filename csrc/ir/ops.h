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

// Block, grid and subgroup operations (Simt statements). ThreadIdx / GlobalThreadIdx / GridThreads
// (the threads of the whole grid; made only by legalization) are i32 values; BlockSync is a barrier of the block with a block-scope memory fence. Subgroup ops are
// one instruction (or a fixed short sequence) each on every GPU codegen; every lane of the
// subgroup runs them together:
//   SubgroupInvocationId: i32 lane; SubgroupSync / SubgroupMemFence: no value.
//   SubgroupShuffle{,Up,Down,Xor}(v, u32 lane / offset / mask): v's type (32 / 64-bit int, float).
//   SubgroupBroadcast(v, u32 constant lane), SubgroupBroadcastFirst(v): v's type.
//   SubgroupBallot(i32 p): u64, bit i set iff lane i is active and p != 0.
//   SubgroupAll / SubgroupAny(i32 p): i32 0 / 1 over the active lanes (p != 0).
// SubgroupBroadcastFirst is the lowest active lane's v (lane 0 when every lane is active); made by
// transforms/subgroup_atomics.cpp it may take a second operand, the u64 ballot of the lanes that
// take part (taken before a branch they leave: CUDA's shfl.sync then waits for all of them).
// Made only by transforms/subgroup_atomics.cpp (not callable from Python), over the ACTIVE lanes
// only (any subset of the subgroup, in divergent code too):
//   SubgroupElect: i32 1 on the lowest active lane, 0 on the others.
//   SubgroupReduce(v), ival a BinaryOp (Add Min Max BitAnd BitOr BitXor): op over the active
//     lanes' v, on every active lane; v i32 u32 i64 u64 f32 f64 (float Min / Max: a NaN operand
//     loses; all NaN: unspecified).
//   SubgroupExclusiveScan(v), same ops, integers: op over the active lanes below this one (in lane
//     order); the op's identity on the lowest.
enum class SimtOp {
  BlockSync, BlockMemFence, GridMemFence, ThreadIdx, GlobalThreadIdx, GridThreads,
  SubgroupInvocationId, SubgroupSync, SubgroupMemFence, SubgroupShuffle, SubgroupShuffleUp,
  SubgroupShuffleDown, SubgroupShuffleXor, SubgroupBroadcast, SubgroupBroadcastFirst, SubgroupBallot,
  SubgroupAll, SubgroupAny, SubgroupElect, SubgroupReduce, SubgroupExclusiveScan,
};
constexpr int kNumSimtOps = static_cast<int>(SimtOp::SubgroupExclusiveScan) + 1;
const char *simt_op_name(SimtOp op);

// Span statements (StmtKind::Span, the cpu only). Pointer operands are GlobalPtr statements (the
// span's first element); n is an i32 >= 0.
//   ExclusiveScan(dst, src, n, carry), ival a BinaryOp (Add Min Max), dtype an integer of 32 / 64
//     bits (src's and dst's elements have its width): dst[k] = carry op src[0] op ... op src[k-1]
//     for k < n; the value is carry op src[0] op ... op src[n-1]. In-register prefix sums.
//   Compress(out, flags, n, room, values), dtype i32: values[j] for each j < n with flags[j] != 0
//     (integer flags), in order, to out[0:count]; the value is count. Positions count..room-1 of
//     out may be overwritten, none from room on (room >= count). With an i32 `base` in place of
//     values (an integer statement, not a pointer): the indices base + j.
enum class SpanOp { ExclusiveScan, Compress };

const char *unary_op_name(UnaryOp op);
const char *binary_op_name(BinaryOp op);
inline bool is_comparison(BinaryOp op) { return op >= BinaryOp::Eq && op <= BinaryOp::Ge; }

}  // namespace qd
