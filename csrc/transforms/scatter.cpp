// Partitioned scatter (cpu): `qd.atomic_add(y[p[i]], x[i])` with the old value unused, into a
// large field, pays one locked instruction per iteration, and its random read-modify-writes miss
// the caches. When the loop does nothing else that is visible outside it but write each
// iteration's own elements of other fields (`z[i] = ...` at the loop's index i: a reverse pass's
// `w.grad[i] += ...` and `y.grad[i] = 0`), it runs instead as a bucketing of its updates by
// destination range (B buckets of 2^S consecutive elements, P parts of the iterations), in four
// tasks:
//
//   for part in range(P):                  # 1 parallel: count each bucket's updates of the part
//       counts[part, :] = 0
//       for i in part's slice of the iterations:   # serial, the original body, each atomic:
//           counts[part, j >> S] += 1      # j: the flat index of the updated element
//   offsets (serial): bucket-major exclusive prefix sum of counts (written back into counts),
//       starts[b] = offset of (bucket b, part 0), starts[B] = the number of updates
//   for part in range(P):                  # 3 parallel: the body again, each atomic:
//       o = counts[part, j >> S]; counts[part, j >> S] = o + 1
//       indices[o] = j; values[o] = x[i]
//       (the iteration's own writes happen here only: pass 1 leaves them out, so it reads what
//       the loop would; such a field is read only at i and before the body writes it, so both
//       passes compute the same)
//   for b in range(B):                     # 4 parallel: one bucket per iteration
//       for o in range(starts[b], starts[b + 1]):
//           y.flat[indices[o]] = y.flat[indices[o]] + values[o]   # plain, in a cache-sized range
//
// Each element belongs to one bucket and one thread applies a bucket, so no atomic is needed; a
// bucket's updates are in part order and each part's in iteration order, so each element gets its
// updates in iteration order (integers: the same value; floats: the order of a serial loop, one the
// atomics allowed). counts / starts / indices / values are Scratch buffers the runtime provides at
// launch (Task::scratch_items: items = the trip count times the atomics in the body). Where it
// cannot (too much memory), the original task runs instead (Task::When), itself partitioned as
// before when the host has 2 to 8 threads:
//
//   for part in range(P):                  # parallel: one part per thread
//       for i in range(begin, end):        # serial, the original body
//           ... j = p[i] ...
//           mine = part * chunk <= j < (part + 1) * chunk   # j: the target's first index
//           if mine: y[j, ...] = y[j, ...] + x[i]          # plain read-modify-write
//           (branch-free: else y[spare] += identity, spare an element of the part)
//
// There every thread reads the whole loop's inputs, which is cheap next to the random writes for
// a few threads (not with writes of the iteration's own: each part would make them again). Both
// forms run the body more than once, so bodies with loops are left alone.
#include <algorithm>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "transforms/ir_emitter.h"
#include "transforms/passes.h"

namespace qd {

namespace {

constexpr int64_t kMinTargetElements = int64_t(1) << 16;  // smaller ones stay in cache: atomics are cheap
constexpr int kMaxParts = 8;
constexpr int64_t kMinBucketedItems = int64_t(1) << 14;

// The op's combine from its table row; sub subtracts (this pass runs before legalization negates
// sub's operand, which is why the row says Add).
BinaryOp combine_of(AtomicOp op) { return op == AtomicOp::Sub ? BinaryOp::Sub : *atomic_op_info(op).combine; }

// Whether p points at element i of a 1-D buffer, i the index of `loop`: an iteration's own element.
bool at_loop_index(const Stmt &p, const Stmt *loop) {
  return p.kind == StmtKind::GlobalPtr && p.operands.size() == 1 && p.operands[0]->kind == StmtKind::LoopIndex &&
         p.operands[0]->operands[0] == loop;
}

// The atomics to partition: the loop's only effects are reducible atomics with unused results on
// one field (whose every use in the loop is such an atomic), stores to its own variables, and
// (into *own) plain stores or such atomics at the iteration's own element of other buffers, each
// of which the loop reads only there and before it writes it.
std::vector<Stmt *> partitionable(KernelIR &k, Task &t, int64_t *target, std::vector<Stmt *> *own) {
  Stmt *loop = t.loop();
  std::unordered_set<const Stmt *> used, locals;
  for_each_stmt(t.body, [&](Stmt &s) {
    for (Stmt *o : s.operands) used.insert(o);
  });
  *target = -1;
  for_each_stmt(*loop->body, [&](Stmt &s) {  // the target: what an atomic not at i updates
    if (*target < 0 && s.kind == StmtKind::Atomic && !at_loop_index(*s.operands[0], loop) &&
        s.operands[0]->kind == StmtKind::GlobalPtr)
      *target = s.operands[0]->ival;
  });
  auto reducible = [&](const Stmt &s) {
    // (an ordered atomic synchronizes other memory: it stays an atomic)
    return s.operands[0]->kind == StmtKind::GlobalPtr && atomic_op_info(s.atomic_op()).reducible && !used.count(&s) &&
           s.order == MemoryOrder::Relaxed;
  };
  std::vector<Stmt *> atomics;
  std::unordered_set<int64_t> written;  // buffers of the iteration's own writes, so far in the body
  bool ok = true;
  for_each_stmt(*loop->body, [&](Stmt &s) {
    const Stmt *p = s.operands.empty() ? nullptr : s.operands[0];
    bool own_write = (s.kind == StmtKind::GlobalStore || (s.kind == StmtKind::Atomic && reducible(s))) &&
                     at_loop_index(*p, loop) && p->ival != *target;
    switch (s.kind) {
      case StmtKind::Alloca: locals.insert(&s); break;
      case StmtKind::LocalStore: ok = ok && locals.count(s.operands[0]); break;
      case StmtKind::Atomic:
        if (own_write) {
          own->push_back(&s), written.insert(p->ival);
        } else {
          bool good = reducible(s) && p->ival == *target;
          if (good) atomics.push_back(&s);
          ok = ok && good;
        }
        break;
      case StmtKind::GlobalStore:
        if (own_write) own->push_back(&s), written.insert(p->ival);
        ok = ok && own_write;
        break;
      // qd.atomic_load synchronizes; a volatile load might differ between the passes over the body
      case StmtKind::GlobalLoad: ok = ok && !s.is_atomic && !s.is_volatile; break;
      case StmtKind::Fence:
      case StmtKind::Return: case StmtKind::Break:
      case StmtKind::While: case StmtKind::RangeFor: case StmtKind::Simt: case StmtKind::Span:
        ok = false;
        break;
      default: break;
    }
    // A buffer the iteration writes is read only at i, and not after a write to it.
    if (s.kind == StmtKind::GlobalLoad && p->kind == StmtKind::GlobalPtr && written.count(p->ival)) ok = false;
  });
  for_each_stmt(*loop->body, [&](Stmt &s) {
    if (s.kind == StmtKind::GlobalPtr && !at_loop_index(s, loop))
      for (const Stmt *w : *own)
        if (w->operands[0]->ival == s.ival) ok = false;
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

// --- Bucketing ---------------------------------------------------------------------------------

Stmt *range_for(IrEmitter &e, Stmt *begin, Stmt *end, bool serial) {
  Stmt *loop = e.add(StmtKind::RangeFor, DataType::none, {begin, end});
  loop->serialize = serial;
  loop->body = std::make_unique<Block>();
  loop->body->owner = loop;
  return loop;
}

class Bucketing {
 public:
  // max_shift: buckets of at most 2^max_shift elements (-1: this pass's choice, below).
  Bucketing(KernelIR &k, const Task &t, int64_t target, const std::vector<Stmt *> &atomics,
            const std::vector<Stmt *> &own, int threads, int max_shift = -1)
      : k_(k), t_(t), target_(target), atomics_(atomics), own_(own), loc_(t.loop()->loc) {
    const BufferDesc &d = k.buffers[target];
    shape_ = d.shape;
    dtype_ = atomics[0]->dtype;
    op_ = atomics[0]->atomic_op();
    size_ = 1;
    for (int64_t n : shape_) size_ *= n;
    // Few buckets: each is a stream of pairs that pass 3 writes, and many streams thrash the
    // caches and write-combining buffers (16, or 4 per thread for balance); but a bucket's range
    // of the target at most 4 MiB, so that applying it stays in the cache. Measured on 2 cores:
    // 16 buckets of 2^20 f32 for 2^24 elements run in 0.6-0.9x the time of a scatter store, 256
    // of 2^16 in 1.0-1.2x. Enough parts of the iterations that a busy thread's share moves to
    // another.
    if (max_shift < 0) {
      max_shift = 22;
      for (int64_t b = byte_size(dtype_); b > 1; b /= 2) max_shift--;
    }
    int64_t want = std::max(16, 4 * threads);
    shift_ = 10;
    while (shift_ < max_shift && ((size_ - 1) >> shift_) + 1 > want) shift_++;
    buckets_ = ((size_ - 1) >> shift_) + 1;
    parts_ = 4 * threads;
    std::string name = d.name.empty() ? "target" : d.name;
    counts_ = scratch(name + ".counts", DataType::i32, parts_ * buckets_, 0);
    starts_ = scratch(name + ".starts", DataType::i32, buckets_ + 1, 0);
    indices_ = scratch(name + ".indices", DataType::i32, 0, 1);
    values_ = scratch(name + ".values", dtype_, 0, 1);
  }

  // Whether the field and atomics suit it: one op, i32 flat indices.
  static bool applies(const KernelIR &k, int64_t target, const std::vector<Stmt *> &atomics) {
    int64_t size = 1;
    for (int64_t n : k.buffers[target].shape) size *= n;
    for (Stmt *a : atomics)
      if (a->atomic_op() != atomics[0]->atomic_op() || a->dtype != atomics[0]->dtype) return false;
    return size < (int64_t(1) << 31);
  }

  // Passes 1-3 (the buckets filled), then pass 4 where `apply`.
  std::vector<Task> tasks(bool apply) {
    std::vector<Task> out;
    out.push_back(pass(false));
    out.push_back(offsets());
    out.push_back(pass(true));
    if (apply) out.push_back(this->apply());
    return out;
  }
  ScatterBuckets buckets() const { return {target_, size_, buckets_, shift_, starts_, indices_, values_}; }

 private:
  int scratch(std::string name, DataType t, int64_t fixed, int64_t per_item) {
    BufferDesc d{BufferKind::Scratch, t, {fixed}};
    d.name = std::move(name);
    d.scratch_per_item = per_item;
    return k_.add_buffer(std::move(d));
  }
  Stmt *ptr(IrEmitter &e, int64_t buffer, DataType t, Stmt *i) {
    Stmt *p = e.add(StmtKind::GlobalPtr, t, {i});
    p->ival = buffer;
    return p;
  }
  Stmt *load(IrEmitter &e, int buffer, Stmt *i) {
    DataType t = k_.buffers[buffer].dtype;
    return e.add(StmtKind::GlobalLoad, t, {ptr(e, buffer, t, i)});
  }
  void store(IrEmitter &e, int buffer, Stmt *i, Stmt *v) {
    e.add(StmtKind::GlobalStore, DataType::none, {ptr(e, buffer, k_.buffers[buffer].dtype, i), v});
  }
  Stmt *i32(IrEmitter &e, int64_t v) { return e.ci(DataType::i32, v); }

  // Pass 1 (count) or 3 (fill): for part in range(P), the part's slice of the iterations with
  // the body's atomics replaced.
  Task pass(bool fill) {
    Task p;
    p.parallel = true;
    p.when = Task::When::WithScratch;
    CloneMap m;
    clone_into(t_.prologue, p.prologue, m);
    const Stmt *loop = t_.loop();
    IrEmitter pe(p.prologue, loc_);
    Stmt *begin = mapped(m, loop->operands[0]);
    Stmt *n = pe.cast(pe.bin(BinaryOp::Max, pe.bin(BinaryOp::Sub, mapped(m, loop->operands[1]), begin), i32(pe, 0)),
                      DataType::i64);
    Stmt *chunk = pe.bin(BinaryOp::Div, pe.bin(BinaryOp::Add, n, pe.ci(DataType::i64, parts_ - 1)),
                         pe.ci(DataType::i64, parts_));
    Stmt *items = pe.bin(BinaryOp::Mul, n, pe.ci(DataType::i64, static_cast<int64_t>(atomics_.size())));
    // Few updates for the buckets' fixed costs (zeroing, offsets, a task per pass): no scratch, the
    // original loop runs.
    if (!fill) {
      Stmt *few = pe.bin(BinaryOp::Lt, items, pe.ci(DataType::i64, std::max<int64_t>(kMinBucketedItems, 4 * parts_ * buckets_)));
      p.scratch_items = pe.sel(few, pe.ci(DataType::i64, -1), items);
    }
    Stmt *outer = range_for(pe, i32(pe, 0), i32(pe, parts_), false);
    // (the loop statement belongs in the body, its bounds in the prologue)
    p.body.push(std::move(p.prologue.stmts.back()));
    p.prologue.stmts.pop_back();
    IrEmitter e(*outer->body, loc_);
    Stmt *part = e.add(StmtKind::LoopIndex, DataType::i32, {outer});
    Stmt *row = e.bin(BinaryOp::Mul, part, i32(e, buckets_));
    if (!fill) {
      Stmt *zero = range_for(e, i32(e, 0), i32(e, buckets_), true);
      IrEmitter ze(*zero->body, loc_);
      store(ze, counts_, ze.bin(BinaryOp::Add, row, ze.add(StmtKind::LoopIndex, DataType::i32, {zero})), i32(ze, 0));
    }
    Stmt *part64 = e.cast(part, DataType::i64);
    auto bound = [&](Stmt *q) {
      Stmt *first = e.bin(BinaryOp::Min, e.bin(BinaryOp::Mul, q, chunk), n);
      return e.bin(BinaryOp::Add, begin, e.cast(first, DataType::i32));
    };
    Stmt *lo = bound(part64), *hi = bound(e.bin(BinaryOp::Add, part64, e.ci(DataType::i64, 1)));
    // (a slot past the end could only come from a body that computes different indices in the two
    // passes: clamped, so that it stays in the scratch memory)
    Stmt *last = fill ? e.cast(e.bin(BinaryOp::Sub, items, e.ci(DataType::i64, 1)), DataType::i32) : nullptr;
    Stmt *inner = range_for(e, lo, hi, true);
    m[loop] = inner;
    clone_into(*loop->body, *inner->body, m);
    for (Stmt *orig : atomics_) {
      Stmt *a = m.at(orig);
      IrEmitter in(a);
      Stmt *j = flat_index(in, *a->operands[0]);
      Stmt *bucket = in.bin(BinaryOp::Shr, in.cast(j, DataType::u32), in.ci(DataType::u32, shift_));
      bucket = in.cast(in.bin(BinaryOp::Min, bucket, in.ci(DataType::u32, buckets_ - 1)), DataType::i32);
      Stmt *slot = in.bin(BinaryOp::Add, row, bucket);
      Stmt *o = load(in, counts_, slot);
      store(in, counts_, slot, in.bin(BinaryOp::Add, o, i32(in, 1)));
      if (fill) {
        o = in.bin(BinaryOp::Min, o, last);
        store(in, indices_, o, j);
        store(in, values_, o, a->operands[1]);
      }
      std::erase_if(a->parent->stmts, [&](auto &s) { return s.get() == a; });
    }
    if (!fill)
      for (Stmt *orig : own_) {
        Stmt *w = m.at(orig);
        std::erase_if(w->parent->stmts, [&](auto &s) { return s.get() == w; });
      }
    return p;
  }

  // The row-major index of the target's element, i32.
  Stmt *flat_index(IrEmitter &e, const Stmt &p) {
    Stmt *j = nullptr;
    for (size_t i = 0; i < p.operands.size(); i++) {
      Stmt *x = e.cast(p.operands[i], DataType::i32);
      j = j ? e.bin(BinaryOp::Add, e.bin(BinaryOp::Mul, j, i32(e, shape_[i])), x) : x;
    }
    return j;
  }

  // Pass 2 (serial): counts[part, b] becomes the offset of (b, part)'s updates, bucket-major.
  Task offsets() {
    Task s;
    s.when = Task::When::WithScratch;
    IrEmitter e(s.body, loc_);
    Stmt *sum = e.var(DataType::i32, i32(e, 0));
    Stmt *lb = range_for(e, i32(e, 0), i32(e, buckets_), true);
    IrEmitter be(*lb->body, loc_);
    Stmt *b = be.add(StmtKind::LoopIndex, DataType::i32, {lb});
    store(be, starts_, b, be.load(sum));
    Stmt *lp = range_for(be, i32(be, 0), i32(be, parts_), true);
    IrEmitter pe(*lp->body, loc_);
    Stmt *q = pe.add(StmtKind::LoopIndex, DataType::i32, {lp});
    Stmt *slot = pe.bin(BinaryOp::Add, pe.bin(BinaryOp::Mul, q, i32(pe, buckets_)), b);
    Stmt *c = load(pe, counts_, slot);
    Stmt *at = pe.load(sum);
    store(pe, counts_, slot, at);
    pe.store(sum, pe.bin(BinaryOp::Add, at, c));
    store(e, starts_, i32(e, buckets_), e.load(sum));
    return s;
  }

  // Pass 4: for b in range(B), bucket b's updates as plain read-modify-writes, in order.
  Task apply() {
    Task p;
    p.parallel = true;
    p.when = Task::When::WithScratch;
    IrEmitter pe(p.prologue, loc_);
    Stmt *outer = range_for(pe, i32(pe, 0), i32(pe, buckets_), false);
    p.body.push(std::move(p.prologue.stmts.back()));
    p.prologue.stmts.pop_back();
    IrEmitter e(*outer->body, loc_);
    Stmt *b = e.add(StmtKind::LoopIndex, DataType::i32, {outer});
    Stmt *inner = range_for(e, load(e, starts_, b), load(e, starts_, e.bin(BinaryOp::Add, b, i32(e, 1))), true);
    IrEmitter in(*inner->body, loc_);
    Stmt *o = in.add(StmtKind::LoopIndex, DataType::i32, {inner});
    // (clamped like the slots in pass 3)
    Stmt *j = in.bin(BinaryOp::Min, in.cast(load(in, indices_, o), DataType::u32), in.ci(DataType::u32, size_ - 1));
    Stmt *y = ptr(in, target_, dtype_, in.cast(j, DataType::i32));  // one flat index
    Stmt *old = in.add(StmtKind::GlobalLoad, dtype_, {y});
    in.add(StmtKind::GlobalStore, DataType::none, {y, in.bin(combine_of(op_), old, load(in, values_, o))});
    return p;
  }

  KernelIR &k_;
  const Task &t_;
  int64_t target_;
  const std::vector<Stmt *> &atomics_;
  const std::vector<Stmt *> &own_;  // the iteration's own writes (partitionable): pass 3's only
  SourceLoc loc_;
  std::vector<int64_t> shape_;
  DataType dtype_;
  AtomicOp op_;
  int64_t size_ = 1, buckets_ = 1;
  int shift_ = 16, parts_ = 1;
  int counts_ = -1, starts_ = -1, indices_ = -1, values_ = -1;
};

// The atomics of t's loop that partition_scatters rewrites (none: it leaves the loop alone).
std::vector<Stmt *> scatter_atomics(KernelIR &k, Task &t, int64_t *target, std::vector<Stmt *> *own) {
  if (k.debug || !t.parallel || !t.pre_loop.stmts.empty() || !t.post_loop.stmts.empty() || t.loop()->block_dim ||
      first_call(*t.loop()->body))  // a call's memory accesses are not the loop's to reorder
    return {};
  return partitionable(k, t, target, own);
}

int host_threads() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

}  // namespace

bool bucket_scatter(KernelIR &k, const Task &t, const std::vector<Stmt *> &atomics, int max_shift,
                    std::vector<Task> &out, ScatterBuckets *b) {
  int64_t target = -1;
  std::vector<Stmt *> own;
  std::vector<Stmt *> found = scatter_atomics(k, const_cast<Task &>(t), &target, &own);  // (only reads t)
  std::vector<Stmt *> want = atomics;
  std::sort(found.begin(), found.end());
  std::sort(want.begin(), want.end());
  if (found.empty() || found != want || !Bucketing::applies(k, target, found)) return false;
  Bucketing bucketing(k, t, target, found, own, host_threads(), max_shift);
  for (Task &p : bucketing.tasks(/*apply=*/false)) out.push_back(std::move(p));
  *b = bucketing.buckets();
  return true;
}

void partition_scatters(KernelIR &k) {
  int threads = host_threads();
  std::vector<Task> tasks;
  for (Task &t : k.tasks) {
    int64_t target = -1;
    std::vector<Stmt *> own;
    std::vector<Stmt *> atomics = scatter_atomics(k, t, &target, &own);
    if (!atomics.empty()) {
      if (Bucketing::applies(k, target, atomics)) {
        for (Task &b : Bucketing(k, t, target, atomics, own, threads).tasks(/*apply=*/true)) tasks.push_back(std::move(b));
        t.when = Task::When::WithoutScratch;
      }
      if (threads >= 2 && threads <= kMaxParts && own.empty()) partition(k, t, target, atomics, threads);
    }
    tasks.push_back(std::move(t));
  }
  k.tasks = std::move(tasks);
  // The tasks' blocks moved: point their statements at where they are now.
  for (Task &t : k.tasks)
    for (Block *b : {&t.prologue, &t.body, &t.pre_loop, &t.post_loop})
      for (auto &s : b->stmts) s->parent = b;
}

}  // namespace qd
