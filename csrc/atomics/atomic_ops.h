#pragma once
// The atomic read-modify-write family, declared once. Everything else (the IR printer, the
// bindings, the Python wrappers' docstrings, docs/atomics.md) reads these rows.
#include <optional>
#include <string>
#include <vector>

namespace qd {

enum class AtomicOp : unsigned char { Add, Sub, Mul, Min, Max, And, Or, Xor, Exchange, Cas };

// Which dtypes an op accepts at all (before any backend restriction).
enum class DtypeClass { IntOrFloat, IntOnly };

struct AtomicOpInfo {
  AtomicOp op;
  const char *name;        // "add": the Python function is qd.atomic_<name>
  int num_operands;        // besides the target: 1, or 2 for cas (expected, desired)
  DtypeClass dtypes;
  const char *effect;      // one line for docs and docstrings
};

const std::vector<AtomicOpInfo> &atomic_ops();
const AtomicOpInfo &atomic_op_info(AtomicOp op);
std::optional<AtomicOp> atomic_op_from_name(const std::string &name);

}  // namespace qd
