#pragma once
// Transcendental math for the GPU targets, built into the module as LLVM IR. LLVM 19's NVPTX
// cannot select sin/cos/exp/log/pow at all, and AMDGPU only some of them (and f32 only, at
// reduced accuracy), while a libm call links nowhere on a GPU. So the kernel module carries its
// own implementations: branch-free f64 code (Cody-Waite range reduction, Taylor polynomials),
// within 3 ulp in f64 (4 for pow) and correctly rounded in f32 almost always (f16 / f32
// arguments are computed in f64 and rounded back). sin/cos/tan lose accuracy gradually for
// |x| > ~1e6, where the 99-bit pi/2 of the reduction runs out.
#include <string>
#include <vector>

namespace llvm {
class IRBuilderBase;
class Module;
class Value;
}  // namespace llvm

namespace qd::llvm_gpu {

// The libm names emit_math_call implements: sin cos tan exp log tanh asin acos atan (one
// argument), atan2 pow (two).
bool has_gpu_math(const std::string &name);

// Emits a call to the in-module implementation of `name` (defined on first use as an internal
// function "qd_math_<name>"), converting f16/f32 arguments to f64 and the result back.
// Returns null when `name` is not one of has_gpu_math's.
llvm::Value *emit_math_call(llvm::IRBuilderBase &b, llvm::Module &m, const std::string &name,
                            const std::vector<llvm::Value *> &args);

}  // namespace qd::llvm_gpu
