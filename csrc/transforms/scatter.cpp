// Partitioned scatter (cpu): `qd.atomic_add(y[p[i]], x[i])` with the old value unused, into a
// large field, pays one locked instruction per iteration. When the loop does nothing else that
// is visible outside it, its iterations can instead be replicated over P parts of the target:
//
//   for part in range(P):                  # parallel: one part per thread
//       for i in range(begin, end):        # serial, the original body
//           ... j = p[i] ...
//           mine = part * chunk <= j < (part + 1) * chunk   # j: the target's first index
//           if mine: y[j, ...] = y[j, ...] + x[i]          # plain read-modify-write
//           (branch-free: else y[spare] += identity, spare an element of the part)
//
// Each element belongs to one part, so one thread updates it and no atomic is needed; it gets
// the same updates as before, in iteration order (integers: the same value; floats: a reordering
// the atomics allowed). Every thread reads the whole loop's inputs, which is cheap next to the
// random writes for a few threads, so the rewrite is limited to P <= 8 and to bodies without
// loops.
#include <algorithm>
#include <thread>
#include <unordered_set>

#include "transforms/ir_emitter.h"
#include "transforms/passes.h"

namespace qd {

namespace {

constexpr int64_t kMinTargetElements = int64_t(1) << 16;  // smaller ones stay in cache: atomics are cheap
constexpr int kMaxParts = 8;

BinaryOp combine_of(AtomicOp op) {
  switch (op) {
    case AtomicOp::Sub: return BinaryOp::Sub;
    case AtomicOp::Mul: return BinaryOp::Mul;
    case AtomicOp::Min: return BinaryOp::Min;
    case AtomicOp::Max: return BinaryOp::Max;
    case AtomicOp::And: return BinaryOp::BitAnd;
    case AtomicOp::Or: return BinaryOp::BitOr;
    case AtomicOp::Xor: return BinaryOp::BitXor;
    default: return BinaryOp::Add;
  }
}

// The atomics to partition: the loop's only effects are reducible atomics with unused results on
// one field (whose every use in the loop is such an atomic) and stores to its own variables.
std::vector<Stmt *> partitionable(KernelIR &k, Task &t, int64_t *target) {
  Stmt *loop = t.loop();
  std::unordered_set<const Stmt *> used, locals;
  for_each_stmt(t.body, [&](Stmt &s) {
    for (Stmt *o : s.operands) used.insert(o);
  });
  std::vector<Stmt *> atomics;
  bool ok = true;
  *target = -1;
  for_each_stmt(*loop->body, [&](Stmt &s) {
    switch (s.kind) {
      case StmtKind::Alloca: locals.insert(&s); break;
      case StmtKind::LocalStore: ok = ok && locals.count(s.operands[0]); break;
      case StmtKind::Atomic: {
        const Stmt &p = *s.operands[0];
        // (an ordered atomic synchronizes other memory: it stays an atomic)
        bool good = p.kind == StmtKind::GlobalPtr && atomic_op_info(s.atomic_op()).reducible && !used.count(&s) &&
                    s.order == MemoryOrder::Relaxed &&
                    (*target < 0 || *target == p.ival);
        if (good) *target = p.ival, atomics.push_back(&s);
        ok = ok && good;
        break;
      }
      case StmtKind::GlobalLoad: ok = ok && !s.is_atomic; break;  // qd.atomic_load synchronizes
      case StmtKind::Fence:
      case StmtKind::GlobalStore: case StmtKind::Return: case StmtKind::Break:
      case StmtKind::While: case StmtKind::RangeFor:
        ok = false;
        break;
      default: break;
    }
  });
  if (!ok || atomics.empty()) return {};
  const BufferDesc &d = k.buffers[*target];
  int64_t size = 1;
  for (int64_t n : d.shape) size *= n;
  if (d.kind != BufferKind::Field || d.shape.empty() || size < kMinTargetElements) return {};
  std::unordered_set<const Stmt *> ptrs;
  for (Stmt *a : atomics) ptrs.insert(a->operands[0]);
  for_each_stmt(*loop->body, [&](Stmt &s) {  // the target's pointers feed those atomics only
    if (s.kind == StmtKind::GlobalPtr && s.ival == *target && !ptrs.count(&s)) ok = false;
    for (size_t i = 0; i < s.operands.size(); i++)
      if (ptrs.count(s.operands[i]) && !(s.kind == StmtKind::Atomic && i == 0)) ok = false;
  });
  return ok ? atomics : std::vector<Stmt *>{};
}

void partition(KernelIR &k, Task &t, int64_t target, const std::vector<Stmt *> &atomics, int parts) {
  Stmt *loop = t.loop();
  IrEmitter pro(t.prologue, loop->loc);
  Stmt *zero = pro.ci(DataType::i32, 0), *count = pro.ci(DataType::i32, parts);
  auto outer = std::make_unique<Stmt>(StmtKind::RangeFor, DataType::none);
  outer->operands = {zero, count};
  outer->loc = loop->loc;
  outer->parent = &t.body;
  outer->body = std::make_unique<Block>();
  outer->body->owner = outer.get();
  std::unique_ptr<Stmt> inner = std::move(t.body.stmts[0]);
  t.body.stmts[0] = std::move(outer);
  Stmt *o = t.body.stmts[0].get();
  IrEmitter e(*o->body, loop->loc);
  Stmt *part = e.add(StmtKind::LoopIndex, DataType::i32, {o});
  int64_t chunk = (k.buffers[target].shape[0] + parts - 1) / parts;
  Stmt *lo = e.bin(BinaryOp::Mul, part, e.ci(DataType::i32, chunk));
  Stmt *hi = e.bin(BinaryOp::Add, lo, e.ci(DataType::i32, chunk));
  inner->serialize = true;
  o->body->push(std::move(inner));
  Stmt *last = e.ci(DataType::i32, k.buffers[target].shape[0] - 1);
  Stmt *spare = e.bin(BinaryOp::Min, lo, last);  // an element of this part
  for (Stmt *a : atomics) {
    // Branch-free (the owner test is a coin flip for random indices): another part's update
    // becomes the op's identity applied to an element of this part, which leaves it unchanged.
    IrEmitter in(a);
    Stmt *ptr = a->operands[0];
    Stmt *first = in.cast(ptr->operands[0], DataType::i32);
    Stmt *mine = in.both(in.bin(BinaryOp::Ge, first, lo), in.bin(BinaryOp::Lt, first, hi));
    auto p = clone_leaf(*ptr);
    p->operands[0] = in.sel(mine, ptr->operands[0], in.cast(spare, ptr->operands[0]->dtype));
    Stmt *mptr = in.add(StmtKind::GlobalPtr, ptr->dtype, p->operands);
    mptr->ival = ptr->ival;
    DataType t = a->dtype;
    AtomicIdentity id = atomic_identity(a->atomic_op(), t);
    Stmt *identity = is_real(t) ? in.c(t, id.f) : in.ci(t, id.i);
    Stmt *value = in.sel(mine, a->operands[1], identity);
    Stmt *old = in.add(StmtKind::GlobalLoad, t, {mptr});
    in.add(StmtKind::GlobalStore, DataType::none, {mptr, in.bin(combine_of(a->atomic_op()), old, value)});
    std::erase_if(a->parent->stmts, [&](auto &s) { return s.get() == a; });
  }
}

}  // namespace

void partition_scatters(KernelIR &k) {
  int parts = static_cast<int>(std::thread::hardware_concurrency());
  if (parts < 2 || parts > kMaxParts || k.debug) return;
  for (Task &t : k.tasks) {
    if (!t.parallel || !t.pre_loop.stmts.empty() || !t.post_loop.stmts.empty() || t.loop()->block_dim) continue;
    int64_t target = -1;
    std::vector<Stmt *> atomics = partitionable(k, t, &target);
    if (!atomics.empty()) partition(k, t, target, atomics, parts);
  }
}

}  // namespace qd
