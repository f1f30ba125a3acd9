#include "target/launch_bounds.h"

#include <algorithm>
#include <functional>
#include <unordered_map>

namespace qd {

namespace {

// Integer arithmetic at the statement's width, as the device computes it.
int64_t wrap(int64_t v, DataType t) {
  int bits = bit_width(t);
  if (bits >= 64 || bits == 0) return v;
  uint64_t mask = (uint64_t(1) << bits) - 1, u = uint64_t(v) & mask;
  if (is_signed(t) && (u >> (bits - 1))) u |= ~mask;
  return int64_t(u);
}

class Evaluator {
 public:
  explicit Evaluator(const std::vector<int64_t> &args) : args_(args) {}

  std::optional<int64_t> eval(const Stmt *s) {
    if (is_real(s->dtype)) return std::nullopt;
    auto it = memo_.find(s);
    if (it != memo_.end()) return it->second;
    std::optional<int64_t> v = compute(*s);
    if (v) v = wrap(*v, s->dtype);
    memo_[s] = v;
    return v;
  }

 private:
  std::optional<int64_t> compute(const Stmt &s) {
    switch (s.kind) {
      case StmtKind::Const: return s.ival;
      case StmtKind::Arg:
        if (s.ival < 0 || size_t(s.ival) >= args_.size()) return std::nullopt;
        return args_[s.ival];
      case StmtKind::Unary: return unary(s);
      case StmtKind::Binary: return binary(s);
      case StmtKind::Select: {
        auto c = eval(s.operands[0]), a = eval(s.operands[1]), b = eval(s.operands[2]);
        if (!c || !a || !b) return std::nullopt;
        return *c ? a : b;
      }
      default: return std::nullopt;  // loads and anything with effects
    }
  }

  std::optional<int64_t> unary(const Stmt &s) {
    auto x = eval(s.operands[0]);
    if (!x) return std::nullopt;
    switch (static_cast<UnaryOp>(s.op)) {
      case UnaryOp::Cast: return is_real(s.cast_from) ? std::nullopt : x;
      case UnaryOp::Neg: return -*x;
      case UnaryOp::BitNot: return ~*x;
      case UnaryOp::Not: return int64_t(*x == 0);
      case UnaryOp::Abs: return *x < 0 ? -*x : *x;
      default: return std::nullopt;
    }
  }

  std::optional<int64_t> binary(const Stmt &s) {
    auto a = eval(s.operands[0]), b = eval(s.operands[1]);
    if (!a || !b) return std::nullopt;
    int64_t x = *a, y = *b;
    bool uns = is_unsigned(s.operands[0]->dtype);
    switch (static_cast<BinaryOp>(s.op)) {
      case BinaryOp::Add: return x + y;
      case BinaryOp::Sub: return x - y;
      case BinaryOp::Mul: return x * y;
      case BinaryOp::Div:
      case BinaryOp::FloorDiv:
      case BinaryOp::Mod: return divide(static_cast<BinaryOp>(s.op), x, y, uns);
      case BinaryOp::Min: return uns ? int64_t(std::min(uint64_t(x), uint64_t(y))) : std::min(x, y);
      case BinaryOp::Max: return uns ? int64_t(std::max(uint64_t(x), uint64_t(y))) : std::max(x, y);
      case BinaryOp::BitAnd: return x & y;
      case BinaryOp::BitOr: return x | y;
      case BinaryOp::BitXor: return x ^ y;
      case BinaryOp::Eq: return int64_t(x == y);
      case BinaryOp::Ne: return int64_t(x != y);
      case BinaryOp::Lt: return int64_t(uns ? uint64_t(x) < uint64_t(y) : x < y);
      case BinaryOp::Le: return int64_t(uns ? uint64_t(x) <= uint64_t(y) : x <= y);
      case BinaryOp::Gt: return int64_t(uns ? uint64_t(x) > uint64_t(y) : x > y);
      case BinaryOp::Ge: return int64_t(uns ? uint64_t(x) >= uint64_t(y) : x >= y);
      default: return std::nullopt;  // shifts, pow, ...: rare in bounds, left to the device
    }
  }

  static std::optional<int64_t> divide(BinaryOp op, int64_t x, int64_t y, bool uns) {
    if (y == 0 || (!uns && y == -1)) return std::nullopt;
    if (uns) return int64_t(op == BinaryOp::Mod ? uint64_t(x) % uint64_t(y) : uint64_t(x) / uint64_t(y));
    int64_t q = x / y, r = x % y;
    if (op == BinaryOp::Div) return q;
    bool adjust = r != 0 && ((r < 0) != (y < 0));  // Python floors
    return op == BinaryOp::Mod ? r + (adjust ? y : 0) : q - (adjust ? 1 : 0);
  }

  const std::vector<int64_t> &args_;
  std::unordered_map<const Stmt *, std::optional<int64_t>> memo_;
};

}  // namespace

namespace {

// A break that leaves this loop (not an inner one): the loop may end before its bound.
bool breaks_out(const Block &b) {
  for (const auto &s : b.stmts) {
    if (s->kind == StmtKind::Break) return true;
    if (s->kind == StmtKind::If && ((s->body && breaks_out(*s->body)) || (s->else_body && breaks_out(*s->else_body))))
      return true;
  }
  return false;
}

}  // namespace

LoopLoad heaviest_serial_loop(const Task &task, const std::vector<int64_t> &args) {
  Evaluator e(args);
  LoopLoad worst;
  std::function<void(const Block &, int64_t)> walk = [&](const Block &b, int64_t outer) {
    for (const auto &s : b.stmts) {
      int64_t inner = outer;
      if (s->kind == StmtKind::RangeFor && s.get() != task.loop()) {
        auto begin = e.eval(s->operands[0]), end = e.eval(s->operands[1]);
        if (begin && end && !breaks_out(*s->body)) {
          inner = outer * std::max<int64_t>(0, *end - *begin);
          if (inner > worst.iterations) worst = {s.get(), inner};
        }
      }
      if (s->body) walk(*s->body, inner);
      if (s->else_body) walk(*s->else_body, inner);
    }
  };
  walk(task.body, 1);
  return worst;
}

bool has_effects(const Task &task) {
  bool effects = task.parallel;
  for_each_stmt(const_cast<Block &>(task.body), [&](Stmt &s) {
    effects |= !(s.is_pure() || (s.kind == StmtKind::GlobalLoad && !s.is_atomic));
  });
  return effects;
}

std::optional<int64_t> range_length(const Task &task, const std::vector<int64_t> &args) {
  const Stmt *loop = task.loop();
  if (!loop) return std::nullopt;
  Evaluator e(args);
  auto begin = e.eval(loop->operands[0]), end = e.eval(loop->operands[1]);
  if (!begin || !end) return std::nullopt;
  return std::max<int64_t>(0, *end - *begin);
}

}  // namespace qd
