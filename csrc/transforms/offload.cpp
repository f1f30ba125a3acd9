#include <unordered_map>
#include <unordered_set>

#include "transforms/passes.h"

namespace qd {

namespace {

// Top-level allocas become 8-byte slots of the temps buffer; each use gets its own pointer.
void move_top_level_allocas_to_temps(KernelIR &k) {
  std::unordered_map<Stmt *, int64_t> slots;
  for (auto &s : k.body.stmts)
    if (s->kind == StmtKind::Alloca) slots.emplace(s.get(), 8 * static_cast<int64_t>(slots.size()));
  if (slots.empty()) return;
  k.temps_bytes = 8 * static_cast<int64_t>(slots.size());
  k.temps_buffer = k.add_buffer(BufferDesc{BufferKind::Temps, DataType::u8});

  std::vector<Stmt *> users;
  for_each_stmt(k.body, [&](Stmt &s) {
    if (!s.operands.empty() && slots.count(s.operands[0])) users.push_back(&s);
  });
  for (Stmt *u : users) {
    Stmt *alloca = u->operands[0];
    auto ptr = std::make_unique<Stmt>(StmtKind::GlobalPtr, alloca->dtype);
    ptr->ival = k.temps_buffer;
    ptr->byte_offset = slots[alloca];
    ptr->loc = u->loc;
    u->operands[0] = insert_before(u, std::move(ptr));
    if (u->kind == StmtKind::LocalLoad) u->kind = StmtKind::GlobalLoad;
    if (u->kind == StmtKind::LocalStore) u->kind = StmtKind::GlobalStore;
  }
  auto &stmts = k.body.stmts;
  std::erase_if(stmts, [&](auto &s) { return slots.count(s.get()) > 0; });
}

bool clonable(const Stmt &s) { return s.is_pure() || (s.kind == StmtKind::GlobalLoad && !s.is_volatile); }

// Recomputes, inside `target`, the values a task uses but another task defined.
class CrossTaskValues {
 public:
  CrossTaskValues(Block &scan, Block &target) : target_(target) {
    collect(scan);
    collect(target);
  }

  void fix(Block &b) {
    for_each_stmt(b, [&](Stmt &s) {
      for (auto &o : s.operands)
        if (!defined_.count(o)) o = materialize(o);
    });
  }

 private:
  void collect(Block &b) {
    for_each_stmt(b, [&](Stmt &s) { defined_.insert(&s); });
  }

  Stmt *materialize(Stmt *v) {
    auto it = clones_.find(v);
    if (it != clones_.end()) return it->second;
    if (!clonable(*v))
      syntax_error("this value is computed in one part of the kernel and used in a parallel loop; assign it to a "
                   "variable first",
                   v->loc);
    auto c = clone_leaf(*v);
    for (auto &o : c->operands)
      if (!defined_.count(o)) o = materialize(o);
    Stmt *raw = c.get();
    // Keep clones ahead of every user: they go before the first non-clone statement.
    c->parent = &target_;
    target_.stmts.insert(target_.stmts.begin() + static_cast<long>(clones_.size()), std::move(c));
    clones_[v] = raw;
    defined_.insert(raw);
    return raw;
  }

  Block &target_;
  std::unordered_set<Stmt *> defined_;
  std::unordered_map<Stmt *, Stmt *> clones_;
};

}  // namespace

void offload(KernelIR &k) {
  move_top_level_allocas_to_temps(k);
  if (!k.returns.empty() && k.result_buffer < 0) k.result_buffer = k.add_buffer(BufferDesc{BufferKind::Result, DataType::u8});

  std::vector<Task> tasks;
  auto serial = [&]() -> Task & {
    if (tasks.empty() || tasks.back().parallel) tasks.emplace_back();
    return tasks.back();
  };
  for (auto &s : k.body.stmts) {
    bool parallel = s->kind == StmtKind::RangeFor && !s->serialize;
    Task &t = parallel ? tasks.emplace_back() : serial();
    t.parallel = parallel;
    t.body.push(std::move(s));
  }
  k.body.stmts.clear();
  // A `return` ends only its own task: the parallel loops after it would still run.
  for (size_t i = 0; i + 1 < tasks.size(); i++)
    for_each_stmt(tasks[i].body, [](Stmt &s) {
      if (s.kind == StmtKind::Return)
        syntax_error("a kernel cannot 'return' before a parallel loop; store the result and return it at the end",
                     s.loc);
    });
  for (Task &t : tasks) {
    if (t.parallel) {
      CrossTaskValues(t.body, t.prologue).fix(t.body);
    } else {
      CrossTaskValues(t.body, t.body).fix(t.body);
    }
  }
  k.tasks = std::move(tasks);
  // The tasks' blocks moved while the vector grew: point their statements at where they are now.
  for (Task &t : k.tasks)
    for (Block *b : {&t.prologue, &t.body})
      for (auto &s : b->stmts) s->parent = b;
}

}  // namespace qd
