#include "codegen/llvm/target_cuda.h"

#include <llvm/IR/IntrinsicsNVPTX.h>

#include <llvm/IR/Constants.h>
#include <llvm/IR/Metadata.h>

#include <cctype>

#include "codegen/llvm/gpu_targets.h"

namespace qd {

std::string cuda_sm(const TargetFeatures &features) {
  std::string sm = pick_target_name(features, "sm_", "QD_CUDA_ARCH", llvm_gpu::kDefaultSm);
  if (!sm.empty() && std::isdigit(static_cast<unsigned char>(sm[0]))) sm = "sm_" + sm;
  return sm;
}

CudaTarget::CudaTarget(const TargetFeatures &features) : features_(features), sm_(cuda_sm(features)) {}

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

GpuCompiled cuda_compile(KernelIR &k, const TargetFeatures &features) {
  CudaTarget target(features);
  GpuModule g = generate_gpu_module(k, target);
  std::string ptx = llvm_gpu::emit_ptx(*g.module, target.sm());  // optimises the module in place
  GpuCompiled out{{{"ir", print_ir(k)}, {"llvm_ir", llvm_ir_text(*g.module)}, {"ptx", ptx}}, {},
                  g.task_symbols, g.block_dims, g.trip_counts};
  return out;
}

}  // namespace qd
