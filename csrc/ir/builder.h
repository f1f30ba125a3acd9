#pragma once
// Builds a KernelIR statement by statement. The Python front end drives it through the bindings;
// every creation applies the type rules, inserting casts where the rules promote an operand.
#include <memory>
#include <vector>

#include "analysis/type_rules.h"
#include "ir/ir.h"

namespace qd {

class Builder {
 public:
  Builder(const std::string &name, TypeConfig cfg);

  KernelIR &kernel() { return *kernel_; }
  std::unique_ptr<KernelIR> finish();
  void set_loc(const std::string &file, int line, const std::string &text);
  const SourceLoc &loc() const { return loc_; }
  const TypeConfig &config() const { return cfg_; }

  // Arguments and buffers (set up before the body is built).
  int add_scalar_arg(const std::string &name, DataType dtype);   // returns the arg slot
  int add_ndarray_arg(const std::string &name, DataType dtype, int ndim, std::vector<int64_t> static_tail);
  int add_field(int64_t field_id, DataType dtype, std::vector<int64_t> shape, const std::string &name);
  // A block-shared array (qd.simt.block.SharedArray): a fresh buffer per allocation site; `shape`
  // includes the element dims of vector dtypes.
  int add_shared(DataType dtype, std::vector<int64_t> shape, const std::string &name);
  void set_returns(std::vector<DataType> types) { kernel_->returns = std::move(types); }
  void set_debug(bool on) { kernel_->debug = on; }
  // The adjoint (1) or dual (2) version of the kernel; `companion` holds buffer `buffer`'s gradient
  // or tangent (transforms/autodiff.cpp).
  void set_autodiff(int mode) { kernel_->autodiff = static_cast<KernelIR::Autodiff>(mode); }
  void set_ad_stack_size(int n) { kernel_->ad_stack_size = n; }
  void set_companion(int buffer, int companion) {
    if (kernel_->companion.size() <= static_cast<size_t>(buffer)) kernel_->companion.resize(buffer + 1, -1);
    kernel_->companion[buffer] = companion;
  }
  // Validation (3): a write to an element of `buffer` read before in the launch puts `message` into
  // the assertion word (buffer `word`, element 0) unless an earlier failure is there.
  void set_access_check(int buffer, int message, int word) {
    if (kernel_->check_message.size() <= static_cast<size_t>(buffer)) kernel_->check_message.resize(buffer + 1, 0);
    kernel_->check_message[buffer] = message;
    kernel_->check_word = word;
  }
  void set_deterministic(bool on) { kernel_->deterministic = on; }

  // Values.
  Stmt *const_int(DataType dtype, int64_t v);
  Stmt *const_float(DataType dtype, double v);
  Stmt *arg(int slot, DataType dtype);
  Stmt *ndarray_shape(int buffer, int axis);
  Stmt *global_ptr(int buffer, const std::vector<Stmt *> &indices);
  Stmt *global_load(Stmt *ptr, bool is_volatile);
  void global_store(Stmt *ptr, Stmt *value, bool nontemporal = false);  // nontemporal: ir.h
  Stmt *alloca_(DataType dtype);
  // A variable declared just before `anchor` (an earlier statement of an open block): a value that
  // must outlive the block where its type becomes known (a @qd.func's early return).
  Stmt *alloca_before(Stmt *anchor, DataType dtype);
  Stmt *local_load(Stmt *alloca);
  void local_store(Stmt *alloca, Stmt *value);
  Stmt *unary(UnaryOp op, Stmt *x);
  Stmt *cast(Stmt *x, DataType to);
  Stmt *bitcast(Stmt *x, DataType to);
  Stmt *binary(BinaryOp op, Stmt *a, Stmt *b);
  Stmt *select(Stmt *cond, Stmt *a, Stmt *b);
  // qd.math.fns: operands cast to u32, u32, i32; a u32 value.
  Stmt *fns(Stmt *mask, Stmt *base, Stmt *offset);
  // Span statements (ir/ops.h; internal, for qd.algorithms on the cpu): pointers are GlobalPtrs.
  Stmt *span_exclusive_scan(BinaryOp op, Stmt *dst, Stmt *src, Stmt *n, Stmt *carry);
  Stmt *span_compress(Stmt *out, Stmt *flags, Stmt *n, Stmt *room, Stmt *values);
  // `target` is a GlobalPtr or an Alloca; operands are cast to its dtype. Returns the old value.
  Stmt *atomic(AtomicOp op, Stmt *target, Stmt *value, Stmt *desired = nullptr,
               MemoryOrder order = MemoryOrder::Relaxed, MemScope scope = MemScope::Device);
  // qd.atomic_load / atomic_store / atomic_fence; an order that makes no sense for the operation
  // is a type error at the current line.
  Stmt *atomic_load(Stmt *ptr, MemoryOrder order, MemScope scope);
  void atomic_store(Stmt *ptr, Stmt *value, MemoryOrder order, MemScope scope);
  void fence(MemoryOrder order, MemScope scope);

  // A block / grid / subgroup operation (operands and result types in ir/ops.h); null for the
  // operations without a value. Subgroup value operands must be 32 / 64-bit ints or floats.
  Stmt *simt(SimtOp op, std::vector<Stmt *> operands = {});

  // Control flow: begin_* opens a block, end_* closes it.
  Stmt *begin_if(Stmt *cond);
  void begin_else(Stmt *if_stmt);
  void end_if(Stmt *if_stmt);
  Stmt *begin_while();  // an endless loop; leave it with break_()
  void end_while(Stmt *loop);
  Stmt *begin_range_for(Stmt *begin, Stmt *end, bool serialize, int block_dim);
  Stmt *loop_index(Stmt *range_for);
  void end_range_for(Stmt *loop);
  void break_();
  void continue_();
  // Inside a real function: returns its values (cast to its return types); else the kernel's.
  void return_(const std::vector<Stmt *> &values);

  // Real functions (KernelIR::functions): begin_function declares one and builds its code until
  // end_function (it may call itself, or functions declared while it is built); returns its index.
  int begin_function(const std::string &name, std::vector<DataType> params, std::vector<DataType> returns);
  void end_function();
  Stmt *param(int index);  // the current function's parameter
  // Calls function `fn` (arguments cast to its parameter types); its return values.
  std::vector<Stmt *> call(int fn, const std::vector<Stmt *> &args);
  int loop_depth() const { return loop_depth_; }
  int num_arg_slots() const { return kernel_->num_arg_slots; }

 private:
  Stmt *push(std::unique_ptr<Stmt> s);
  Stmt *make(StmtKind kind, DataType dtype, std::vector<Stmt *> operands = {});
  Stmt *to_condition(Stmt *cond);
  void close(Stmt *owner, const char *what);

  std::unique_ptr<KernelIR> kernel_;
  TypeConfig cfg_;
  SourceLoc loc_;
  std::vector<Block *> blocks_;
  int loop_depth_ = 0;
  // The functions being built, innermost last, with the enclosing code's open blocks and loop depth.
  struct Open {
    int fn;
    std::vector<Block *> blocks;
    int loop_depth;
  };
  std::vector<Open> open_functions_;
};

}  // namespace qd
