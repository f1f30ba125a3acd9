// Subgroup aggregation (GPU targets): an atomic whose address is the same for every lane of a
// subgroup (`total[None]`, `c[None]`, a kernel-scope variable: its indices are constants and
// kernel arguments) is combined in registers first. The active lanes reduce their operands with
// one subgroup operation and the lowest of them applies the total with one atomic:
//
//   r = subgroup.reduce op v;  if subgroup.elect: atomic op(x, r)
//
// When the old value is used (compaction: `slot = qd.atomic_add(c[None], 1)`), each lane also
// takes the exclusive prefix of the operands of the active lanes below it, and receives
//
//   op(old, prefix)   with old the elected lane's result, broadcast to the others
//
// which is exactly what it would have received had the lanes' atomics run one after another in
// lane order, back to back: integers only (a float sum rounds differently). A uniform operand added
// (the `1` of a counter) needs no scan: the prefix is the operand times the number of active lanes
// below, from a ballot, where the target's ballot is cheap (CUDA, AMDGPU).
//
// Only the active lanes take part (the operations are over the active lanes, in divergent branches
// and in the grid-stride loop's tail alike). The grouped updates are one interleaving the
// unordered atomics could have had; float sums are added in another order, integers are exact.
// Runs after privatize_reductions, so a privatized flush is aggregated too, and before
// legalization, which expands the elected lane's atomic if it is a CAS loop.
//
// In a reverse-mode kernel, on a target that Target::aggregates_scattered_atomics, an atomic on a
// scattered address (`x.grad[p[i]]`, the reverse pass of a gather) whose result is unused is
// aggregated over the active lanes that share the first active lane's address (its indices
// broadcast and compared); the others keep their own atomic:
//
//   same = all_k(idx_k == broadcast_first(idx_k))
//   if same:  r = subgroup.reduce op v;  if subgroup.elect: atomic op(x[idx], r)
//   if !same: atomic op(x[idx], v)
//
// One round: when neighbouring lanes share a target (sorted or blocked indices, `p[i] = i // k`)
// most of a subgroup's atomics become one; when every lane's target differs, the cost is one
// broadcast, a compare and a one-lane reduce per atomic.
#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "transforms/ir_emitter.h"
#include "transforms/passes.h"

namespace qd {

namespace {

using B = BinaryOp;

Stmt *simt(IrEmitter &e, SimtOp op, DataType t, std::vector<Stmt *> operands, B combine = B::Add) {
  Stmt *s = e.simt(op, t, std::move(operands));
  s->ival = static_cast<int64_t>(combine);
  return s;
}

}  // namespace

bool thread_uniform(const Stmt *s) {
  switch (s->kind) {
    case StmtKind::Const: case StmtKind::Arg: return true;
    case StmtKind::Unary: case StmtKind::Binary: case StmtKind::Select:
      for (const Stmt *o : s->operands)
        if (!thread_uniform(o)) return false;
      return true;
    default: return false;
  }
}

namespace {

// An element of a field, ndarray or the kernel's temps (global memory; not a shared array).
bool global_element(const KernelIR &k, const Stmt &ptr) {
  if (ptr.kind != StmtKind::GlobalPtr) return false;
  BufferKind kind = k.buffers[ptr.ival].kind;
  return kind == BufferKind::Field || kind == BufferKind::Ndarray || kind == BufferKind::Temps;
}

}  // namespace

bool thread_uniform_address(const KernelIR &k, const Stmt &ptr) {
  if (!global_element(k, ptr)) return false;
  for (const Stmt *i : ptr.operands)
    if (!thread_uniform(i)) return false;
  return true;
}

namespace {

class Aggregator {
 public:
  Aggregator(KernelIR &k, const Target &target) : k_(k), target_(target) {}

  void run(Task &t) {
    std::unordered_set<const Stmt *> used;
    for (Block *b : {&t.prologue, &t.pre_loop, &t.body, &t.post_loop})
      for_each_stmt(*b, [&](Stmt &s) {
        for (Stmt *o : s.operands) used.insert(o);
      });
    std::vector<Stmt *> work;
    for (Block *b : {&t.body, &t.post_loop})
      for_each_stmt(*b, [&](Stmt &s) {
        if (eligible(s, used.count(&s) > 0)) work.push_back(&s);
      });
    for (Stmt *a : work) {
      if (thread_uniform_address(k_, *a->operands[0])) aggregate(t, a, used.count(a) > 0);
      else aggregate_scattered(t, a);
    }
  }

 private:
  // The subgroup operations' type for an atomic of type t: 8 / 16-bit integers are widened (sign-
  // or zero-extended: sums wrap to the same low bits, min / max and the bitwise ops are unchanged).
  static DataType wide(DataType t) { return is_integral(t) && bit_width(t) < 32 ? int_of_width(32, is_signed(t)) : t; }

  bool eligible(const Stmt &s, bool used) const {
    if (s.kind != StmtKind::Atomic || s.order != MemoryOrder::Relaxed) return false;
    const Stmt *branch = s.parent->owner;  // already one per subgroup (transforms/compaction.cpp)
    if (branch && branch->kind == StmtKind::If && branch->operands[0]->kind == StmtKind::Simt &&
        branch->operands[0]->op == static_cast<int>(SimtOp::SubgroupElect))
      return false;
    bool uniform = thread_uniform_address(k_, *s.operands[0]);
    if (!uniform && (used || !scattered_address(*s.operands[0]))) return false;
    switch (s.atomic_op()) {
      case AtomicOp::Add: case AtomicOp::Sub: case AtomicOp::Min: case AtomicOp::Max:
      case AtomicOp::And: case AtomicOp::Or: case AtomicOp::Xor: break;
      default: return false;
    }
    if (used && is_real(s.dtype)) return false;  // a float prefix sum rounds as no lane order would
    return s.dtype != DataType::u1 && s.dtype != DataType::f16 && target_.has_subgroup_reduce(wide(s.dtype));
  }

  // A global buffer's element whose indices are per-lane integers (broadcast and compared; 64-bit
  // ones only where shuffles move 64 bits).
  bool scattered_address(const Stmt &ptr) const {
    if (k_.autodiff != KernelIR::Autodiff::Reverse || !target_.aggregates_scattered_atomics()) return false;
    if (!global_element(k_, ptr)) return false;
    for (const Stmt *i : ptr.operands)
      if (!is_integral(i->dtype) || (bit_width(i->dtype) != 32 && (target_.is_spirv() || bit_width(i->dtype) != 64)))
        return false;
    return true;
  }

  // The atomic runs under `if same` as a uniform-address atomic, and a copy of it under `if !same`.
  void aggregate_scattered(Task &t, Stmt *atomic) {
    IrEmitter e(atomic);
    Stmt *same = nullptr;
    for (Stmt *i : atomic->operands[0]->operands) {
      Stmt *eq = e.bin(B::Eq, i, simt(e, SimtOp::SubgroupBroadcastFirst, i->dtype, {i}));
      same = same ? e.both(same, eq) : eq;
    }
    IrEmitter others = e.if_(e.not_(same));
    others.insert(clone_leaf(*atomic));
    IrEmitter group = e.if_(same);
    auto &stmts = atomic->parent->stmts;
    auto it = std::find_if(stmts.begin(), stmts.end(), [&](auto &s) { return s.get() == atomic; });
    std::unique_ptr<Stmt> moved = std::move(*it);
    stmts.erase(it);
    group.insert(std::move(moved));
    aggregate(t, atomic, false);
  }

  void aggregate(Task &t, Stmt *atomic, bool used) {
    AtomicOp op = atomic->atomic_op();
    DataType type = atomic->dtype, w = wide(type);
    B combine = *atomic_op_info(op).combine;  // sub: the operands are summed, the atomic subtracts the sum
    IrEmitter e(atomic);
    Stmt *v = e.cast(atomic->operands[1], w);
    Stmt *total = nullptr, *prefix = nullptr;
    bool cuda = target_.backend == Backend::Cuda;
    // The lanes taking part, for the ballot-counted prefix and for CUDA's broadcast.
    // (a u64 ballot: on Vulkan only with 64-bit integers; else the prefix is a scan)
    bool ballot = target_.backend != Backend::Vulkan || target_.features.has(Cap::shader_int64);
    Stmt *lanes = used && ballot ? simt(e, SimtOp::SubgroupBallot, DataType::u64, {e.ci(DataType::i32, 1)}) : nullptr;
    if (is_real(type) && (op == AtomicOp::Min || op == AtomicOp::Max)) {
      // NaN operands lose (minNum / maxNum): they enter the reduction as the op's identity; if every
      // active lane's is NaN, the total is NaN (which then loses to the value in memory, or stays NaN).
      Stmt *number = e.bin(B::Eq, v, v);
      double inf = op == AtomicOp::Min ? INFINITY : -INFINITY;
      total = simt(e, SimtOp::SubgroupReduce, w, {e.sel(number, v, e.c(w, inf))}, combine);
      Stmt *any = simt(e, SimtOp::SubgroupAny, DataType::i32, {number});
      total = e.sel(any, total, e.c(w, NAN));
    } else if (used && lanes && (op == AtomicOp::Add || op == AtomicOp::Sub) && thread_uniform(v)) {
      DataType u64 = DataType::u64;
      Stmt *lane = e.cast(simt(e, SimtOp::SubgroupInvocationId, DataType::i32, {}), u64);
      Stmt *below = e.bin(B::BitAnd, lanes, e.bin(B::Sub, e.bin(B::Shl, e.ci(u64, 1), lane), e.ci(u64, 1)));
      prefix = e.bin(B::Mul, v, e.cast(e.un(UnaryOp::PopCount, below), w));
      total = e.bin(B::Mul, v, e.cast(e.un(UnaryOp::PopCount, lanes), w));
    } else {
      total = simt(e, SimtOp::SubgroupReduce, w, {v}, combine);
      if (used) prefix = simt(e, SimtOp::SubgroupExclusiveScan, w, {v}, combine);
    }
    Stmt *old_var = used ? e.var(type, is_real(type) ? e.c(type, 0) : e.ci(type, 0)) : nullptr;
    {
      IrEmitter one = e.if_(simt(e, SimtOp::SubgroupElect, DataType::i32, {}));
      Stmt *a = one.add(StmtKind::Atomic, type, {atomic->operands[0], one.cast(total, type)});
      a->ival = atomic->ival;
      a->lowering = atomic->lowering;
      a->order = atomic->order;
      a->scope = atomic->scope;
      if (used) one.store(old_var, a);
    }
    if (used) {
      std::vector<Stmt *> operands = {e.cast(e.load(old_var), w)};
      if (cuda) operands.push_back(lanes);
      Stmt *old = simt(e, SimtOp::SubgroupBroadcastFirst, w, operands);
      Stmt *result = e.cast(e.bin(op == AtomicOp::Sub ? B::Sub : combine, old, prefix), type);
      for (Block *b : {&t.body, &t.post_loop}) replace_uses(*b, atomic, result);
    }
    std::erase_if(atomic->parent->stmts, [&](auto &s) { return s.get() == atomic; });
  }

  KernelIR &k_;
  const Target &target_;
};

}  // namespace

void aggregate_subgroup_atomics(KernelIR &k, const Target &target) {
  for (Task &t : k.tasks)
    if (t.parallel && !synchronizes(t)) Aggregator(k, target).run(t);
}

}  // namespace qd
