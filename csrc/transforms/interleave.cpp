// cpu: iterations of a parallel loop side by side, each statement's copies in a row (Stmt::lanes),
// which the LLVM codegen emits as one vector instruction whose lanes are the iterations
// (docs/backends.md, "Interleaved iterations on the cpu").
//
// Made for the all-pairs shape: each iteration runs straight-line code, one inner loop whose trip
// count is the same for every iteration, and straight-line code again (`for i in x: acc = 0;
// for j in range(n): acc += f(x[i], x[j]); a[i] = acc`). Its inner loop is a serial chain of
// float operations (the sum over j) that no vectorizer may reorder without fast math; but
// kInterleave iterations i .. i + kInterleave - 1 are independent of one another: the rewritten
// loop steps by kInterleave iterations and runs their code side by side in one inner loop
// (outer-loop unroll and jam), each iteration's own operations in its own order, so the results
// are bit for bit those of the loop as written. A block of fewer than kInterleave iterations (the
// end of the range) runs them one after another.
//
// Only loops whose reordering no program can observe: no atomics, no block / subgroup
// operations, no calls, no break / continue / return, no branches, no stores in the inner loop,
// and no buffer that the loop both reads and writes (iterations of a parallel loop may run in any
// order already; with this rule even a program that races sees what a serial run would give).
// A loop another pass rewrote (privatized, bucketed, compacted, blocked) is left alone.
#include <algorithm>
#include <unordered_set>
#include <vector>

#include "transforms/ir_emitter.h"
#include "transforms/passes.h"

namespace qd {

namespace {

using B = BinaryOp;

constexpr int kInterleave = 8;  // iterations side by side: eight f32 lanes of AVX2
constexpr size_t kMaxInnerStmts = 400;  // the inner loop's copies stay a reasonable size

// Straight-line statements the rewrite copies freely (no control flow, no ordering effects).
bool plain(const Stmt &s, bool in_inner) {
  switch (s.kind) {
    case StmtKind::Const: case StmtKind::Arg: case StmtKind::GlobalPtr: case StmtKind::Alloca:
    case StmtKind::LocalLoad: case StmtKind::LocalStore: case StmtKind::Unary: case StmtKind::Binary:
    case StmtKind::Select: case StmtKind::LoopIndex:
      return true;
    case StmtKind::GlobalLoad:
      return !s.is_volatile && !s.is_atomic;
    case StmtKind::GlobalStore:
      return !s.is_atomic && !in_inner;
    default:
      return false;
  }
}

bool inside(const Stmt *s, const Block &b) {
  for (const Block *p = s->parent; p; p = p->owner ? p->owner->parent : nullptr)
    if (p == &b) return true;
  return false;
}

// Whether s has the same value in every iteration of the loop whose body is b: made before the loop,
// or a constant, an argument, or pure arithmetic on such values.
bool uniform(const Stmt *s, const Block &b) {
  if (!inside(s, b) || s->kind == StmtKind::Const || s->kind == StmtKind::Arg) return true;
  if (s->kind != StmtKind::Unary && s->kind != StmtKind::Binary && s->kind != StmtKind::Select) return false;
  for (const Stmt *o : s->operands)
    if (!uniform(o, b)) return false;
  return true;
}

// The loop's one inner loop, or null where the loop does not have the shape this pass takes.
Stmt *inner_loop(const KernelIR &k, Stmt &loop) {
  Stmt *inner = nullptr;
  for (auto &s : loop.body->stmts) {
    if (s->kind == StmtKind::RangeFor && !inner) inner = s.get();
    else if (!plain(*s, false)) return nullptr;
  }
  if (!inner || inner->first_index || inner->body->stmts.size() > kMaxInnerStmts) return nullptr;
  for (Stmt *bound : inner->operands)
    if (!uniform(bound, *loop.body)) return nullptr;  // a trip count that may differ between iterations
  bool has_float_math = false;
  for (auto &s : inner->body->stmts) {
    if (!plain(*s, true)) return nullptr;
    if ((s->kind == StmtKind::Binary || s->kind == StmtKind::Unary) && is_real(s->dtype)) has_float_math = true;
  }
  // The buffers it reads and writes: fields and ndarrays only, none of them both.
  std::unordered_set<int64_t> read, written;
  bool ok = true;
  for_each_stmt(*loop.body, [&](Stmt &s) {
    if (s.kind != StmtKind::GlobalLoad && s.kind != StmtKind::GlobalStore) return;
    const Stmt *ptr = s.operands[0];
    BufferKind kind = ptr->kind == StmtKind::GlobalPtr ? k.buffers[ptr->ival].kind : BufferKind::Temps;
    if (kind != BufferKind::Field && kind != BufferKind::Ndarray) ok = false;
    else (s.kind == StmtKind::GlobalLoad ? read : written).insert(ptr->ival);
  });
  for (int64_t b : written)
    if (read.count(b)) ok = false;
  return ok && has_float_math ? inner : nullptr;
}

// Drops every statement reading `loop`'s index from b (nested blocks too), its uses reading `index`.
void take_index(Block &b, Stmt &loop, Stmt *index) {
  for (auto &s : b.stmts)
    if (s->kind == StmtKind::LoopIndex && s->operands[0] == &loop) replace_uses(b, s.get(), index);
  std::erase_if(b.stmts, [&](auto &s) { return s->kind == StmtKind::LoopIndex && s->operands[0] == &loop; });
  for (auto &s : b.stmts)
    for (auto *child : {s->body.get(), s->else_body.get()})
      if (child) take_index(*child, loop, index);
}

void interleave(Task &t, Stmt &loop, Stmt *inner) {
  SourceLoc loc = loop.loc;
  Stmt *end = loop.operands[1];
  DataType it = loop.operands[0]->dtype;
  Block original;  // the body as written, its index read from `index` (each copy maps it)
  for (auto &s : loop.body->stmts) {
    s->parent = &original;
    original.stmts.push_back(std::move(s));
  }
  loop.body->stmts.clear();
  Stmt index(StmtKind::LoopIndex, it);
  take_index(original, loop, &index);

  IrEmitter top(*loop.body, loc);
  Stmt *first = top.add(StmtKind::LoopIndex, it, {&loop});
  Stmt *left = top.bin(B::Sub, end, first);
  Stmt *width = top.ci(it, kInterleave);
  // The next block's first index, stopping at `end` (no wrap-around past the type's largest value).
  DataType ut = it == DataType::i64 ? DataType::u64 : DataType::u32;
  loop.next_index = top.sel(top.bin(B::Gt, top.bitcast(left, ut), top.bitcast(width, ut)),
                            top.bin(B::Add, first, width), end);
  Stmt *full = top.bin(B::Ge, left, width);

  // A whole block: the code before the inner loop, the inner loops fused into one, the code after
  // it; each statement once per iteration in turn (statement-major: isomorphic copies side by side).
  IrEmitter side = top.if_(full);
  std::vector<CloneMap> maps(kInterleave);
  for (int lane = 0; lane < kInterleave; lane++) maps[lane][&index] = side.bin(B::Add, first, side.ci(it, lane));
  // A statement whose value is the same in every iteration (operands the same, no variable of
  // its own: x[j] in the inner loop) is made once for all; the others once per iteration in turn,
  // marked Stmt::lanes for the codegen (one vector instruction where it can).
  auto copies = [&](IrEmitter &e, const Stmt &st) {
    auto same_in_all = [&](Stmt *o) {
      return std::all_of(maps.begin(), maps.end(), [&](const CloneMap &m) { return mapped(m, o) == mapped(maps[0], o); });
    };
    bool shared = (st.is_pure() || st.kind == StmtKind::LoopIndex || st.kind == StmtKind::GlobalLoad) &&
                  std::all_of(st.operands.begin(), st.operands.end(), same_in_all);
    if (shared) {
      Stmt *one = e.copy(st, maps[0]);
      for (CloneMap &m : maps) m[&st] = one;
      return;
    }
    for (CloneMap &m : maps) m[&st] = e.copy(st, m);
    maps[0][&st]->lanes = kInterleave;
  };
  for (auto &st : original.stmts) {
    if (st.get() != inner) {
      copies(side, *st);
      continue;
    }
    Stmt *fused = side.copy(*inner, maps[0]);
    fused->body = std::make_unique<Block>();
    fused->body->owner = fused;
    for (CloneMap &m : maps) m[inner] = fused;
    IrEmitter in(*fused->body, loc);
    for (auto &s : inner->body->stmts) copies(in, *s);
  }

  // The last, partial block: its iterations one after another, the body as written.
  IrEmitter rest = top.if_(top.not_(full));
  Stmt *lane = nullptr;
  IrEmitter one = rest.for_(rest.ci(it, 0), left, lane);
  CloneMap m{{&index, one.bin(B::Add, first, lane)}};
  Block body;
  clone_into(original, body, m);
  for (auto &s : body.stmts) one.insert(std::move(s));
  t.cpu_block_dim = kInterleave;
  loop.label = "interleaved iterations";
}

}  // namespace

void interleave_iterations(KernelIR &k) {
  for (Task &t : k.tasks) {
    Stmt *loop = t.loop();
    if (!loop || loop->kind != StmtKind::RangeFor || loop->serialize || loop->first_index || loop->next_index ||
        loop->label || t.cpu_block_dim || t.min_chunk || t.scratch_items || t.when != Task::When::Always ||
        !t.pre_loop.stmts.empty() || !t.post_loop.stmts.empty())
      continue;
    if (loop->operands[0]->dtype != DataType::i32 && loop->operands[0]->dtype != DataType::i64) continue;
    if (Stmt *inner = inner_loop(k, *loop)) interleave(t, *loop, inner);
  }
}

}  // namespace qd
