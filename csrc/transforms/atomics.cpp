#include <unordered_map>
#include <unordered_set>

// Atomic passes: the backend support check and demotion to plain read-modify-writes.
#include "transforms/passes.h"

namespace qd {

namespace {

class Inserter {
 public:
  explicit Inserter(Stmt *anchor) : anchor_(anchor) {}
  Stmt *add(StmtKind kind, DataType dtype, std::vector<Stmt *> operands, int op = 0) {
    auto s = std::make_unique<Stmt>(kind, dtype);
    s->operands = std::move(operands);
    s->op = op;
    s->loc = anchor_->loc;
    return insert_before(anchor_, std::move(s));
  }
  Stmt *binary(BinaryOp op, Stmt *a, Stmt *b, DataType t) { return add(StmtKind::Binary, t, {a, b}, static_cast<int>(op)); }

 private:
  Stmt *anchor_;
};

// The new value an atomic writes, computed from the old one with ordinary operations.
Stmt *updated_value(Inserter &in, const Stmt &atomic, Stmt *old) {
  DataType t = atomic.dtype;
  Stmt *val = atomic.operands[1];
  switch (atomic.atomic_op()) {
    case AtomicOp::Add: return in.binary(BinaryOp::Add, old, val, t);
    case AtomicOp::Sub: return in.binary(BinaryOp::Sub, old, val, t);
    case AtomicOp::Mul: return in.binary(BinaryOp::Mul, old, val, t);
    case AtomicOp::Min: return in.binary(BinaryOp::Min, old, val, t);
    case AtomicOp::Max: return in.binary(BinaryOp::Max, old, val, t);
    case AtomicOp::And: return in.binary(BinaryOp::BitAnd, old, val, t);
    case AtomicOp::Or: return in.binary(BinaryOp::BitOr, old, val, t);
    case AtomicOp::Xor: return in.binary(BinaryOp::BitXor, old, val, t);
    case AtomicOp::Exchange: return val;
    case AtomicOp::Cas: {
      Stmt *hit = in.binary(BinaryOp::Eq, old, val, DataType::i32);
      return in.add(StmtKind::Select, t, {hit, atomic.operands[2], old});
    }
  }
  return val;
}

// Replaces `atomic` by load / compute / store; its users get the loaded (old) value.
void demote(Block &scope, Stmt *atomic) {
  Stmt *target = atomic->operands[0];
  bool local = target->kind == StmtKind::Alloca;
  Inserter in(atomic);
  Stmt *old = in.add(local ? StmtKind::LocalLoad : StmtKind::GlobalLoad, atomic->dtype, {target});
  Stmt *updated = updated_value(in, *atomic, old);
  in.add(local ? StmtKind::LocalStore : StmtKind::GlobalStore, DataType::none, {target, updated});
  replace_uses(scope, atomic, old);
  std::erase_if(atomic->parent->stmts, [&](auto &s) { return s.get() == atomic; });
}

bool same_index_pattern(const Stmt &a, const Stmt &b) {
  if (a.operands.size() != b.operands.size()) return false;
  for (size_t i = 0; i < a.operands.size(); i++) {
    const Stmt *x = a.operands[i], *y = b.operands[i];
    if (x == y) continue;
    if (x->kind == StmtKind::Const && y->kind == StmtKind::Const && x->ival == y->ival && x->dtype == y->dtype) continue;
    return false;
  }
  return true;
}

bool indexed_by_loop(const Stmt &ptr, const Stmt *loop) {
  bool has_loop_index = false;
  for (const Stmt *i : ptr.operands) {
    if (i->kind == StmtKind::LoopIndex && i->operands[0] == loop) has_loop_index = true;
    else if (i->kind != StmtKind::Const) return false;
  }
  return has_loop_index;
}

}  // namespace

void demote_local_atomics(KernelIR &k) {
  // A kernel-scope variable updated inside a parallel loop is shared by all its iterations (it
  // moves to the temps buffer): `total += x` there stays atomic.
  std::unordered_set<const Stmt *> shared;
  for (auto &top : k.body.stmts) {
    if (top->kind != StmtKind::RangeFor || top->serialize) continue;
    for_each_stmt(*top->body, [&](Stmt &s) {
      if (s.kind == StmtKind::Atomic && s.operands[0]->parent == &k.body) shared.insert(&s);
    });
  }
  std::vector<Stmt *> local;
  for_each_stmt(k.body, [&](Stmt &s) {
    if (s.kind == StmtKind::Atomic && s.operands[0]->kind == StmtKind::Alloca && !shared.count(&s)) local.push_back(&s);
  });
  for (Stmt *a : local) demote(k.body, a);
}

void demote_unique_atomics(KernelIR &k) {
  for (Task &t : k.tasks) {
    if (!t.parallel) continue;
    Stmt *loop = t.loop();
    // buffer -> the one index pattern every access in this loop uses (null once two differ)
    std::unordered_map<int64_t, const Stmt *> pattern;
    std::unordered_map<int64_t, bool> unique;
    for_each_stmt(*loop->body, [&](Stmt &s) {
      if (s.kind != StmtKind::GlobalPtr) return;
      const BufferDesc &d = k.buffers[s.ival];
      bool ok = (d.kind == BufferKind::Field || d.kind == BufferKind::Ndarray) && indexed_by_loop(s, loop);
      auto [it, fresh] = pattern.emplace(s.ival, &s);
      unique[s.ival] = (fresh || unique[s.ival]) && ok && same_index_pattern(*it->second, s);
    });
    std::vector<Stmt *> demotable;
    for_each_stmt(*loop->body, [&](Stmt &s) {
      if (s.kind == StmtKind::Atomic && s.operands[0]->kind == StmtKind::GlobalPtr && unique[s.operands[0]->ival])
        demotable.push_back(&s);
    });
    for (Stmt *a : demotable) demote(t.body, a);
  }
}

// On SPIR-V a shared array is one Workgroup variable of one element type (variables cannot
// alias): a float array that some atomic reaches through its bits (exchange, CAS loops) holds
// integers, so its native float atomics become CAS loops too.
static void same_view_for_shared_floats(KernelIR &k) {
  std::unordered_map<int64_t, std::vector<Stmt *>> by_buffer;
  for (Task &t : k.tasks)
    for_each_stmt(t.body, [&](Stmt &s) {
      if (s.kind != StmtKind::Atomic || s.operands[0]->kind != StmtKind::GlobalPtr) return;
      const BufferDesc &d = k.buffers[s.operands[0]->ival];
      if (d.kind == BufferKind::Shared && is_real(d.dtype)) by_buffer[s.operands[0]->ival].push_back(&s);
    });
  for (auto &[buffer, atomics] : by_buffer) {
    bool bits = false;
    for (Stmt *a : atomics) bits = bits || a->lowering == Lowering::CasLoop || a->atomic_op() == AtomicOp::Exchange;
    if (!bits) continue;
    for (Stmt *a : atomics)
      if (a->atomic_op() != AtomicOp::Exchange) a->lowering = Lowering::CasLoop;
  }
}

void decide_atomics(KernelIR &k, const Target &target) {
  auto decide = [&](Stmt &s) {
    if (s.kind != StmtKind::Atomic || s.operands[0]->kind != StmtKind::GlobalPtr) return;
    bool shared = k.buffers[s.operands[0]->ival].kind == BufferKind::Shared;
    auto verdict = atomic_lowering(target.backend, s.atomic_op(), s.dtype,
                                   shared ? MemorySpace::Shared : MemorySpace::Global, target.features);
    if (verdict.kind == Lowering::Rejected) type_error(verdict.reason, s.loc);
    s.lowering = verdict.kind;
  };
  for (Task &t : k.tasks) for_each_stmt(t.body, decide);
  if (target.backend == Backend::Vulkan || target.backend == Backend::Metal) same_view_for_shared_floats(k);
}

void run_passes(KernelIR &k, const Target &target) {
  Backend backend = target.backend;
  demote_local_atomics(k);
  if (k.debug) insert_bounds_checks(k);
  offload(k);
  demote_unique_atomics(k);  // before the verdicts: an element unique to its iteration needs no atomic
  decide_atomics(k, target);
  if (backend == Backend::Cpu || backend == Backend::Cuda || backend == Backend::Amdgpu)
    privatize_reductions(k, /*cpu=*/backend == Backend::Cpu);
  if (backend == Backend::Cpu) partition_scatters(k);
  legalize(k, target);
}

}  // namespace qd
