#pragma once
// GPU back ends of LLVM 19 (NVPTX -> PTX text, AMDGPU -> HSA code object), independent of the
// Quadrants IR: the shared LLVM codegen builds a module, marks its kernels with the helpers here,
// and hands the module over. No GPU is needed; every artefact can be produced on any machine.
//
// Every failure (unknown sm / gfx name, a module that does not verify, a missing or failing
// external tool) throws qd::RuntimeError with a message saying what failed.
#include <cstdint>
#include <string>
#include <vector>

#include <llvm/IR/LLVMContext.h>  // llvm::SyncScope::ID

namespace llvm {
class Function;
class IRBuilderBase;
class Module;
class Value;
}  // namespace llvm

namespace qd::llvm_gpu {

// Registers the NVPTX, AMDGPU and X86 targets with LLVM. Idempotent and thread-safe; every
// function below calls it, so calling it yourself is only needed before using the
// TargetRegistry directly.
void init_gpu_targets();

enum class Dim { X, Y, Z };

// ---------------------------------------------------------------------------------------------
// NVPTX (CUDA)

inline constexpr const char *kNvptxTriple = "nvptx64-nvidia-cuda";
inline constexpr const char *kDefaultSm = "sm_75";

// Sets the NVPTX triple and data layout. Call before building IR when convenient; emit_ptx
// calls it anyway.
void set_nvptx_target(llvm::Module &module, const std::string &sm = kDefaultSm);

// Verifies the module, retargets it to NVPTX, runs the O3 pipeline on it in place, and returns
// the PTX text. Code generation runs on a copy, so the call may be repeated on one module.
std::string emit_ptx(llvm::Module &module, const std::string &sm = kDefaultSm);

// The "+ptxNN" feature emit_ptx uses for `sm` (PTX 7.8 covers sm_75..sm_90; sm_90a needs 8.0).
std::string ptx_version_feature(const std::string &sm);

// Makes `fn` a PTX `.entry`: LLVM 19 reads the nvvm.annotations "kernel" metadata (what clang 19
// emits); the ptx_kernel calling convention is set too because later LLVMs read only that.
void mark_nvptx_kernel(llvm::Function &fn);

// %tid, %ctaid, %ntid, %nctaid as i32.
llvm::Value *nvptx_thread_idx(llvm::IRBuilderBase &b, Dim d);
llvm::Value *nvptx_block_idx(llvm::IRBuilderBase &b, Dim d);
llvm::Value *nvptx_block_dim(llvm::IRBuilderBase &b, Dim d);
llvm::Value *nvptx_grid_dim(llvm::IRBuilderBase &b, Dim d);

// ptxas: /usr/local/cuda/bin/ptxas, then $CUDA_HOME/bin/ptxas, then `ptxas` on PATH.
// Returns "" when none is found.
std::string find_ptxas();
bool ptxas_available();
// Assembles `ptx` for `sm` with ptxas. Returns "" on success, else the error text (also when
// ptxas is missing, so check ptxas_available() to tell the two apart).
std::string run_ptxas(const std::string &ptx, const std::string &sm = kDefaultSm);

// ---------------------------------------------------------------------------------------------
// AMDGPU (HIP)

inline constexpr const char *kAmdgpuTriple = "amdgcn-amd-amdhsa";
inline constexpr const char *kDefaultGfx = "gfx942";

void set_amdgpu_target(llvm::Module &module, const std::string &gfx = kDefaultGfx);

// Verifies, retargets, applies the float-atomic policy below, runs O3 in place, then emits on a
// copy of the module: the assembly text, a relocatable ELF object, or the shared code object
// (hsaco) that hipModuleLoadData takes (the object linked with `ld.lld -shared`).
std::string amdgpu_assembly(llvm::Module &module, const std::string &gfx = kDefaultGfx);
std::vector<uint8_t> emit_amdgpu_object(llvm::Module &module, const std::string &gfx = kDefaultGfx);
std::vector<uint8_t> emit_amdgpu_code_object(llvm::Module &module,
                                             const std::string &gfx = kDefaultGfx);
// Links one relocatable AMDGPU object into a code object with ld.lld.
std::vector<uint8_t> link_amdgpu_code_object(const std::vector<uint8_t> &object);

// Float atomics policy. LLVM 19 selects native float atomics on some chips only when the
// function carries "amdgpu-unsafe-fp-atomics"="true" (the "unsafe" part: they misbehave on
// fine-grained host-coherent memory; Quadrants uses hipMalloc'd coarse-grained memory).
// The spec (atomics.md footnote 2) asks for f32/f64 add and f64 min/max native on gfx942 (the
// latter needs the attribute) and CAS loops for every float atomic on other chips (gfx90a would
// make them native with the attribute). One table decides both: the attribute is set exactly where
// the support table (atomics/support_table.cpp) says f64 atomic_max is native for the chip, on
// every defined function that does not already carry it.
bool amdgpu_uses_unsafe_fp_atomics(const std::string &gfx);
void apply_amdgpu_fp_atomic_policy(llvm::Module &module, const std::string &gfx);

// amdgpu_kernel calling convention plus "amdgpu-flat-work-group-size"="1,max_block_size", so
// launches of up to max_block_size threads per block are valid.
void mark_amdgpu_kernel(llvm::Function &fn, unsigned max_block_size = 1024);

// The scope every AMDGPU atomic must use (spec: "Atomic visibility scope"): at system scope
// LLVM falls back to CAS loops.
llvm::SyncScope::ID amdgpu_agent_scope(llvm::LLVMContext &ctx);

// workitem id, workgroup id, workgroup size (from the HSA dispatch packet) and number of
// workgroups (grid size / workgroup size, rounded up), all as i32.
llvm::Value *amdgpu_workitem_id(llvm::IRBuilderBase &b, Dim d);
llvm::Value *amdgpu_workgroup_id(llvm::IRBuilderBase &b, Dim d);
llvm::Value *amdgpu_workgroup_size(llvm::IRBuilderBase &b, Dim d);
llvm::Value *amdgpu_num_workgroups(llvm::IRBuilderBase &b, Dim d);

// ld.lld-19, ld.lld on PATH, then /usr/lib/llvm-19/bin/ld.lld. Returns "" when none is found.
std::string find_ld_lld();

}  // namespace qd::llvm_gpu
