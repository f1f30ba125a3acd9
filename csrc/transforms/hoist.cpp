// Loop-invariant loads: a parallel loop that reads `s[None]` (or `c[3]`, or a kernel-scope
// variable) in every iteration, from memory nothing in its task writes, reads the same value each
// time. Each thread reads it once, before its share of the loop, into a variable the loop reads.
// On Vulkan this is most of some loops' cost: lavapipe runs every load inside control flow lane by
// lane (eight scalar loads, each inserted into the vector through memory), one outside it as one
// scalar load for the subgroup (docs/performance.md). Reverse-mode kernels read such loads in every
// iteration (the seed `loss.grad[None]`, a broadcast scalar's replayed value).
#include <unordered_set>

#include "transforms/ir_emitter.h"
#include "transforms/passes.h"

namespace qd {

namespace {

// An element every thread may read at any point of the task: a field element at constant indices
// within its shape, or a kernel-scope variable (the temps buffer, at a fixed offset).
bool always_valid(const KernelIR &k, const Stmt &ptr) {
  if (ptr.kind != StmtKind::GlobalPtr) return false;
  const BufferDesc &d = k.buffers[ptr.ival];
  if (d.kind == BufferKind::Temps) return ptr.operands.empty();
  if (d.kind != BufferKind::Field || ptr.operands.size() != d.shape.size()) return false;
  for (size_t i = 0; i < d.shape.size(); i++) {
    const Stmt &idx = *ptr.operands[i];
    if (idx.kind != StmtKind::Const || idx.ival < 0 || idx.ival >= d.shape[i]) return false;
  }
  return true;
}

// The buffers the task writes; false when it may write memory no pointer names (a span
// operation, a store through something other than a pointer statement).
bool written_buffers(Task &t, std::unordered_set<int64_t> &out) {
  bool known = true;
  for (Block *b : {&t.prologue, &t.pre_loop, &t.body, &t.post_loop})
    for_each_stmt(*b, [&](Stmt &s) {
      if (s.kind == StmtKind::Span) known = false;
      if (s.kind != StmtKind::GlobalStore && s.kind != StmtKind::Atomic) return;
      const Stmt &ptr = *s.operands[0];
      if (ptr.kind == StmtKind::GlobalPtr) out.insert(ptr.ival);
      else if (ptr.kind != StmtKind::Alloca) known = false;
    });
  return known;
}

void hoist_task(KernelIR &k, Task &t) {
  std::unordered_set<int64_t> written;
  if (!written_buffers(t, written)) return;
  std::vector<Stmt *> loads;
  for_each_stmt(*t.loop()->body, [&](Stmt &s) {
    if (s.kind == StmtKind::GlobalLoad && !s.is_volatile && !s.is_atomic && always_valid(k, *s.operands[0]) &&
        !written.count(s.operands[0]->ival))
      loads.push_back(&s);
  });
  for (Stmt *load : loads) {
    // The pointer's copy (its indices are constants) and the load, in the thread's pre-loop code.
    auto ptr = clone_leaf(*load->operands[0]);
    for (Stmt *&idx : ptr->operands) {
      auto leaf = clone_leaf(*idx);
      leaf->parent = &t.pre_loop;
      idx = t.pre_loop.push(std::move(leaf));
    }
    IrEmitter pre(t.pre_loop, load->loc);
    Stmt *value = pre.add(StmtKind::GlobalLoad, load->dtype, {pre.insert(std::move(ptr))});
    Stmt *var = pre.var(load->dtype, value);
    // The loop's load becomes a read of the variable, in place (its users stay).
    load->kind = StmtKind::LocalLoad;
    load->operands = {var};
  }
}

}  // namespace

void hoist_invariant_loads(KernelIR &k) {
  for (Task &t : k.tasks)
    if (t.parallel && !synchronizes(t)) hoist_task(k, t);
}

}  // namespace qd
