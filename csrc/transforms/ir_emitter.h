#pragma once
// Writes IR statements at a point of a block (before an anchor, or at a block's end), for passes
// that expand one statement into several. Every statement it makes takes the given source line.
#include <memory>
#include <vector>

#include "ir/ir.h"

namespace qd {

class IrEmitter {
 public:
  // Inserts before `anchor`, in its block.
  explicit IrEmitter(Stmt *anchor) : block_(anchor->parent), loc_(anchor->loc) {
    while (block_->stmts[pos_].get() != anchor) pos_++;
  }
  // Appends to `block`.
  IrEmitter(Block &block, SourceLoc loc) : block_(&block), pos_(block.stmts.size()), loc_(std::move(loc)) {}

  // Marks every statement made from now on (here and in nested emitters) exact: rounded as
  // written, never contracted or reassociated, even under fast_math (Stmt::exact).
  void mark_exact() { exact_ = true; }

  Stmt *add(StmtKind kind, DataType t, std::vector<Stmt *> operands, int op = 0) {
    auto s = std::make_unique<Stmt>(kind, t);
    s->operands = std::move(operands);
    s->op = op;
    s->exact = exact_;
    s->loc = loc_;
    return insert(std::move(s));
  }
  // A copy of s (clone_leaf: payload and source line), its operands renamed by m.
  Stmt *copy(const Stmt &s, const CloneMap &m) {
    auto c = clone_leaf(s);
    for (Stmt *&o : c->operands) o = mapped(m, o);
    return insert(std::move(c));
  }
  // A statement made elsewhere (a clone: clone_leaf), keeping its own source line.
  Stmt *insert(std::unique_ptr<Stmt> s) {
    s->parent = block_;
    Stmt *raw = s.get();
    block_->stmts.insert(block_->stmts.begin() + static_cast<std::ptrdiff_t>(pos_++), std::move(s));
    return raw;
  }

  // Values.
  Stmt *c(DataType t, double v) {
    Stmt *s = add(StmtKind::Const, t, {});
    if (is_real(t)) s->fval = v;
    else s->ival = static_cast<int64_t>(v);
    return s;
  }
  Stmt *ci(DataType t, int64_t v) {
    Stmt *s = add(StmtKind::Const, t, {});
    s->ival = v;
    return s;
  }
  Stmt *un(UnaryOp op, Stmt *x) { return add(StmtKind::Unary, x->dtype, {x}, static_cast<int>(op)); }
  Stmt *cast(Stmt *x, DataType to) { return convert(UnaryOp::Cast, x, to); }
  Stmt *bitcast(Stmt *x, DataType to) { return convert(UnaryOp::Bitcast, x, to); }
  Stmt *bin(BinaryOp op, Stmt *a, Stmt *b) {
    DataType t = is_comparison(op) || op == BinaryOp::LogicalAnd || op == BinaryOp::LogicalOr ? DataType::i32 : a->dtype;
    return add(StmtKind::Binary, t, {a, b}, static_cast<int>(op));
  }
  Stmt *sel(Stmt *cond, Stmt *a, Stmt *b) { return add(StmtKind::Select, a->dtype, {cond, a, b}); }
  Stmt *both(Stmt *p, Stmt *q) { return bin(BinaryOp::LogicalAnd, p, q); }
  Stmt *either(Stmt *p, Stmt *q) { return bin(BinaryOp::LogicalOr, p, q); }
  Stmt *not_(Stmt *p) { return add(StmtKind::Unary, DataType::i32, {p}, static_cast<int>(UnaryOp::Not)); }
  Stmt *simt(SimtOp op, DataType t, std::vector<Stmt *> operands) {
    return add(StmtKind::Simt, t, std::move(operands), static_cast<int>(op));
  }

  // Variables.
  Stmt *var(DataType t, Stmt *init) {
    Stmt *v = add(StmtKind::Alloca, t, {});
    store(v, init);
    return v;
  }
  Stmt *load(Stmt *var) { return add(StmtKind::LocalLoad, var->dtype, {var}); }
  void store(Stmt *var, Stmt *v) { add(StmtKind::LocalStore, DataType::none, {var, v}); }

  // Control flow: the returned emitter writes into the new statement's block.
  IrEmitter if_(Stmt *cond) { return nested(body_of(add(StmtKind::If, DataType::none, {cond}))); }
  IrEmitter while_(const char *label = nullptr) {
    Stmt *loop = add(StmtKind::While, DataType::none, {});
    loop->label = label;
    return nested(body_of(loop));
  }
  void break_() { add(StmtKind::Break, DataType::none, {}); }
  // A serial range-for over [begin, end); `index` is set to its loop index, the first statement
  // of the body the returned emitter writes.
  IrEmitter for_(Stmt *begin, Stmt *end, Stmt *&index) {
    Stmt *loop = add(StmtKind::RangeFor, DataType::none, {begin, end});
    loop->serialize = true;
    IrEmitter b = nested(body_of(loop));
    index = b.add(StmtKind::LoopIndex, begin->dtype, {loop});
    return b;
  }

  const SourceLoc &loc() const { return loc_; }

 private:
  Stmt *convert(UnaryOp op, Stmt *x, DataType to) {
    if (x->dtype == to) return x;
    Stmt *s = add(StmtKind::Unary, to, {x}, static_cast<int>(op));
    s->cast_from = x->dtype;
    return s;
  }
  IrEmitter nested(Block &body) const {
    IrEmitter e(body, loc_);
    e.exact_ = exact_;
    return e;
  }
  static Block &body_of(Stmt *s) {
    s->body = std::make_unique<Block>();
    s->body->owner = s;
    return *s->body;
  }

  Block *block_;
  size_t pos_ = 0;
  SourceLoc loc_;
  bool exact_ = false;
};

}  // namespace qd
