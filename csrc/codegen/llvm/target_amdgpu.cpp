#include "codegen/llvm/target_amdgpu.h"

#include <llvm/IR/IntrinsicsAMDGPU.h>

#include "codegen/llvm/gpu_targets.h"

namespace qd {

std::string amdgpu_gfx(const TargetFeatures &features) {
  if (!features.amdgpu_gfx.empty()) return features.amdgpu_gfx;
  const char *env = std::getenv("QD_AMDGPU_ARCH");
  return env && *env ? env : llvm_gpu::kDefaultGfx;
}

AmdgpuTarget::AmdgpuTarget(const TargetFeatures &features) : features_(features), gfx_(amdgpu_gfx(features)) {
  features_.amdgpu_gfx = gfx_;
}

llvm::SyncScope::ID AmdgpuTarget::atomic_scope(llvm::LLVMContext &ctx, MemScope scope) const {
  std::string name = amdgpu_syncscope(scope);  // "workgroup", "agent", "" (system)
  return name.empty() ? llvm::SyncScope::System : ctx.getOrInsertSyncScopeID(name);
}

void AmdgpuTarget::configure_module(llvm::Module &m) { llvm_gpu::set_amdgpu_target(m, gfx_); }

void AmdgpuTarget::mark_kernel(llvm::Function &fn, int block_dim) {
  llvm_gpu::mark_amdgpu_kernel(fn, static_cast<unsigned>(block_dim));
}

GpuTarget::Ids AmdgpuTarget::ids(llvm::IRBuilderBase &b) {
  using llvm_gpu::Dim;
  return {llvm_gpu::amdgpu_workitem_id(b, Dim::X), llvm_gpu::amdgpu_workgroup_id(b, Dim::X),
          llvm_gpu::amdgpu_workgroup_size(b, Dim::X), llvm_gpu::amdgpu_num_workgroups(b, Dim::X)};
}

// s_barrier between a workgroup release and acquire fence, so the block's writes before the
// barrier are visible after it; fences at workgroup / agent scope.
void AmdgpuTarget::emit_barrier(llvm::IRBuilderBase &b) {
  auto wg = b.getContext().getOrInsertSyncScopeID("workgroup");
  b.CreateFence(llvm::AtomicOrdering::Release, wg);
  b.CreateIntrinsic(llvm::Intrinsic::amdgcn_s_barrier, {}, {});
  b.CreateFence(llvm::AtomicOrdering::Acquire, wg);
}

void AmdgpuTarget::emit_fence(llvm::IRBuilderBase &b, bool device) {
  b.CreateFence(llvm::AtomicOrdering::AcquireRelease,
                b.getContext().getOrInsertSyncScopeID(device ? "agent" : "workgroup"));
}

// Subgroup (wavefront, 64 lanes) operations: lane id from mbcnt, shuffles by ds_bpermute (wave-wide
// on CDNA), broadcasts by readlane / readfirstlane, votes from the 64-bit ballot (never
// ballot.i32, which fails selection on gfx942).
llvm::Value *AmdgpuTarget::emit_subgroup(llvm::IRBuilderBase &b, SimtOp op, const std::vector<llvm::Value *> &args) {
  namespace I = llvm::Intrinsic;
  auto lane = [&] {
    llvm::Value *lo = b.CreateIntrinsic(I::amdgcn_mbcnt_lo, {}, {b.getInt32(-1), b.getInt32(0)});
    return b.CreateIntrinsic(I::amdgcn_mbcnt_hi, {}, {b.getInt32(-1), lo});
  };
  auto bpermute = [&](llvm::Value *src_lane) {
    llvm::Value *addr = b.CreateShl(src_lane, 2);
    return per_word(b, args[0], [&](llvm::Value *w) { return b.CreateIntrinsic(I::amdgcn_ds_bpermute, {}, {addr, w}); });
  };
  auto ballot = [&](bool want) {
    llvm::Value *p = want ? b.CreateICmpNE(args[0], b.getInt32(0)) : b.CreateICmpEQ(args[0], b.getInt32(0));
    return b.CreateIntrinsic(I::amdgcn_ballot, {b.getInt64Ty()}, {p});
  };
  switch (op) {
    case SimtOp::SubgroupInvocationId: return lane();
    case SimtOp::SubgroupSync: b.CreateIntrinsic(I::amdgcn_wave_barrier, {}, {}); return nullptr;
    case SimtOp::SubgroupMemFence:
      b.CreateFence(llvm::AtomicOrdering::SequentiallyConsistent, b.getContext().getOrInsertSyncScopeID("workgroup"));
      return nullptr;
    case SimtOp::SubgroupShuffle: return bpermute(args[1]);
    case SimtOp::SubgroupShuffleUp: return bpermute(b.CreateSub(lane(), args[1]));
    case SimtOp::SubgroupShuffleDown: return bpermute(b.CreateAdd(lane(), args[1]));
    case SimtOp::SubgroupShuffleXor: return bpermute(b.CreateXor(lane(), args[1]));
    case SimtOp::SubgroupBroadcast:
      return b.CreateIntrinsic(I::amdgcn_readlane, {args[0]->getType()}, {args[0], args[1]});
    case SimtOp::SubgroupBroadcastFirst:  // the lowest active lane (EXEC reconverges after a branch)
      return b.CreateIntrinsic(I::amdgcn_readfirstlane, {args[0]->getType()}, {args[0]});
    case SimtOp::SubgroupBallot: return ballot(true);
    case SimtOp::SubgroupAll: return b.CreateZExt(b.CreateICmpEQ(ballot(false), b.getInt64(0)), b.getInt32Ty());
    case SimtOp::SubgroupAny: return b.CreateZExt(b.CreateICmpNE(ballot(true), b.getInt64(0)), b.getInt32Ty());
    default: throw std::logic_error("internal: not a subgroup op");
  }
}

// Over the active lanes (EXEC), as LLVM's own atomic optimizer does it (its Iterative strategy): a
// loop, uniform across the wave, over the set bits of the ballot of the active lanes, reading each
// lane's value with readlane in lane order; a scan writes each lane's running total before its own
// value with writelane.
llvm::Value *AmdgpuTarget::emit_collective(LlvmCodegen &cg, const Stmt &s, const std::vector<llvm::Value *> &args) {
  namespace I = llvm::Intrinsic;
  auto &b = cg.b();
  SimtOp op = static_cast<SimtOp>(s.op);
  llvm::Value *active = b.CreateIntrinsic(I::amdgcn_ballot, {b.getInt64Ty()}, {b.getTrue()});
  llvm::Value *first = b.CreateTrunc(b.CreateBinaryIntrinsic(I::cttz, active, b.getTrue()), b.getInt32Ty());
  if (op == SimtOp::SubgroupElect) {
    llvm::Value *lo = b.CreateIntrinsic(I::amdgcn_mbcnt_lo, {}, {b.getInt32(-1), b.getInt32(0)});
    llvm::Value *lane = b.CreateIntrinsic(I::amdgcn_mbcnt_hi, {}, {b.getInt32(-1), lo});
    return b.CreateZExt(b.CreateICmpEQ(lane, first), b.getInt32Ty());
  }
  auto combine = static_cast<BinaryOp>(s.ival);
  bool scan = op == SimtOp::SubgroupExclusiveScan;
  llvm::Value *v = args[0];
  llvm::Type *t = v->getType();
  llvm::Function *fn = b.GetInsertBlock()->getParent();
  llvm::BasicBlock *pre = b.GetInsertBlock();
  llvm::Value *acc0 = b.CreateIntrinsic(I::amdgcn_readlane, {t}, {v, first});
  llvm::Value *rest0 = b.CreateAnd(active, b.CreateSub(active, b.getInt64(1)));  // the lowest bit cleared
  llvm::Value *excl0 = scan ? scan_identity(cg, s) : nullptr;
  auto *loop = llvm::BasicBlock::Create(cg.ctx(), "subgroup.lanes", fn);
  auto *done = llvm::BasicBlock::Create(cg.ctx(), "subgroup.done", fn);
  b.CreateCondBr(b.CreateICmpNE(rest0, b.getInt64(0)), loop, done);
  b.SetInsertPoint(loop);
  llvm::PHINode *rest = b.CreatePHI(b.getInt64Ty(), 2), *acc = b.CreatePHI(t, 2);
  llvm::PHINode *excl = scan ? b.CreatePHI(t, 2) : nullptr;
  llvm::Value *l = b.CreateTrunc(b.CreateBinaryIntrinsic(I::cttz, rest, b.getTrue()), b.getInt32Ty());
  llvm::Value *excl_next = scan ? b.CreateIntrinsic(I::amdgcn_writelane, {t}, {acc, l, excl}) : nullptr;
  llvm::Value *acc_next = cg.arith(combine, s.dtype, acc, b.CreateIntrinsic(I::amdgcn_readlane, {t}, {v, l}));
  llvm::Value *rest_next = b.CreateAnd(rest, b.CreateSub(rest, b.getInt64(1)));
  llvm::BasicBlock *body_end = b.GetInsertBlock();
  b.CreateCondBr(b.CreateICmpNE(rest_next, b.getInt64(0)), loop, done);
  rest->addIncoming(rest0, pre);
  rest->addIncoming(rest_next, body_end);
  acc->addIncoming(acc0, pre);
  acc->addIncoming(acc_next, body_end);
  if (scan) {
    excl->addIncoming(excl0, pre);
    excl->addIncoming(excl_next, body_end);
  }
  b.SetInsertPoint(done);
  llvm::PHINode *out = b.CreatePHI(t, 2);
  out->addIncoming(scan ? excl0 : acc0, pre);
  out->addIncoming(scan ? excl_next : acc_next, body_end);
  return out;
}

GpuCompiled amdgpu_compile(KernelIR &k, const TargetFeatures &features, bool code_object) {
  AmdgpuTarget target(features);
  GpuModule g = generate_gpu_module(k, target);
  GpuCompiled out{{}, {}, g.task_symbols, g.block_dims, g.dynamic_shared_bytes};
  // Both emitters optimise the module in place, so llvm_ir is printed after them.
  if (code_object)
    out.code_object = llvm_gpu::emit_amdgpu_code_object(*g.module, target.gfx());
  else
    out.artifacts["amdgcn"] = llvm_gpu::amdgpu_assembly(*g.module, target.gfx());
  out.artifacts["ir"] = print_ir(k);
  out.artifacts["llvm_ir"] = llvm_ir_text(*g.module);
  return out;
}

}  // namespace qd
