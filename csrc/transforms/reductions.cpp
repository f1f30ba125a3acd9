// Reduction privatization: `qd.atomic_add(total[None], x[i])` in a parallel loop makes every
// iteration contend for one cache line. When the old value is unused and the address is the same
// for every iteration, each thread can combine its iterations' operands in a register and apply
// one atomic at the end of its share of the loop. Any interleaving of those grouped updates is
// one the original program could have had, so per-location atomicity still holds.
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <thread>
#include <unordered_set>

#include "transforms/ir_emitter.h"
#include "transforms/passes.h"

namespace qd {

namespace {

bool reducible(AtomicOp op) { return atomic_op_info(op).reducible; }

// The same address in every iteration: indices are constants or kernel arguments.
bool loop_invariant(const Stmt &ptr) {
  for (const Stmt *i : ptr.operands)
    if (i->kind != StmtKind::Const && i->kind != StmtKind::Arg) return false;
  return true;
}

class Privatizer {
 public:
  Privatizer(KernelIR &k, Task &t, bool cpu) : k_(k), t_(t), cpu_(cpu) {}

  void run() {
    std::unordered_set<const Stmt *> used;
    for_each_stmt(t_.body, [&](Stmt &s) {
      for (Stmt *o : s.operands) used.insert(o);
    });
    // A buffer qualifies when it is touched in the loop only by reducible atomics with unused
    // results on invariant addresses; anything else (a load, a store, a returned old value) keeps
    // all its atomics as they are.
    // Block barriers and fences order the loop's atomics against other threads' accesses, and a
    // shared array lives per block: neither may move to the end of the thread's share. On the cpu
    // a block runs on one worker (cpu_blocks.cpp): its barriers order nothing across workers, so a
    // global accumulator no iteration reads (shared arrays are never candidates) is per worker.
    bool simt = false;
    for_each_stmt(*t_.loop()->body, [&](Stmt &s) {
      simt = simt || (s.kind == StmtKind::Simt && (!cpu_ || static_cast<SimtOp>(s.op) == SimtOp::GridMemFence));
    });
    if (simt) return;
    std::map<std::pair<int64_t, int64_t>, bool> ok;  // (buffer, byte offset) -> qualifies
    std::vector<Stmt *> candidates;
    for_each_stmt(*t_.loop()->body, [&](Stmt &s) {
      if (s.kind == StmtKind::Atomic) {
        const Stmt &ptr = *s.operands[0];
        if (ptr.kind != StmtKind::GlobalPtr) return;
        bool good = reducible(s.atomic_op()) && !used.count(&s) && loop_invariant(ptr) &&
                    k_.buffers[ptr.ival].kind != BufferKind::Shared;
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

  // The atomic becomes `acc = combine(acc, value)` on a variable that starts at the op's
  // identity before the thread's share of the loop; after it, one atomic applies acc (sub
  // accumulates a sum and subtracts it). The flush's pointer is a copy, as its constant / argument
  // indices live in the loop.
  void privatize(Stmt *atomic) {
    AtomicOp op = atomic->atomic_op();
    DataType t = atomic->dtype;
    IrEmitter pre(t_.pre_loop, atomic->loc), in(atomic);
    AtomicIdentity id = atomic_identity(op, t);
    Stmt *value = atomic->operands[1];
    BinaryOp combine = *atomic_op_info(op).combine;
    // Float min/max (cpu): the identity is NaN and a NaN operand loses, which LLVM cannot vectorise.
    // The accumulator instead starts at -inf (max) / +inf (min) and takes the non-NaN operands
    // only; `seen` says whether there was one, and the flush applies NaN (the identity) if not.
    bool numeric = cpu_ && is_real(t) && (op == AtomicOp::Min || op == AtomicOp::Max);
    double inf = op == AtomicOp::Max ? -INFINITY : INFINITY;
    Stmt *acc = pre.var(t, numeric ? pre.c(t, inf) : is_real(t) ? pre.c(t, id.f) : pre.ci(t, id.i));
    Stmt *seen = numeric ? pre.var(DataType::i32, pre.ci(DataType::i32, 0)) : nullptr;
    if (numeric) {
      Stmt *is_nan = in.bin(BinaryOp::Ne, value, value);
      Stmt *any = in.bin(BinaryOp::BitOr, in.load(seen), in.bin(BinaryOp::Eq, value, value));
      any->reassoc = true;
      in.store(seen, any);
      value = in.sel(is_nan, in.c(t, inf), value);
    }
    Stmt *combined = in.bin(combine, in.load(acc), value);
    combined->reassoc = true;  // several accumulators / SIMD lanes: the atomics were unordered
    in.store(acc, combined);
    const Stmt &ptr = *atomic->operands[0];
    auto hoisted = clone_leaf(ptr);
    for (Stmt *&idx : hoisted->operands) {
      auto leaf = clone_leaf(*idx);
      leaf->parent = &t_.post_loop;
      idx = t_.post_loop.push(std::move(leaf));
    }
    Stmt *flush_ptr = t_.post_loop.push(std::move(hoisted));
    IrEmitter post(t_.post_loop, atomic->loc);
    Stmt *result = post.load(acc);
    if (numeric) result = post.sel(post.load(seen), result, post.c(t, id.f));
    Stmt *flush = post.add(StmtKind::Atomic, t, {flush_ptr, result});
    flush->ival = static_cast<int64_t>(op);
    flush->lowering = atomic->lowering;
    flush->scope = atomic->scope;  // (relaxed: privatized loops have no ordered atomics)
    std::erase_if(atomic->parent->stmts, [&](auto &s) { return s.get() == atomic; });
  }

  KernelIR &k_;
  Task &t_;
  bool cpu_;
};

}  // namespace

namespace {

constexpr int64_t kMaxPrivateElements = 4096;  // 16 KiB of i32 per thread: stays in L1
constexpr int64_t kMaxLongLoopPrivateElements = int64_t(1) << 16;  // 256 KiB of f32: the L2
constexpr int64_t kMaxLargePrivateBytes = int64_t(1) << 20;        // all such copies of one loop

// The largest field a loop privatizes: a loop of known length affords a copy of up to 2^16
// elements when each thread's share of it is at least 8 times the copy, so that setting the copy
// up and flushing it cost little next to the loop (a reverse pass's scatter-add into a gathered
// input of 65536 elements: backward 5.9x -> 2.3-3.7x its forward on a 2-core host,
// benchmarks/autodiff.py "gather n/16").
int64_t max_private_elements(const Task &t) {
  const Stmt *begin = t.loop()->operands[0], *end = t.loop()->operands[1];
  if (begin->kind != StmtKind::Const || end->kind != StmtKind::Const) return kMaxPrivateElements;
  int64_t threads = std::max(1u, std::thread::hardware_concurrency());
  return std::clamp((end->ival - begin->ival) / (8 * threads), kMaxPrivateElements, kMaxLongLoopPrivateElements);
}

// Nested serial loops over every index of `shape`; `body` gets the indices.
void for_each_index(IrEmitter &e, const std::vector<int64_t> &shape, std::vector<Stmt *> &indices,
                    const std::function<void(IrEmitter &, const std::vector<Stmt *> &)> &body) {
  if (indices.size() == shape.size()) return body(e, indices);
  Stmt *loop = e.add(StmtKind::RangeFor, DataType::none, {e.ci(DataType::i32, 0), e.ci(DataType::i32, shape[indices.size()])});
  loop->serialize = true;
  loop->body = std::make_unique<Block>();
  loop->body->owner = loop;
  IrEmitter in(*loop->body, e.loc());
  indices.push_back(in.add(StmtKind::LoopIndex, DataType::i32, {loop}));
  for_each_index(in, shape, indices, body);
  indices.pop_back();
}

// The field's updates in the loop go to a private copy (a Private buffer of the same shape, which
// the codegen places in the thread's stack), set to the op's identity before the thread's share of
// the loop; after it, each element that moved from the identity is applied with one atomic.
void privatize_array(KernelIR &k, Task &t, int field, const std::vector<Stmt *> &atomics) {
  const BufferDesc d = k.buffers[field];  // a copy: add_buffer below may move the table
  // (copies: the atomics are removed below)
  AtomicOp op = atomics.front()->atomic_op();
  DataType dtype = atomics.front()->dtype;
  Lowering lowering = atomics.front()->lowering;
  SourceLoc loc = atomics.front()->loc;
  MemScope scope = MemScope::Block;  // the flush reaches every thread any of the atomics reached
  for (Stmt *a : atomics) scope = std::max(scope, a->scope);
  BufferDesc copy{BufferKind::Private, dtype, d.shape};
  copy.name = d.name;
  int priv = k.add_buffer(copy);
  int64_t size = 1;
  for (int64_t n : d.shape) size *= n;
  t.min_chunk += (size > kMaxPrivateElements ? 8 : 4) * size;  // (a long loop: one share per thread)
  auto ptr = [&](IrEmitter &e, int buffer, const std::vector<Stmt *> &idx) {
    Stmt *p = e.add(StmtKind::GlobalPtr, dtype, idx);
    p->ival = buffer;
    return p;
  };
  AtomicIdentity id = atomic_identity(op, dtype);
  std::vector<Stmt *> indices;
  IrEmitter pre(t.pre_loop, loc);
  for_each_index(pre, d.shape, indices, [&](IrEmitter &e, const std::vector<Stmt *> &idx) {
    e.add(StmtKind::GlobalStore, DataType::none, {ptr(e, priv, idx), is_real(dtype) ? e.c(dtype, id.f) : e.ci(dtype, id.i)});
  });
  for (Stmt *a : atomics) {
    IrEmitter e(a);
    Stmt *p = ptr(e, priv, a->operands[0]->operands);
    Stmt *old = e.add(StmtKind::GlobalLoad, dtype, {p});
    e.add(StmtKind::GlobalStore, DataType::none, {p, e.bin(*atomic_op_info(op).combine, old, a->operands[1])});
    std::erase_if(a->parent->stmts, [&](auto &s) { return s.get() == a; });
  }
  IrEmitter post(t.post_loop, loc);
  for_each_index(post, d.shape, indices, [&](IrEmitter &e, const std::vector<Stmt *> &idx) {
    Stmt *v = e.add(StmtKind::GlobalLoad, dtype, {ptr(e, priv, idx)});
    DataType bits = int_of_width(bit_width(dtype), false);
    Stmt *identity = is_real(dtype) ? e.c(dtype, id.f) : e.ci(dtype, id.i);
    IrEmitter touched = e.if_(e.bin(BinaryOp::Ne, e.bitcast(v, bits), e.bitcast(identity, bits)));
    Stmt *flush = touched.add(StmtKind::Atomic, dtype, {ptr(touched, field, idx), v});
    flush->ival = static_cast<int64_t>(op);
    flush->lowering = lowering;
    flush->scope = scope;
  });
}

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
  // (the atomics' verdicts say how the flush after the loop is done: native or a CAS loop)
  std::map<int64_t, Use> uses;
  int64_t max_size = max_private_elements(t);
  for_each_stmt(*t.loop()->body, [&](Stmt &s) {
    if (s.kind != StmtKind::GlobalPtr) return;
    const BufferDesc &d = k.buffers[s.ival];
    Use &u = uses[s.ival];
    int64_t size = 1;
    for (int64_t n : d.shape) size *= n;
    if (d.kind != BufferKind::Field || size > max_size) u.ok = false;
    for_each_stmt(t.body, [&](Stmt &user) {
      for (Stmt *o : user.operands) {
        if (o != &s) continue;
        bool good = user.kind == StmtKind::Atomic && user.operands[0] == &s &&
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
  // The copies live on the worker's stack (8 MiB): copies past kMaxPrivateElements take at most
  // 1 MiB in all (fields in buffer order).
  int64_t large_bytes = 0;
  for (auto &[buffer, u] : uses) {
    if (!u.ok || u.atomics.empty()) continue;
    int64_t size = 1;
    for (int64_t n : k.buffers[buffer].shape) size *= n;
    if (size > kMaxPrivateElements) {
      int64_t bytes = size * byte_size(u.atomics.front()->dtype);
      if (large_bytes + bytes > kMaxLargePrivateBytes) continue;
      large_bytes += bytes;
    }
    privatize_array(k, t, static_cast<int>(buffer), u.atomics);
  }
}

}  // namespace

// A loop that synchronizes through memory (fences, atomic loads / stores, ordered atomics) keeps
// its atomics where they are: grouping them would move them across what they are ordered with.
// So does a loop that calls a real function, which may read and write any memory.
bool synchronizes(Task &t) {
  bool found = false;
  for_each_stmt(*t.loop()->body, [&](Stmt &s) {
    found |= s.kind == StmtKind::Fence || s.is_atomic || (s.kind == StmtKind::Atomic && s.order != MemoryOrder::Relaxed) ||
             s.kind == StmtKind::Call;
  });
  return found;
}

void privatize_reductions(KernelIR &k, bool cpu) {
  for (Task &t : k.tasks) {
    if (!t.parallel || synchronizes(t)) continue;
    Privatizer(k, t, cpu).run();
    if (cpu) privatize_arrays(k, t);
  }
}

}  // namespace qd
