#include <functional>
#include <unordered_map>
#include <unordered_set>

// Atomic passes: the backend support check and demotion to plain read-modify-writes.
#include "target/shared_memory.h"
#include "transforms/passes.h"

namespace qd {

namespace {

class Inserter {
 public:
  explicit Inserter(Stmt *anchor) : anchor_(anchor) {}
  Stmt *add(StmtKind kind, DataType dtype, std::vector<Stmt *> operands, int op = 0) {
    auto s = std::make_unique<Stmt>(kind, dtype);
    s->operands = std::move(operands);
    s->op = op;
    s->loc = anchor_->loc;
    return insert_before(anchor_, std::move(s));
  }
  Stmt *binary(BinaryOp op, Stmt *a, Stmt *b, DataType t) { return add(StmtKind::Binary, t, {a, b}, static_cast<int>(op)); }

 private:
  Stmt *anchor_;
};

// atom.inc: old >= bound ? 0 : old + 1; atom.dec: (old == 0 || old > bound) ? bound : old - 1.
Stmt *wrapped_value(Inserter &in, AtomicOp op, Stmt *old, Stmt *bound) {
  DataType t = old->dtype, b = DataType::i32;
  auto c = [&](int64_t v) {
    Stmt *k = in.add(StmtKind::Const, t, {});
    k->ival = v;
    return k;
  };
  if (op == AtomicOp::Inc) {
    Stmt *wrap = in.binary(BinaryOp::Ge, old, bound, b);
    return in.add(StmtKind::Select, t, {wrap, c(0), in.binary(BinaryOp::Add, old, c(1), t)});
  }
  Stmt *wrap = in.binary(BinaryOp::LogicalOr, in.binary(BinaryOp::Eq, old, c(0), b), in.binary(BinaryOp::Gt, old, bound, b), b);
  return in.add(StmtKind::Select, t, {wrap, bound, in.binary(BinaryOp::Sub, old, c(1), t)});
}

// The new value an atomic writes, computed from the old one with ordinary operations.
Stmt *updated_value(Inserter &in, const Stmt &atomic, Stmt *old) {
  DataType t = atomic.dtype;
  Stmt *val = atomic.operands[1];
  switch (atomic.atomic_op()) {
    case AtomicOp::Add: return in.binary(BinaryOp::Add, old, val, t);
    case AtomicOp::Sub: return in.binary(BinaryOp::Sub, old, val, t);
    case AtomicOp::Mul: return in.binary(BinaryOp::Mul, old, val, t);
    case AtomicOp::Min: return in.binary(BinaryOp::Min, old, val, t);
    case AtomicOp::Max: return in.binary(BinaryOp::Max, old, val, t);
    case AtomicOp::And: return in.binary(BinaryOp::BitAnd, old, val, t);
    case AtomicOp::Or: return in.binary(BinaryOp::BitOr, old, val, t);
    case AtomicOp::Xor: return in.binary(BinaryOp::BitXor, old, val, t);
    case AtomicOp::Exchange: return val;
    case AtomicOp::Cas: {
      Stmt *hit = in.binary(BinaryOp::Eq, old, val, DataType::i32);
      return in.add(StmtKind::Select, t, {hit, atomic.operands[2], old});
    }
    case AtomicOp::Inc: case AtomicOp::Dec: return wrapped_value(in, atomic.atomic_op(), old, val);
  }
  return val;
}

// Replaces `atomic` by load / compute / store; its users get the loaded (old) value.
void demote(Block &scope, Stmt *atomic) {
  Stmt *target = atomic->operands[0];
  bool local = target->kind == StmtKind::Alloca;
  Inserter in(atomic);
  Stmt *old = in.add(local ? StmtKind::LocalLoad : StmtKind::GlobalLoad, atomic->dtype, {target});
  Stmt *updated = updated_value(in, *atomic, old);
  in.add(local ? StmtKind::LocalStore : StmtKind::GlobalStore, DataType::none, {target, updated});
  replace_uses(scope, atomic, old);
  std::erase_if(atomic->parent->stmts, [&](auto &s) { return s.get() == atomic; });
}

bool same_index_pattern(const Stmt &a, const Stmt &b) {
  if (a.operands.size() != b.operands.size()) return false;
  for (size_t i = 0; i < a.operands.size(); i++) {
    const Stmt *x = a.operands[i], *y = b.operands[i];
    if (x == y) continue;
    if (x->kind == StmtKind::Const && y->kind == StmtKind::Const && x->ival == y->ival && x->dtype == y->dtype) continue;
    return false;
  }
  return true;
}

bool indexed_by_loop(const Stmt &ptr, const Stmt *loop) {
  bool has_loop_index = false;
  for (const Stmt *i : ptr.operands) {
    if (i->kind == StmtKind::LoopIndex && i->operands[0] == loop) has_loop_index = true;
    else if (i->kind != StmtKind::Const) return false;
  }
  return has_loop_index;
}

}  // namespace

void demote_atomic(Block &scope, Stmt *atomic) { demote(scope, atomic); }

void demote_local_atomics(KernelIR &k) {
  // A kernel-scope variable updated inside a parallel loop is shared by all its iterations (it
  // moves to the temps buffer): `total += x` there stays atomic.
  std::unordered_set<const Stmt *> shared;
  for (auto &top : k.body.stmts) {
    if (top->kind != StmtKind::RangeFor || top->serialize) continue;
    for_each_stmt(*top->body, [&](Stmt &s) {
      if (s.kind == StmtKind::Atomic && s.operands[0]->parent == &k.body) shared.insert(&s);
    });
  }
  std::vector<Stmt *> local;
  for_each_stmt(k.body, [&](Stmt &s) {
    if (s.kind == StmtKind::Atomic && s.operands[0]->kind == StmtKind::Alloca && !shared.count(&s)) local.push_back(&s);
  });
  for (Stmt *a : local) demote(k.body, a);
}

void demote_unique_atomics(KernelIR &k) {
  for (Task &t : k.tasks) {
    if (!t.parallel) continue;
    Stmt *loop = t.loop();
    if (first_call(*loop->body)) continue;  // the call may access any element
    // buffer -> the one index pattern every access in this loop uses (null once two differ)
    std::unordered_map<int64_t, const Stmt *> pattern;
    std::unordered_map<int64_t, bool> unique;
    for_each_stmt(*loop->body, [&](Stmt &s) {
      if (s.kind != StmtKind::GlobalPtr) return;
      const BufferDesc &d = k.buffers[s.ival];
      bool ok = (d.kind == BufferKind::Field || d.kind == BufferKind::Ndarray) && indexed_by_loop(s, loop);
      auto [it, fresh] = pattern.emplace(s.ival, &s);
      unique[s.ival] = (fresh || unique[s.ival]) && ok && same_index_pattern(*it->second, s);
    });
    std::vector<Stmt *> demotable;
    for_each_stmt(*loop->body, [&](Stmt &s) {
      // An ordered atomic synchronizes other memory: it stays atomic even on a unique element.
      if (s.kind == StmtKind::Atomic && s.operands[0]->kind == StmtKind::GlobalPtr && unique[s.operands[0]->ival] &&
          s.order == MemoryOrder::Relaxed)
        demotable.push_back(&s);
    });
    for (Stmt *a : demotable) demote(t.body, a);
  }
}

// On SPIR-V a shared array is one Workgroup variable of one element type (variables cannot
// alias): a float array that some atomic reaches through its bits (exchange, CAS loops) holds
// integers, so its native float atomics become CAS loops too.
static void same_view_for_shared_floats(KernelIR &k) {
  std::unordered_map<int64_t, std::vector<Stmt *>> by_buffer;
  for (Task &t : k.tasks)
    for_each_stmt(t.body, [&](Stmt &s) {
      if (s.kind != StmtKind::Atomic || s.operands[0]->kind != StmtKind::GlobalPtr) return;
      const BufferDesc &d = k.buffers[s.operands[0]->ival];
      if (d.kind == BufferKind::Shared && is_real(d.dtype)) by_buffer[s.operands[0]->ival].push_back(&s);
    });
  for (auto &[buffer, atomics] : by_buffer) {
    bool bits = false;
    for (Stmt *a : atomics) bits = bits || a->lowering == Lowering::CasLoop || a->atomic_op() == AtomicOp::Exchange;
    if (!bits) continue;
    for (Stmt *a : atomics)
      if (a->atomic_op() != AtomicOp::Exchange) a->lowering = Lowering::CasLoop;
  }
}

void decide_atomics(KernelIR &k, const Target &target) {
  auto decide = [&](Stmt &s) {
    MemOpKind kind = s.kind == StmtKind::Fence ? MemOpKind::Fence
                     : s.kind == StmtKind::GlobalLoad ? MemOpKind::Load
                     : s.kind == StmtKind::GlobalStore ? MemOpKind::Store : MemOpKind::Rmw;
    if (s.kind == StmtKind::Fence || s.is_atomic || s.kind == StmtKind::Atomic)
      if (auto why = memory_model_unsupported(target.backend, kind, s.order, s.scope)) type_error(*why, s.loc);
    if (s.is_atomic) {  // qd.atomic_load / atomic_store: the dtypes every backend loads atomically
      DataType t = s.kind == StmtKind::GlobalLoad ? s.dtype : s.operands[0]->dtype;
      auto ok = atomic_lowering(target.backend, AtomicOp::Exchange, t, MemorySpace::Global, target.features);
      bool narrow = bit_width(t) < 32;
      if (ok.kind == Lowering::Rejected || narrow) {
        std::string what = std::string(mem_op_name(kind)) + " on " + dtype_name(t);
        type_error(what + " is not supported on " + backend_name(target.backend) +
                       (narrow ? std::string(": ") + dtype_name(t) + " has no atomic loads and stores; use " +
                                     (is_real(t) ? "f32" : "i32/u32")
                               : ": " + ok.reason),
                   s.loc);
      }
    }
    if (s.kind != StmtKind::Atomic || s.operands[0]->kind != StmtKind::GlobalPtr) return;
    bool shared = k.buffers[s.operands[0]->ival].kind == BufferKind::Shared;
    auto verdict = atomic_lowering(target.backend, s.atomic_op(), s.dtype,
                                   shared ? MemorySpace::Shared : MemorySpace::Global, target.features);
    if (verdict.kind == Lowering::Rejected) type_error(verdict.reason, s.loc);
    s.lowering = verdict.kind;
    // Only the block sees a shared array, so a relaxed atomic on one (which orders nothing but the
    // element itself) needs no scope wider than the block: AMDGPU then emits it at workgroup scope.
    // An ordered atomic keeps its scope: its release / acquire also orders the thread's other
    // (global) accesses at that scope.
    if (shared && s.order == MemoryOrder::Relaxed) s.scope = MemScope::Block;
  };
  for (Task &t : k.tasks) for_each_stmt(t.body, decide);
  if (target.backend == Backend::Vulkan || target.backend == Backend::Metal) same_view_for_shared_floats(k);
}

// Points the top-level statements of a task's blocks at where the blocks are now.
static void set_task_parents(Task &t) {
  for (Block *b : {&t.prologue, &t.body, &t.pre_loop, &t.post_loop})
    for (auto &s : b->stmts) s->parent = b;
}

// Runs `pass` on the code of each real function as if it were the kernel's: before offloading as
// the kernel body, after it as the kernel's only (serial) task; the kernel's own code is put back.
static void on_functions(KernelIR &k, bool offloaded, const std::function<void(KernelIR &)> &pass) {
  for (FunctionDesc &f : k.functions) {
    if (!offloaded) {
      std::swap(k.body.stmts, f.code->body.stmts);
      for (auto &s : k.body.stmts) s->parent = &k.body;
      pass(k);
      std::swap(k.body.stmts, f.code->body.stmts);
      for (auto &s : k.body.stmts) s->parent = &k.body;
      set_task_parents(*f.code);
      continue;
    }
    std::vector<Task> code;
    code.push_back(std::move(*f.code));
    std::swap(code, k.tasks);
    set_task_parents(k.tasks[0]);
    pass(k);
    std::swap(code, k.tasks);
    *f.code = std::move(code[0]);
    set_task_parents(*f.code);
  }
}

// Real function calls (recursive @qd.real_funcs): the passes that move memory operations refuse
// the loops that contain a call, which may read and write any global memory (synchronizes(),
// demote_unique_atomics, partition_scatters, make_deterministic). SPIR-V forbids recursion, and
// autodiff does not differentiate through calls: both refuse the kernel, naming a call.
static void check_calls(KernelIR &k, Backend backend) {
  if (k.functions.empty()) return;
  bool spirv = backend == Backend::Vulkan || backend == Backend::Metal;
  if (!spirv && k.autodiff == KernelIR::Autodiff::None) return;
  const Stmt *call = first_call(k.body);
  for (FunctionDesc &f : k.functions)
    if (!call) call = first_call(f.code->body);
  std::string what = spirv ? std::string("recursive qd.real_func is not supported on ") + backend_name(backend) +
                                 " (SPIR-V has no recursion); make the recursion end at compile time (qd.template() "
                                 "arguments and qd.static conditions) or use an LLVM backend (cpu, cuda, amdgpu)"
                     : std::string(k.autodiff == KernelIR::Autodiff::Validation ? "qd.ad.Tape(validation=True)"
                                                                              : "automatic differentiation") +
                           " of a kernel that calls a recursive qd.real_func is not supported";
  throw CompileError(ErrorKind::Codegen, what, call ? call->loc : SourceLoc{});
}

void run_passes(KernelIR &k, const Target &target) {
  Backend backend = target.backend;
  // First: every pass after it sees constants, and legalization never expands the language's
  // // % ** or the math library (on GPUs) for them.
  bool fold = target.features.constant_folding;
  check_calls(k, backend);
  if (k.autodiff == KernelIR::Autodiff::Reverse) make_adjoint(k, k.ad_stack_size);
  if (k.autodiff == KernelIR::Autodiff::Forward) make_dual(k);
  if (k.autodiff == KernelIR::Autodiff::Validation) check_data_access(k);
  // Real functions' code takes the passes that do not look at parallel loops (on_functions).
  auto kernel_and_functions = [&](bool offloaded, const std::function<void(KernelIR &)> &pass) {
    pass(k);
    on_functions(k, offloaded, pass);
  };
  if (fold) kernel_and_functions(false, fold_constants);
  kernel_and_functions(false, demote_local_atomics);
  if (k.debug) kernel_and_functions(false, insert_bounds_checks);
  offload(k);
  demote_unique_atomics(k);  // before the verdicts: an element unique to its iteration needs no atomic
  if (k.deterministic) make_deterministic(k, target);
  kernel_and_functions(true, [&](KernelIR &code) { decide_atomics(code, target); });
  if (backend == Backend::Cpu || backend == Backend::Cuda || backend == Backend::Amdgpu || backend == Backend::Vulkan)
    privatize_reductions(k, /*cpu=*/backend == Backend::Cpu);
  if (backend == Backend::Cpu) partition_scatters(k);
  if (backend == Backend::Cpu) run_blocks_on_cpu(k);
  batch_compactions(k, target);
  aggregate_subgroup_atomics(k, target);
  if (backend == Backend::Cpu && target.features.interleave_iterations) interleave_iterations(k);
  if (backend == Backend::Vulkan || backend == Backend::Metal) hoist_invariant_loads(k);
  kernel_and_functions(true, [&](KernelIR &code) { legalize(code, target); });
  // the constant operands of its expansions (safe divisors, shift ranges)
  if (fold) kernel_and_functions(true, fold_constants);
  plan_shared_memory(k, target);
}

}  // namespace qd
