#pragma once
// A compilation target: the backend, the device's capabilities (or the GPU architecture), the
// options that change code generation, and the legality facts legalization reads.
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "atomics/support_table.h"

namespace qd {

struct KernelIR;
class Runtime;
struct RuntimeOptions;

struct Target {
  Backend backend = Backend::Cpu;
  TargetFeatures features;  // device capabilities, the CUDA sm / AMDGPU gfx, the shared-memory limit
  bool fast_math = false;   // SPIR-V: allow reassociation and contraction (LLVM: TargetFeatures::fast_math)

  // Float Rem is exact (C's fmod): true on the cpu (LLVM's frem calls fmod); SPIR-V's OpFRem and
  // NVPTX's frem compute a - b * trunc(a / b), so legalization expands it there.
  bool has_exact_float_rem() const { return backend == Backend::Cpu; }
  // f64 Floor / Ceil / Trunc / RoundEven are exact: lavapipe's RoundEven rounds 1.5 to 1.0, and its
  // Trunc (and on some host CPUs its Floor) leaves non-integers above 2^24 unchanged, so on SPIR-V
  // legalization computes them from adds (exact_float.h, floor_by_adds).
  bool has_exact_f64_rounding() const { return !is_spirv(); }
  // Float + - * / with a constant zero operand keep IEEE (x * 0.0 is NaN for inf, x + 0.0 is +0.0
  // for -0.0, x / 0.0 is +-inf or NaN). llvmpipe (lavapipe) simplifies them as if there were no
  // -0.0, inf or NaN (x * 0.0 -> 0.0, x + 0.0 -> x, 0.0 / x -> 0.0, x / 0.0 -> undefined: the store
  // is dropped), SignedZeroInfNanPreserve or not, for literals and for whatever its optimiser
  // folds to zero: legalization tests such operands on such a device and computes the zero case
  // without the zero; its abs of a constant -0.0 is -0.0 too, so abs clears the sign bit there
  // (Cap::folds_float_zero_operands, probed by the Vulkan runtime; docs/backends.md).
  bool has_exact_float_zero_operands() const { return !features.has(Cap::folds_float_zero_operands); }

  // Bit counting (PopCount / Clz / Ctz) at this width: Vulkan's OpBitCount, FindUMsb and FindILsb
  // take 32-bit integers only, so legalization widens narrower ones and splits 64-bit ones there.
  bool has_bit_count(DataType t) const { return !is_spirv() || bit_width(t) == 32; }
  // qd.math.fns as one instruction: PTX fns.b32 (base <= 31); elsewhere legalization loops.
  bool has_native_fns() const { return backend == Backend::Cuda; }

  // sin cos tan exp log tanh asin acos atan atan2 pow on this float type: the cpu calls the C
  // library, SPIR-V has GLSL.std.450 for 16 / 32-bit floats (needs_math_library replaces the few
  // a driver with Cap::inexact_float_math gets far wrong); NVPTX and AMDGPU have neither, so
  // legalization builds them (transforms/math_library.cpp). A cpu without Cap::libm
  // (RuntimeOptions::disabled_caps) uses the built ones too: that is how they are tested.
  bool has_native_math(DataType t) const {
    if (backend == Backend::Cpu) return features.has(Cap::libm);
    return is_spirv() && t != DataType::f64;
  }

  // Subgroup reductions and scans over the active lanes (SimtOp::SubgroupReduce / ExclusiveScan /
  // Elect) on values of type t, for subgroup aggregation of atomics (transforms/subgroup_atomics.cpp,
  // which widens 8 / 16-bit integers first): CUDA and AMDGPU build them from shuffles and ballots;
  // Vulkan has OpGroupNonUniform arithmetic on 32-bit values and f64, on 64-bit integers with
  // shaderSubgroupExtendedTypes (Cap::subgroup_extended_types). Off with TargetFeatures::subgroup_aggregation
  // (qd.init(subgroup_aggregation=False)).
  bool has_subgroup_reduce(DataType t) const {
    if (!features.subgroup_aggregation) return false;
    bool word = t == DataType::i32 || t == DataType::u32 || t == DataType::f32;
    bool wide = t == DataType::i64 || t == DataType::u64 || t == DataType::f64;
    if (backend == Backend::Cuda || backend == Backend::Amdgpu) return word || wide;
    if (backend != Backend::Vulkan) return false;
    for (Cap c : {Cap::subgroup_basic, Cap::subgroup_vote, Cap::subgroup_arithmetic, Cap::subgroup_ballot})
      if (!features.has(c)) return false;
    return word || t == DataType::f64 || (wide && features.has(Cap::subgroup_extended_types));
  }

  // The reverse pass's scattered adjoint atomics (`x.grad[p[i]] += ...`) are combined per subgroup
  // among the lanes that share a target (transforms/subgroup_atomics.cpp): on GPUs, where atomics
  // on one address serialize; not where the driver runs them lane by lane on CPU cores.
  bool aggregates_scattered_atomics() const { return !features.has(Cap::cheap_scattered_atomics); }

  // A workgroup may spin on a flag that another workgroup of the same dispatch publishes with a
  // Release atomic (read with Acquire): the decoupled look-back of qd.algorithms' scan and select.
  // It needs both forward progress for a workgroup that started before the waiting one (tile ids
  // come from an atomic counter, so a tile waits only on tiles already running) and exact ordered
  // atomics in loops. cpu: OS threads; CUDA / AMDGPU: resident blocks; Vulkan: with the Vulkan
  // memory model at device scope, unless the driver runs ordered atomics as barriers (llvmpipe);
  // Metal: MSL atomics are relaxed only. Where false the library uses reduce-then-scan.
  bool can_wait_on_other_workgroups() const {
    if (backend == Backend::Cpu || backend == Backend::Cuda || backend == Backend::Amdgpu) return true;
    if (backend != Backend::Vulkan) return false;
    return features.has(Cap::vulkan_memory_model) && features.has(Cap::vulkan_memory_model_device_scope) &&
           !features.has(Cap::ordered_atomics_act_as_barriers);
  }

  bool is_spirv() const { return backend == Backend::Vulkan || backend == Backend::Metal; }
  // The type of element indices: SPIR-V indexes buffers with i32 (they hold fewer than 2^31
  // elements), LLVM with i64.
  DataType index_type() const { return is_spirv() ? DataType::i32 : DataType::i64; }
};

// One backend in the registry (target/target.cpp).
struct TargetEntry {
  Backend backend;
  std::function<TargetFeatures()> compile_features;  // what qd.compile assumes without a device
  // Runs the pass pipeline and the codegen: the artefacts ("ir", "llvm_ir", "ptx", "spirv_asm", ...).
  std::function<std::map<std::string, std::string>(KernelIR &, const Target &)> artifacts;
  std::function<std::unique_ptr<Runtime>(const RuntimeOptions &)> create_runtime;
};
const TargetEntry &target_entry(Backend backend);

// The features qd.compile targets for `backend` without a device: the default ones, with the GPU
// architecture from $QD_CUDA_ARCH / $QD_AMDGPU_ARCH.
TargetFeatures compile_features(Backend backend);

// Compiles a kernel for a target without launching it (qd.compile): its artefacts.
std::map<std::string, std::string> compile_artifacts(std::unique_ptr<KernelIR> k, const Target &target);

}  // namespace qd
