#pragma once
// Shared LLVM IR emission for the LLVM backends (cpu, cuda, amdgpu). A target supplies the task
// function shape and the few target-specific choices through LlvmTarget.
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>

#include "atomics/support_table.h"
#include "ir/ir.h"

namespace qd {

// The names of the functions emitted for task i of a kernel.
struct TaskSymbols {
  std::string body;    // serial: fn(bufs, args); parallel (cpu): fn(bufs, args, lo, hi)
  std::string bounds;  // parallel (cpu): fn(bufs, args, i64 out[2]); empty otherwise
};

class LlvmTarget {
 public:
  virtual ~LlvmTarget() = default;
  virtual Backend backend() const = 0;
  virtual const TargetFeatures &features() const = 0;
  // The syncscope of an atomic at `scope`: cpu has one host, so every scope is LLVM's system scope.
  virtual llvm::SyncScope::ID atomic_scope(llvm::LLVMContext &ctx, MemScope scope) const { return llvm::SyncScope::System; }
  // Emits an atomic, atomic load / store or fence itself (CUDA: inline PTX where NVPTX would drop
  // the order or scope); null means the generic LLVM instruction.
  virtual llvm::Value *emit_memory_op(class LlvmCodegen &cg, const Stmt &s, bool *done) { return nullptr; }
  virtual unsigned global_address_space() const { return 0; }
  // cpu: a block's shared arrays are arrays on the stack of the worker running the block.
  virtual bool shared_on_stack() const { return false; }
  // Sets up the fresh module before any code is emitted (GPU targets: triple and data layout, so
  // allocas land in the target's private address space).
  virtual void configure_module(llvm::Module &m) {}
  // A block / grid operation (barrier, fence, thread index); targets without blocks reject it.
  virtual llvm::Value *emit_simt(class LlvmCodegen &cg, const Stmt &s);
  // qd.math.fns's instruction (StmtKind::Fns): only targets with one (Target::has_native_fns) see it.
  virtual llvm::Value *emit_fns(class LlvmCodegen &cg, llvm::Value *mask, llvm::Value *base, llvm::Value *offset) {
    throw std::logic_error("internal: fns reached a target without the instruction");
  }
  // Emits the functions of one task: calls `emit_prologue` / `emit_body(index)` where the task's code
  // goes. Returns the symbols.
  virtual TaskSymbols emit_task(class LlvmCodegen &cg, const Task &task, int task_index) = 0;
};

class LlvmCodegen {
 public:
  LlvmCodegen(KernelIR &k, LlvmTarget &target, llvm::LLVMContext &ctx);
  std::unique_ptr<llvm::Module> run(std::vector<TaskSymbols> *symbols);

  // Helpers for targets building task functions.
  llvm::IRBuilder<> &b() { return b_; }
  llvm::Module &module() { return *module_; }
  llvm::LLVMContext &ctx() { return ctx_; }
  const KernelIR &kernel() const { return k_; }
  llvm::Function *new_function(const std::string &name, std::vector<llvm::Type *> params);
  // Starts emitting into `fn`, whose first two arguments are the buffer table and the args array.
  void begin_function(llvm::Function *fn);
  void emit_block(const Block &b);
  // Emits a RangeFor's body for one value of its index.
  void emit_loop_body(const Stmt &loop, llvm::Value *index);
  // Emits `for (i = begin; i < end; i = next) body(loop)`, next being the loop's next_index (a
  // grid-stride loop) or i + 1; continue/break work; a parallel task's pre/post-loop code goes
  // around it.
  void emit_index_loop(const Stmt &loop, llvm::Value *begin, llvm::Value *end);
  llvm::Value *value(const Stmt *s) const { return values_.at(s); }
  // Emits the fence that orders the function's streaming (non-temporal) stores before what other
  // threads do after it, where it has any: before each of its returns.
  void end_streaming();
  llvm::Type *llvm_type(DataType t) { return type(t); }
  // A primitive binary operation on values of `operand_type` (float min / max: minnum / maxnum).
  llvm::Value *arith(BinaryOp op, DataType operand_type, llvm::Value *a, llvm::Value *c);

 private:
  void emit(const Stmt &s);
  llvm::Type *type(DataType t);
  llvm::Value *arg_value(const Stmt &s);
  llvm::Value *buffer_base(int buffer);
  llvm::Value *global_ptr(const Stmt &s);
  // unary / binary / select: of the operands' values given, scalars or vectors (lanes) alike.
  llvm::Value *unary(const Stmt &s, llvm::Value *x);
  void set_fast_math(const Stmt &s);
  llvm::Value *cast(llvm::Value *v, DataType from, DataType to);
  llvm::Value *binary(const Stmt &s, llvm::Value *a, llvm::Value *c);
  llvm::Value *select(const Stmt &s, llvm::Value *cond, llvm::Value *a, llvm::Value *c);
  // Stmt::lanes: the copies of one statement that start at blk.stmts[first] as one vector
  // instruction; false (nothing emitted) where they are not copies it can take.
  bool emit_lanes(const Block &blk, size_t first);
  // The vector of these statements' values, lane k the value of ops[k].
  llvm::Value *lanes_vector(const std::vector<const Stmt *> &ops);
  llvm::Value *to_bool(llvm::Value *v, DataType t);
  llvm::Value *atomic(const Stmt &s);
  llvm::Value *atomic_rmw(const Stmt &s, llvm::Value *ptr, llvm::Value *val);
  llvm::Value *atomic_load(const Stmt &s);
  void atomic_store(const Stmt &s);
  void fence(const Stmt &s);
  const Task *parallel_task_of(const Stmt &loop) const;
  llvm::Value *math_call(const char *libm_name, llvm::Intrinsic::ID id, llvm::Value *x, DataType t);
  void emit_if(const Stmt &s);
  void emit_while(const Stmt &s);
  void emit_serial_for(const Stmt &s);
  void emit_return(const Stmt &s);
  void start_dead_block();
  // StmtKind::Span (span_llvm.cpp): a vector loop over the span, then a scalar loop over its tail.
  llvm::Value *span(const Stmt &s);
  llvm::Value *span_scan(const Stmt &s);
  llvm::Value *span_compress(const Stmt &s);
  // Real functions (KernelIR::functions): fn(bufs, args, params...) -> {returns...}, internal to
  // the module; declared before the tasks, whose code calls them, and emitted after.
  void declare_functions();
  void emit_function(int index);
  llvm::Value *call(const Stmt &s);

  KernelIR &k_;
  LlvmTarget &target_;
  llvm::LLVMContext &ctx_;
  std::unique_ptr<llvm::Module> module_;
  llvm::IRBuilder<> b_;
  llvm::Function *fn_ = nullptr;
  const FunctionDesc *function_ = nullptr;  // the real function being emitted; null in a task
  std::vector<llvm::Function *> functions_;
  llvm::BasicBlock *entry_ = nullptr;
  std::unordered_map<const Stmt *, llvm::Value *> values_;
  // A statement emitted as lane `lane` of the vector `vec` (emit_lanes; an alloca: of the vector variable).
  struct Lane {
    llvm::Value *vec;
    unsigned lane;
  };
  std::unordered_map<const Stmt *, Lane> lanes_;
  std::unordered_map<int, llvm::Value *> bases_;
  std::unordered_map<int, llvm::GlobalVariable *> shared_;  // block-shared arrays, addrspace(3)
  struct LoopTargets {
    llvm::BasicBlock *continue_bb, *break_bb;
  };
  std::vector<LoopTargets> loops_;
  // Inside an independent RangeFor: the access group its global loads and stores join.
  bool streamed_ = false;  // the function being emitted has a streaming store (Stmt::nontemporal)
  llvm::MDNode *access_group_ = nullptr;
};

}  // namespace qd
