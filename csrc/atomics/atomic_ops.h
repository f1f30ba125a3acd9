#pragma once
// The atomic read-modify-write family, declared once. Everything else (the IR printer, the
// bindings, the Python wrappers' docstrings, docs/atomics.md) reads these rows.
#include <optional>
#include <string>
#include <vector>

#include "ir/ops.h"
#include "ir/types.h"

namespace qd {

enum class AtomicOp : unsigned char { Add, Sub, Mul, Min, Max, And, Or, Xor, Exchange, Cas, Inc, Dec };

// Which dtypes an op accepts at all (before any backend restriction).
enum class DtypeClass { IntOrFloat, IntOnly, UnsignedOnly };  // UnsignedOnly: u8 / u16 / u32 / u64

struct AtomicOpInfo {
  AtomicOp op;
  const char *name;        // "add": the Python function is qd.atomic_<name>
  int num_operands;        // besides the target: 1, or 2 for cas (expected, desired)
  DtypeClass dtypes;
  const char *effect;      // one line for docs and docstrings
  // The value written, as an operation on (old, operand): Add for sub too (its operand is negated
  // for floats, and integer sub is add of the two's complement). Exchange and cas have none.
  std::optional<BinaryOp> combine;
  // Updates may be grouped per thread and applied once (privatized reductions): the final value
  // does not depend on the order. False for exchange and cas.
  bool reducible;
  const char *params = "y";  // the operands' parameter names in Python
};

// The value that leaves memory unchanged under `op` (where a per-thread partial result starts):
// -0.0 for float add/sub (x + -0.0 is x, -0.0 included), 1 for mul, NaN for float min/max (NaN
// loses under minNum/maxNum, so an all-NaN input stays NaN), the extreme for integer min/max,
// all ones for and, 0 for or/xor. Integers in `i`, floats in `f`.
struct AtomicIdentity {
  int64_t i = 0;
  double f = 0;
};
AtomicIdentity atomic_identity(AtomicOp op, DataType t);

const std::vector<AtomicOpInfo> &atomic_ops();
const AtomicOpInfo &atomic_op_info(AtomicOp op);
std::optional<AtomicOp> atomic_op_from_name(const std::string &name);

}  // namespace qd
