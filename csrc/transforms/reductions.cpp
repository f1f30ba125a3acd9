// Reduction privatization: `qd.atomic_add(total[None], x[i])` in a parallel loop makes every
// iteration contend for one cache line. When the old value is unused and the address is the same
// for every iteration, each thread can combine its iterations' operands in a register and apply
// one atomic at the end of its share of the loop. Any interleaving of those grouped updates is
// one the original program could have had, so per-location atomicity still holds.
#include <map>
#include <unordered_set>

#include "transforms/passes.h"

namespace qd {

namespace {

bool reducible(AtomicOp op) {
  switch (op) {
    case AtomicOp::Add: case AtomicOp::Sub: case AtomicOp::Mul: case AtomicOp::Min: case AtomicOp::Max:
    case AtomicOp::And: case AtomicOp::Or: case AtomicOp::Xor:
      return true;
    default:
      return false;  // exchange and cas: the final value depends on the order
  }
}

// The same address in every iteration: indices are constants or kernel arguments.
bool loop_invariant(const Stmt &ptr) {
  for (const Stmt *i : ptr.operands)
    if (i->kind != StmtKind::Const && i->kind != StmtKind::Arg) return false;
  return true;
}

class Privatizer {
 public:
  Privatizer(KernelIR &k, Task &t) : k_(k), t_(t) {}

  void run() {
    std::unordered_set<const Stmt *> used;
    for_each_stmt(t_.body, [&](Stmt &s) {
      for (Stmt *o : s.operands) used.insert(o);
    });
    // A buffer qualifies when it is touched in the loop only by reducible atomics with unused
    // results on invariant addresses; anything else (a load, a store, a returned old value) keeps
    // all its atomics as they are.
    std::map<std::pair<int64_t, int64_t>, bool> ok;  // (buffer, byte offset) -> qualifies
    std::vector<Stmt *> candidates;
    for_each_stmt(*t_.loop()->body, [&](Stmt &s) {
      if (s.kind == StmtKind::Atomic) {
        const Stmt &ptr = *s.operands[0];
        if (ptr.kind != StmtKind::GlobalPtr) return;
        bool good = reducible(s.atomic_op()) && !used.count(&s) && loop_invariant(ptr);
        auto [it, fresh] = ok.emplace(key(ptr), good);
        it->second = it->second && good;
        if (good) candidates.push_back(&s);
      }
    });
    for_each_stmt(*t_.loop()->body, [&](Stmt &s) {
      if (s.kind != StmtKind::GlobalPtr || !ok.count(key(s))) return;
      for (Stmt *user : users_of(&s))
        if (user->kind != StmtKind::Atomic || user->operands[0] != &s) ok[key(s)] = false;
    });
    for (Stmt *a : candidates)
      if (ok[key(*a->operands[0])]) privatize(a);
  }

 private:
  static std::pair<int64_t, int64_t> key(const Stmt &ptr) { return {ptr.ival, ptr.byte_offset}; }

  std::vector<Stmt *> users_of(const Stmt *v) {
    std::vector<Stmt *> out;
    for_each_stmt(t_.body, [&](Stmt &s) {
      for (Stmt *o : s.operands)
        if (o == v) out.push_back(&s);
    });
    return out;
  }

  // The pointer (and its constant / argument indices) moves to the prologue, where it dominates
  // both the loop and the flush after it.
  void privatize(Stmt *atomic) {
    const Stmt &ptr = *atomic->operands[0];
    auto hoisted = clone_leaf(ptr);
    for (Stmt *&idx : hoisted->operands) idx = t_.prologue.push(clone_leaf(*idx));
    atomic->operands[0] = t_.prologue.push(std::move(hoisted));
    atomic->privatized = true;
    t_.reductions.push_back(atomic);
  }

  KernelIR &k_;
  Task &t_;
};

}  // namespace

namespace {

constexpr int64_t kMaxPrivateElements = 4096;  // 16 KiB of i32 per thread: stays in L1

// Fields whose every access in the loop is the same reducible atomic op, result unused.
void privatize_arrays(KernelIR &k, Task &t) {
  std::unordered_set<const Stmt *> used;
  for_each_stmt(t.body, [&](Stmt &s) {
    for (Stmt *o : s.operands) used.insert(o);
  });
  struct Use {
    bool ok = true;
    const Stmt *first = nullptr;
    std::vector<Stmt *> atomics;
  };
  std::map<int64_t, Use> uses;
  for_each_stmt(*t.loop()->body, [&](Stmt &s) {
    if (s.kind != StmtKind::GlobalPtr) return;
    const BufferDesc &d = k.buffers[s.ival];
    Use &u = uses[s.ival];
    int64_t size = 1;
    for (int64_t n : d.shape) size *= n;
    if (d.kind != BufferKind::Field || size > kMaxPrivateElements) u.ok = false;
    for_each_stmt(t.body, [&](Stmt &user) {
      for (Stmt *o : user.operands) {
        if (o != &s) continue;
        bool good = user.kind == StmtKind::Atomic && user.operands[0] == &s && !user.privatized &&
                    reducible(user.atomic_op()) && !used.count(&user) &&
                    (!u.first || (u.first->atomic_op() == user.atomic_op() && u.first->dtype == user.dtype));
        if (!good) {
          u.ok = false;
          continue;
        }
        if (!u.first) u.first = &user;
        u.atomics.push_back(&user);
      }
    });
  });
  for (auto &[buffer, u] : uses) {
    if (!u.ok || u.atomics.empty()) continue;
    int64_t size = 1;
    for (int64_t n : k.buffers[buffer].shape) size *= n;
    t.array_reductions.push_back({static_cast<int>(buffer), u.first->atomic_op(), u.first->dtype, size});
    for (Stmt *a : u.atomics) a->privatized = true;
  }
}

}  // namespace

void privatize_reductions(KernelIR &k, bool arrays) {
  for (Task &t : k.tasks) {
    if (!t.parallel) continue;
    Privatizer(k, t).run();
    if (arrays) privatize_arrays(k, t);
  }
}

}  // namespace qd
