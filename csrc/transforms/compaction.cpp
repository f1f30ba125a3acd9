// Batched compaction (Vulkan, cpu): a parallel loop of the form
//
//   for i in range(begin, end):
//       <loads and arithmetic>                     (no side effects)
//       if cond:
//           slot = qd.atomic_add(c[None], v)        (v the same for every thread: `1`)
//           out[slot] = value; ...                  (stores, arithmetic)
//
// takes one atomic per batch of B * S elements (S lanes per subgroup) instead of one per element
// (or per subgroup and element, after subgroup aggregation). Thread t handles B elements, the
// subgroup's lanes consecutive ones: element (t / S) * S * B + j * S + t % S, j < B. For each j
// the lanes evaluate the condition; the masks of the passing lanes come from subgroup reductions
// (or ballots); one elected lane does the atomic for the batch's total. Then, for each j, the
// passing lanes' values are moved in registers to the first active lanes (the one of rank r takes
// those of the r-th passing lane: a shuffle), and the first count lanes run the `if` body with
// slot = old + v * (passing elements before it, in (j, lane) order).
//
// The slots are what the atomics would have returned one after another in that order; every
// element is handled once, the condition and the body are evaluated for the same elements as
// before. Only the assignment of elements to threads changes, which a parallel loop leaves open.
// Why: an atomic per batch instead of per element or subgroup means little contention between
// cores; and on lavapipe, which runs every memory access of a subgroup lane by lane, stores under
// a random mask mispredict a branch per lane, while here the stores' mask is a prefix of the
// lanes. On the cpu a thread's batch (1024 elements) runs in two loops instead, without a branch
// per element: the indices of the passing elements are listed, then the body runs for each
// (Batcher::batch_in_loops); where the body reads the element only through loads x[i], x itself is
// compressed instead, and the body reads the passing elements' values in order.
// Deterministic mode's stable compaction (deterministic.cpp) runs each of its chunks the same way
// (batch_chunk_compaction), the batches in order, each taking its slots from the chunk's running
// slot instead of an atomic: on the cpu a chunk is a serial loop of one thread; on Vulkan a
// subgroup's S lanes take a chunk together, in rounds of S * B consecutive elements laid out as
// above (lane l, element j of the round at j * S + l), so that neighbouring lanes load neighbouring
// elements; its counting pass runs the same rounds for each lane's count alone (count_only), which
// the caller adds over the subgroup after the chunk.
// Off with qd.init(subgroup_aggregation=False).
#include <algorithm>
#include <map>
#include <unordered_set>

#include "transforms/ir_emitter.h"
#include "transforms/passes.h"

namespace qd {

namespace {

using B = BinaryOp;
constexpr int kGpuBatch = kGpuCompactionBatch;  // GPUs: elements per thread and batch
constexpr int kCpuBatch = 1024;      // cpu: elements per batch (one atomic each), in loops

// Evaluated for every element of a batch, including the ones that do not pass the condition and,
// with a clamped index, past the end of the range: no side effects, no control flow.
bool speculatable(const Stmt &s) {
  switch (s.kind) {
    case StmtKind::Const: case StmtKind::Arg: case StmtKind::Unary: case StmtKind::Binary:
    case StmtKind::Select: case StmtKind::GlobalPtr: case StmtKind::LoopIndex:
      return true;
    case StmtKind::GlobalLoad: return !s.is_atomic && !s.is_volatile;
    default: return false;
  }
}

// Types a shuffle moves as they are (Vulkan: 64-bit integers need subgroup extended types).
bool shuffles(DataType t, const Target &target) {
  if (is_real(t)) return bit_width(t) >= 32;
  if (bit_width(t) == 64) return target.features.has(Cap::subgroup_extended_types);
  return true;  // 32-bit, and narrower ones widened to i32 first
}

struct Match {
  Stmt *loop = nullptr, *branch = nullptr, *atomic = nullptr;
  std::vector<Stmt *> pre;    // the statements before the `if`
  std::vector<Stmt *> moved;  // the lane-dependent values of `pre` that the `if` body uses
  std::vector<Stmt *> rebuilt;  // pointers of `pre` that the `if` body uses: made again from moved indices
};

// A lane-independent value (constants, arguments, arithmetic on them), operands first, at e's point.
Stmt *copy_tree(IrEmitter &e, Stmt *s, CloneMap &done) {
  if (auto it = done.find(s); it != done.end()) return it->second;
  for (Stmt *o : s->operands) copy_tree(e, o, done);
  return done[s] = e.copy(*s, done);
}

// The index in `block` of the statement holding s (s itself, or the If / loop it is nested in).
size_t position(const Block &block, const Stmt *s) {
  while (s->parent != &block) s = s->parent->owner;
  size_t i = 0;
  while (block.stmts[i].get() != s) i++;
  return i;
}

// Variables of straight-line code: an alloca whose stores are all in its own block (not in a
// nested branch or loop) is replaced, at each load, by the value stored last before it (`v = x[i]`,
// `keep = v > t` then `keep = ...`, `s = qd.atomic_add(...)`); it goes when every load has one.
void forward_stores(Block &body) {
  std::map<Stmt *, std::vector<Stmt *>> stores, loads;
  for_each_stmt(body, [&](Stmt &s) {
    if (s.kind == StmtKind::Alloca) stores[&s], loads[&s];
    if (s.kind == StmtKind::LocalStore && stores.count(s.operands[0])) stores[s.operands[0]].push_back(&s);
    if (s.kind == StmtKind::LocalLoad && loads.count(s.operands[0])) loads[s.operands[0]].push_back(&s);
  });
  for (auto &[var, st] : stores) {
    Block &block = *var->parent;
    if (std::any_of(st.begin(), st.end(), [&](Stmt *x) { return x->parent != &block; })) continue;
    std::vector<std::pair<Stmt *, Stmt *>> forwarded;  // load -> the store before it
    for (Stmt *l : loads[var]) {
      size_t at = position(block, l);
      Stmt *last = nullptr;
      for (Stmt *x : st)  // in program order
        if (position(block, x) < at) last = x;
      if (last) forwarded.emplace_back(l, last);
    }
    if (forwarded.size() != loads[var].size()) continue;
    std::unordered_set<const Stmt *> dead(st.begin(), st.end());
    dead.insert(var);
    for (auto &[l, store] : forwarded) {  // in program order: a store of an earlier load's value
      replace_uses(body, l, store->operands[1]);  // reads it already replaced
      dead.insert(l);
    }
    for_each_stmt(body, [&](Stmt &s) {
      if (s.body) std::erase_if(s.body->stmts, [&](auto &x) { return dead.count(x.get()) > 0; });
      if (s.else_body) std::erase_if(s.else_body->stmts, [&](auto &x) { return dead.count(x.get()) > 0; });
    });
    std::erase_if(body.stmts, [&](auto &x) { return dead.count(x.get()) > 0; });
  }
}

class Batcher {
 public:
  // The device's subgroup size, when known, lays the elements out and sizes the masks; otherwise
  // the layout assumes 32 lanes and the masks are 64-bit ballots (right for any size).
  // On the cpu a thread is its own subgroup of one lane (and the batch runs in loops).
  // `run`: the loop matched is a serial one whose slots come from that variable
  // (batch_chunk_compaction: on the cpu one thread's, on Vulkan a subgroup's lanes together);
  // otherwise it is t's parallel loop.
  Batcher(KernelIR &k, const Target &target, Task &t, Stmt *run = nullptr, bool count_only = false)
      : k_(k), target_(target), t_(t), run_(run), count_only_(count_only), cpu_(target.backend == Backend::Cpu),
        known_(cpu_ || target.features.subgroup_size > 0),
        lanes_(cpu_ ? 1 : known_ ? target.features.subgroup_size : 32), batch_(cpu_ ? kCpuBatch : kGpuBatch) {}

  bool match(Match &m, Stmt *loop) {
    if ((!run_ && (loop->serialize || t_.cpu_block_dim)) || loop->first_index ||
        loop->operands[0]->dtype != DataType::i32 || (lanes_ & (lanes_ - 1)) != 0 || lanes_ > 64)
      return false;
    auto &stmts = loop->body->stmts;
    if (stmts.empty() || stmts.back()->kind != StmtKind::If) return false;
    forward_stores(*loop->body);
    Stmt *branch = stmts.back().get();
    if (branch->else_body && !branch->else_body->stmts.empty()) return false;
    std::unordered_set<const Stmt *> pre, moved, rebuilt;
    auto move = [&](Stmt *o) {
      if (!pre.count(o) || thread_uniform(o) || moved.count(o)) return true;
      if (!cpu_ && !shuffles(o->dtype, target_)) return false;
      moved.insert(o);
      m.moved.push_back(o);
      return true;
    };
    for (size_t i = 0; i + 1 < stmts.size(); i++) {
      if (!speculatable(*stmts[i])) return false;
      if (stmts[i]->kind == StmtKind::LoopIndex && stmts[i]->operands[0] != loop) return false;  // (before_if)
      pre.insert(stmts[i].get());
      m.pre.push_back(stmts[i].get());
    }
    Stmt *atomic = nullptr;
    for (auto &sp : branch->body->stmts) {
      Stmt &s = *sp;
      switch (s.kind) {
        case StmtKind::Const: case StmtKind::Arg: case StmtKind::Unary: case StmtKind::Binary:
        case StmtKind::Select: case StmtKind::GlobalPtr: break;
        case StmtKind::GlobalStore: if (s.is_atomic) return false; break;
        case StmtKind::GlobalLoad: if (s.is_atomic || s.is_volatile) return false; break;  // `out[s] = x[i]`
        case StmtKind::Atomic: if (atomic) return false; atomic = &s; break;
        default: return false;
      }
      for (Stmt *o : s.operands) {
        if (o->kind == StmtKind::GlobalPtr && pre.count(o)) {
          if (rebuilt.insert(o).second) m.rebuilt.push_back(o);
          for (Stmt *index : o->operands)
            if (!move(index)) return false;
        } else if (!move(o)) {
          return false;
        }
      }
    }
    if (!atomic || !counter(*atomic)) return false;
    m.loop = loop;
    m.branch = branch;
    m.atomic = atomic;
    return true;
  }

  void rewrite(const Match &m) {
    Stmt *loop = m.loop, *atomic = m.atomic;
    DataType it = loop->operands[0]->dtype, u32 = DataType::u32;  // it: the index type
    const int chunk = lanes_ * batch_;
    // The loop now counts threads: S per chunk of S * batch_ elements (the cpu: batches).
    IrEmitter p = run_ ? IrEmitter(loop) : IrEmitter(t_.prologue, loop->loc);
    Stmt *begin = loop->operands[0], *end = loop->operands[1];
    // The length as unsigned: right for any i32 range (up to 2^32 - 1), read only when end > begin.
    Stmt *n_u = p.bin(B::Sub, p.bitcast(end, u32), p.bitcast(begin, u32));
    Stmt *chunks = p.sel(p.bin(B::Gt, end, begin),
                         p.bin(B::Add, p.bin(B::Div, p.bin(B::Sub, n_u, p.ci(u32, 1)), p.ci(u32, chunk)), p.ci(u32, 1)),
                         p.ci(u32, 0));
    // (with run_, a serial loop of a subgroup's lanes together: one iteration per round)
    loop->operands = {p.ci(it, 0), p.bitcast(run_ ? chunks : p.bin(B::Mul, chunks, p.ci(u32, lanes_)), it)};  // below 2^28
    loop->label = count_only_ ? "deterministic chunk, batched count" : run_ ? "deterministic chunk, batched compaction"
                                                                             : "batched compaction";

    auto old_body = std::move(loop->body);  // the originals stay alive while they are copied
    loop->body = std::make_unique<Block>();
    loop->body->owner = loop;
    IrEmitter e(*loop->body, m.branch->loc);
    Stmt *t = e.bitcast(e.add(StmtKind::LoopIndex, it, {loop}), u32);
    if (cpu_) {
      loop->label = run_ ? "deterministic chunk, batched compaction in loops" : "batched compaction, in loops";
      return batch_in_loops(m, e, t, begin, n_u);
    }
    Stmt *lane = e.cast(e.simt(SimtOp::SubgroupInvocationId, DataType::i32, {}), u32);
    if (run_) t = e.bin(B::Add, e.bin(B::Mul, t, e.ci(u32, lanes_)), lane);  // round t, this lane
    int log2_lanes = 0;
    while ((1 << log2_lanes) < lanes_) log2_lanes++;
    // (t / S) * S * batch_ + t % S, unsigned: below n + S * batch_, so it does not overflow
    Stmt *first = e.bin(B::Add, e.bin(B::Mul, e.bin(B::Shr, t, e.ci(u32, log2_lanes)), e.ci(u32, chunk)),
                        e.bin(B::BitAnd, t, e.ci(u32, lanes_ - 1)));
    // Per element j: the statements before the `if` at index i_j (clamped to the last index past
    // the end of the range) and whether it passes.
    std::vector<CloneMap> value(batch_);
    std::vector<Stmt *> passes(batch_);
    for (int j = 0; j < batch_; j++) {
      Stmt *off = e.bin(B::Add, first, e.ci(u32, j * lanes_));
      Stmt *valid = e.bin(B::Lt, off, n_u);
      Stmt *index = e.sel(valid, e.bin(B::Add, begin, e.bitcast(off, it)), e.bin(B::Sub, end, e.ci(it, 1)));
      value[j] = before_if(e, m, index);
      passes[j] = e.both(valid, passes_at(e, m, value[j]));
    }
    if (count_only_) {  // this lane's passing elements: run_ advances by their slots, per lane
      Stmt *mine = e.ci(u32, 0);
      for (Stmt *p : passes) mine = e.bin(B::Add, mine, e.cast(p, u32));
      Stmt *step = nullptr;
      take_slots(e, atomic, mine, step);
      return;
    }
    // The masks of the passing lanes, and this lane's rank among the active ones (its lane number
    // when every lane is there).
    std::vector<Stmt *> masks = lane_masks(e, passes, lane);
    Stmt *active = lane_masks(e, {e.ci(DataType::i32, 1)}, lane)[0];
    DataType mt = active->dtype;
    Stmt *below = e.bin(B::Sub, e.bin(B::Shl, e.ci(mt, 1), e.cast(lane, mt)), e.ci(mt, 1));
    Stmt *rank = e.cast(e.un(UnaryOp::PopCount, e.bin(B::BitAnd, active, below)), u32);
    std::vector<Stmt *> counts(batch_);
    Stmt *total = nullptr;
    for (int j = 0; j < batch_; j++) {
      counts[j] = e.cast(e.un(UnaryOp::PopCount, masks[j]), u32);
      total = total ? e.bin(B::Add, total, counts[j]) : counts[j];
    }
    DataType type = atomic->dtype;
    Stmt *step = nullptr;
    Stmt *old = take_slots(e, atomic, total, step);
    B combine = atomic->atomic_op() == AtomicOp::Sub ? B::Sub : B::Add;
    Stmt *before = e.ci(u32, 0);  // the passing elements of the earlier j
    for (int j = 0; j < batch_; j++) {
      // The active lane of rank r < count takes the values of the r-th passing lane (shuffled
      // before the branch, while every lane is there to be read).
      Stmt *src = nth_set_bit(e, masks[j], rank);
      CloneMap map = value[j];
      for (Stmt *v : m.moved) map[v] = shuffle(e, value[j][v], src);
      map[atomic] = e.bin(combine, old, e.bin(B::Mul, step, e.cast(e.bin(B::Add, before, rank), type)));
      IrEmitter body = e.if_(e.bin(B::Lt, rank, counts[j]));
      for (Stmt *ptr : m.rebuilt) map[ptr] = body.copy(*ptr, map);
      for (auto &s : m.branch->body->stmts)
        if (s.get() != atomic) map[s.get()] = body.copy(*s, map);
      before = e.bin(B::Add, before, counts[j]);
    }
  }

 private:
  // The statements before the `if`, evaluated at `index` (for the original loop index).
  static CloneMap before_if(IrEmitter &e, const Match &m, Stmt *index) {
    CloneMap v;
    for (Stmt *s : m.pre) v[s] = s->kind == StmtKind::LoopIndex ? index : e.copy(*s, v);
    return v;
  }

  // Whether the element whose statements before the `if` are `v` passes its condition (i32 0 / 1).
  static Stmt *passes_at(IrEmitter &e, const Match &m, const CloneMap &v) {
    Stmt *cond = mapped(v, m.branch->operands[0]);
    return e.bin(B::Ne, cond, e.ci(cond->dtype, 0));
  }

  // One atomic taking `total` elements' slots, by the lowest active lane; every lane gets its old
  // value. `step` is set to the atomic's operand (the same for every element). With run_, the
  // variable's value instead, advanced past them.
  Stmt *take_slots(IrEmitter &e, Stmt *atomic, Stmt *total, Stmt *&step) const {
    DataType type = atomic->dtype;
    CloneMap hoisted;
    step = e.cast(copy_tree(e, atomic->operands[1], hoisted), type);
    if (run_) {
      Stmt *old = e.load(run_);
      e.store(run_, e.bin(atomic->atomic_op() == AtomicOp::Sub ? B::Sub : B::Add, old,
                          e.bin(B::Mul, step, e.cast(total, type))));
      return old;
    }
    copy_tree(e, atomic->operands[0], hoisted);
    if (cpu_) {
      hoisted[atomic->operands[1]] = e.bin(B::Mul, step, e.cast(total, type));
      return e.copy(*atomic, hoisted);
    }
    Stmt *old_var = e.var(type, e.ci(type, 0));
    IrEmitter one = e.if_(e.simt(SimtOp::SubgroupElect, DataType::i32, {}));
    hoisted[atomic->operands[1]] = one.bin(B::Mul, step, one.cast(total, type));
    one.store(old_var, one.copy(*atomic, hoisted));
    return e.simt(SimtOp::SubgroupBroadcastFirst, type, {e.load(old_var)});
  }

  // The cpu: thread iteration t takes the kCpuBatch elements from begin + t * kCpuBatch in two
  // inner loops without a branch per element (one on random data mispredicts half the time). The
  // first evaluates each element's condition into a per-thread array (a loop LLVM vectorizes when
  // the condition's code allows), a span compress (ir/ops.h: vectors of conditions, a table entry
  // each) lists the indices of the passing elements; after one atomic for their count, the second
  // loop runs the body for each listed element, in order, at slot old + step * (its place in the
  // list). The body runs for exactly the passing elements, as before.
  void batch_in_loops(const Match &m, IrEmitter &e, Stmt *t, Stmt *begin, Stmt *n_u) const {
    DataType it = begin->dtype, u32 = DataType::u32, type = m.atomic->dtype;
    BufferDesc d{BufferKind::Private, it, {kCpuBatch}};
    d.name = "passing elements";
    const int list = k_.add_buffer(std::move(d));
    auto at = [&](IrEmitter &x, Stmt *index) {
      Stmt *p = x.add(StmtKind::GlobalPtr, it, {index});
      p->ival = list;
      return p;
    };
    Stmt *first = e.bin(B::Mul, t, e.ci(u32, kCpuBatch));  // below n_u
    Stmt *left = e.bin(B::Sub, n_u, first);
    Stmt *len = e.sel(e.bin(B::Lt, left, e.ci(u32, kCpuBatch)), left, e.ci(u32, kCpuBatch));
    Stmt *lo = e.bin(B::Add, begin, e.bitcast(first, it));
    Stmt *hi = e.bin(B::Add, lo, e.bitcast(len, it));
    BufferDesc fd{BufferKind::Private, DataType::i32, {kCpuBatch}};
    fd.name = "passes";
    const int passes = k_.add_buffer(std::move(fd));
    Stmt *i = nullptr;
    {
      IrEmitter c = e.for_(lo, hi, i);
      Stmt *p = c.add(StmtKind::GlobalPtr, DataType::i32, {c.bin(B::Sub, i, lo)});
      p->ival = passes;
      c.add(StmtKind::GlobalStore, DataType::none, {p, passes_at(c, m, before_if(c, m, i))});
    }
    Stmt *flags = e.add(StmtKind::GlobalPtr, DataType::i32, {e.ci(it, 0)});
    flags->ival = passes;
    auto compress = [&](IrEmitter &x, Stmt *out, Stmt *from) {
      return x.add(StmtKind::Span, DataType::i32, {out, flags, x.bitcast(len, it), x.ci(DataType::i32, kCpuBatch), from},
                   static_cast<int>(SpanOp::Compress));
    };
    // Where the body uses the element only through loads x[i] (streamed_loads) and x holds the
    // batch's elements, each such x is compressed from x[lo:hi) itself, and the body reads the
    // r-th passing element's values in order from those arrays instead of gathering them at
    // listed indices (no list then); elsewhere the indices are listed, from lo on.
    Streamed streamed_info = it == DataType::i32 ? streamed_loads(m) : Streamed{};
    const std::vector<Stmt *> &streamed = streamed_info.loads;
    Stmt *fits = nullptr;
    std::vector<std::pair<Stmt *, int>> from;
    Stmt *count = e.var(DataType::i32, e.ci(DataType::i32, 0));
    if (!streamed.empty()) {
      fits = e.bin(B::Ge, lo, e.ci(it, 0));
      for (Stmt *l : streamed) fits = e.both(fits, e.bin(B::Le, hi, length_of(e, l->operands[0]->ival)));
      IrEmitter fast = e.if_(fits);
      for (Stmt *l : streamed) {
        BufferDesc vd{BufferKind::Private, l->dtype, {kCpuBatch}};
        vd.name = "passing values";
        const int values = k_.add_buffer(std::move(vd));
        Stmt *out = fast.add(StmtKind::GlobalPtr, l->dtype, {fast.ci(it, 0)});
        out->ival = values;
        Stmt *src = fast.add(StmtKind::GlobalPtr, l->dtype, {lo});
        src->ival = l->operands[0]->ival;
        fast.store(count, compress(fast, out, src));
        from.emplace_back(l, values);
      }
    }
    if (fits) {
      IrEmitter listing = e.if_(e.not_(fits));
      listing.store(count, compress(listing, at(listing, listing.ci(it, 0)), lo));
    } else {
      e.store(count, compress(e, at(e, e.ci(it, 0)), lo));
    }
    Stmt *total = e.bitcast(e.load(count), u32);
    IrEmitter g = e.if_(e.bin(B::Gt, total, e.ci(u32, 0)));
    Stmt *step = nullptr;
    Stmt *old = take_slots(g, m.atomic, total, step);
    B combine = m.atomic->atomic_op() == AtomicOp::Sub ? B::Sub : B::Add;
    // The body for the r-th passing element: the values of `from`'s loads from their arrays
    // (element r), everything else from its listed index.
    auto body_loop = [&](IrEmitter &x, const std::vector<std::pair<Stmt *, int>> &given_loads) {
      Stmt *r = nullptr;
      IrEmitter b = x.for_(x.ci(it, 0), x.bitcast(total, it), r);
      r->operands[0]->independent = true;  // each iteration its own element and slot
      CloneMap map;
      if (given_loads.empty()) {
        map = before_if(b, m, b.add(StmtKind::GlobalLoad, it, {at(b, r)}));
      } else {  // (the body uses no other value of the element: the rest of `pre` is uniform)
        for (auto [load, buffer] : given_loads) {
          Stmt *p = b.add(StmtKind::GlobalPtr, load->dtype, {r});
          p->ival = buffer;
          map[load] = b.add(StmtKind::GlobalLoad, load->dtype, {p});
        }
        for (Stmt *s : m.pre)
          if (!map.count(s) && thread_uniform(s)) map[s] = b.copy(*s, map);
      }
      map[m.atomic] = b.bin(combine, old, b.bin(B::Mul, step, b.cast(r, type)));
      for (auto &s : m.branch->body->stmts)
        if (s.get() != m.atomic && !map.count(s.get()) && (given_loads.empty() || !streamed_info.ptrs.count(s.get())))
          map[s.get()] = b.copy(*s, map);
    };
    if (!fits) {
      body_loop(g, {});
      return;
    }
    IrEmitter fast = g.if_(fits);
    body_loop(fast, from);
    IrEmitter slow = g.if_(g.not_(fits));
    body_loop(slow, {});
  }

  // The loads x[i] of the element's own index that the `if` body uses (in it, or before it and
  // used in it) from a one-dimensional array of 32- or 64-bit elements (what a compress moves)
  // that the body does not write, where the body uses nothing else of the element (no other value
  // of `pre` but uniform ones); else none. `ptrs`: the body's pointers that only those loads use.
  struct Streamed {
    std::vector<Stmt *> loads;
    std::unordered_set<const Stmt *> ptrs;
  };
  Streamed streamed_loads(const Match &m) const {
    std::unordered_set<int64_t> written;
    for_each_stmt(*m.branch->body, [&](Stmt &s) {
      if ((s.kind == StmtKind::GlobalStore || s.kind == StmtKind::Atomic) && s.operands[0]->kind == StmtKind::GlobalPtr)
        written.insert(s.operands[0]->ival);
    });
    auto own_element = [&](const Stmt &s) {
      if (s.kind != StmtKind::GlobalLoad || s.is_atomic || s.is_volatile) return false;
      const Stmt &p = *s.operands[0];
      if (p.kind != StmtKind::GlobalPtr || p.operands.size() != 1 || p.operands[0]->kind != StmtKind::LoopIndex ||
          p.operands[0]->operands[0] != m.loop || written.count(p.ival))
        return false;
      const int bits = bit_width(s.dtype);
      if (bits != 32 && bits != 64) return false;
      const BufferDesc &d = k_.buffers[p.ival];
      return (d.kind == BufferKind::Ndarray && d.ndim == 1 && d.static_tail.empty()) ||
             (d.kind == BufferKind::Field && d.shape.size() == 1);
    };
    Streamed out;
    for (Stmt *s : m.moved)
      if (own_element(*s)) out.loads.push_back(s);
    for (auto &s : m.branch->body->stmts)
      if (own_element(*s)) out.loads.push_back(s.get());
    std::unordered_set<const Stmt *> loads(out.loads.begin(), out.loads.end());
    std::unordered_set<const Stmt *> used;  // operands of the body's statements but those loads
    for_each_stmt(*m.branch->body, [&](Stmt &s) {
      if (!loads.count(&s)) used.insert(s.operands.begin(), s.operands.end());
    });
    for (const Stmt *l : out.loads)
      if (l->operands[0]->parent == m.branch->body.get() && !used.count(l->operands[0])) out.ptrs.insert(l->operands[0]);
    std::unordered_set<const Stmt *> pre(m.pre.begin(), m.pre.end());
    bool other = false;
    for_each_stmt(*m.branch->body, [&](Stmt &s) {
      if (loads.count(&s) || out.ptrs.count(&s)) return;
      for (const Stmt *o : s.operands)
        if (pre.count(o) && !loads.count(o) && !thread_uniform(o)) other = true;
    });
    if (other) return {};
    return out;
  }

  // The elements of a one-dimensional field or ndarray (i32).
  Stmt *length_of(IrEmitter &e, int64_t buffer) const {
    const BufferDesc &d = k_.buffers[buffer];
    if (d.kind == BufferKind::Field) return e.ci(DataType::i32, std::min<int64_t>(d.shape[0], INT32_MAX));
    Stmt *a = e.add(StmtKind::Arg, DataType::i32, {});
    a->ival = d.shape_arg_slot;
    return a;
  }

  // A relaxed add / sub of a lane-independent operand on a lane-independent address.
  bool counter(const Stmt &a) const {
    if (a.order != MemoryOrder::Relaxed) return false;
    if (a.atomic_op() != AtomicOp::Add && a.atomic_op() != AtomicOp::Sub) return false;
    DataType t = a.dtype;
    if (t != DataType::i32 && t != DataType::u32 && t != DataType::i64 && t != DataType::u64) return false;
    return thread_uniform_address(k_, *a.operands[0]) && thread_uniform(a.operands[1]);
  }

  // Per predicate, the active lanes where it holds. With a known size up to 32 lanes, the bits of
  // 32 / S predicates are packed in one word (bit k * S + lane) and or-reduced over the subgroup
  // (on lavapipe much cheaper than a ballot each); otherwise 64-bit ballots.
  std::vector<Stmt *> lane_masks(IrEmitter &e, const std::vector<Stmt *> &passes, Stmt *lane) const {
    if (!known_ || lanes_ > 32) {
      std::vector<Stmt *> masks;
      for (Stmt *p : passes) masks.push_back(e.simt(SimtOp::SubgroupBallot, DataType::u64, {p}));
      return masks;
    }
    DataType u32 = DataType::u32;
    const int per_word = 32 / lanes_, n = static_cast<int>(passes.size());
    std::vector<Stmt *> masks;
    for (int j0 = 0; j0 < n; j0 += per_word) {
      Stmt *bits = nullptr;
      for (int j = j0; j < n && j < j0 + per_word; j++) {
        Stmt *bit = e.bin(B::Shl, e.cast(passes[j], u32), e.bin(B::Add, lane, e.ci(u32, (j - j0) * lanes_)));
        bits = bits ? e.bin(B::BitOr, bits, bit) : bit;
      }
      Stmt *word = e.add(StmtKind::Simt, u32, {bits}, static_cast<int>(SimtOp::SubgroupReduce));
      word->ival = static_cast<int64_t>(B::BitOr);
      for (int j = j0; j < n && j < j0 + per_word; j++) {
        Stmt *shifted = j == j0 ? word : e.bin(B::Shr, word, e.ci(u32, (j - j0) * lanes_));
        masks.push_back(lanes_ == 32 ? shifted : e.bin(B::BitAnd, shifted, e.ci(u32, (int64_t{1} << lanes_) - 1)));
      }
    }
    return masks;
  }

  // The position of the (r + 1)-th set bit of mask (r < popcount(mask)), by halves, branch-free.
  Stmt *nth_set_bit(IrEmitter &e, Stmt *mask, Stmt *r) const {
    DataType u32 = DataType::u32, mt = mask->dtype;
    Stmt *pos = e.ci(u32, 0);
    for (int w = bit_width(mt) == 64 ? 32 : lanes_ / 2; w >= 1; w /= 2) {  // a ballot: any size up to 64
      Stmt *low = e.bin(B::BitAnd, e.bin(B::Shr, mask, e.cast(pos, mt)), e.ci(mt, (int64_t{1} << w) - 1));
      Stmt *cnt = e.cast(e.un(UnaryOp::PopCount, low), u32);
      Stmt *ge = e.bin(B::Ge, r, cnt);
      pos = e.sel(ge, e.bin(B::Add, pos, e.ci(u32, w)), pos);
      r = e.sel(ge, e.bin(B::Sub, r, cnt), r);
    }
    return pos;
  }

  static Stmt *shuffle(IrEmitter &e, Stmt *v, Stmt *src) {
    DataType t = v->dtype;
    Stmt *x = bit_width(t) < 32 ? e.cast(v, DataType::i32) : v;  // bools, 8 / 16-bit values
    return e.cast(e.simt(SimtOp::SubgroupShuffle, x->dtype, {x, src}), t);
  }

  KernelIR &k_;
  const Target &target_;
  Task &t_;
  Stmt *const run_;
  const bool count_only_;  // GPUs with run_: no body; each lane's run_ advanced by its own elements' slots
  const bool cpu_, known_;
  const int lanes_, batch_;
};

// Whether compactions are batched on this target: the cpu, and Vulkan with the subgroup operations
// the batches use.
bool batches_compactions(const Target &target) {
  if (!target.features.subgroup_aggregation) return false;
  if (target.backend == Backend::Cpu) return true;
  if (target.backend != Backend::Vulkan || !target.has_subgroup_reduce(DataType::u32)) return false;
  for (Cap c : {Cap::subgroup_shuffle, Cap::shader_int64})
    if (!target.features.has(c)) return false;
  return true;
}

}  // namespace

void batch_compactions(KernelIR &k, const Target &target) {
  if (!batches_compactions(target)) return;
  for (Task &t : k.tasks) {
    if (!t.parallel || synchronizes(t)) continue;
    Batcher b(k, target, t);
    Match m;
    if (b.match(m, t.loop())) b.rewrite(m);
  }
}

int subgroup_chunk_lanes(const Target &target) {
  if (target.backend != Backend::Vulkan || !batches_compactions(target)) return 0;
  const int s = target.features.subgroup_size;
  return s > 0 && s <= 64 && (s & (s - 1)) == 0 ? s : 0;
}

bool batch_chunk_compaction(KernelIR &k, const Target &target, Task &t, Stmt *loop, Stmt *run, bool count_only) {
  if (target.backend == Backend::Cpu ? count_only || !target.features.subgroup_aggregation
                                     : subgroup_chunk_lanes(target) == 0)
    return false;
  Batcher b(k, target, t, run, count_only);
  Match m;
  if (!b.match(m, loop)) return false;
  b.rewrite(m);
  return true;
}

}  // namespace qd
