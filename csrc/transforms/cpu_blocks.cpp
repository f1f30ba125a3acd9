// cpu: blocks, barriers, shared memory and subgroups (docs/backends.md, "Blocks on the cpu").
//
// A parallel loop whose body uses a block or subgroup operation (or a SharedArray) runs block by
// block: the runtime hands a worker whole blocks of block_dim iterations, and this pass rewrites the
// loop to step by blocks and run each block's logical threads in order on that worker. The body is
// cut at every barrier into barrier-free regions; each region becomes a serial loop over the
// block's threads (t = 0 .. n-1), so every thread finishes a region before any starts the next:
// block.sync() is a true barrier. Control flow that contains a barrier (a loop or a branch) is
// kept around its regions, executed once per block, and must therefore be uniform over the block:
// a condition that can differ between threads is a QuadrantsSyntaxError naming the barrier's line.
// A value computed in one region and used in another (or a variable used in several) lives in a
// per-thread array (a Private buffer of block_dim elements, indexed by t); a uniform condition or
// bound read at block level, in one slot every thread writes. A subgroup operation
// reads other lanes' values: its operand is written to such an array in an earlier region, and it
// becomes loads from the lanes it names (the same array). Subgroups are 32 consecutive threads of
// the block. Shared arrays live on the worker's stack (codegen), one per block at a time; atomics
// on them are plain read-modify-writes (nothing else runs the block meanwhile).
#include <algorithm>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "transforms/ir_emitter.h"
#include "transforms/passes.h"

namespace qd {

namespace {

using B = BinaryOp;

bool is_simt(const Stmt &s, SimtOp op) { return s.kind == StmtKind::Simt && static_cast<SimtOp>(s.op) == op; }

bool is_barrier(const Stmt &s) { return is_simt(s, SimtOp::BlockSync) || is_simt(s, SimtOp::SubgroupSync); }

bool is_exchange(const Stmt &s) {
  if (s.kind != StmtKind::Simt) return false;
  switch (static_cast<SimtOp>(s.op)) {
    case SimtOp::SubgroupShuffle: case SimtOp::SubgroupShuffleUp: case SimtOp::SubgroupShuffleDown:
    case SimtOp::SubgroupShuffleXor: case SimtOp::SubgroupBroadcast: case SimtOp::SubgroupBroadcastFirst:
    case SimtOp::SubgroupBallot: case SimtOp::SubgroupAll: case SimtOp::SubgroupAny:
      return true;
    default:
      return false;
  }
}

bool is_loop(const Stmt &s) { return s.kind == StmtKind::While || s.kind == StmtKind::RangeFor; }

// Statements a use may simply copy instead of reading another region's value.
bool rematerializable(const Stmt &s) { return s.kind == StmtKind::Const || s.kind == StmtKind::Arg; }

void set_parents(Block &b) {
  for (auto &s : b.stmts) {
    s->parent = &b;
    if (s->body) s->body->owner = s.get(), set_parents(*s->body);
    if (s->else_body) s->else_body->owner = s.get(), set_parents(*s->else_body);
  }
}

Stmt *insert_after(Stmt *anchor, std::unique_ptr<Stmt> s) {
  Block *b = anchor->parent;
  for (size_t i = 0; i < b->stmts.size(); i++)
    if (b->stmts[i].get() == anchor) {
      s->parent = b;
      Stmt *raw = s.get();
      b->stmts.insert(b->stmts.begin() + static_cast<long>(i) + 1, std::move(s));
      return raw;
    }
  return nullptr;
}

std::unique_ptr<Stmt> make(StmtKind kind, DataType t, std::vector<Stmt *> operands, const SourceLoc &loc) {
  auto s = std::make_unique<Stmt>(kind, t);
  s->operands = std::move(operands);
  s->loc = loc;
  return s;
}

const char *what(const Stmt &s) {
  if (is_simt(s, SimtOp::BlockSync)) return "qd.simt.block.sync()";
  if (is_simt(s, SimtOp::SubgroupSync)) return "qd.simt.subgroup.sync()";
  return "a subgroup operation (it reads the other lanes' values)";
}

class BlockSplitter {
 public:
  BlockSplitter(KernelIR &k, Task &t, int block_dim) : k_(k), t_(t), loop_(t.loop()), bd_(block_dim) {}

  void run() {
    set_parents(*loop_->body);
    for_each_stmt(*loop_->body, [&](Stmt &s) { in_body_.insert(&s); });
    find_varying();
    find_thread_exits();
    Stmt *begin = loop_->operands[0], *end = loop_->operands[1];
    SourceLoc loc = loop_->loc;

    auto old = std::move(loop_->body->stmts);
    loop_->body->stmts.clear();
    IrEmitter top(*loop_->body, loc);
    bs_ = top.add(StmtKind::LoopIndex, DataType::i32, {loop_});
    Stmt *left = top.bin(B::Sub, end, bs_);
    Stmt *bdc = top.ci(DataType::i32, bd_);
    // The next block's first index, stopping at `end` (no i32 wrap-around past INT_MAX).
    loop_->next_index = top.sel(top.bin(B::Gt, top.bitcast(left, DataType::u32), top.bitcast(bdc, DataType::u32)),
                                top.bin(B::Add, bs_, bdc), end);
    nthreads_ = top.sel(top.bin(B::Lt, left, bdc), left, bdc);
    gbase_ = top.bin(B::Sub, bs_, begin);
    if (!exits_.empty()) {
      exited_ = private_array(DataType::i32);
      int r = open_region(*loop_->body, /*check_exit=*/false);
      IrEmitter e(*regions_[r].body, loc);
      store(e, exited_, regions_[r].t, e.ci(DataType::i32, 0));
    }
    place(std::move(old), *loop_->body);

    compute_homes();
    substitute_thread_values();
    expand_exchanges();
    compute_homes();
    promote_variables();
    compute_homes();
    copy_pointers();
    compute_homes();
    promote_values();
    t_.cpu_block_dim = bd_;
  }

 private:
  static constexpr int kBlockLevel = -1;
  static constexpr int kLanes = kCpuSubgroupSize;

  struct Region {
    Stmt *loop, *t, *i, *gtid, *lane;
    Block *body;
    size_t helpers;  // statements at the top of the body that every other statement may use
  };

  // ---- uniformity: which values (and variables) can differ between the threads of a block -------
  bool varying(const Stmt *s) const { return varying_.count(s) > 0; }

  // A loop or branch whose execution differs between threads: an If on a varying condition, a
  // range with varying bounds, a while left by a break under such a branch.
  bool varying_control(const Stmt *owner) const {
    if (owner->kind == StmtKind::If) return varying(owner->operands[0]);
    if (owner->kind == StmtKind::RangeFor) return varying(owner->operands[0]) || varying(owner->operands[1]);
    return varying_loops_.count(owner) > 0;
  }

  bool under_varying_control(const Stmt *s, const Stmt *stop = nullptr) const {
    for (const Block *b = s->parent; b && b->owner && b->owner != loop_ && b->owner != stop; b = b->owner->parent)
      if (varying_control(b->owner)) return true;
    return false;
  }

  Stmt *target_loop(const Stmt *jump) const {
    for (const Block *b = jump->parent; b && b->owner; b = b->owner->parent)
      if (is_loop(*b->owner)) return b->owner;
    return nullptr;
  }

  void find_varying() {
    for (bool changed = true; changed;) {
      changed = false;
      auto mark = [&](const Stmt *s) {
        if (varying_.insert(s).second) changed = true;
      };
      for_each_stmt(*loop_->body, [&](Stmt &s) {
        if (varying(&s)) return;
        bool v = false;
        switch (s.kind) {
          case StmtKind::LoopIndex: v = s.operands[0] == loop_ || varying_control(s.operands[0]); break;
          case StmtKind::Simt:
            v = is_exchange(s) || is_simt(s, SimtOp::ThreadIdx) || is_simt(s, SimtOp::GlobalThreadIdx) ||
                is_simt(s, SimtOp::SubgroupInvocationId);
            break;
          case StmtKind::Atomic: case StmtKind::Call: v = true; break;  // (a call may read what others wrote)
          case StmtKind::Alloca: break;  // by its stores, below
          case StmtKind::LocalStore:
            if (varying(s.operands[1]) || under_varying_control(&s)) mark(s.operands[0]);
            break;
          case StmtKind::Break: case StmtKind::Continue: {
            Stmt *l = target_loop(&s);
            if (l && l != loop_ && l->kind == StmtKind::While && under_varying_control(&s, l)) {
              if (varying_loops_.insert(l).second) changed = true;
            }
            break;
          }
          default:
            if (block_index(s)) break;
            for (Stmt *o : s.operands) v = v || varying(o);
        }
        if (v && s.dtype != DataType::none) mark(&s);
      });
    }
  }

  // i // c or i >> k with c (2^k) a multiple of block_dim, i the loop index of a loop whose begin
  // is a constant multiple of block_dim (or global_thread_idx()): the same on the whole block.
  bool block_index(const Stmt &s) const {
    if (s.kind != StmtKind::Binary || s.operands.size() != 2) return false;
    auto op = static_cast<B>(s.op);
    const Stmt *i = s.operands[0], *c = s.operands[1];
    if ((op != B::FloorDiv && op != B::Div && op != B::Shr) || c->kind != StmtKind::Const || is_real(c->dtype))
      return false;
    if (op == B::Shr && (c->ival < 0 || c->ival > 30)) return false;
    int64_t d = op == B::Shr ? int64_t(1) << c->ival : c->ival;
    if (d <= 0 || d % bd_ != 0) return false;
    if (is_simt(*i, SimtOp::GlobalThreadIdx)) return true;
    const Stmt *begin = loop_->operands[0];
    bool aligned = begin->kind == StmtKind::Const && !is_real(begin->dtype) && begin->ival % bd_ == 0;
    return aligned && i->kind == StmtKind::LoopIndex && i->operands[0] == loop_ && (op == B::FloorDiv || begin->ival >= 0);
  }

  // `continue` (or `break`) of the parallel loop itself: that thread is done with this iteration.
  void find_thread_exits() {
    for_each_stmt(*loop_->body, [&](Stmt &s) {
      if ((s.kind == StmtKind::Break || s.kind == StmtKind::Continue) && target_loop(&s) == loop_) exits_.insert(&s);
      if (s.kind == StmtKind::Return)
        syntax_error("'return' inside a parallel loop that uses block or subgroup operations is not supported on the cpu",
                     s.loc);
    });
  }

  // ---- placing statements in regions ----------------------------------------------------------
  // Does the exchange `x` need every lane's operand computed before it, i.e. is its operand
  // produced in the region being built (or not placed yet: inside the statement being decided)?
  bool must_split(const Stmt &x, int cur) const {
    const Stmt *v = x.operands[0];
    if (rematerializable(*v) || !in_body_.count(v)) return false;
    auto it = home_.find(v);
    if (it == home_.end()) return true;
    return it->second != kBlockLevel && it->second == cur;
  }

  // The first barrier or splitting exchange in `s` (itself included), or a jump to a loop kept
  // at block level; null when `s` can sit inside a region.
  const Stmt *block_level_reason(Stmt &s, int cur) const {
    const Stmt *found = nullptr;
    auto check = [&](Stmt &x) {
      if (found) return;
      if (is_barrier(x) || (is_exchange(x) && must_split(x, cur))) found = &x;
      if ((x.kind == StmtKind::Break || x.kind == StmtKind::Continue) && !exits_.count(&x)) {
        auto it = home_.find(target_loop(&x));
        if (it != home_.end() && it->second == kBlockLevel) found = &x;
      }
    };
    check(s);
    if (s.body) for_each_stmt(*s.body, check);
    if (s.else_body) for_each_stmt(*s.else_body, check);
    return found;
  }

  [[noreturn]] void divergent(const Stmt &control, const Stmt &reason) const {
    std::string kind = control.kind == StmtKind::If ? "a branch" : "a loop";
    std::string where = control.loc.line ? " (line " + std::to_string(control.loc.line) + ")" : "";
    std::string op = reason.kind == StmtKind::Break || reason.kind == StmtKind::Continue
                         ? std::string("a 'break' / 'continue' of a loop containing a barrier")
                         : what(reason);
    syntax_error(op + " inside " + kind + where +
                     " whose condition can differ between the threads of a block: every thread of the block must "
                     "reach it together (on a GPU this deadlocks or gives undefined results; the cpu runs blocks "
                     "region by region and refuses it). Make the condition the same for the whole block, or move "
                     "the operation out of the " + (control.kind == StmtKind::If ? "branch" : "loop"),
                 reason.loc);
  }

  void place(std::vector<std::unique_ptr<Stmt>> src, Block &dst) {
    int cur = -1;
    for (auto &up : src) {
      Stmt *s = up.get();
      if (is_barrier(*s)) {
        cur = -1;
        dead_.push_back(std::move(up));
        continue;
      }
      if (is_exchange(*s) && must_split(*s, cur)) cur = -1;
      bool control = s->kind == StmtKind::If || is_loop(*s) || s->kind == StmtKind::Break || s->kind == StmtKind::Continue;
      if (control && !exits_.count(s)) {
        if (const Stmt *reason = block_level_reason(*s, cur)) {
          if (s->kind == StmtKind::If || s->kind == StmtKind::RangeFor) {
            if (varying_control(s)) divergent(*s, *reason);
          }
          cur = -1;
          Stmt *raw = dst.push(std::move(up));
          home_[raw] = kBlockLevel;
          for (auto *body : {&raw->body, &raw->else_body}) {
            if (!*body) continue;
            auto inner = std::move((*body)->stmts);
            (*body)->stmts.clear();
            place(std::move(inner), **body);
          }
          continue;
        }
      }
      if (cur < 0) cur = open_region(dst, true);
      Stmt *raw = regions_[cur].body->push(std::move(up));
      home_[raw] = cur;
      if (raw->body) for_each_stmt(*raw->body, [&](Stmt &x) { home_[&x] = cur; });
      if (raw->else_body) for_each_stmt(*raw->else_body, [&](Stmt &x) { home_[&x] = cur; });
    }
  }

  int open_region(Block &dst, bool check_exit) {
    SourceLoc loc = loop_->loc;
    IrEmitter e(dst, loc);
    Stmt *zero = e.ci(DataType::i32, 0);
    Stmt *r = dst.push(make(StmtKind::RangeFor, DataType::none, {zero, nthreads_}, loc));
    r->serialize = true;
    r->body = std::make_unique<Block>();
    r->body->owner = r;
    IrEmitter b(*r->body, loc);
    Region reg{};
    reg.loop = r;
    reg.body = r->body.get();
    reg.t = b.add(StmtKind::LoopIndex, DataType::i32, {r});
    reg.i = b.bin(B::Add, bs_, reg.t);
    reg.gtid = b.bin(B::Add, gbase_, reg.t);
    reg.lane = b.bin(B::BitAnd, reg.t, b.ci(DataType::i32, kLanes - 1));
    if (check_exit && exited_ >= 0) {
      Stmt *done = load(b, exited_, reg.t);
      IrEmitter then = b.if_(b.bin(B::Ne, done, b.ci(DataType::i32, 0)));
      then.add(StmtKind::Continue, DataType::none, {});
    }
    reg.helpers = reg.body->stmts.size();
    regions_.push_back(reg);
    region_of_loop_[r] = static_cast<int>(regions_.size()) - 1;
    home_[r] = kBlockLevel;
    return static_cast<int>(regions_.size()) - 1;
  }

  // ---- per-thread arrays ----------------------------------------------------------------------
  int private_array(DataType t) {
    BufferDesc d{BufferKind::Private, t, {bd_}};
    d.name = "per-thread";
    return k_.add_buffer(std::move(d));
  }

  Stmt *ptr(IrEmitter &e, int buffer, Stmt *index) {
    Stmt *p = e.add(StmtKind::GlobalPtr, k_.buffers[buffer].dtype, {index});
    p->ival = buffer;
    return p;
  }
  Stmt *load(IrEmitter &e, int buffer, Stmt *index) {
    return e.add(StmtKind::GlobalLoad, k_.buffers[buffer].dtype, {ptr(e, buffer, index)});
  }
  void store(IrEmitter &e, int buffer, Stmt *index, Stmt *value) {
    e.add(StmtKind::GlobalStore, DataType::none, {ptr(e, buffer, index), value});
  }

  void compute_homes() {
    home_.clear();
    std::function<void(Block &, int)> walk = [&](Block &b, int r) {
      for (auto &s : b.stmts) {
        s->parent = &b;
        int here = r;
        home_[s.get()] = r;
        auto it = region_of_loop_.find(s.get());
        if (it != region_of_loop_.end()) here = it->second;
        for (auto *body : {s->body.get(), s->else_body.get()})
          if (body) body->owner = s.get(), walk(*body, here);
      }
    };
    walk(*loop_->body, kBlockLevel);
  }

  int home(const Stmt *s) const {
    auto it = home_.find(s);
    return it == home_.end() ? kBlockLevel : it->second;
  }

  void remove(Stmt *s) {
    auto &stmts = s->parent->stmts;
    auto it = std::find_if(stmts.begin(), stmts.end(), [&](auto &p) { return p.get() == s; });
    dead_.push_back(std::move(*it));
    stmts.erase(it);
  }

  void apply(const std::unordered_map<Stmt *, Stmt *> &repl) {
    if (repl.empty()) return;
    for_each_stmt(*loop_->body, [&](Stmt &s) {
      for (Stmt *&o : s.operands)
        for (auto it = repl.find(o); it != repl.end(); it = repl.find(o)) o = it->second;
    });
  }

  // The thread's index, its loop index, global index and lane: the region loop's counter.
  void substitute_thread_values() {
    std::unordered_map<Stmt *, Stmt *> repl;
    std::vector<Stmt *> gone;
    for_each_stmt(*loop_->body, [&](Stmt &s) {
      int r = home(&s);
      if (r == kBlockLevel) return;
      const Region &reg = regions_[r];
      Stmt *to = nullptr;
      if (s.kind == StmtKind::LoopIndex && s.operands[0] == loop_) to = reg.i;
      else if (is_simt(s, SimtOp::ThreadIdx)) to = reg.t;
      else if (is_simt(s, SimtOp::GlobalThreadIdx)) to = reg.gtid;
      else if (is_simt(s, SimtOp::SubgroupInvocationId)) to = reg.lane;
      else if (is_simt(s, SimtOp::BlockMemFence) || is_simt(s, SimtOp::SubgroupMemFence)) gone.push_back(&s);
      else if (exits_.count(&s)) gone.push_back(&s);
      if (to) repl[&s] = to, gone.push_back(&s);
    });
    for (Stmt *s : gone) {
      if (exits_.count(s)) {  // this thread is done: skipped by the later regions of this iteration
        IrEmitter e(s);
        store(e, exited_, regions_[home(s)].t, e.ci(DataType::i32, 1));
        e.add(StmtKind::Continue, DataType::none, {});
      }
      remove(s);
    }
    apply(repl);
  }

  // The per-thread array holding `v` (written right after v, in its region).
  int array_of(Stmt *v) {
    auto it = arrays_.find(v);
    if (it != arrays_.end()) return it->second;
    int buf = private_array(v->dtype);
    arrays_[v] = buf;
    auto p = make(StmtKind::GlobalPtr, v->dtype, {regions_[home(v)].t}, v->loc);
    p->ival = buf;
    Stmt *pr = insert_after(v, std::move(p));
    insert_after(pr, make(StmtKind::GlobalStore, DataType::none, {pr, v}, v->loc));
    return buf;
  }

  // One slot every thread writes `v` to (right after v): what block-level code reads of a value
  // the same on every thread (a thread that left the iteration writes nothing).
  int uniform_slot_of(Stmt *v) {
    auto it = slots_.find(v);
    if (it != slots_.end()) return it->second;
    BufferDesc d{BufferKind::Private, v->dtype, {1}};
    d.name = "uniform value";
    int buf = k_.add_buffer(std::move(d));
    slots_[v] = buf;
    auto zero = make(StmtKind::Const, DataType::i32, {}, v->loc);
    Stmt *z = insert_after(v, std::move(zero));
    auto p = make(StmtKind::GlobalPtr, v->dtype, {z}, v->loc);
    p->ival = buf;
    Stmt *pr = insert_after(z, std::move(p));
    insert_after(pr, make(StmtKind::GlobalStore, DataType::none, {pr, v}, v->loc));
    return buf;
  }

  void expand_exchanges() {
    std::vector<Stmt *> work;
    for_each_stmt(*loop_->body, [&](Stmt &s) {
      if (is_exchange(s)) work.push_back(&s);
    });
    // An exchange of an earlier one's value (shuffle(shuffle(v))) reads that one's result; every
    // exchange is removed only once all are expanded (their operands point at them until apply).
    std::unordered_map<Stmt *, Stmt *> repl;
    for (Stmt *x : work) {
      int r = home(x);
      if (r == kBlockLevel) throw std::logic_error("internal: a subgroup operation at block level");
      const Region &reg = regions_[r];
      Stmt *v = x->operands[0];
      if (auto it = repl.find(v); it != repl.end()) v = it->second;
      bool uniform = rematerializable(*v) || home(v) == kBlockLevel;
      if (!uniform && home(v) == r) throw std::logic_error("internal: a subgroup operand in its own region");
      int arr = uniform ? -1 : array_of(v);
      IrEmitter e(x);
      auto at = [&](IrEmitter &em, Stmt *lane_index) { return uniform ? v : load(em, arr, lane_index); };
      const DataType i32 = DataType::i32, u32 = DataType::u32;
      Stmt *t = reg.t, *lane = reg.lane;
      Stmt *base = e.bin(B::Sub, t, lane);
      auto in_block = [&](Stmt *src) { return e.sel(e.bin(B::Lt, src, nthreads_), src, t); };
      Stmt *result = nullptr;
      switch (static_cast<SimtOp>(x->op)) {
        case SimtOp::SubgroupShuffle: case SimtOp::SubgroupBroadcast: {
          Stmt *l = e.bin(B::BitAnd, x->operands[1], e.ci(u32, kLanes - 1));
          result = at(e, in_block(e.bin(B::Add, base, e.bitcast(l, i32))));
          break;
        }
        case SimtOp::SubgroupBroadcastFirst: result = at(e, base); break;
        case SimtOp::SubgroupShuffleUp: {  // lanes below `offset` keep their own value
          Stmt *off = x->operands[1];
          Stmt *ok = e.bin(B::Ge, e.bitcast(lane, u32), off);
          result = at(e, e.sel(ok, e.bin(B::Sub, t, e.bitcast(off, i32)), t));
          break;
        }
        case SimtOp::SubgroupShuffleDown: {  // lanes past the subgroup's (or block's) end keep their own
          Stmt *off = x->operands[1];
          Stmt *room = e.bitcast(e.bin(B::Sub, e.ci(i32, kLanes), lane), u32);
          Stmt *ok = e.bin(B::Lt, off, room);
          result = at(e, in_block(e.sel(ok, e.bin(B::Add, t, e.bitcast(off, i32)), t)));
          break;
        }
        case SimtOp::SubgroupShuffleXor: {
          Stmt *l = e.bin(B::BitXor, e.bitcast(lane, u32), x->operands[1]);
          Stmt *ok = e.bin(B::Lt, l, e.ci(u32, kLanes));
          result = at(e, in_block(e.sel(ok, e.bin(B::Add, base, e.bitcast(l, i32)), t)));
          break;
        }
        default: {  // ballot / all / any: the predicates of the subgroup's lanes that exist
          Stmt *left = e.bin(B::Sub, nthreads_, base);
          Stmt *count = e.sel(e.bin(B::Lt, left, e.ci(i32, kLanes)), left, e.ci(i32, kLanes));
          Stmt *bits = e.var(DataType::u64, e.ci(DataType::u64, 0));
          Stmt *j_loop = e.add(StmtKind::RangeFor, DataType::none, {e.ci(i32, 0), count});
          j_loop->serialize = true;
          j_loop->body = std::make_unique<Block>();
          j_loop->body->owner = j_loop;
          IrEmitter b(*j_loop->body, x->loc);
          Stmt *j = b.add(StmtKind::LoopIndex, i32, {j_loop});
          Stmt *p = at(b, b.bin(B::Add, base, j));
          Stmt *bit = b.cast(b.bin(B::Ne, p, b.ci(p->dtype, 0)), DataType::u64);
          b.store(bits, b.bin(B::BitOr, b.load(bits), b.bin(B::Shl, bit, b.cast(j, DataType::u64))));
          Stmt *ballot = e.load(bits);
          if (is_simt(*x, SimtOp::SubgroupBallot)) {
            result = ballot;
          } else if (is_simt(*x, SimtOp::SubgroupAny)) {
            result = e.bin(B::Ne, ballot, e.ci(DataType::u64, 0));
          } else {  // all: every existing lane's bit
            Stmt *one = e.ci(DataType::u64, 1);
            Stmt *full = e.bin(B::Sub, e.bin(B::Shl, one, e.cast(count, DataType::u64)), one);
            result = e.bin(B::Eq, ballot, full);
          }
        }
      }
      if (result->dtype != x->dtype) result = e.cast(result, x->dtype);
      repl[x] = result;
      home_[result] = r;
    }
    apply(repl);
    for (Stmt *x : work) remove(x);
  }

  // A variable used in several regions (or declared in one, used in another): one per thread.
  void promote_variables() {
    std::unordered_map<Stmt *, std::vector<Stmt *>> users;
    std::vector<Stmt *> allocas;
    for_each_stmt(*loop_->body, [&](Stmt &s) {
      if (s.kind == StmtKind::Alloca) allocas.push_back(&s);
      if ((s.kind == StmtKind::LocalLoad || s.kind == StmtKind::LocalStore) && !s.operands.empty())
        users[s.operands[0]].push_back(&s);
    });
    for (Stmt *a : allocas) {
      int r = home(a);
      bool spread = false;
      for (Stmt *u : users[a]) spread = spread || home(u) != r;
      if (!spread) continue;
      int buf = private_array(a->dtype);
      for (Stmt *u : users[a]) {
        IrEmitter e(u);
        u->operands[0] = ptr(e, buf, regions_[home(u)].t);
        u->kind = u->kind == StmtKind::LocalLoad ? StmtKind::GlobalLoad : StmtKind::GlobalStore;
      }
      IrEmitter e(a);  // variables start at zero
      Stmt *zero = is_real(a->dtype) ? e.c(a->dtype, 0.0) : e.ci(a->dtype, 0);
      store(e, buf, regions_[r].t, zero);
      remove(a);
    }
  }

  // An element pointer used in another region is recomputed there (its indices are values).
  void copy_pointers() {
    std::vector<std::pair<Stmt *, size_t>> uses;
    for_each_stmt(*loop_->body, [&](Stmt &s) {
      for (size_t i = 0; i < s.operands.size(); i++) {
        Stmt *o = s.operands[i];
        if (o && o->kind == StmtKind::GlobalPtr && home_.count(o) && home(o) != home(&s)) uses.push_back({&s, i});
      }
    });
    for (auto &[user, i] : uses) user->operands[i] = insert_before(user, clone_leaf(*user->operands[i]));
  }

  // A value used outside its region: written to its per-thread array there, read where used
  // (at block level: thread 0's, the same on every thread of a uniform condition).
  void promote_values() {
    struct Use {
      Stmt *user;
      size_t operand;
    };
    std::vector<Use> uses;
    for_each_stmt(*loop_->body, [&](Stmt &s) {
      for (size_t i = 0; i < s.operands.size(); i++) {
        Stmt *o = s.operands[i];
        if (!o || o->kind == StmtKind::Alloca || is_loop(*o)) continue;
        int ro = home(o);
        if (ro == kBlockLevel || ro == home(&s)) continue;
        if (home_.find(o) == home_.end()) continue;  // outside the loop body (the prologue)
        uses.push_back({&s, i});
      }
    });
    std::unordered_map<int64_t, Stmt *> loaded;  // (value, region) -> its load at the region's top
    for (auto &[user, i] : uses) {
      Stmt *o = user->operands[i];
      if (rematerializable(*o)) {
        auto c = clone_leaf(*o);
        user->operands[i] = insert_before(user, std::move(c));
        continue;
      }
      int ru = home(user);
      if (ru == kBlockLevel) {  // a uniform condition or bound: the value of any thread still running
        IrEmitter e(user);
        user->operands[i] = load(e, uniform_slot_of(o), e.ci(DataType::i32, 0));
        continue;
      }
      int buf = array_of(o);
      int64_t key = int64_t(buf) * 1000003 + ru;
      auto it = loaded.find(key);
      if (it == loaded.end()) {
        Region &reg = regions_[ru];
        IrEmitter e(reg.body->stmts[reg.helpers].get());
        it = loaded.emplace(key, load(e, buf, reg.t)).first;
        reg.helpers = 0;  // (positions shifted; later loads go after the counter, still on top)
        for (size_t p = 0; p < reg.body->stmts.size(); p++)
          if (reg.body->stmts[p].get() == it->second) reg.helpers = p + 1;
      }
      user->operands[i] = it->second;
    }
  }

  KernelIR &k_;
  Task &t_;
  Stmt *loop_;
  int bd_;
  Stmt *bs_ = nullptr, *nthreads_ = nullptr, *gbase_ = nullptr;
  int exited_ = -1;
  std::unordered_set<const Stmt *> varying_, varying_loops_, in_body_;
  std::unordered_set<const Stmt *> exits_;
  std::vector<Region> regions_;
  std::unordered_map<const Stmt *, int> region_of_loop_;
  std::unordered_map<const Stmt *, int> home_;
  std::unordered_map<Stmt *, int> arrays_, slots_;
  std::vector<std::unique_ptr<Stmt>> dead_;
};

bool uses_blocks(const KernelIR &k, Task &t) {
  bool blocks = false;
  for_each_stmt(t.body, [&](Stmt &s) {
    if (s.kind == StmtKind::Simt && !is_simt(s, SimtOp::GridMemFence)) blocks = true;
    if (s.kind == StmtKind::GlobalPtr && k.buffers[s.ival].kind == BufferKind::Shared) blocks = true;
  });
  return blocks;
}

// Serial code runs as one thread of a one-thread block.
void single_thread(Task &t) {
  std::vector<Stmt *> work;
  for_each_stmt(t.body, [&](Stmt &s) {
    if (s.kind == StmtKind::Simt && !is_simt(s, SimtOp::GridMemFence)) work.push_back(&s);
  });
  std::unordered_map<Stmt *, Stmt *> repl;
  std::vector<std::unique_ptr<Stmt>> dead;
  for (Stmt *s : work) {
    IrEmitter e(s);
    Stmt *to = nullptr;
    switch (static_cast<SimtOp>(s->op)) {
      case SimtOp::ThreadIdx: case SimtOp::GlobalThreadIdx: case SimtOp::SubgroupInvocationId:
        to = e.ci(DataType::i32, 0);
        break;
      case SimtOp::SubgroupBallot: to = e.cast(e.bin(B::Ne, s->operands[0], e.ci(DataType::i32, 0)), DataType::u64); break;
      case SimtOp::SubgroupAll: case SimtOp::SubgroupAny: to = e.bin(B::Ne, s->operands[0], e.ci(DataType::i32, 0)); break;
      default: if (is_exchange(*s)) to = s->operands[0];
    }
    if (to) repl[s] = to;
    auto &stmts = s->parent->stmts;
    auto it = std::find_if(stmts.begin(), stmts.end(), [&](auto &p) { return p.get() == s; });
    dead.push_back(std::move(*it));
    stmts.erase(it);
  }
  for_each_stmt(t.body, [&](Stmt &s) {
    for (Stmt *&o : s.operands)
      for (auto it = repl.find(o); it != repl.end(); it = repl.find(o)) o = it->second;
  });
}

}  // namespace

void run_blocks_on_cpu(KernelIR &k) {
  for (Task &t : k.tasks) {
    if (!t.parallel) {
      set_parents(t.body);
      single_thread(t);
      continue;
    }
    if (!uses_blocks(k, t)) continue;
    int bd = t.loop()->block_dim > 0 ? t.loop()->block_dim : kCpuDefaultBlockDim;
    if (bd > kCpuMaxBlockDim)
      syntax_error("block_dim=" + std::to_string(bd) + " is out of range on cpu: a block has 1 to " +
                       std::to_string(kCpuMaxBlockDim) + " threads",
                   t.loop()->loc);
    // A block's threads run one at a time on one worker, and no other worker sees its shared
    // arrays: an atomic on one is a plain read-modify-write.
    std::vector<Stmt *> shared_atomics;
    for_each_stmt(t.body, [&](Stmt &s) {
      if (s.kind == StmtKind::Atomic && s.operands[0]->kind == StmtKind::GlobalPtr &&
          k.buffers[s.operands[0]->ival].kind == BufferKind::Shared)
        shared_atomics.push_back(&s);
    });
    for (Stmt *a : shared_atomics) demote_atomic(t.body, a);
    BlockSplitter(k, t, bd).run();
  }
}

}  // namespace qd
