#include "codegen/llvm/codegen_llvm.h"

#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>

#include <algorithm>

namespace qd {

using llvm::Value;

LlvmCodegen::LlvmCodegen(KernelIR &k, LlvmTarget &target, llvm::LLVMContext &ctx)
    : k_(k), target_(target), ctx_(ctx), module_(std::make_unique<llvm::Module>(k.name, ctx)), b_(ctx) {
  target_.configure_module(*module_);
}

std::unique_ptr<llvm::Module> LlvmCodegen::run(std::vector<TaskSymbols> *symbols) {
  declare_functions();
  for (size_t i = 0; i < k_.tasks.size(); i++) symbols->push_back(target_.emit_task(*this, k_.tasks[i], int(i)));
  for (size_t i = 0; i < k_.functions.size(); i++) emit_function(int(i));
  std::string err;
  llvm::raw_string_ostream os(err);
  if (llvm::verifyModule(*module_, &os)) throw std::runtime_error("internal: invalid LLVM IR generated: " + err);
  return std::move(module_);
}

llvm::Function *LlvmCodegen::new_function(const std::string &name, std::vector<llvm::Type *> params) {
  auto *fty = llvm::FunctionType::get(b_.getVoidTy(), params, false);
  return llvm::Function::Create(fty, llvm::Function::ExternalLinkage, name, *module_);
}

void LlvmCodegen::begin_function(llvm::Function *fn) {
  fn_ = fn;
  entry_ = llvm::BasicBlock::Create(ctx_, "entry", fn);
  b_.SetInsertPoint(entry_);
  values_.clear();
  lanes_.clear();
  streamed_ = false;
  bases_.clear();
}

llvm::Type *LlvmCodegen::type(DataType t) {
  switch (t) {
    case DataType::u1: return b_.getInt1Ty();
    case DataType::i8: case DataType::u8: return b_.getInt8Ty();
    case DataType::i16: case DataType::u16: return b_.getInt16Ty();
    case DataType::i32: case DataType::u32: return b_.getInt32Ty();
    case DataType::i64: case DataType::u64: return b_.getInt64Ty();
    case DataType::f16: return b_.getHalfTy();
    case DataType::f32: return b_.getFloatTy();
    case DataType::f64: return b_.getDoubleTy();
    default: return b_.getVoidTy();
  }
}

void LlvmCodegen::emit_block(const Block &blk) {
  for (size_t i = 0; i < blk.stmts.size(); i++) {
    if (blk.stmts[i]->lanes > 1 && emit_lanes(blk, i)) i += blk.stmts[i]->lanes - 1;
    else emit(*blk.stmts[i]);
  }
}

namespace {

bool lane_type(DataType t) {
  return t == DataType::i32 || t == DataType::u32 || t == DataType::i64 || t == DataType::u64 || t == DataType::f32 ||
         t == DataType::f64;
}

// What emit_lanes takes: variables, and the operations that are one LLVM instruction or intrinsic
// acting lane by lane on vectors as on scalars (no libm calls).
bool lane_op(const Stmt &s) {
  for (const Stmt *o : s.operands)
    if (o->kind != StmtKind::Alloca && !lane_type(o->dtype)) return false;
  switch (s.kind) {
    case StmtKind::Alloca: case StmtKind::LocalLoad: return lane_type(s.dtype);
    case StmtKind::LocalStore: case StmtKind::Select: return true;
    case StmtKind::Unary:
      switch (static_cast<UnaryOp>(s.op)) {
        case UnaryOp::Neg: case UnaryOp::Not: case UnaryOp::BitNot: case UnaryOp::Cast: case UnaryOp::Bitcast:
        case UnaryOp::Abs: case UnaryOp::Sqrt: case UnaryOp::Floor: case UnaryOp::Ceil: case UnaryOp::Round:
        case UnaryOp::Trunc:
          return lane_type(s.dtype);
        default: return false;
      }
    case StmtKind::Binary:
      switch (static_cast<BinaryOp>(s.op)) {
        case BinaryOp::Add: case BinaryOp::Sub: case BinaryOp::Mul: case BinaryOp::Div: case BinaryOp::Min:
        case BinaryOp::Max: case BinaryOp::BitAnd: case BinaryOp::BitOr: case BinaryOp::BitXor: case BinaryOp::Shl:
        case BinaryOp::Shr: case BinaryOp::Eq: case BinaryOp::Ne: case BinaryOp::Lt: case BinaryOp::Le:
        case BinaryOp::Gt: case BinaryOp::Ge: case BinaryOp::LogicalAnd: case BinaryOp::LogicalOr:
          return lane_type(s.dtype);
        default: return false;
      }
    default: return false;
  }
}

bool same_op(const Stmt &a, const Stmt &b) {
  if (a.kind != b.kind || a.op != b.op || a.dtype != b.dtype || a.cast_from != b.cast_from || a.exact != b.exact ||
      a.reassoc != b.reassoc || a.operands.size() != b.operands.size())
    return false;
  for (size_t p = 0; p < a.operands.size(); p++)
    if (a.operands[p]->dtype != b.operands[p]->dtype) return false;
  return true;
}

}  // namespace

Value *LlvmCodegen::lanes_vector(const std::vector<const Stmt *> &ops) {
  const unsigned n = unsigned(ops.size());
  auto first = lanes_.find(ops[0]);
  if (first != lanes_.end() && first->second.lane == 0 && !llvm::isa<llvm::AllocaInst>(first->second.vec)) {
    bool whole = llvm::cast<llvm::FixedVectorType>(first->second.vec->getType())->getNumElements() == n;
    for (unsigned k = 1; k < n && whole; k++) {
      auto it = lanes_.find(ops[k]);
      whole = it != lanes_.end() && it->second.vec == first->second.vec && it->second.lane == k;
    }
    if (whole) return first->second.vec;
  }
  if (std::all_of(ops.begin(), ops.end(), [&](const Stmt *o) { return o == ops[0]; }))
    return b_.CreateVectorSplat(n, value(ops[0]));
  Value *v = llvm::PoisonValue::get(llvm::FixedVectorType::get(value(ops[0])->getType(), n));
  for (unsigned k = 0; k < n; k++) v = b_.CreateInsertElement(v, value(ops[k]), uint64_t(k));
  return v;
}

bool LlvmCodegen::emit_lanes(const Block &blk, size_t first) {
  const Stmt &s0 = *blk.stmts[first];
  const unsigned n = unsigned(s0.lanes);
  if (first + n > blk.stmts.size() || !lane_op(s0)) return false;
  std::vector<const Stmt *> group(n);
  for (unsigned k = 0; k < n; k++) {
    group[k] = blk.stmts[first + k].get();
    if (!same_op(*group[k], s0) || (k && group[k]->lanes)) return false;
  }
  for (const Stmt *s : group)  // independent copies: none reads another
    for (const Stmt *o : s->operands)
      if (std::find(group.begin(), group.end(), o) != group.end()) return false;
  auto operand = [&](size_t p) {
    std::vector<const Stmt *> ops;
    for (const Stmt *s : group) ops.push_back(s->operands[p]);
    return ops;
  };
  // A local load or store: the lanes of one vector variable, in order.
  Value *var = nullptr;
  if (s0.kind == StmtKind::LocalLoad || s0.kind == StmtKind::LocalStore) {
    auto it = lanes_.find(s0.operands[0]);
    if (it == lanes_.end() || !llvm::isa<llvm::AllocaInst>(it->second.vec)) return false;
    var = it->second.vec;
    for (unsigned k = 0; k < n; k++) {
      auto lane = lanes_.find(group[k]->operands[0]);
      if (lane == lanes_.end() || lane->second.vec != var || lane->second.lane != k) return false;
    }
    if (llvm::cast<llvm::AllocaInst>(var)->getAllocatedType() != llvm::FixedVectorType::get(type(s0.operands[0]->dtype), n))
      return false;
  }
  Value *v = nullptr;
  switch (s0.kind) {
    case StmtKind::Alloca: {
      auto *vt = llvm::FixedVectorType::get(type(s0.dtype), n);
      llvm::IRBuilder<> eb(entry_, entry_->begin());
      Value *a = eb.CreateAlloca(vt);
      b_.CreateStore(llvm::Constant::getNullValue(vt), a);  // variables start at zero
      for (unsigned k = 0; k < n; k++) {
        values_[group[k]] = b_.CreateConstInBoundsGEP2_32(vt, a, 0, k);
        lanes_[group[k]] = {a, k};
      }
      return true;
    }
    case StmtKind::LocalStore: b_.CreateStore(lanes_vector(operand(1)), var); return true;
    case StmtKind::LocalLoad: v = b_.CreateLoad(llvm::FixedVectorType::get(type(s0.dtype), n), var); break;
    case StmtKind::Unary: v = unary(s0, lanes_vector(operand(0))); break;
    case StmtKind::Binary: v = binary(s0, lanes_vector(operand(0)), lanes_vector(operand(1))); break;
    case StmtKind::Select: v = select(s0, lanes_vector(operand(0)), lanes_vector(operand(1)), lanes_vector(operand(2))); break;
    default: return false;
  }
  for (unsigned k = 0; k < n; k++) {
    values_[group[k]] = b_.CreateExtractElement(v, uint64_t(k));  // for scalar users; dropped where none
    lanes_[group[k]] = {v, k};
  }
  return true;
}

void LlvmCodegen::emit_loop_body(const Stmt &loop, Value *index) {
  values_[&loop] = index;
  emit_block(*loop.body);
}

void LlvmCodegen::start_dead_block() {
  b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "dead", fn_));
}

void LlvmCodegen::emit(const Stmt &s) {
  Value *v = nullptr;
  switch (s.kind) {
    case StmtKind::Const:
      v = is_real(s.dtype) ? llvm::ConstantFP::get(type(s.dtype), s.fval)
                           : llvm::ConstantInt::get(type(s.dtype), static_cast<uint64_t>(s.ival), is_signed(s.dtype));
      break;
    case StmtKind::Arg: v = arg_value(s); break;
    case StmtKind::GlobalPtr: v = global_ptr(s); break;
    case StmtKind::GlobalLoad: {
      if (s.is_atomic) {
        v = atomic_load(s);
        break;
      }
      auto *load = b_.CreateLoad(type(s.dtype), value(s.operands[0]), s.is_volatile);
      if (access_group_) load->setMetadata(llvm::LLVMContext::MD_access_group, access_group_);
      v = load;
      break;
    }
    case StmtKind::Fence: fence(s); break;
    case StmtKind::GlobalStore:
      if (s.is_atomic) {
        atomic_store(s);
        break;
      }
      {
        auto *store = b_.CreateStore(value(s.operands[1]), value(s.operands[0]));
        if (access_group_) store->setMetadata(llvm::LLVMContext::MD_access_group, access_group_);
        if (s.nontemporal) {  // LangRef: !nontemporal !{i32 1}
          store->setMetadata(llvm::LLVMContext::MD_nontemporal,
                             llvm::MDNode::get(ctx_, {llvm::ConstantAsMetadata::get(b_.getInt32(1))}));
          streamed_ = true;
        }
        break;
      }
    case StmtKind::LocalStore: b_.CreateStore(value(s.operands[1]), value(s.operands[0])); break;
    case StmtKind::Alloca: {
      llvm::IRBuilder<> eb(entry_, entry_->begin());
      v = eb.CreateAlloca(type(s.dtype));
      b_.CreateStore(llvm::Constant::getNullValue(type(s.dtype)), v);  // variables start at zero
      break;
    }
    case StmtKind::LocalLoad: v = b_.CreateLoad(type(s.dtype), value(s.operands[0])); break;
    case StmtKind::Unary: v = unary(s, value(s.operands[0])); break;
    case StmtKind::Binary: v = binary(s, value(s.operands[0]), value(s.operands[1])); break;
    case StmtKind::Select: v = select(s, value(s.operands[0]), value(s.operands[1]), value(s.operands[2])); break;
    case StmtKind::Atomic: v = atomic(s); break;
    case StmtKind::Fns: v = target_.emit_fns(*this, value(s.operands[0]), value(s.operands[1]), value(s.operands[2])); break;
    case StmtKind::If: emit_if(s); break;
    case StmtKind::While: emit_while(s); break;
    case StmtKind::RangeFor: emit_serial_for(s); break;
    case StmtKind::LoopIndex: v = value(s.operands[0]); break;
    case StmtKind::Break:
      b_.CreateBr(loops_.back().break_bb);
      start_dead_block();
      break;
    case StmtKind::Continue:
      b_.CreateBr(loops_.back().continue_bb);
      start_dead_block();
      break;
    case StmtKind::Return: emit_return(s); break;
    case StmtKind::Simt: v = target_.emit_simt(*this, s); break;
    case StmtKind::Span: v = span(s); break;
    case StmtKind::Param: v = fn_->getArg(2 + static_cast<unsigned>(s.ival)); break;
    case StmtKind::Call: v = call(s); break;
    case StmtKind::CallResult: v = b_.CreateExtractValue(value(s.operands[0]), {static_cast<unsigned>(s.ival)}); break;
  }
  if (v) values_[&s] = v;
}

Value *LlvmCodegen::arg_value(const Stmt &s) {
  Value *args = fn_->getArg(1);
  Value *slot = b_.CreateLoad(b_.getInt64Ty(), b_.CreateConstGEP1_64(b_.getInt64Ty(), args, s.ival));
  llvm::Type *t = type(s.dtype);
  Value *bits = b_.CreateTrunc(slot, b_.getIntNTy(bit_width(s.dtype)));
  return is_real(s.dtype) ? b_.CreateBitCast(bits, t) : bits;
}

Value *LlvmCodegen::buffer_base(int buffer) {
  auto it = bases_.find(buffer);
  if (it != bases_.end()) return it->second;
  llvm::IRBuilder<> eb(entry_, entry_->getFirstInsertionPt());
  const BufferDesc &d = k_.buffers[buffer];
  if (d.kind == BufferKind::Private || (d.kind == BufferKind::Shared && target_.shared_on_stack())) {
    // this thread's copy of a field, a per-thread array of a cpu block, or (cpu) a block's shared
    // array: on the stack; shared arrays in whole 32-bit words (a narrow element's atomic is a CAS
    // loop on the word holding it)
    int64_t n = 1;
    for (int64_t dim : d.shape) n *= dim;
    if (d.kind == BufferKind::Shared) {
      int64_t per_word = std::max(1, 4 / byte_size(d.dtype));
      n = (n + per_word - 1) / per_word * per_word;
    }
    auto *a = eb.CreateAlloca(type(d.dtype), eb.getInt64(n));
    a->setAlignment(llvm::Align(16));
    return bases_[buffer] = a;
  }
  if (d.kind == BufferKind::Shared && d.shared_offset >= 0) {
    // In the task's dynamic shared memory (CUDA above 48 KiB; target/shared_memory.h): one
    // `.extern .shared` byte array, sized at launch, that every such task's arrays are offsets in.
    auto *ty = llvm::ArrayType::get(eb.getInt8Ty(), 0);
    auto *g = module_->getNamedGlobal("qd_dynamic_shared");
    if (!g) {
      g = new llvm::GlobalVariable(*module_, ty, false, llvm::GlobalValue::ExternalLinkage, nullptr,
                                   "qd_dynamic_shared", nullptr, llvm::GlobalValue::NotThreadLocal, 3);
      g->setAlignment(llvm::Align(16));
    }
    return bases_[buffer] = eb.CreateConstInBoundsGEP1_64(eb.getInt8Ty(), g, d.shared_offset);
  }
  if (d.kind == BufferKind::Shared) {  // one array per block: a module global in the shared address space
    auto it = shared_.find(buffer);
    if (it != shared_.end()) return bases_[buffer] = it->second;
    int64_t n = 1;
    for (int64_t dim : d.shape) n *= dim;
    // Whole 32-bit words: a narrow element's atomic is a CAS loop on the word holding it.
    int64_t per_word = std::max(1, 4 / byte_size(d.dtype));
    n = (n + per_word - 1) / per_word * per_word;
    auto *ty = llvm::ArrayType::get(type(d.dtype), n);
    auto *g = new llvm::GlobalVariable(*module_, ty, false, llvm::GlobalValue::InternalLinkage,
                                       llvm::UndefValue::get(ty), d.name, nullptr,
                                       llvm::GlobalValue::NotThreadLocal, 3);
    g->setAlignment(llvm::Align(16));
    return bases_[buffer] = shared_[buffer] = g;
  }
  // Loaded once in the entry block: the buffer table does not change during a launch.
  auto *ptr_ty = llvm::PointerType::get(ctx_, target_.global_address_space());
  Value *slot = eb.CreateConstGEP1_64(eb.getPtrTy(), fn_->getArg(0), buffer);
  Value *base = eb.CreateLoad(ptr_ty, slot);
  bases_[buffer] = base;
  return base;
}

Value *LlvmCodegen::global_ptr(const Stmt &s) {
  const BufferDesc &d = k_.buffers[s.ival];
  Value *base = buffer_base(static_cast<int>(s.ival));
  if (d.kind == BufferKind::Temps || d.kind == BufferKind::Result) {
    Value *slot = b_.CreateConstGEP1_64(b_.getInt8Ty(), base, s.byte_offset);
    if (s.operands.empty()) return slot;
    // an array in the temps buffer (deterministic mode's accumulators): element index from there
    return b_.CreateGEP(type(s.dtype), slot, b_.CreateSExt(value(s.operands[0]), b_.getInt64Ty()));
  }
  // Row-major linear index, in i64. The first index needs no dimension: a word pointer of a narrow
  // atomic's CAS loop (legalize.cpp) has one index whatever the buffer's shape, a 0-D field's too.
  Value *linear = s.operands.empty() ? b_.getInt64(0) : b_.CreateSExt(value(s.operands[0]), b_.getInt64Ty());
  for (size_t i = 1; i < s.operands.size(); i++) {
    Value *dim;
    if (d.kind != BufferKind::Ndarray) {  // fields and private copies: a static shape
      dim = b_.getInt64(d.shape[i]);
    } else {
      size_t runtime_dims = d.ndim - d.static_tail.size();
      if (i < runtime_dims) {
        Value *args = fn_->getArg(1);
        dim = b_.CreateLoad(b_.getInt64Ty(), b_.CreateConstGEP1_64(b_.getInt64Ty(), args, d.shape_arg_slot + i));
      } else {
        dim = b_.getInt64(d.static_tail[i - runtime_dims]);
      }
    }
    Value *idx = b_.CreateSExt(value(s.operands[i]), b_.getInt64Ty());
    linear = b_.CreateAdd(b_.CreateMul(linear, dim), idx);
  }
  return b_.CreateGEP(type(s.dtype), base, linear);
}

Value *LlvmTarget::emit_simt(LlvmCodegen &cg, const Stmt &s) {
  throw CompileError(ErrorKind::Codegen,
                     std::string("qd.simt.") + simt_op_name(static_cast<SimtOp>(s.op)) + " is not supported on " +
                         backend_name(backend()),
                     s.loc);
}

// The type of `scalar` values in the shape of v: itself, or a vector of v's lane count (lanes()).
static llvm::Type *shaped(llvm::Type *scalar, const Value *v) {
  if (auto *vt = llvm::dyn_cast<llvm::FixedVectorType>(v->getType())) return llvm::FixedVectorType::get(scalar, vt->getNumElements());
  return scalar;
}

Value *LlvmCodegen::to_bool(Value *v, DataType t) {
  if (v->getType()->isIntOrIntVectorTy(1)) return v;
  if (is_real(t)) return b_.CreateFCmpUNE(v, llvm::ConstantFP::get(v->getType(), 0.0));
  return b_.CreateICmpNE(v, llvm::ConstantInt::get(v->getType(), 0));
}

Value *LlvmCodegen::cast(Value *v, DataType from, DataType to) {
  llvm::Type *t = shaped(type(to), v);
  if (from == to) return v;
  if (to == DataType::u1) return to_bool(v, from);
  if (is_real(from) && is_real(to)) return b_.CreateFPCast(v, t);
  // A float out of the integer type's range converts to LLVM poison, which spreads to the selects and
  // branches that use it (an `if` on it may take either way): frozen, it is one unspecified value, as
  // docs/language.md specifies.
  if (is_real(from)) return b_.CreateFreeze(is_signed(to) ? b_.CreateFPToSI(v, t) : b_.CreateFPToUI(v, t));
  if (is_real(to)) return is_signed(from) ? b_.CreateSIToFP(v, t) : b_.CreateUIToFP(v, t);
  return b_.CreateIntCast(v, t, is_signed(from));
}

Value *LlvmCodegen::math_call(const char *libm_name, llvm::Intrinsic::ID id, Value *x, DataType t) {
  if (id != llvm::Intrinsic::not_intrinsic) return b_.CreateUnaryIntrinsic(id, x);
  // No LLVM intrinsic: call libm (f32 variants end in 'f'); f16 goes through f32.
  Value *arg = t == DataType::f16 ? b_.CreateFPExt(x, b_.getFloatTy()) : x;
  std::string name = std::string(libm_name) + (t == DataType::f64 ? "" : "f");
  auto callee = module_->getOrInsertFunction(name, arg->getType(), arg->getType());
  Value *r = b_.CreateCall(callee, {arg});
  return t == DataType::f16 ? b_.CreateFPTrunc(r, b_.getHalfTy()) : r;
}

// qd.init(fast_math=True) on float arithmetic that legalization did not write (TargetFeatures::fast_math).
void LlvmCodegen::set_fast_math(const Stmt &s) {
  if (!target_.features().fast_math || s.exact) return;
  llvm::FastMathFlags f;
  f.setAllowReassoc();
  f.setAllowContract();
  f.setAllowReciprocal();
  f.setApproxFunc();
  f.setNoSignedZeros();
  b_.setFastMathFlags(f);
}

Value *LlvmCodegen::unary(const Stmt &s, Value *x) {
  DataType t = s.dtype;
  llvm::IRBuilder<>::FastMathFlagGuard keep(b_);
  set_fast_math(s);
  using I = llvm::Intrinsic::ID;
  switch (static_cast<UnaryOp>(s.op)) {
    case UnaryOp::Neg: return is_real(t) ? b_.CreateFNeg(x) : b_.CreateNeg(x);
    case UnaryOp::Not: return b_.CreateZExt(b_.CreateNot(to_bool(x, s.operands[0]->dtype)), shaped(b_.getInt32Ty(), x));
    case UnaryOp::BitNot: return b_.CreateNot(x);
    case UnaryOp::Cast: return cast(x, s.cast_from, t);
    case UnaryOp::Bitcast: return b_.CreateBitCast(x, shaped(type(t), x));
    case UnaryOp::Abs:
      if (is_real(t)) return b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
      if (!is_signed(t)) return x;
      return b_.CreateBinaryIntrinsic(llvm::Intrinsic::abs, x, b_.getFalse());
    case UnaryOp::Sqrt: return math_call("sqrt", llvm::Intrinsic::sqrt, x, t);
    case UnaryOp::Sin: return math_call("sin", llvm::Intrinsic::sin, x, t);
    case UnaryOp::Cos: return math_call("cos", llvm::Intrinsic::cos, x, t);
    case UnaryOp::Exp: return math_call("exp", llvm::Intrinsic::exp, x, t);
    case UnaryOp::Log: return math_call("log", llvm::Intrinsic::log, x, t);
    case UnaryOp::Floor: return math_call("floor", llvm::Intrinsic::floor, x, t);
    case UnaryOp::Ceil: return math_call("ceil", llvm::Intrinsic::ceil, x, t);
    case UnaryOp::Round: return math_call("round", llvm::Intrinsic::rint, x, t);
    case UnaryOp::Trunc: return math_call("trunc", llvm::Intrinsic::trunc, x, t);
    case UnaryOp::Tan: return math_call("tan", I(llvm::Intrinsic::not_intrinsic), x, t);
    case UnaryOp::Tanh: return math_call("tanh", I(llvm::Intrinsic::not_intrinsic), x, t);
    case UnaryOp::Asin: return math_call("asin", I(llvm::Intrinsic::not_intrinsic), x, t);
    case UnaryOp::Acos: return math_call("acos", I(llvm::Intrinsic::not_intrinsic), x, t);
    case UnaryOp::Atan: return math_call("atan", I(llvm::Intrinsic::not_intrinsic), x, t);
    // NVPTX: popc / clz; AMDGPU: v_bcnt_u32_b32 / v_ffbh_u32 / v_ffbl_b32; x86: popcnt / lzcnt / tzcnt.
    case UnaryOp::PopCount: return b_.CreateUnaryIntrinsic(llvm::Intrinsic::ctpop, x);
    case UnaryOp::Clz: return b_.CreateBinaryIntrinsic(llvm::Intrinsic::ctlz, x, b_.getFalse());
    case UnaryOp::Ctz: return b_.CreateBinaryIntrinsic(llvm::Intrinsic::cttz, x, b_.getFalse());
  }
  return x;
}

// The primitive binary operations (legalization has expanded the language's // and % and
// integer **, made integer divisors safe and shift amounts in range).
Value *LlvmCodegen::arith(BinaryOp op, DataType ot, Value *a, Value *c) {
  bool fp = is_real(ot), sg = is_signed(ot);
  auto cmp = [&](llvm::CmpInst::Predicate f, llvm::CmpInst::Predicate si, llvm::CmpInst::Predicate ui) {
    Value *r = fp ? b_.CreateFCmp(f, a, c) : b_.CreateICmp(sg ? si : ui, a, c);
    return b_.CreateZExt(r, shaped(b_.getInt32Ty(), r));
  };
  using P = llvm::CmpInst::Predicate;
  switch (op) {
    case BinaryOp::Add: return fp ? b_.CreateFAdd(a, c) : b_.CreateAdd(a, c);
    case BinaryOp::Sub: return fp ? b_.CreateFSub(a, c) : b_.CreateSub(a, c);
    case BinaryOp::Mul: return fp ? b_.CreateFMul(a, c) : b_.CreateMul(a, c);
    case BinaryOp::Div: return fp ? b_.CreateFDiv(a, c) : sg ? b_.CreateSDiv(a, c) : b_.CreateUDiv(a, c);
    case BinaryOp::Rem: return fp ? b_.CreateFRem(a, c) : sg ? b_.CreateSRem(a, c) : b_.CreateURem(a, c);
    case BinaryOp::Pow:  // floats only (legalization expands integer **; GPUs get transforms/math_library.cpp)
      return b_.CreateBinaryIntrinsic(llvm::Intrinsic::pow, a, c);
    // minnum / maxnum: one NaN operand -> the other; both NaN -> NaN (the spec's minNum / maxNum).
    case BinaryOp::Min:
      return b_.CreateBinaryIntrinsic(fp ? llvm::Intrinsic::minnum : sg ? llvm::Intrinsic::smin : llvm::Intrinsic::umin, a, c);
    case BinaryOp::Max:
      return b_.CreateBinaryIntrinsic(fp ? llvm::Intrinsic::maxnum : sg ? llvm::Intrinsic::smax : llvm::Intrinsic::umax, a, c);
    case BinaryOp::BitAnd: return b_.CreateAnd(a, c);
    case BinaryOp::BitOr: return b_.CreateOr(a, c);
    case BinaryOp::BitXor: return b_.CreateXor(a, c);
    case BinaryOp::Shl: return b_.CreateShl(a, c);
    case BinaryOp::Shr: return sg ? b_.CreateAShr(a, c) : b_.CreateLShr(a, c);
    case BinaryOp::Atan2: {
      // libm has no half version: f16 goes through f32, as in math_call.
      bool half = ot == DataType::f16;
      if (half) a = b_.CreateFPExt(a, b_.getFloatTy()), c = b_.CreateFPExt(c, b_.getFloatTy());
      std::string name = ot == DataType::f64 ? "atan2" : "atan2f";
      auto callee = module_->getOrInsertFunction(name, a->getType(), a->getType(), a->getType());
      Value *r = b_.CreateCall(callee, {a, c});
      return half ? b_.CreateFPTrunc(r, b_.getHalfTy()) : r;
    }
    case BinaryOp::Eq: return cmp(P::FCMP_OEQ, P::ICMP_EQ, P::ICMP_EQ);
    case BinaryOp::Ne: return cmp(P::FCMP_UNE, P::ICMP_NE, P::ICMP_NE);
    case BinaryOp::Lt: return cmp(P::FCMP_OLT, P::ICMP_SLT, P::ICMP_ULT);
    case BinaryOp::Le: return cmp(P::FCMP_OLE, P::ICMP_SLE, P::ICMP_ULE);
    case BinaryOp::Gt: return cmp(P::FCMP_OGT, P::ICMP_SGT, P::ICMP_UGT);
    case BinaryOp::Ge: return cmp(P::FCMP_OGE, P::ICMP_SGE, P::ICMP_UGE);
    default: break;
  }
  throw std::logic_error(std::string("internal: ") + binary_op_name(op) + " reached the LLVM codegen unlegalized");
}

Value *LlvmCodegen::binary(const Stmt &s, Value *a, Value *c) {
  DataType ot = s.operands[0]->dtype;
  llvm::IRBuilder<>::FastMathFlagGuard keep(b_);
  set_fast_math(s);
  if (s.reassoc && is_real(ot)) {  // a privatized reduction: may use several accumulators / SIMD
    llvm::FastMathFlags f = b_.getFastMathFlags();
    f.setAllowReassoc();
    if (s.op == int(BinaryOp::Min) || s.op == int(BinaryOp::Max)) {  // operands never NaN (reductions.cpp)
      f.setNoNaNs();
      f.setNoSignedZeros();
    }
    b_.setFastMathFlags(f);
  }
  switch (static_cast<BinaryOp>(s.op)) {
    case BinaryOp::LogicalAnd:
      return b_.CreateZExt(b_.CreateAnd(to_bool(a, ot), to_bool(c, s.operands[1]->dtype)), shaped(b_.getInt32Ty(), a));
    case BinaryOp::LogicalOr:
      return b_.CreateZExt(b_.CreateOr(to_bool(a, ot), to_bool(c, s.operands[1]->dtype)), shaped(b_.getInt32Ty(), a));
    default: return arith(static_cast<BinaryOp>(s.op), ot, a, c);
  }
}

Value *LlvmCodegen::select(const Stmt &s, Value *cond, Value *a, Value *c) {
  return b_.CreateSelect(to_bool(cond, s.operands[0]->dtype), a, c);
}

void LlvmCodegen::emit_if(const Stmt &s) {
  Value *cond = to_bool(value(s.operands[0]), s.operands[0]->dtype);
  auto *then_bb = llvm::BasicBlock::Create(ctx_, "then", fn_);
  auto *else_bb = llvm::BasicBlock::Create(ctx_, "else", fn_);
  auto *merge = llvm::BasicBlock::Create(ctx_, "endif", fn_);
  b_.CreateCondBr(cond, then_bb, else_bb);
  b_.SetInsertPoint(then_bb);
  emit_block(*s.body);
  b_.CreateBr(merge);
  b_.SetInsertPoint(else_bb);
  if (s.else_body) emit_block(*s.else_body);
  b_.CreateBr(merge);
  b_.SetInsertPoint(merge);
}

void LlvmCodegen::emit_while(const Stmt &s) {
  auto *body = llvm::BasicBlock::Create(ctx_, s.label ? s.label : "while", fn_);
  auto *exit = llvm::BasicBlock::Create(ctx_, "endwhile", fn_);
  b_.CreateBr(body);
  b_.SetInsertPoint(body);
  loops_.push_back({body, exit});
  emit_block(*s.body);
  loops_.pop_back();
  b_.CreateBr(body);
  b_.SetInsertPoint(exit);
}

void LlvmCodegen::emit_serial_for(const Stmt &s) {
  emit_index_loop(s, value(s.operands[0]), value(s.operands[1]));
}

// A parallel task's loop: each thread runs the task's pre_loop / post_loop code around its share.
const Task *LlvmCodegen::parallel_task_of(const Stmt &loop) const {
  for (const Task &t : k_.tasks)
    if (t.parallel && t.loop() == &loop) return &t;
  return nullptr;
}

void LlvmCodegen::emit_index_loop(const Stmt &loop, Value *begin, Value *end) {
  const Task *task = parallel_task_of(loop);
  if (task) emit_block(task->pre_loop);
  llvm::IRBuilder<> eb(entry_, entry_->begin());
  Value *counter = eb.CreateAlloca(b_.getInt32Ty());
  b_.CreateStore(begin, counter);
  auto *cond = llvm::BasicBlock::Create(ctx_, "for.cond", fn_);
  auto *body = llvm::BasicBlock::Create(ctx_, "for.body", fn_);
  auto *next = llvm::BasicBlock::Create(ctx_, "for.step", fn_);
  auto *exit = llvm::BasicBlock::Create(ctx_, "for.end", fn_);
  b_.CreateBr(cond);
  b_.SetInsertPoint(cond);
  Value *i = b_.CreateLoad(b_.getInt32Ty(), counter);
  b_.CreateCondBr(b_.CreateICmpSLT(i, end), body, exit);
  b_.SetInsertPoint(body);
  loops_.push_back({next, exit});
  llvm::MDNode *outer_group = access_group_;
  if (loop.independent) access_group_ = llvm::MDNode::getDistinct(ctx_, {});
  llvm::MDNode *group = access_group_;
  emit_loop_body(loop, i);
  access_group_ = outer_group;
  loops_.pop_back();
  b_.CreateBr(next);
  b_.SetInsertPoint(next);
  // A grid-stride loop's next index is legalization's (it stops at `end`); else i + 1.
  Value *step = loop.next_index ? value(loop.next_index)
                                : b_.CreateAdd(b_.CreateLoad(b_.getInt32Ty(), counter), b_.getInt32(1));
  b_.CreateStore(step, counter);
  auto *latch = b_.CreateBr(cond);
  // !llvm.loop !{self, !{"llvm.loop.parallel_accesses", group}, !{"llvm.loop.vectorize.width", i32 w}}
  std::vector<llvm::Metadata *> hints{nullptr};
  if (loop.independent)
    hints.push_back(llvm::MDNode::get(ctx_, {llvm::MDString::get(ctx_, "llvm.loop.parallel_accesses"), group}));
  if (loop.vector_width)
    hints.push_back(llvm::MDNode::get(ctx_, {llvm::MDString::get(ctx_, "llvm.loop.vectorize.width"),
                                             llvm::ConstantAsMetadata::get(b_.getInt32(loop.vector_width))}));
  if (hints.size() > 1) {
    llvm::MDNode *md = llvm::MDNode::getDistinct(ctx_, hints);
    md->replaceOperandWith(0, md);
    latch->setMetadata(llvm::LLVMContext::MD_loop, md);
  }
  b_.SetInsertPoint(exit);
  if (task) emit_block(task->post_loop);
}

void LlvmCodegen::declare_functions() {
  auto *ptr = llvm::PointerType::get(ctx_, target_.global_address_space());
  for (size_t i = 0; i < k_.functions.size(); i++) {
    const FunctionDesc &f = k_.functions[i];
    std::vector<llvm::Type *> params{ptr, ptr}, returns;
    for (DataType t : f.params) params.push_back(type(t));
    for (DataType t : f.returns) returns.push_back(type(t));
    auto *fty = llvm::FunctionType::get(llvm::StructType::get(ctx_, returns), params, false);
    functions_.push_back(llvm::Function::Create(fty, llvm::Function::InternalLinkage,
                                                k_.name + "_f" + std::to_string(i) + "_" + f.name, *module_));
  }
}

void LlvmCodegen::emit_function(int index) {
  function_ = &k_.functions[index];
  llvm::Function *fn = functions_[index];
  begin_function(fn);
  emit_block(function_->code->body);
  // Falling off the end (no return on this path): zero values, as a variable starts.
  b_.CreateRet(llvm::Constant::getNullValue(fn->getReturnType()));
  function_ = nullptr;
}

Value *LlvmCodegen::call(const Stmt &s) {
  std::vector<Value *> args{fn_->getArg(0), fn_->getArg(1)};
  for (const Stmt *a : s.operands) args.push_back(value(a));
  return b_.CreateCall(functions_.at(s.ival), args);
}

void LlvmCodegen::emit_return(const Stmt &s) {
  if (function_) {
    Value *r = llvm::UndefValue::get(fn_->getReturnType());
    for (size_t i = 0; i < s.operands.size(); i++) r = b_.CreateInsertValue(r, value(s.operands[i]), {unsigned(i)});
    end_streaming();
    b_.CreateRet(r);
    start_dead_block();
    return;
  }
  // A bare `return` stores nothing, and its kernel may have no result buffer (index -1).
  for (size_t i = 0; i < s.operands.size(); i++)
    b_.CreateStore(value(s.operands[i]), b_.CreateConstGEP1_64(b_.getInt8Ty(), buffer_base(k_.result_buffer), 8 * i));
  end_streaming();
  b_.CreateRetVoid();
  start_dead_block();
}

// Non-temporal stores are weakly ordered (x86: not by the lock-prefixed operations of the thread
// pool's hand-over either, only by a fence instruction): a sequentially consistent fence (mfence).
void LlvmCodegen::end_streaming() {
  if (streamed_) b_.CreateFence(llvm::AtomicOrdering::SequentiallyConsistent);
}

}  // namespace qd
