#include "codegen/llvm/target_cuda.h"

#include <llvm/IR/IntrinsicsNVPTX.h>

#include <llvm/IR/Constants.h>
#include <llvm/IR/InlineAsm.h>
#include <llvm/IR/Metadata.h>

#include <functional>

#include "codegen/llvm/gpu_targets.h"

namespace qd {

int cuda_sm(const TargetFeatures &features) {
  if (features.cuda_sm) return features.cuda_sm;
  const char *env = std::getenv("QD_CUDA_ARCH");
  std::string sm = env && *env ? env : llvm_gpu::kDefaultSm;
  std::string digits = sm.rfind("sm_", 0) == 0 ? sm.substr(3) : sm;
  if (digits.empty() || digits.size() > 4 || digits.find_first_not_of("0123456789") != std::string::npos)
    throw RuntimeError("QD_CUDA_ARCH=" + sm + " is not an sm (sm_90 or 90)");
  return std::stoi(digits);
}

CudaTarget::CudaTarget(const TargetFeatures &features) : features_(features) {
  features_.cuda_sm = cuda_sm(features);
  sm_ = "sm_" + std::to_string(features_.cuda_sm);
}

void CudaTarget::configure_module(llvm::Module &m) { llvm_gpu::set_nvptx_target(m, sm_); }

void CudaTarget::mark_kernel(llvm::Function &fn, int block_dim) {
  llvm_gpu::mark_nvptx_kernel(fn);
  // .maxntid: the launch never exceeds block_dim threads, which lets ptxas budget registers for it.
  llvm::LLVMContext &ctx = fn.getContext();
  auto *threads = llvm::ConstantInt::get(llvm::Type::getInt32Ty(ctx), block_dim);
  llvm::Metadata *ops[] = {llvm::ValueAsMetadata::get(&fn), llvm::MDString::get(ctx, "maxntidx"),
                           llvm::ConstantAsMetadata::get(threads)};
  fn.getParent()->getOrInsertNamedMetadata("nvvm.annotations")->addOperand(llvm::MDNode::get(ctx, ops));
}

namespace {

// The PTX type suffix and inline-asm register constraint of a value.
const char *ptx_reg(DataType t) {
  if (t == DataType::f32) return "f";
  if (t == DataType::f64) return "d";
  return bit_width(t) == 64 ? "l" : "r";
}

std::string ptx_type(DataType t, const char *kind) {  // kind: "u" / "s" / "b" for integers
  if (is_real(t)) return bit_width(t) == 64 ? ".f64" : ".f32";
  return std::string(".") + kind + std::to_string(bit_width(t));
}

}  // namespace

llvm::Value *CudaTarget::emit_memory_op(LlvmCodegen &cg, const Stmt &s, bool *done) {
  llvm::IRBuilder<> &b = cg.b();
  llvm::LLVMContext &ctx = cg.ctx();
  std::string sem = ptx_sem(s.kind == StmtKind::Fence ? MemOpKind::Fence : MemOpKind::Rmw, s.order);
  std::string scope = ptx_scope(s.scope);
  // PTX's .sem qualifiers (and ld / st .relaxed) need sm_70. Before it (sm_6x) the memory model is
  // the older one, where membar.{cta,gl,sys} is the fence: an atom without .sem (relaxed, .scope
  // needs only sm_60) gets a membar before it when it releases and after it when it acquires, as
  // CUDA's own atomics do there; atomic loads and stores are ld / st .volatile with the same membars.
  bool pre_sm70 = features_.cuda_sm < 70;
  std::string membar = s.scope == MemScope::Block ? "membar.cta;" : s.scope == MemScope::Device ? "membar.gl;" : "membar.sys;";
  bool releases = s.order == MemoryOrder::Release || s.order == MemoryOrder::AcqRel;
  bool acquires = s.order == MemoryOrder::Acquire || s.order == MemoryOrder::AcqRel;
  if (pre_sm70) {
    sem = s.kind == StmtKind::GlobalLoad || s.kind == StmtKind::GlobalStore ? ".volatile" : "";
    if (s.kind == StmtKind::GlobalLoad || s.kind == StmtKind::GlobalStore) scope = "";
  }
  auto asm_call = [&](llvm::Type *ret, const std::string &text, std::string constraints,
                      std::vector<llvm::Value *> args) -> llvm::Value * {
    *done = true;
    std::vector<llvm::Type *> types;
    for (auto *a : args) types.push_back(a->getType());
    constraints += ",~{memory}";
    auto *fty = llvm::FunctionType::get(ret, types, false);
    return b.CreateCall(llvm::InlineAsm::get(fty, text, constraints, /*hasSideEffects=*/true), args);
  };
  // Global memory (addrspace 1) is addressed as .global; anything else (shared arrays) through a
  // generic address, which PTX resolves to the right state space.
  std::string space = ".global";
  auto address = [&](const Stmt *ptr) {
    llvm::Value *p = cg.value(ptr);
    if (p->getType()->getPointerAddressSpace() != 1) {
      p = b.CreateAddrSpaceCast(p, llvm::PointerType::get(ctx, 0));
      space = "";
    }
    return b.CreatePtrToInt(p, llvm::Type::getInt64Ty(ctx));
  };
  // Wraps an ordered access in the membars it needs before sm_70.
  auto fenced = [&](const std::function<llvm::Value *()> &access) -> llvm::Value * {
    if (pre_sm70 && releases) asm_call(llvm::Type::getVoidTy(ctx), membar, "", {});
    llvm::Value *v = access();
    if (pre_sm70 && acquires) asm_call(llvm::Type::getVoidTy(ctx), membar, "", {});
    return v;
  };
  if (s.kind == StmtKind::Fence) {
    if (pre_sm70) return asm_call(llvm::Type::getVoidTy(ctx), membar, "", {});
    return asm_call(llvm::Type::getVoidTy(ctx), "fence" + sem + scope + ";", "", {});
  }
  if (s.kind == StmtKind::GlobalLoad) {
    DataType t = s.dtype;
    llvm::Value *a = address(s.operands[0]);
    return fenced([&] {
      return asm_call(cg.llvm_type(t), "ld" + sem + scope + space + ptx_type(t, "u") + " $0, [$1];",
                      std::string("=") + ptx_reg(t) + ",l", {a});
    });
  }
  if (s.kind == StmtKind::GlobalStore) {
    DataType t = s.operands[1]->dtype;
    llvm::Value *a = address(s.operands[0]);
    llvm::Value *v = cg.value(s.operands[1]);
    return fenced([&] {
      return asm_call(llvm::Type::getVoidTy(ctx), "st" + sem + scope + space + ptx_type(t, "u") + " [$0], $1;",
                      std::string("l,") + ptx_reg(t), {a, v});
    });
  }
  // Read-modify-write atomics: the default (Relaxed at Device scope) stays an LLVM atomicrmw, except
  // inc / dec, which NVPTX does not select.
  AtomicOp op = s.atomic_op();
  bool inc_dec = op == AtomicOp::Inc || op == AtomicOp::Dec;
  // A relaxed atomic on a shared array is at block scope (decide_atomics), which NVPTX's atom.shared is.
  bool shared = cg.value(s.operands[0])->getType()->getPointerAddressSpace() == 3;
  if (!inc_dec && s.order == MemoryOrder::Relaxed && (s.scope == MemScope::Device || (shared && s.scope == MemScope::Block)))
    return nullptr;
  DataType t = s.dtype;
  llvm::Value *val = cg.value(s.operands[1]);
  std::string name, type;
  switch (op) {
    case AtomicOp::Add: name = "add", type = ptx_type(t, bit_width(t) == 32 && is_signed(t) ? "s" : "u"); break;
    case AtomicOp::Sub:  // no atom.sub: add the two's complement
      name = "add", type = ptx_type(t, "u");
      val = b.CreateNeg(val);
      break;
    case AtomicOp::Min: name = "min", type = ptx_type(t, is_signed(t) ? "s" : "u"); break;
    case AtomicOp::Max: name = "max", type = ptx_type(t, is_signed(t) ? "s" : "u"); break;
    case AtomicOp::And: name = "and", type = ptx_type(t, "b"); break;
    case AtomicOp::Or: name = "or", type = ptx_type(t, "b"); break;
    case AtomicOp::Xor: name = "xor", type = ptx_type(t, "b"); break;
    case AtomicOp::Exchange: name = "exch", type = ptx_type(t, "b"); break;
    case AtomicOp::Cas: name = "cas", type = ptx_type(t, "b"); break;
    case AtomicOp::Inc: name = "inc", type = ".u32"; break;
    case AtomicOp::Dec: name = "dec", type = ".u32"; break;
    default: throw std::logic_error("internal: no PTX atom for this atomic");
  }
  llvm::Value *a = address(s.operands[0]);
  std::string head = "atom" + sem + scope + space + "." + name + type + " $0, [$1], $2";
  std::string r = ptx_reg(t);
  if (op == AtomicOp::Cas) {
    llvm::Value *desired = cg.value(s.operands[2]);
    return fenced([&] { return asm_call(cg.llvm_type(t), head + ", $3;", "=" + r + ",l," + r + "," + r, {a, val, desired}); });
  }
  return fenced([&] { return asm_call(cg.llvm_type(t), head + ";", "=" + r + ",l," + r, {a, val}); });
}

// PTX fns.b32 (legalization has clamped base to 31).
llvm::Value *CudaTarget::emit_fns(LlvmCodegen &cg, llvm::Value *mask, llvm::Value *base, llvm::Value *offset) {
  return cg.b().CreateIntrinsic(llvm::Intrinsic::nvvm_fns, {}, {mask, base, offset});
}

GpuTarget::Ids CudaTarget::ids(llvm::IRBuilderBase &b) {
  using llvm_gpu::Dim;
  return {llvm_gpu::nvptx_thread_idx(b, Dim::X), llvm_gpu::nvptx_block_idx(b, Dim::X),
          llvm_gpu::nvptx_block_dim(b, Dim::X), llvm_gpu::nvptx_grid_dim(b, Dim::X)};
}

// bar.sync 0 (also a block-scope fence); membar.cta / membar.gl.
void CudaTarget::emit_barrier(llvm::IRBuilderBase &b) {
  b.CreateIntrinsic(llvm::Intrinsic::nvvm_barrier0, {}, {});
}

void CudaTarget::emit_fence(llvm::IRBuilderBase &b, bool device) {
  b.CreateIntrinsic(device ? llvm::Intrinsic::nvvm_membar_gl : llvm::Intrinsic::nvvm_membar_cta, {}, {});
}

// Subgroup operations over the active lanes (activemask: a block smaller than a warp has only
// its lanes): shfl.sync, vote.sync, bar.warp.sync; membar.cta for the subgroup fence.
llvm::Value *CudaTarget::emit_subgroup(llvm::IRBuilderBase &b, SimtOp op, const std::vector<llvm::Value *> &args) {
  using llvm::Intrinsic::ID;
  auto call = [&](ID id, std::vector<llvm::Value *> a) { return b.CreateIntrinsic(id, {}, a); };
  if (op == SimtOp::SubgroupInvocationId) return call(llvm::Intrinsic::nvvm_read_ptx_sreg_laneid, {});
  if (op == SimtOp::SubgroupMemFence) {
    emit_fence(b, false);
    return nullptr;
  }
  llvm::Value *mask = call(llvm::Intrinsic::nvvm_activemask, {});
  auto shfl = [&](ID id, llvm::Value *lane, int c) {
    return per_word(b, args[0], [&](llvm::Value *w) { return call(id, {mask, w, lane, b.getInt32(c)}); });
  };
  auto pred = [&] { return b.CreateICmpNE(args[0], b.getInt32(0)); };
  switch (op) {
    case SimtOp::SubgroupSync: call(llvm::Intrinsic::nvvm_bar_warp_sync, {mask}); return nullptr;
    case SimtOp::SubgroupShuffle: case SimtOp::SubgroupBroadcast:
      return shfl(llvm::Intrinsic::nvvm_shfl_sync_idx_i32, args[1], 0x1f);
    case SimtOp::SubgroupBroadcastFirst: {  // the lowest active lane (of the lanes given, if given)
      if (args.size() == 2) mask = b.CreateTrunc(args[1], b.getInt32Ty());
      return shfl(llvm::Intrinsic::nvvm_shfl_sync_idx_i32, b.CreateBinaryIntrinsic(llvm::Intrinsic::cttz, mask, b.getTrue()), 0x1f);
    }
    case SimtOp::SubgroupShuffleUp: return shfl(llvm::Intrinsic::nvvm_shfl_sync_up_i32, args[1], 0);
    case SimtOp::SubgroupShuffleDown: return shfl(llvm::Intrinsic::nvvm_shfl_sync_down_i32, args[1], 0x1f);
    case SimtOp::SubgroupShuffleXor: return shfl(llvm::Intrinsic::nvvm_shfl_sync_bfly_i32, args[1], 0x1f);
    case SimtOp::SubgroupBallot:
      return b.CreateZExt(call(llvm::Intrinsic::nvvm_vote_ballot_sync, {mask, pred()}), b.getInt64Ty());
    case SimtOp::SubgroupAll:
      return b.CreateZExt(call(llvm::Intrinsic::nvvm_vote_all_sync, {mask, pred()}), b.getInt32Ty());
    case SimtOp::SubgroupAny:
      return b.CreateZExt(call(llvm::Intrinsic::nvvm_vote_any_sync, {mask, pred()}), b.getInt32Ty());
    default: throw std::logic_error("internal: not a subgroup op");
  }
}

// Over the active lanes, any subset of the warp (activemask). A scan runs in the order of the
// active lanes: at step k each lane combines the partial result of the active lane 2^k active lanes
// below it (fns finds it; shfl.sync over the active mask reads it). A reduction is the highest
// active lane's inclusive scan; on sm_80+ 32-bit integers reduce with one redux.sync.
llvm::Value *CudaTarget::emit_collective(LlvmCodegen &cg, const Stmt &s, const std::vector<llvm::Value *> &args) {
  using llvm::Intrinsic::ID;
  auto &b = cg.b();
  auto call = [&](ID id, std::vector<llvm::Value *> a) { return b.CreateIntrinsic(id, {}, a); };
  SimtOp op = static_cast<SimtOp>(s.op);
  llvm::Value *mask = call(llvm::Intrinsic::nvvm_activemask, {});
  llvm::Value *lane = call(llvm::Intrinsic::nvvm_read_ptx_sreg_laneid, {});
  if (op == SimtOp::SubgroupElect)
    return b.CreateZExt(b.CreateICmpEQ(lane, b.CreateBinaryIntrinsic(llvm::Intrinsic::cttz, mask, b.getTrue())), b.getInt32Ty());
  auto combine = static_cast<BinaryOp>(s.ival);
  DataType t = s.dtype;
  int sm_number = std::atoi(sm_.c_str() + 3);
  if (op == SimtOp::SubgroupReduce && sm_number >= 80 && (t == DataType::i32 || t == DataType::u32)) {
    bool sg = t == DataType::i32;
    ID id = combine == BinaryOp::Add      ? llvm::Intrinsic::nvvm_redux_sync_add
            : combine == BinaryOp::Min    ? (sg ? llvm::Intrinsic::nvvm_redux_sync_min : llvm::Intrinsic::nvvm_redux_sync_umin)
            : combine == BinaryOp::Max    ? (sg ? llvm::Intrinsic::nvvm_redux_sync_max : llvm::Intrinsic::nvvm_redux_sync_umax)
            : combine == BinaryOp::BitAnd ? llvm::Intrinsic::nvvm_redux_sync_and
            : combine == BinaryOp::BitOr  ? llvm::Intrinsic::nvvm_redux_sync_or
                                          : llvm::Intrinsic::nvvm_redux_sync_xor;
    return call(id, {args[0], mask});
  }
  auto read = [&](llvm::Value *v, llvm::Value *src) {
    return per_word(b, v, [&](llvm::Value *w) {
      return call(llvm::Intrinsic::nvvm_shfl_sync_idx_i32, {mask, w, src, b.getInt32(0x1f)});
    });
  };
  // The active lane `below` active lanes under this one, or none (0xFFFFFFFF): fns counts this
  // lane (set in the mask) as the first.
  auto lane_below = [&](int below) { return call(llvm::Intrinsic::nvvm_fns, {mask, lane, b.getInt32(-(below + 1))}); };
  llvm::Value *x = args[0];
  for (int d = 1; d < 32; d *= 2) {
    llvm::Value *src = lane_below(d);
    llvm::Value *found = b.CreateICmpNE(src, b.getInt32(-1));
    llvm::Value *y = read(x, b.CreateSelect(found, src, lane));
    x = b.CreateSelect(found, cg.arith(combine, t, y, x), x);
  }
  if (op == SimtOp::SubgroupReduce) {
    llvm::Value *last = b.CreateSub(b.getInt32(31), b.CreateBinaryIntrinsic(llvm::Intrinsic::ctlz, mask, b.getTrue()));
    return read(x, last);
  }
  llvm::Value *src = lane_below(1);
  llvm::Value *found = b.CreateICmpNE(src, b.getInt32(-1));
  return b.CreateSelect(found, read(x, b.CreateSelect(found, src, lane)), scan_identity(cg, s));
}

GpuCompiled cuda_compile(KernelIR &k, const TargetFeatures &features) {
  CudaTarget target(features);
  GpuModule g = generate_gpu_module(k, target);
  std::string ptx = llvm_gpu::emit_ptx(*g.module, target.sm());  // optimises the module in place
  GpuCompiled out{{{"ir", print_ir(k)}, {"llvm_ir", llvm_ir_text(*g.module)}, {"ptx", ptx}}, {},
                  g.task_symbols, g.block_dims, g.dynamic_shared_bytes};
  return out;
}

}  // namespace qd
