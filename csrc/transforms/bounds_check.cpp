// Debug-mode bounds checks, built from ordinary IR statements so every backend gets them.
#include "transforms/passes.h"

namespace qd {

namespace {

class Checker {
 public:
  explicit Checker(KernelIR &k) : k_(k) {
    // Two hidden result slots after the kernel's own return values.
    k_.error_slot = static_cast<int>(k_.returns.size());
    k_.returns.push_back(DataType::i32);
    k_.returns.push_back(DataType::i64);
    k_.result_buffer = k_.add_buffer(BufferDesc{BufferKind::Result, DataType::u8});
  }

  void check(Stmt *ptr) {
    const BufferDesc &d = k_.buffers[ptr->ival];
    for (size_t axis = 0; axis < ptr->operands.size(); axis++) {
      Stmt *idx = ptr->operands[axis];
      // The builder narrows every index to i32; an i64, u64 or u32 index is checked as written
      // (2**32 + 3 must not pass as 3), in i64.
      Stmt *written = idx;
      if (idx->kind == StmtKind::Unary && idx->op == int(UnaryOp::Cast) &&
          (idx->cast_from == DataType::i64 || idx->cast_from == DataType::u64 || idx->cast_from == DataType::u32))
        written = idx->operands[0];
      DataType t = written == idx ? DataType::i32 : DataType::i64;
      Stmt *checked = written;
      if (written->dtype != t) {  // u64 keeps its bits (huge values read as negative); u32 zero-extends
        checked = add(ptr, StmtKind::Unary, t, {written}, int(UnaryOp::Cast));
        checked->cast_from = written->dtype;
      }
      Stmt *below = add(ptr, StmtKind::Binary, DataType::i32, {checked, constant(ptr, 0, t)}, int(BinaryOp::Lt));
      Stmt *above = add(ptr, StmtKind::Binary, DataType::i32, {checked, dimension(ptr, d, axis, t)}, int(BinaryOp::Ge));
      Stmt *bad = add(ptr, StmtKind::Binary, DataType::i32, {below, above}, int(BinaryOp::LogicalOr));
      report(ptr, bad, checked, message(ptr, d, axis));
      ptr->operands[axis] = add(ptr, StmtKind::Select, DataType::i32, {bad, constant(ptr, 0), idx});
    }
  }

 private:
  Stmt *add(Stmt *anchor, StmtKind kind, DataType t, std::vector<Stmt *> ops, int op = 0) {
    auto s = std::make_unique<Stmt>(kind, t);
    s->operands = std::move(ops);
    s->op = op;
    s->loc = anchor->loc;
    return insert_before(anchor, std::move(s));
  }

  Stmt *constant(Stmt *anchor, int64_t v, DataType t = DataType::i32) {
    Stmt *c = add(anchor, StmtKind::Const, t, {});
    c->ival = v;
    return c;
  }

  Stmt *dimension(Stmt *anchor, const BufferDesc &d, size_t axis, DataType t) {
    if (d.kind == BufferKind::Field) return constant(anchor, d.shape[axis], t);
    size_t runtime_dims = d.ndim - d.static_tail.size();
    if (axis >= runtime_dims) return constant(anchor, d.static_tail[axis - runtime_dims], t);
    Stmt *slot = add(anchor, StmtKind::Arg, t, {});  // the 8-byte slot holds the shape at any width
    slot->ival = d.shape_arg_slot + static_cast<int64_t>(axis);
    return slot;
  }

  // if (bad) { result[error_slot] = message id + 1; result[error_slot + 1] = index; }
  void report(Stmt *anchor, Stmt *bad, Stmt *idx, const std::string &msg) {
    k_.error_messages.push_back(msg);
    Stmt *code = constant(anchor, static_cast<int64_t>(k_.error_messages.size()));
    Stmt *wide = idx;
    if (idx->dtype != DataType::i64) {
      wide = add(anchor, StmtKind::Unary, DataType::i64, {idx}, int(UnaryOp::Cast));
      wide->cast_from = idx->dtype;
    }
    auto branch = std::make_unique<Stmt>(StmtKind::If, DataType::none);
    branch->operands = {bad};
    branch->loc = anchor->loc;
    branch->body = std::make_unique<Block>();
    branch->body->owner = branch.get();
    store(*branch->body, anchor, 0, code, DataType::i32);
    store(*branch->body, anchor, 1, wide, DataType::i64);
    insert_before(anchor, std::move(branch));
  }

  void store(Block &b, Stmt *anchor, int slot, Stmt *value, DataType t) {
    auto ptr = std::make_unique<Stmt>(StmtKind::GlobalPtr, t);
    ptr->ival = k_.result_buffer;
    ptr->byte_offset = 8 * static_cast<int64_t>(k_.error_slot + slot);
    ptr->loc = anchor->loc;
    Stmt *p = b.push(std::move(ptr));
    auto st = std::make_unique<Stmt>(StmtKind::GlobalStore, DataType::none);
    st->operands = {p, value};
    st->loc = anchor->loc;
    b.push(std::move(st));
  }

  static std::string message(Stmt *ptr, const BufferDesc &d, size_t axis) {
    std::string shape;
    if (d.kind == BufferKind::Field) {
      for (size_t i = 0; i < d.shape.size(); i++) shape += (i ? ", " : "") + std::to_string(d.shape[i]);
      shape = " with shape (" + shape + (d.shape.size() == 1 ? ",)" : ")");
    }
    return CompileError::format("index {} out of range for axis " + std::to_string(axis) + " of '" + d.name + "'" +
                                    shape,
                                ptr->loc);
  }

  KernelIR &k_;
};

}  // namespace

void insert_bounds_checks(KernelIR &k) {
  std::vector<Stmt *> ptrs;
  for_each_stmt(k.body, [&](Stmt &s) {
    if (s.kind != StmtKind::GlobalPtr) return;
    BufferKind kind = k.buffers[s.ival].kind;
    if (kind == BufferKind::Field || kind == BufferKind::Ndarray) ptrs.push_back(&s);
  });
  if (ptrs.empty()) return;
  Checker c(k);
  for (Stmt *p : ptrs) c.check(p);
}

}  // namespace qd
