#include "ir/builder.h"

namespace qd {

Builder::Builder(const std::string &name, TypeConfig cfg) : kernel_(std::make_unique<KernelIR>()), cfg_(cfg) {
  kernel_->name = name;
  blocks_.push_back(&kernel_->body);
}

std::unique_ptr<KernelIR> Builder::finish() {
  if (blocks_.size() != 1 || !open_functions_.empty()) syntax_error("internal: unbalanced blocks at the end of the kernel", loc_);
  return std::move(kernel_);
}

void Builder::set_loc(const std::string &file, int line, const std::string &text) { loc_ = {file, line, text}; }

int Builder::add_scalar_arg(const std::string &name, DataType dtype) {
  ArgDesc a{ArgDesc::Scalar, dtype, name, kernel_->num_arg_slots++};
  kernel_->args.push_back(a);
  return a.slot;
}

int Builder::add_ndarray_arg(const std::string &name, DataType dtype, int ndim, std::vector<int64_t> static_tail) {
  BufferDesc d{BufferKind::Ndarray, dtype};
  d.ndim = ndim;
  d.shape_arg_slot = kernel_->num_arg_slots;
  d.static_tail = std::move(static_tail);
  d.name = name;
  kernel_->num_arg_slots += ndim;
  int b = kernel_->add_buffer(std::move(d));
  kernel_->args.push_back(ArgDesc{ArgDesc::Ndarray, dtype, name, -1, b});
  return b;
}

int Builder::add_field(int64_t field_id, DataType dtype, std::vector<int64_t> shape, const std::string &name) {
  for (size_t i = 0; i < kernel_->buffers.size(); i++)
    if (kernel_->buffers[i].kind == BufferKind::Field && kernel_->buffers[i].field_id == field_id)
      return static_cast<int>(i);
  BufferDesc d{BufferKind::Field, dtype, std::move(shape)};
  d.field_id = field_id;
  d.name = name;
  return kernel_->add_buffer(std::move(d));
}

int Builder::add_shared(DataType dtype, std::vector<int64_t> shape, const std::string &name) {
  if (!open_functions_.empty()) syntax_error("a SharedArray inside a recursive qd.real_func is not supported", loc_);
  if (dtype == DataType::none) type_error("a SharedArray needs a dtype", loc_);
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d <= 0) syntax_error("SharedArray dimensions must be positive", loc_);
    n *= d;
  }
  if (n > (int64_t(1) << 31) / 8) syntax_error("SharedArray is too large for any device's shared memory", loc_);
  BufferDesc d{BufferKind::Shared, dtype, std::move(shape)};
  d.name = name;
  d.loc = loc_;
  return kernel_->add_buffer(std::move(d));
}

Stmt *Builder::simt(SimtOp op, std::vector<Stmt *> operands) {
  if (!open_functions_.empty())
    syntax_error(std::string("qd.simt.") + simt_op_name(op) + " inside a recursive qd.real_func is not supported", loc_);
  size_t arity = 0;
  DataType t = DataType::none;
  switch (op) {
    case SimtOp::ThreadIdx: case SimtOp::GlobalThreadIdx: case SimtOp::GridThreads: case SimtOp::SubgroupInvocationId:
      t = DataType::i32;
      break;
    case SimtOp::SubgroupShuffle: case SimtOp::SubgroupShuffleUp: case SimtOp::SubgroupShuffleDown:
    case SimtOp::SubgroupShuffleXor: case SimtOp::SubgroupBroadcast: arity = 2; break;
    case SimtOp::SubgroupBroadcastFirst: arity = 1; break;
    case SimtOp::SubgroupBallot: arity = 1; t = DataType::u64; break;
    case SimtOp::SubgroupAll: case SimtOp::SubgroupAny: arity = 1; t = DataType::i32; break;
    case SimtOp::SubgroupElect: case SimtOp::SubgroupReduce: case SimtOp::SubgroupExclusiveScan:
      syntax_error(std::string("qd.simt.") + simt_op_name(op) + " is made only by the compiler", loc_);
    default: break;
  }
  std::string name = std::string("qd.simt.") + simt_op_name(op);
  if (operands.size() != arity)
    syntax_error(name + " takes " + std::to_string(arity) + " operand(s), got " + std::to_string(operands.size()), loc_);
  for (Stmt *o : operands)
    if (!o || o->dtype == DataType::none) syntax_error(name + ": an operand has no value", loc_);
  if (arity >= 1 && t == DataType::none) {  // a value moved between lanes
    DataType v = operands[0]->dtype;
    if (!(v == DataType::i32 || v == DataType::u32 || v == DataType::i64 || v == DataType::u64 ||
          v == DataType::f32 || v == DataType::f64))
      type_error(name + ": the value must be i32, u32, i64, u64, f32 or f64, got " + dtype_name(v), loc_);
    t = v;
    if (arity == 2 && operands[1]->dtype != DataType::u32) operands[1] = cast(operands[1], DataType::u32);
    if (op == SimtOp::SubgroupBroadcast && operands[1]->kind != StmtKind::Const)
      syntax_error(name + ": the lane must be a compile-time constant", loc_);
  } else if (arity == 1 && operands[0]->dtype != DataType::i32) {  // a predicate: p != 0 as i32
    operands[0] = cast(binary(BinaryOp::Ne, operands[0], const_int(operands[0]->dtype, 0)), DataType::i32);
  }
  Stmt *s = make(StmtKind::Simt, t, std::move(operands));
  s->op = static_cast<int>(op);
  return t == DataType::none ? nullptr : s;
}

Stmt *Builder::push(std::unique_ptr<Stmt> s) {
  s->loc = loc_;
  return blocks_.back()->push(std::move(s));
}

Stmt *Builder::make(StmtKind kind, DataType dtype, std::vector<Stmt *> operands) {
  auto s = std::make_unique<Stmt>(kind, dtype);
  s->operands = std::move(operands);
  return push(std::move(s));
}

Stmt *Builder::const_int(DataType dtype, int64_t v) {
  if (is_real(dtype)) return const_float(dtype, static_cast<double>(v));
  Stmt *s = make(StmtKind::Const, dtype);
  s->ival = v;
  return s;
}

Stmt *Builder::const_float(DataType dtype, double v) {
  if (!is_real(dtype)) return const_int(dtype, static_cast<int64_t>(v));
  Stmt *s = make(StmtKind::Const, dtype);
  s->fval = v;
  return s;
}

Stmt *Builder::arg(int slot, DataType dtype) {
  Stmt *s = make(StmtKind::Arg, dtype);
  s->ival = slot;
  return s;
}

Stmt *Builder::ndarray_shape(int buffer, int axis) {
  const BufferDesc &d = kernel_->buffers.at(buffer);
  if (d.kind != BufferKind::Ndarray || axis < 0 || axis >= d.ndim)
    type_error("shape index " + std::to_string(axis) + " out of range for '" + d.name + "'", loc_);
  return arg(d.shape_arg_slot + axis, DataType::i32);
}

Stmt *Builder::global_ptr(int buffer, const std::vector<Stmt *> &indices) {
  const BufferDesc &d = kernel_->buffers.at(buffer);
  size_t ndim = d.kind == BufferKind::Ndarray ? d.ndim : d.shape.size();
  if (d.kind != BufferKind::Temps && d.kind != BufferKind::Result && indices.size() != ndim)
    type_error("'" + d.name + "' has " + std::to_string(ndim) + " dimension(s) but is indexed with " +
                   std::to_string(indices.size()) + " index(es)",
               loc_);
  std::vector<Stmt *> idx;
  for (Stmt *i : indices) {
    if (is_real(i->dtype)) type_error("index into '" + d.name + "' must be an integer, got " +
                                          std::string(dtype_name(i->dtype)), loc_);
    idx.push_back(i->dtype == DataType::i32 ? i : cast(i, DataType::i32));
  }
  Stmt *s = make(StmtKind::GlobalPtr, d.dtype, idx);
  s->ival = buffer;
  return s;
}

Stmt *Builder::global_load(Stmt *ptr, bool is_volatile) {
  if (ptr->kind != StmtKind::GlobalPtr) type_error("internal: load from a non-pointer", loc_);
  Stmt *s = make(StmtKind::GlobalLoad, ptr->dtype, {ptr});
  s->is_volatile = is_volatile;
  return s;
}

void Builder::global_store(Stmt *ptr, Stmt *value, bool nontemporal) {
  make(StmtKind::GlobalStore, DataType::none, {ptr, cast(value, ptr->dtype)})->nontemporal = nontemporal;
}

Stmt *Builder::alloca_(DataType dtype) { return make(StmtKind::Alloca, dtype); }

Stmt *Builder::alloca_before(Stmt *anchor, DataType dtype) {
  auto s = std::make_unique<Stmt>(StmtKind::Alloca, dtype);
  s->loc = anchor->loc;
  Stmt *raw = insert_before(anchor, std::move(s));
  if (!raw) syntax_error("internal: alloca_before an unknown statement", loc_);
  return raw;
}

Stmt *Builder::local_load(Stmt *a) { return make(StmtKind::LocalLoad, a->dtype, {a}); }

void Builder::local_store(Stmt *a, Stmt *value) { make(StmtKind::LocalStore, DataType::none, {a, cast(value, a->dtype)}); }

Stmt *Builder::unary(UnaryOp op, Stmt *x) {
  DataType t = unary_result(op, x->dtype, cfg_, loc_);
  if (op != UnaryOp::Not && t != x->dtype) x = cast(x, t);
  Stmt *s = make(StmtKind::Unary, t, {x});
  s->op = static_cast<int>(op);
  return s;
}

Stmt *Builder::cast(Stmt *x, DataType to) {
  if (x->dtype == to) return x;
  if (x->dtype == DataType::none) type_error("cannot convert a statement without a value", loc_);
  Stmt *s = make(StmtKind::Unary, to, {x});
  s->op = static_cast<int>(UnaryOp::Cast);
  s->cast_from = x->dtype;
  return s;
}

Stmt *Builder::bitcast(Stmt *x, DataType to) {
  if (bit_width(x->dtype) != bit_width(to))
    type_error(std::string("qd.bit_cast needs types of equal width, got ") + dtype_name(x->dtype) + " -> " +
                   dtype_name(to), loc_);
  Stmt *s = make(StmtKind::Unary, to, {x});
  s->op = static_cast<int>(UnaryOp::Bitcast);
  s->cast_from = x->dtype;
  return s;
}

Stmt *Builder::binary(BinaryOp op, Stmt *a, Stmt *b) {
  BinaryTyping t = binary_typing(op, a->dtype, b->dtype, cfg_, loc_);
  Stmt *s = make(StmtKind::Binary, t.result, {cast(a, t.operand), cast(b, (op == BinaryOp::Shl || op == BinaryOp::Shr) ? b->dtype : t.operand)});
  s->op = static_cast<int>(op);
  return s;
}

Stmt *Builder::select(Stmt *cond, Stmt *a, Stmt *b) {
  DataType t = promoted_type(a->dtype, b->dtype);
  return make(StmtKind::Select, t, {to_condition(cond), cast(a, t), cast(b, t)});
}

Stmt *Builder::fns(Stmt *mask, Stmt *base, Stmt *offset) {
  for (Stmt *x : {mask, base, offset})
    if (x->dtype == DataType::none || is_real(x->dtype)) type_error("qd.math.fns takes integral inputs only (mask: u32, base: u32, offset: i32)", loc_);
  return make(StmtKind::Fns, DataType::u32, {cast(mask, DataType::u32), cast(base, DataType::u32), cast(offset, DataType::i32)});
}

namespace {
bool integer_of_width(DataType t, int bits) { return t != DataType::none && !is_real(t) && t != DataType::u1 && bit_width(t) == bits; }
}  // namespace

Stmt *Builder::span_exclusive_scan(BinaryOp op, Stmt *dst, Stmt *src, Stmt *n, Stmt *carry) {
  DataType t = carry->dtype;
  bool ok = (op == BinaryOp::Add || op == BinaryOp::Min || op == BinaryOp::Max) && dst->kind == StmtKind::GlobalPtr &&
            src->kind == StmtKind::GlobalPtr && (integer_of_width(t, 32) || integer_of_width(t, 64)) &&
            integer_of_width(dst->dtype, bit_width(t)) && integer_of_width(src->dtype, bit_width(t));
  if (!ok) syntax_error("internal: a span scan takes element pointers and a carry of one 32 / 64-bit integer width", loc_);
  Stmt *s = make(StmtKind::Span, t, {dst, src, cast(n, DataType::i32), carry});
  s->op = static_cast<int>(SpanOp::ExclusiveScan);
  s->ival = static_cast<int64_t>(op);
  return s;
}

Stmt *Builder::span_compress(Stmt *out, Stmt *flags, Stmt *n, Stmt *room, Stmt *values) {
  bool pointer = values->kind == StmtKind::GlobalPtr;
  int bits = out->kind == StmtKind::GlobalPtr && out->dtype != DataType::none ? bit_width(out->dtype) : 0;
  bool ok = bits && flags->kind == StmtKind::GlobalPtr && !is_real(flags->dtype) && flags->dtype != DataType::u1 &&
            (pointer ? (bits == 32 || bits == 64) && bit_width(values->dtype) == bits
                     : bits == 32 && !is_real(out->dtype) && !is_real(values->dtype));
  if (!ok) syntax_error("internal: a span compress takes element pointers of one 32 / 64-bit width and integer flags", loc_);
  Stmt *s = make(StmtKind::Span, DataType::i32,
                 {out, flags, cast(n, DataType::i32), cast(room, DataType::i32), pointer ? values : cast(values, DataType::i32)});
  s->op = static_cast<int>(SpanOp::Compress);
  return s;
}

Stmt *Builder::atomic_load(Stmt *ptr, MemoryOrder order, MemScope scope) {
  if (auto why = memory_order_error(MemOpKind::Load, order)) type_error(*why, loc_);
  Stmt *s = global_load(ptr, true);
  s->is_atomic = true;
  s->order = order;
  s->scope = scope;
  return s;
}

void Builder::atomic_store(Stmt *ptr, Stmt *value, MemoryOrder order, MemScope scope) {
  if (auto why = memory_order_error(MemOpKind::Store, order)) type_error(*why, loc_);
  if (ptr->kind != StmtKind::GlobalPtr) type_error("internal: store to a non-pointer", loc_);
  Stmt *s = make(StmtKind::GlobalStore, DataType::none, {ptr, cast(value, ptr->dtype)});
  s->is_atomic = true;
  s->order = order;
  s->scope = scope;
}

void Builder::fence(MemoryOrder order, MemScope scope) {
  if (auto why = memory_order_error(MemOpKind::Fence, order)) type_error(*why, loc_);
  Stmt *s = make(StmtKind::Fence, DataType::none);
  s->order = order;
  s->scope = scope;
}

Stmt *Builder::atomic(AtomicOp op, Stmt *target, Stmt *value, Stmt *desired, MemoryOrder order, MemScope scope) {
  if (target->kind != StmtKind::GlobalPtr && target->kind != StmtKind::Alloca)
    syntax_error(std::string("qd.atomic_") + atomic_op_info(op).name +
                     ": the target must be a writable lvalue (a field or ndarray element, or a variable)",
                 loc_);
  check_atomic_operands(op, target->dtype, loc_);
  if (!value || (op == AtomicOp::Cas && !desired))  // the front end always passes them
    type_error(std::string("internal: qd.atomic_") + atomic_op_info(op).name + " without an operand", loc_);
  std::vector<Stmt *> ops = {target, cast(value, target->dtype)};
  if (op == AtomicOp::Cas) ops.push_back(cast(desired, target->dtype));
  Stmt *s = make(StmtKind::Atomic, target->dtype, ops);
  s->ival = static_cast<int64_t>(op);
  s->order = order;
  s->scope = scope;
  return s;
}

Stmt *Builder::to_condition(Stmt *cond) {
  if (cond->dtype == DataType::none) type_error("a condition needs a value", loc_);
  return cond;
}

Stmt *Builder::begin_if(Stmt *cond) {
  Stmt *s = make(StmtKind::If, DataType::none, {to_condition(cond)});
  s->body = std::make_unique<Block>();
  s->body->owner = s;
  blocks_.push_back(s->body.get());
  return s;
}

void Builder::close(Stmt *owner, const char *what) {
  if (blocks_.size() < 2 || blocks_.back()->owner != owner)
    syntax_error(std::string("internal: mismatched ") + what, loc_);
  blocks_.pop_back();
}

void Builder::begin_else(Stmt *if_stmt) {
  close(if_stmt, "else");
  if_stmt->else_body = std::make_unique<Block>();
  if_stmt->else_body->owner = if_stmt;
  blocks_.push_back(if_stmt->else_body.get());
}

void Builder::end_if(Stmt *if_stmt) { close(if_stmt, "if"); }

Stmt *Builder::begin_while() {
  Stmt *s = make(StmtKind::While, DataType::none);
  s->body = std::make_unique<Block>();
  s->body->owner = s;
  blocks_.push_back(s->body.get());
  loop_depth_++;
  return s;
}

void Builder::end_while(Stmt *loop) {
  close(loop, "while");
  loop_depth_--;
}

Stmt *Builder::begin_range_for(Stmt *begin, Stmt *end, bool serialize, int block_dim) {
  if (is_real(begin->dtype) || is_real(end->dtype)) type_error("range() bounds must be integers", loc_);
  Stmt *s = make(StmtKind::RangeFor, DataType::none, {cast(begin, DataType::i32), cast(end, DataType::i32)});
  s->serialize = serialize;
  s->block_dim = block_dim;
  s->body = std::make_unique<Block>();
  s->body->owner = s;
  blocks_.push_back(s->body.get());
  loop_depth_++;
  return s;
}

Stmt *Builder::loop_index(Stmt *range_for) { return make(StmtKind::LoopIndex, DataType::i32, {range_for}); }

void Builder::end_range_for(Stmt *loop) {
  close(loop, "for");
  loop_depth_--;
}

void Builder::break_() {
  if (loop_depth_ == 0) syntax_error("'break' outside a loop", loc_);
  make(StmtKind::Break, DataType::none);
}

void Builder::continue_() {
  if (loop_depth_ == 0) syntax_error("'continue' outside a loop", loc_);
  make(StmtKind::Continue, DataType::none);
}

void Builder::return_(const std::vector<Stmt *> &values) {
  bool in_function = !open_functions_.empty();
  auto &rets = in_function ? kernel_->functions[open_functions_.back().fn].returns : kernel_->returns;
  if (values.size() != rets.size())
    type_error(std::string(in_function ? "the function" : "the kernel") + " returns " + std::to_string(values.size()) +
                   " value(s) but its annotation says " + std::to_string(rets.size()), loc_);
  std::vector<Stmt *> cast_values;
  for (size_t i = 0; i < values.size(); i++) cast_values.push_back(cast(values[i], rets[i]));
  make(StmtKind::Return, DataType::none, cast_values);
}

int Builder::begin_function(const std::string &name, std::vector<DataType> params, std::vector<DataType> returns) {
  int fn = static_cast<int>(kernel_->functions.size());
  kernel_->functions.push_back(FunctionDesc{name, std::move(params), std::move(returns), loc_, std::make_unique<Task>()});
  open_functions_.push_back(Open{fn, std::move(blocks_), loop_depth_});
  blocks_ = {&kernel_->functions[fn].code->body};
  loop_depth_ = 0;
  return fn;
}

void Builder::end_function() {
  if (open_functions_.empty() || blocks_.size() != 1) syntax_error("internal: unbalanced blocks at a function's end", loc_);
  blocks_ = std::move(open_functions_.back().blocks);
  loop_depth_ = open_functions_.back().loop_depth;
  open_functions_.pop_back();
}

Stmt *Builder::param(int index) {
  if (open_functions_.empty()) syntax_error("internal: a parameter outside a function", loc_);
  Stmt *s = make(StmtKind::Param, kernel_->functions[open_functions_.back().fn].params.at(index));
  s->ival = index;
  return s;
}

std::vector<Stmt *> Builder::call(int fn, const std::vector<Stmt *> &args) {
  const FunctionDesc &f = kernel_->functions.at(fn);
  if (args.size() != f.params.size())
    type_error("internal: " + f.name + " takes " + std::to_string(f.params.size()) + " argument(s), got " +
                   std::to_string(args.size()), loc_);
  std::vector<Stmt *> cast_args;
  for (size_t i = 0; i < args.size(); i++) cast_args.push_back(cast(args[i], f.params[i]));
  Stmt *c = make(StmtKind::Call, DataType::none, cast_args);
  c->ival = fn;
  std::vector<Stmt *> results;
  for (size_t i = 0; i < f.returns.size(); i++) {
    Stmt *r = make(StmtKind::CallResult, f.returns[i], {c});
    r->ival = static_cast<int64_t>(i);
    results.push_back(r);
  }
  return results;
}

}  // namespace qd
