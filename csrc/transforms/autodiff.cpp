// Automatic differentiation (docs/autodiff.md): the reverse-mode adjoint kernel and the forward-mode
// dual kernel, as IR transforms before every other pass, so that every backend gets them and the
// atomic rewrites (demotion of unique atomics, privatized reductions, bucketed scatter-add,
// subgroup aggregation) run on the adjoint accumulation they produce.
//
// Reverse mode (make_adjoint). Every field / ndarray with a gradient companion (KernelIR::companion)
// has its adjoint there. The adjoint kernel replays the primal computation without writing global
// memory (the primal outputs are already there: the global data access rule says a kernel never
// overwrites what it read) and walks it backwards applying the chain rule:
//   y = x[i] (a load)           x.grad[i] += adj(y)       (an atomic add: the rewrites then decide)
//   x[i] = v, x[i] += v         adj(v) += x.grad[i]
//   local v = e / reads of v    adj(e) += adj(v), adj(v) = 0 / adj(v) += adj(read)
// Adjoints are local variables (zeroed where the block defining their value starts), so each
// iteration of a loop has its own. The replay and its reverse share one block (a "level"): the
// kernel body, the body of each parallel loop, and the body of each reversed inner loop; values an
// `if` computes are spilled to variables of the level so that the reversed `if` can read them.
// Inner loops run backwards; when the reverse of an iteration needs a value that depends on
// variables carried from earlier iterations, the state the iteration started from is read back
// from a per-thread array the forward run filled (its first `stack_size` iterations: the adstack,
// a Private buffer), or beyond those rebuilt by replaying the loop from its entry state up to it
// (exact, at quadratic cost; never an overflow).
// A store hands the element's gradient to the stored value and zeroes it (the overwritten value
// had no part in what came after); a load of an element the same block stored reads the stored
// value (store forwarding), so the adjoint skips the element.
// Top level: the kernel's serial code is replayed first, then the parallel loops and the serial
// segments are reversed in reverse order.
//
// Forward mode (make_dual): each real value gets its tangent computed next to it; loads read the
// companion (the .dual), stores and atomic adds write it.
#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "transforms/passes.h"

namespace qd {
namespace {

// Appends statements to a block (never inserts in the middle: blocks also grow at their front
// while the transform runs, which would move a position-based insertion point).
struct Em {
  Block *b;
  SourceLoc loc;

  Stmt *add(StmtKind kind, DataType t, std::vector<Stmt *> operands, int op = 0) {
    auto s = std::make_unique<Stmt>(kind, t);
    s->operands = std::move(operands);
    s->op = op;
    s->loc = loc;
    return b->push(std::move(s));
  }
  Stmt *c(DataType t, double v) {
    Stmt *s = add(StmtKind::Const, t, {});
    if (is_real(t)) s->fval = v;
    else s->ival = static_cast<int64_t>(v);
    return s;
  }
  Stmt *un(UnaryOp op, Stmt *x) { return add(StmtKind::Unary, x->dtype, {x}, static_cast<int>(op)); }
  Stmt *cast(Stmt *x, DataType to) {
    if (x->dtype == to) return x;
    Stmt *s = add(StmtKind::Unary, to, {x}, static_cast<int>(UnaryOp::Cast));
    s->cast_from = x->dtype;
    return s;
  }
  Stmt *bin(BinaryOp op, Stmt *a, Stmt *b2) {
    DataType t = is_comparison(op) || op == BinaryOp::LogicalAnd || op == BinaryOp::LogicalOr ? DataType::i32 : a->dtype;
    return add(StmtKind::Binary, t, {a, b2}, static_cast<int>(op));
  }
  Stmt *mul(Stmt *a, Stmt *b2) { return bin(BinaryOp::Mul, a, b2); }
  Stmt *sel(Stmt *cond, Stmt *a, Stmt *b2) { return add(StmtKind::Select, a->dtype, {cond, a, b2}); }
  Stmt *load(Stmt *var) { return add(StmtKind::LocalLoad, var->dtype, {var}); }
  void store(Stmt *var, Stmt *v) { add(StmtKind::LocalStore, DataType::none, {var, v}); }
  Stmt *atomic_add(Stmt *target, Stmt *v) {
    Stmt *s = add(StmtKind::Atomic, target->dtype, {target, v});
    s->ival = static_cast<int64_t>(AtomicOp::Add);
    return s;
  }
  // A statement with child blocks, like `like` (payload kept), its operands given.
  Stmt *open(const Stmt &like, std::vector<Stmt *> operands) {
    auto s = clone_leaf(like);
    s->operands = std::move(operands);
    s->body = std::make_unique<Block>();
    s->body->owner = s.get();
    if (like.else_body) {
      s->else_body = std::make_unique<Block>();
      s->else_body->owner = s.get();
    }
    return b->push(std::move(s));
  }
};

Stmt *insert_at(Block &b, size_t pos, std::unique_ptr<Stmt> s) {
  s->parent = &b;
  Stmt *raw = s.get();
  b.stmts.insert(b.stmts.begin() + static_cast<std::ptrdiff_t>(pos), std::move(s));
  return raw;
}

size_t position(const Stmt *s) {
  const Block &b = *s->parent;
  for (size_t i = 0; i < b.stmts.size(); i++)
    if (b.stmts[i].get() == s) return i;
  return b.stmts.size();
}

bool differentiable(const Stmt *s) {
  return s && is_real(s->dtype) && s->kind != StmtKind::Const && s->kind != StmtKind::Arg;
}

// d(s) / d(operand k) at the primal operands x (x[0], x[1]) and result y; null: zero.
Stmt *partial(Em &e, const Stmt &s, int k, const std::vector<Stmt *> &x, Stmt *y) {
  DataType t = s.dtype;
  auto one = [&] { return e.c(t, 1.0); };
  if (s.kind == StmtKind::Unary) {
    Stmt *a = x[0];
    switch (static_cast<UnaryOp>(s.op)) {
      case UnaryOp::Neg: return e.c(t, -1.0);
      case UnaryOp::Abs:
        return e.sel(e.bin(BinaryOp::Gt, a, e.c(t, 0)), one(),
                     e.sel(e.bin(BinaryOp::Lt, a, e.c(t, 0)), e.c(t, -1.0), e.c(t, 0)));
      case UnaryOp::Sqrt: return e.bin(BinaryOp::Div, e.c(t, 0.5), y);
      case UnaryOp::Sin: return e.un(UnaryOp::Cos, a);
      case UnaryOp::Cos: return e.un(UnaryOp::Neg, e.un(UnaryOp::Sin, a));
      case UnaryOp::Tan: return e.bin(BinaryOp::Add, one(), e.mul(y, y));
      case UnaryOp::Exp: return y;
      case UnaryOp::Log: return e.bin(BinaryOp::Div, one(), a);
      case UnaryOp::Tanh: return e.bin(BinaryOp::Sub, one(), e.mul(y, y));
      case UnaryOp::Asin:
      case UnaryOp::Acos: {
        Stmt *d = e.bin(BinaryOp::Div, one(), e.un(UnaryOp::Sqrt, e.bin(BinaryOp::Sub, one(), e.mul(a, a))));
        return static_cast<UnaryOp>(s.op) == UnaryOp::Asin ? d : e.un(UnaryOp::Neg, d);
      }
      case UnaryOp::Atan: return e.bin(BinaryOp::Div, one(), e.bin(BinaryOp::Add, one(), e.mul(a, a)));
      default: return nullptr;  // floor, ceil, round, trunc: zero almost everywhere
    }
  }
  Stmt *a = x[0], *b = x[1];
  auto other = [&](Stmt *v) { return e.cast(v, t); };
  switch (static_cast<BinaryOp>(s.op)) {
    case BinaryOp::Add: return one();
    case BinaryOp::Sub: return k == 0 ? one() : e.c(t, -1.0);
    case BinaryOp::Mul: return other(k == 0 ? b : a);
    case BinaryOp::Div:
      return k == 0 ? e.bin(BinaryOp::Div, one(), other(b)) : e.un(UnaryOp::Neg, e.bin(BinaryOp::Div, y, other(b)));
    case BinaryOp::Pow:
      if (k == 0) {
        Stmt *p = other(b);
        return e.mul(p, e.bin(BinaryOp::Pow, a, e.bin(BinaryOp::Sub, p, one())));
      }
      return e.mul(e.un(UnaryOp::Log, other(a)), y);
    case BinaryOp::Min:
    case BinaryOp::Max: {
      // The operand the result came from (the first on a tie).
      BinaryOp pick = static_cast<BinaryOp>(s.op) == BinaryOp::Min ? BinaryOp::Le : BinaryOp::Ge;
      Stmt *first = e.bin(pick, a, b);
      return k == 0 ? e.sel(first, one(), e.c(t, 0)) : e.sel(first, e.c(t, 0), one());
    }
    case BinaryOp::Atan2: {  // atan2(a, b)
      Stmt *r2 = e.bin(BinaryOp::Add, e.mul(a, a), e.mul(b, b));
      return k == 0 ? e.bin(BinaryOp::Div, b, r2) : e.un(UnaryOp::Neg, e.bin(BinaryOp::Div, a, r2));
    }
    case BinaryOp::Mod:  // a - floor(a / b) * b
      return k == 0 ? one() : e.un(UnaryOp::Neg, e.un(UnaryOp::Floor, e.bin(BinaryOp::Div, a, b)));
    default: return nullptr;  // floordiv, comparisons, bit operations
  }
}

bool has_value_rule(const Stmt &s) {
  return (s.kind == StmtKind::Unary || s.kind == StmtKind::Binary || s.kind == StmtKind::Select) && is_real(s.dtype);
}

// The companion buffer of a GlobalPtr's buffer, or -1.
int companion_of(const KernelIR &k, const Stmt *ptr) {
  if (!ptr || ptr->kind != StmtKind::GlobalPtr) return -1;
  auto b = static_cast<size_t>(ptr->ival);
  return b < k.companion.size() ? k.companion[b] : -1;
}

// Variables (allocas) defined outside `loop`'s body and written inside it.
std::vector<Stmt *> carried_variables(Stmt &loop) {
  std::unordered_set<const Stmt *> inside;
  std::vector<Stmt *> out;
  for_each_stmt(*loop.body, [&](Stmt &s) { inside.insert(&s); });
  for_each_stmt(*loop.body, [&](Stmt &s) {
    bool writes = s.kind == StmtKind::LocalStore || (s.kind == StmtKind::Atomic && s.operands[0]->kind == StmtKind::Alloca);
    Stmt *v = writes ? s.operands[0] : nullptr;
    if (v && !inside.count(v) && std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  });
  return out;
}

// A break / continue of this loop (not of a loop nested in it).
const Stmt *own_jump(const Block &b) {
  for (auto &s : b.stmts) {
    if (s->kind == StmtKind::Break || s->kind == StmtKind::Continue) return s.get();
    if (s->kind == StmtKind::If) {
      if (const Stmt *j = own_jump(*s->body)) return j;
      if (s->else_body)
        if (const Stmt *j = own_jump(*s->else_body)) return j;
    }
  }
  return nullptr;
}

// A break / continue of this loop, or an `if` holding one.
bool jumps(const Stmt &s) {
  if (s.kind == StmtKind::Break || s.kind == StmtKind::Continue) return true;
  return s.kind == StmtKind::If && (own_jump(*s.body) || (s.else_body && own_jump(*s.else_body)));
}

Stmt *make_if(Em &e, Stmt *cond) {
  Stmt *g = e.add(StmtKind::If, DataType::none, {cond});
  g->body = std::make_unique<Block>();
  g->body->owner = g;
  return g;
}

// The same element in buffer `companion` (a gradient, tangent or check-bit buffer), of type `t`
// (none: the pointer's own).
Stmt *same_element_in(const Stmt &ptr, int companion, Em &e, DataType t = DataType::none) {
  auto c = clone_leaf(ptr);
  c->ival = companion;
  if (t != DataType::none) c->dtype = t;
  return e.b->push(std::move(c));
}

// Rewrites b in place, nested blocks too: before(s, e) writes code ahead of each statement s,
// after(s, e) behind it (the transforms that add to a kernel without reordering it).
void rebuild(Block &b, const std::function<void(Stmt &, Em &)> &before, const std::function<void(Stmt &, Em &)> &after) {
  auto old = std::move(b.stmts);
  b.stmts.clear();
  for (auto &s : old) {
    Stmt *raw = s.get();
    Em e{&b, raw->loc};
    before(*raw, e);
    b.push(std::move(s));
    after(*raw, e);
    if (raw->body) rebuild(*raw->body, before, after);
    if (raw->else_body) rebuild(*raw->else_body, before, after);
  }
}

class Adjoint {
 public:
  Adjoint(KernelIR &k, int stack_size) : k_(k), stack_size_(stack_size) {}

  void run() {
    // The original statements move to `orig_`; the adjoint kernel is written into k.body.
    orig_.stmts = std::move(k_.body.stmts);
    k_.body.stmts.clear();
    for (auto &s : orig_.stmts) s->parent = &orig_;
    rev_block_[&orig_] = &k_.body;
    level_ = &k_.body;
    Em top{&k_.body, {}};
    std::vector<Stmt *> items;
    for (auto &s : orig_.stmts) {
      items.push_back(s.get());
      if (!is_parallel_loop(*s)) forward(*s, top);
    }
    for (auto it = items.rbegin(); it != items.rend(); ++it) {
      Stmt &s = **it;
      top.loc = s.loc;
      if (!is_parallel_loop(s)) {
        reverse(s, top);
        continue;
      }
      Stmt *loop = top.open(s, {primal(s.operands[0]), primal(s.operands[1])});
      m_[&s] = loop;
      Em body{loop->body.get(), s.loc};
      rev_block_[s.body.get()] = loop->body.get();
      Block *outer = level_;
      level_ = loop->body.get();
      in_parallel_ = true;
      jump_flag_ = own_jump(*s.body) ? jump_flag(body) : nullptr;
      forward_block(*s.body, body);
      reverse_block(*s.body, body);
      jump_flag_ = nullptr;
      in_parallel_ = false;
      level_ = outer;
    }
    drop_unused_stacks();
    // Every operand now refers to the adjoint kernel's own statements.
    std::unordered_set<const Stmt *> old;
    for_each_stmt(orig_, [&](Stmt &s) { old.insert(&s); });
    for_each_stmt(k_.body, [&](Stmt &s) {
      for (Stmt *o : s.operands)
        if (old.count(o)) syntax_error("internal: the adjoint kernel refers to a primal statement", s.loc);
    });
  }

 private:
  static bool is_parallel_loop(const Stmt &s) { return s.kind == StmtKind::RangeFor && !s.serialize; }

  // ---- the primal replay ----
  // Within one block, a load of the element a store just wrote is the stored value (the reverse
  // pass then carries the adjoint straight to it, as the element's gradient never saw it), and a
  // second load of an element is the first (one gradient update for both: x[i] * x[i]).
  // In the replay of an iteration that runs backwards, a break / continue of the loop sets the
  // iteration's jump flag instead, and what follows it runs under `if not flag` (the reverse pass
  // mirrors it), so that the replay and its reverse stay one block.
  void forward_block(const Block &b, Em &e_in) {
    Em *ep = &e_in, guarded{nullptr, {}};
    std::vector<std::pair<Stmt *, Stmt *>> stored;  // (pointer, value) of this block's stores so far
    auto forget = [&](int64_t buffer) {
      std::erase_if(stored, [&](auto &p) { return buffer < 0 || p.first->ival == buffer; });
    };
    for (auto &s : b.stmts) {
      Em &e = *ep;
      if (jump_flag_ && (s->kind == StmtKind::Break || s->kind == StmtKind::Continue)) {
        e.loc = s->loc;
        e.store(jump_flag_, e.c(DataType::i32, 1));
        return;  // the rest of the block never runs
      }
      if (s->kind == StmtKind::GlobalLoad && !s->is_volatile && !s->is_atomic) {
        auto hit = std::find_if(stored.begin(), stored.end(), [&](auto &p) { return same_element(p.first, s->operands[0]); });
        if (hit != stored.end()) {
          forwarded_[s.get()] = hit->second;
          m_[s.get()] = m(hit->second);
          continue;
        }
      }
      forward(*s, e);
      if (s->kind == StmtKind::GlobalLoad && !s->is_volatile && !s->is_atomic) {
        stored.push_back({s->operands[0], s.get()});  // a second read of the element is this one
      } else if (s->kind == StmtKind::GlobalStore && s->operands[0]->kind == StmtKind::GlobalPtr) {
        forget(s->operands[0]->ival);
        if (!s->is_atomic) stored.push_back({s->operands[0], s->operands[1]});
      } else if (s->kind == StmtKind::Atomic && s->operands[0]->kind == StmtKind::GlobalPtr) {
        forget(s->operands[0]->ival);
      } else if (s->body) {
        forget(-1);
      }
      if (jump_flag_ && jumps(*s)) {
        Stmt *g = make_if(e, not_jumped(e));
        guarded = Em{g->body.get(), s->loc};
        ep = &guarded;
        forget(-1);
      }
    }
  }

  Stmt *not_jumped(Em &e) { return e.bin(BinaryOp::Eq, e.load(jump_flag_), e.c(DataType::i32, 0)); }

  // The jump flag of the iteration whose replay `body` starts: a variable of the level, cleared.
  Stmt *jump_flag(Em &body) {
    Stmt *f = variable_at_front(*level_, DataType::i32);
    body.store(f, body.c(DataType::i32, 0));
    return f;
  }

  static bool same_value(const Stmt *a, const Stmt *b) {
    if (a == b) return true;
    return a->kind == StmtKind::Const && b->kind == StmtKind::Const && a->dtype == b->dtype && a->ival == b->ival &&
           a->fval == b->fval;
  }
  static bool same_element(const Stmt *p, const Stmt *q) {
    if (p->kind != StmtKind::GlobalPtr || q->kind != StmtKind::GlobalPtr || p->ival != q->ival ||
        p->operands.size() != q->operands.size())
      return false;
    for (size_t i = 0; i < p->operands.size(); i++)
      if (!same_value(p->operands[i], q->operands[i])) return false;
    return true;
  }

  void forward(Stmt &s, Em &e) {
    e.loc = s.loc;
    switch (s.kind) {
      case StmtKind::GlobalStore: case StmtKind::Fence: case StmtKind::Return:
        return;  // the primal outputs are in memory already
      case StmtKind::Atomic:
        if (s.operands[0]->kind == StmtKind::Alloca) break;
        // Global memory holds the primal result; the old value is read from it.
        note(&s, e.add(StmtKind::GlobalLoad, s.dtype, {m(s.operands[0])}));
        return;
      case StmtKind::Simt:
        if (s.dtype == DataType::none) return;  // barriers: the replay has no shared memory
        break;
      case StmtKind::LoopIndex: {
        auto it = index_.find(s.operands[0]);
        if (it != index_.end()) {
          m_[&s] = it->second;
          return;
        }
        break;
      }
      case StmtKind::If: {
        Stmt *c = e.open(s, {m(s.operands[0])});
        note(&s, c);
        Em t{c->body.get(), s.loc};
        forward_block(*s.body, t);
        if (s.else_body) {
          Em f{c->else_body.get(), s.loc};
          forward_block(*s.else_body, f);
        }
        return;
      }
      case StmtKind::RangeFor: case StmtKind::While: {
        // Where the loop starts from, for rebuilding an iteration's state when it runs backwards.
        auto &snaps = snapshots_[&s];
        snaps.clear();
        for (Stmt *v : carried_variables(s)) {
          Stmt *snap = variable_at_front(*level_, v->dtype);
          e.store(snap, e.load(m(v)));
          snaps.push_back({v, snap});
        }
        // A loop that can stop early counts the iterations it starts, for running them backwards.
        Stmt *trips = nullptr;
        if (s.kind == StmtKind::While || own_jump(*s.body)) {
          trips = variable_at_front(*level_, DataType::i32);
          e.store(trips, e.c(DataType::i32, 0));
        }
        trips_[&s] = trips;
        std::vector<Stmt *> ops;
        for (Stmt *o : s.operands) ops.push_back(m(o));
        Stmt *c = e.open(s, ops);
        note(&s, c);
        Em body{c->body.get(), s.loc};
        if (trips) body.store(trips, body.bin(BinaryOp::Add, body.load(trips), body.c(DataType::i32, 1)));
        if (stack_size_ > 0 && !snaps.empty()) {
          // The first stack_size_ iterations save the carried state they start from, for the
          // reverse pass (the later ones are rebuilt by replay).
          Stmt *n = s.kind == StmtKind::RangeFor ? body.bin(BinaryOp::Sub, body.add(StmtKind::LoopIndex, DataType::i32, {c}), ops[0])
                                                 : body.bin(BinaryOp::Sub, body.load(trips), body.c(DataType::i32, 1));
          Stmt *g = make_if(body, body.bin(BinaryOp::Lt, n, body.c(DataType::i32, stack_size_)));
          Em gb{g->body.get(), s.loc};
          for (auto &[v, snap] : snaps)
            gb.add(StmtKind::GlobalStore, DataType::none, {stack_ptr(&s, v, n, gb), gb.load(m(v))});
          pushes_[&s].push_back(g);
        }
        Stmt *flag = jump_flag_;
        jump_flag_ = nullptr;  // its own break / continue are real ones
        forward_block(*s.body, body);
        jump_flag_ = flag;
        return;
      }
      default: break;
    }
    auto c = clone_leaf(s);
    for (Stmt *&o : c->operands) o = m(o);
    note(&s, e.b->push(std::move(c)));
  }

  void note(const Stmt *orig, Stmt *copy) {
    m_[orig] = copy;
    level_of_[copy] = level_;
  }

  Stmt *m(Stmt *orig) {
    auto it = m_.find(orig);
    if (it == m_.end()) syntax_error("internal: autodiff met a value before its definition", orig->loc);
    return it->second;
  }

  Stmt *variable_at_front(Block &b, DataType t, Stmt *init = nullptr) {
    auto v = std::make_unique<Stmt>(StmtKind::Alloca, t);
    Stmt *var = insert_at(b, 0, std::move(v));
    if (init) {
      auto st = std::make_unique<Stmt>(StmtKind::LocalStore, DataType::none);
      st->operands = {var, init};
      insert_at(b, 1, std::move(st));
    }
    return var;
  }

  // The primal value of `orig` where the reverse code is being written.
  Stmt *primal(Stmt *orig, Em *e = nullptr) {
    for (auto &f : frames_)
      if (f.depends.count(orig)) f.replay = true;
    Stmt *c = m(orig);
    Block *lv = level_of_.count(c) ? level_of_[c] : nullptr;
    if (!lv || c->parent == lv || !e) return c;
    // Defined inside an `if` of its level: spilled to a variable of the level.
    Stmt *&sp = spill_[c];
    if (!sp) {
      sp = variable_at_front(*lv, c->dtype);
      auto st = std::make_unique<Stmt>(StmtKind::LocalStore, DataType::none);
      st->operands = {sp, c};
      insert_at(*c->parent, position(c) + 1, std::move(st));
    }
    return e->load(sp);
  }

  // ---- adjoints ----
  Stmt *adjoint_variable(Stmt *orig) {
    Stmt *&a = adj_[orig];
    if (!a) {
      Block *rb = rev_block_.at(orig->parent);
      auto zero = std::make_unique<Stmt>(StmtKind::Const, orig->dtype);
      zero->fval = 0;
      Stmt *z = insert_at(*rb, 0, std::move(zero));
      auto v = std::make_unique<Stmt>(StmtKind::Alloca, orig->dtype);
      a = insert_at(*rb, 1, std::move(v));
      auto st = std::make_unique<Stmt>(StmtKind::LocalStore, DataType::none);
      st->operands = {a, z};
      insert_at(*rb, 2, std::move(st));
    }
    return a;
  }

  Stmt *adjoint(Stmt *orig, Em &e) {
    auto it = adj_.find(orig);
    return it == adj_.end() ? nullptr : e.load(it->second);
  }

  void accumulate(Stmt *orig, Stmt *v, Em &e) {
    if (!differentiable(orig) || !v) return;
    if (orig->kind == StmtKind::Unary && static_cast<UnaryOp>(orig->op) == UnaryOp::Bitcast) return;
    v = e.cast(v, orig->dtype);
    Stmt *a = adjoint_variable(orig);
    if (in_parallel_ && a->parent == &k_.body) {
      e.atomic_add(a, v);  // a kernel-scope value used by every iteration
      return;
    }
    e.store(a, e.bin(BinaryOp::Add, e.load(a), v));
  }

  Stmt *companion_ptr(Stmt *ptr, int companion, Em &e) {
    auto c = clone_leaf(*ptr);
    c->ival = companion;
    for (Stmt *&o : c->operands) o = primal(o, &e);
    return e.b->push(std::move(c));
  }

  // ---- the reverse pass ----
  void reverse_block(const Block &b, Em &e) { reverse_range(b, 0, b.stmts.size(), e); }

  // Statements [lo, hi) of b backwards; what follows a jump of the loop only when none was taken.
  void reverse_range(const Block &b, size_t lo, size_t hi, Em &e) {
    size_t k = lo;
    while (jump_flag_ && k < hi && !jumps(*b.stmts[k])) k++;
    if (jump_flag_ && k < hi) {
      if (k + 1 < hi && b.stmts[k]->kind == StmtKind::If) {
        e.loc = b.stmts[k + 1]->loc;
        Em g{make_if(e, not_jumped(e))->body.get(), e.loc};
        reverse_range(b, k + 1, hi, g);
      }
      if (b.stmts[k]->kind == StmtKind::If) reverse(*b.stmts[k], e);
      hi = k;
    }
    for (size_t i = hi; i > lo; i--) reverse(*b.stmts[i - 1], e);
  }

  void reverse(Stmt &s, Em &e) {
    e.loc = s.loc;
    switch (s.kind) {
      case StmtKind::GlobalLoad: {
        if (auto f = forwarded_.find(&s); f != forwarded_.end()) {
          if (Stmt *a = adjoint(&s, e)) accumulate(f->second, a, e);
          return;
        }
        int g = companion_of(k_, s.operands[0]);
        if (g < 0 || !is_real(s.dtype)) return;
        if (Stmt *a = adjoint(&s, e)) e.atomic_add(companion_ptr(s.operands[0], g, e), a);
        return;
      }
      case StmtKind::GlobalStore: {
        // The store's value takes the element's gradient, which the overwritten value no longer has.
        int g = companion_of(k_, s.operands[0]);
        if (g < 0 || !is_real(s.operands[0]->dtype)) return;
        Stmt *ptr = companion_ptr(s.operands[0], g, e);
        if (differentiable(s.operands[1])) accumulate(s.operands[1], e.add(StmtKind::GlobalLoad, ptr->dtype, {ptr}), e);
        e.add(StmtKind::GlobalStore, DataType::none, {ptr, e.c(ptr->dtype, 0)});
        return;
      }
      case StmtKind::Atomic: {
        if (!is_real(s.dtype)) return;
        AtomicOp op = s.atomic_op();
        Stmt *target = s.operands[0];
        Stmt *incoming = nullptr;
        if (target->kind == StmtKind::Alloca) {
          incoming = e.load(adjoint_variable(target));
        } else {
          int g = companion_of(k_, target);
          if (g < 0) return;
          incoming = e.add(StmtKind::GlobalLoad, target->dtype, {companion_ptr(target, g, e)});
        }
        if (!incoming) return;
        if (op == AtomicOp::Add) accumulate(s.operands[1], incoming, e);
        else if (op == AtomicOp::Sub) accumulate(s.operands[1], e.un(UnaryOp::Neg, incoming), e);
        else if (differentiable(s.operands[1]))
          type_error(std::string("reverse-mode autodiff: qd.atomic_") + atomic_op_info(op).name +
                         " on a float is not differentiable (only atomic add / sub are)", s.loc);
        return;
      }
      case StmtKind::LocalLoad:
        if (Stmt *a = adjoint(&s, e)) accumulate(s.operands[0], a, e);
        return;
      case StmtKind::LocalStore: {
        // (The variable's adjoint may be nonzero only from a later iteration's reverse, written
        // after this in the emitted code: it is made here, not looked up.)
        Stmt *var = s.operands[0];
        if (!is_real(var->dtype)) return;
        Stmt *av = adjoint_variable(var);
        accumulate(s.operands[1], e.load(av), e);
        e.store(av, e.c(var->dtype, 0));
        return;
      }
      case StmtKind::Unary: case StmtKind::Binary: case StmtKind::Select: {
        if (!has_value_rule(s)) return;
        Stmt *a = adjoint(&s, e);
        if (!a) return;
        if (s.kind == StmtKind::Select) {
          Stmt *c = primal(s.operands[0], &e), *zero = e.c(s.dtype, 0);
          accumulate(s.operands[1], e.sel(c, a, zero), e);
          accumulate(s.operands[2], e.sel(c, zero, a), e);
          return;
        }
        if (s.kind == StmtKind::Unary && static_cast<UnaryOp>(s.op) == UnaryOp::Cast) {
          if (is_real(s.cast_from)) accumulate(s.operands[0], a, e);
          return;
        }
        if (s.kind == StmtKind::Unary && static_cast<UnaryOp>(s.op) == UnaryOp::Bitcast) return;
        std::vector<Stmt *> x;
        for (Stmt *o : s.operands) x.push_back(primal(o, &e));
        for (int k = 0; k < static_cast<int>(s.operands.size()); k++) {
          if (!differentiable(s.operands[k])) continue;
          bool needs_y = s.kind == StmtKind::Unary ? false : static_cast<BinaryOp>(s.op) == BinaryOp::Div ||
                                                                 static_cast<BinaryOp>(s.op) == BinaryOp::Pow;
          if (s.kind == StmtKind::Unary) {
            auto u = static_cast<UnaryOp>(s.op);
            needs_y = u == UnaryOp::Sqrt || u == UnaryOp::Exp || u == UnaryOp::Tan || u == UnaryOp::Tanh;
          }
          Stmt *d = partial(e, s, k, x, needs_y ? primal(&s, &e) : nullptr);
          if (d) accumulate(s.operands[k], e.mul(a, d), e);
        }
        return;
      }
      case StmtKind::If: {
        Stmt *c = e.open(s, {primal(s.operands[0], &e)});
        rev_block_[s.body.get()] = c->body.get();
        Em t{c->body.get(), s.loc};
        reverse_block(*s.body, t);
        if (s.else_body) {
          rev_block_[s.else_body.get()] = c->else_body.get();
          Em f{c->else_body.get(), s.loc};
          reverse_block(*s.else_body, f);
        }
        return;
      }
      case StmtKind::RangeFor: case StmtKind::While:
        reverse_loop(s, e);
        return;
      default:
        return;
    }
  }

  // Whether a loop's body reads or writes a differentiated global, or writes a float variable
  // from outside it.
  bool affects_gradients(Stmt &loop) {
    bool yes = false;
    std::unordered_set<const Stmt *> inside;
    for_each_stmt(*loop.body, [&](Stmt &s) { inside.insert(&s); });
    for_each_stmt(*loop.body, [&](Stmt &s) {
      if ((s.kind == StmtKind::GlobalLoad || s.kind == StmtKind::GlobalStore || s.kind == StmtKind::Atomic) &&
          companion_of(k_, s.operands[0]) >= 0 && is_real(s.operands[0]->dtype))
        yes = true;
      if ((s.kind == StmtKind::LocalStore || s.kind == StmtKind::Atomic) && s.operands[0]->kind == StmtKind::Alloca &&
          is_real(s.operands[0]->dtype) && !inside.count(s.operands[0]))
        yes = true;
    });
    return yes;
  }

  // An inner loop run backwards: iteration j = end - 1 - r of a range-for for r in range(end -
  // begin); a loop that can stop early (a while, a break) runs its counted iterations backwards.
  void reverse_loop(Stmt &s, Em &e) {
    if (!affects_gradients(s)) return;
    bool is_for = s.kind == StmtKind::RangeFor;
    Stmt *trips = trips_[&s];
    Stmt *begin = is_for ? primal(s.operands[0], &e) : nullptr, *end = is_for ? primal(s.operands[1], &e) : nullptr;
    Stmt *count = trips ? e.load(trips) : e.bin(BinaryOp::Sub, end, begin);
    Stmt *loop = e.add(StmtKind::RangeFor, DataType::none, {e.c(DataType::i32, 0), count});
    loop->serialize = true;
    loop->body = std::make_unique<Block>();
    loop->body->owner = loop;
    Block *body = loop->body.get();
    Em eb{body, s.loc};
    Stmt *r = eb.add(StmtKind::LoopIndex, DataType::i32, {loop});
    // The iteration's number from the first (while: the iterations before it).
    Stmt *nth = eb.bin(BinaryOp::Sub, eb.bin(BinaryOp::Sub, count, eb.c(DataType::i32, 1)), r);
    Stmt *j = is_for ? eb.bin(BinaryOp::Add, begin, nth) : nth;
    // The values of this iteration that depend on the carried variables' state.
    Frame f;
    auto carried = carried_variables(s);
    std::unordered_set<const Stmt *> vars(carried.begin(), carried.end());
    for_each_stmt(*s.body, [&](Stmt &x) {
      bool dep = x.kind == StmtKind::LocalLoad && vars.count(x.operands[0]);
      for (Stmt *o : x.operands) dep = dep || f.depends.count(o);
      if (dep) f.depends.insert(&x);
    });
    auto snaps = snapshots_[&s];  // the entry state, saved by the replay above
    frames_.push_back(std::move(f));
    Block *outer = level_;
    Stmt *outer_flag = jump_flag_;
    level_ = body;
    rev_block_[s.body.get()] = body;
    if (is_for) index_[&s] = j;
    jump_flag_ = own_jump(*s.body) ? jump_flag(eb) : nullptr;
    forward_block(*s.body, eb);
    reverse_block(*s.body, eb);
    bool replay = frames_.back().replay;
    frames_.pop_back();
    if (replay && !snaps.empty()) {
      // Rebuild the iteration's state: from the entry state, the iterations before it again
      // (they all ran to their end: only the last can stop the loop).
      Block pre;
      Em ep{&pre, s.loc};
      for (auto &[v, snap] : snaps) ep.store(m(v), ep.load(snap));
      Stmt *again = ep.add(StmtKind::RangeFor, DataType::none, {is_for ? begin : ep.c(DataType::i32, 0), j});
      again->serialize = true;
      again->body = std::make_unique<Block>();
      again->body->owner = again;
      Em er{again->body.get(), s.loc};
      Stmt *index = er.add(StmtKind::LoopIndex, DataType::i32, {again});
      if (is_for) index_[&s] = index;
      Block *saved = level_;
      level_ = again->body.get();
      jump_flag_ = nullptr;
      forward_block(*s.body, er);
      level_ = saved;
      size_t at = position(j) + 1;
      if (pushes_.count(&s)) {
        // The state the forward run saved, for the iterations it had room for.
        used_stacks_.insert(&s);
        Block sel;
        Em es{&sel, s.loc};
        Stmt *g = make_if(es, es.bin(BinaryOp::Lt, nth, es.c(DataType::i32, stack_size_)));
        g->else_body = std::make_unique<Block>();
        g->else_body->owner = g;
        Em saved_state{g->body.get(), s.loc};
        for (auto &[v, snap] : snaps)
          saved_state.store(m(v), saved_state.add(StmtKind::GlobalLoad, v->dtype, {stack_ptr(&s, v, nth, saved_state)}));
        for (auto &st : pre.stmts) g->else_body->push(std::move(st));
        pre.stmts = std::move(sel.stmts);
      }
      for (auto &st : pre.stmts) insert_at(*body, at++, std::move(st));
    }
    index_.erase(&s);
    jump_flag_ = outer_flag;
    level_ = outer;
  }

  struct Frame {
    std::unordered_set<const Stmt *> depends;
    bool replay = false;
  };

  // Element n of the stack holding carried variable v's state for loop `loop` (a per-thread array).
  Stmt *stack_ptr(const Stmt *loop, Stmt *v, Stmt *n, Em &e) {
    int &buf = stacks_[{loop, v}];
    if (!buf) buf = k_.add_buffer(BufferDesc{BufferKind::Private, v->dtype, {stack_size_}, 0, -1, {}, -1, "adstack"}) + 1;
    Stmt *p = e.add(StmtKind::GlobalPtr, v->dtype, {n});
    p->ival = buf - 1;
    return p;
  }

  // Saved states no reverse pass reads: not saved, and their arrays shrunk.
  void drop_unused_stacks() {
    for (auto &[loop, ifs] : pushes_) {
      if (used_stacks_.count(loop)) continue;
      for (Stmt *g : ifs) {
        Block &b = *g->parent;
        b.stmts.erase(b.stmts.begin() + static_cast<std::ptrdiff_t>(position(g)));
      }
    }
    for (auto &[key, buf] : stacks_)
      if (!used_stacks_.count(key.first)) k_.buffers[buf - 1].shape = {1};
  }

  KernelIR &k_;
  Block orig_;
  CloneMap m_;                                            // primal statement -> its latest replay
  std::unordered_map<const Stmt *, Stmt *> forwarded_;    // load -> the stored value (or earlier load) it reads
  std::unordered_map<const Stmt *, Block *> level_of_;    // replayed statement -> its level
  std::unordered_map<const Stmt *, Stmt *> spill_;        // replayed statement -> its variable
  std::unordered_map<const Stmt *, Stmt *> adj_;          // primal value / variable -> its adjoint
  std::unordered_map<const Block *, Block *> rev_block_;  // primal block -> where its reverse is
  std::unordered_map<const Stmt *, Stmt *> index_;        // inner loop run backwards -> its index
  std::unordered_map<const Stmt *, std::vector<std::pair<Stmt *, Stmt *>>> snapshots_;
  std::unordered_map<const Stmt *, Stmt *> trips_;        // loop that can stop early -> its iteration count
  int stack_size_ = 0;  // iterations whose carried state the forward run saves (0: none, all replayed)
  std::map<std::pair<const Stmt *, Stmt *>, int> stacks_;  // (loop, variable) -> its array's buffer + 1
  std::unordered_map<const Stmt *, std::vector<Stmt *>> pushes_;  // loop -> the saves
  std::unordered_set<const Stmt *> used_stacks_;
  Stmt *jump_flag_ = nullptr;  // the replayed iteration's "a break / continue was taken"
  std::vector<Frame> frames_;
  Block *level_ = nullptr;
  bool in_parallel_ = false;
};

class Dual {
 public:
  explicit Dual(KernelIR &k) : k_(k) {}
  void run() {
    rebuild(k_.body, [](Stmt &, Em &) {}, [&](Stmt &s, Em &e) { tangent(s, e); });
  }

 private:
  Stmt *t(Stmt *x) {
    auto it = tan_.find(x);
    return it == tan_.end() ? nullptr : it->second;
  }

  void tangent(Stmt &s, Em &e) {
    switch (s.kind) {
      case StmtKind::Alloca:
        if (is_real(s.dtype)) {
          Stmt *d = e.add(StmtKind::Alloca, s.dtype, {});
          e.store(d, e.c(s.dtype, 0));
          tan_[&s] = d;
        }
        return;
      case StmtKind::LocalLoad:
        if (Stmt *d = t(s.operands[0])) tan_[&s] = e.load(d);
        return;
      case StmtKind::LocalStore:
        if (Stmt *d = t(s.operands[0])) {
          Stmt *v = t(s.operands[1]);
          e.store(d, v ? e.cast(v, d->dtype) : e.c(d->dtype, 0));
        }
        return;
      case StmtKind::GlobalLoad: {
        int g = companion_of(k_, s.operands[0]);
        if (g >= 0 && is_real(s.dtype)) tan_[&s] = e.add(StmtKind::GlobalLoad, s.dtype, {same_element_in(*s.operands[0], g, e)});
        return;
      }
      case StmtKind::GlobalStore: {
        int g = companion_of(k_, s.operands[0]);
        if (g < 0 || !is_real(s.operands[0]->dtype)) return;
        Stmt *v = t(s.operands[1]);
        Stmt *p = same_element_in(*s.operands[0], g, e);
        e.add(StmtKind::GlobalStore, DataType::none, {p, v ? e.cast(v, p->dtype) : e.c(p->dtype, 0)});
        return;
      }
      case StmtKind::Atomic: {
        if (!is_real(s.dtype)) return;
        AtomicOp op = s.atomic_op();
        Stmt *v = t(s.operands[1]);
        if (!v) return;
        if (op != AtomicOp::Add && op != AtomicOp::Sub)
          type_error(std::string("forward-mode autodiff: qd.atomic_") + atomic_op_info(op).name +
                         " on a float is not differentiable (only atomic add / sub are)", s.loc);
        Stmt *target = s.operands[0];
        Stmt *d = nullptr;
        if (target->kind == StmtKind::Alloca) d = t(target);
        else if (int g = companion_of(k_, target); g >= 0) d = same_element_in(*target, g, e);
        if (!d) return;
        if (op == AtomicOp::Sub) v = e.un(UnaryOp::Neg, v);
        e.atomic_add(d, e.cast(v, d->dtype));
        return;
      }
      case StmtKind::Unary: case StmtKind::Binary: case StmtKind::Select: {
        if (!has_value_rule(s)) return;
        if (s.kind == StmtKind::Select) {
          Stmt *a = t(s.operands[1]), *b = t(s.operands[2]);
          if (!a && !b) return;
          Stmt *zero = e.c(s.dtype, 0);
          tan_[&s] = e.sel(s.operands[0], a ? a : zero, b ? b : zero);
          return;
        }
        if (s.kind == StmtKind::Unary && static_cast<UnaryOp>(s.op) == UnaryOp::Cast) {
          if (Stmt *a = t(s.operands[0]); a && is_real(s.cast_from)) tan_[&s] = e.cast(a, s.dtype);
          return;
        }
        if (s.kind == StmtKind::Unary && static_cast<UnaryOp>(s.op) == UnaryOp::Bitcast) return;
        Stmt *sum = nullptr;
        for (int k = 0; k < static_cast<int>(s.operands.size()); k++) {
          Stmt *dk = t(s.operands[k]);
          if (!dk) continue;
          Stmt *d = partial(e, s, k, s.operands, &s);
          if (!d) continue;
          Stmt *term = e.mul(e.cast(dk, s.dtype), d);
          sum = sum ? e.bin(BinaryOp::Add, sum, term) : term;
        }
        if (sum) tan_[&s] = sum;
        return;
      }
      default:
        return;
    }
  }

  KernelIR &k_;
  std::unordered_map<const Stmt *, Stmt *> tan_;
};

}  // namespace

// The global data access rule, checked at run time (Tape(validation=True)).
class AccessCheck {
 public:
  explicit AccessCheck(KernelIR &k) : k_(k) {}
  void run() {
    rebuild(k_.body, [&](Stmt &s, Em &e) { check_write(s, e); }, [&](Stmt &s, Em &e) { mark_read(s, e); });
  }

 private:
  // Before a write of a checked element: was it read?
  void check_write(Stmt &s, Em &e) {
    bool writes = s.kind == StmtKind::GlobalStore || s.kind == StmtKind::Atomic;
    int c = writes ? companion_of(k_, s.operands[0]) : -1;
    if (c < 0) return;
    Stmt *bit = e.add(StmtKind::GlobalLoad, DataType::i32, {same_element_in(*s.operands[0], c, e, DataType::i32)});
    Stmt *g = make_if(e, e.bin(BinaryOp::Ne, bit, e.c(DataType::i32, 0)));
    Em f{g->body.get(), s.loc};
    auto word = std::make_unique<Stmt>(StmtKind::GlobalPtr, DataType::i32);
    word->operands = {f.c(DataType::i32, 0)};
    word->ival = k_.check_word;
    word->loc = s.loc;
    Stmt *w = f.b->push(std::move(word));
    Stmt *cas = f.add(StmtKind::Atomic, DataType::i32,
                      {w, f.c(DataType::i32, 0), f.c(DataType::i32, k_.check_message[s.operands[0]->ival])});
    cas->ival = static_cast<int64_t>(AtomicOp::Cas);
  }

  // After a read of a checked element: its bit set.
  void mark_read(Stmt &s, Em &e) {
    if (s.kind != StmtKind::GlobalLoad) return;
    if (int r = companion_of(k_, s.operands[0]); r >= 0)
      e.add(StmtKind::GlobalStore, DataType::none, {same_element_in(*s.operands[0], r, e, DataType::i32), e.c(DataType::i32, 1)});
  }

  KernelIR &k_;
};

void make_adjoint(KernelIR &k, int stack_size) { Adjoint(k, stack_size).run(); }
void check_data_access(KernelIR &k) { AccessCheck(k).run(); }
void make_dual(KernelIR &k) { Dual(k).run(); }

}  // namespace qd
