#pragma once
// Device capabilities: one list (below), the enum Cap made from it, a set of them, and the target
// facts that are not yes / no (the CUDA sm, the AMDGPU gfx name, the shared-memory limit). The core
// uses only the enum; names exist at the Python boundary (qd.compile's `features`, the runtime's
// `features`, qd.init(vulkan_disable_caps=...), qd.vulkan_caps()) and in error messages.
#include <bitset>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace qd {

// Every capability, once. SPACED(x) is two adjacent ones: x_buffer (StorageBuffer memory) and
// x_shared (Workgroup memory). The Vulkan ones are probed at init (vulkan_setup.cpp); the float
// atomics come from VK_EXT_shader_atomic_float{,2}: *_atomic_add is OpAtomicFAddEXT, *_atomic_minmax
// OpAtomicFMin/FMaxEXT, *_atomics load / store / exchange.
#define QD_VULKAN_CAPS(CAP, SPACED)                                                                 \
  CAP(shader_int8) CAP(shader_int16) CAP(shader_int64) CAP(shader_float16) CAP(shader_float64)      \
  CAP(int8_storage)    /* 8-bit ints in storage buffers */                                          \
  CAP(float16_storage) /* 16-bit ints and floats in storage buffers */                              \
  SPACED(int64_atomics) SPACED(float16_atomics) SPACED(float16_atomic_add)                          \
  SPACED(float16_atomic_minmax) SPACED(float32_atomics) SPACED(float32_atomic_add)                  \
  SPACED(float32_atomic_minmax) SPACED(float64_atomics) SPACED(float64_atomic_add)                  \
  SPACED(float64_atomic_minmax) CAP(vulkan_memory_model) CAP(vulkan_memory_model_device_scope)      \
  /* Float controls: the SignedZeroInfNanPreserve execution mode per float width. */                \
  CAP(signed_zero_inf_nan_preserve_float16) CAP(signed_zero_inf_nan_preserve_float32)               \
  CAP(signed_zero_inf_nan_preserve_float64)                                                         \
  /* The driver simplifies float + - * / with a +0.0 operand as if there were no -0.0, inf or NaN  \
     (llvmpipe): Target::has_exact_float_zero_operands. */                                          \
  CAP(folds_float_zero_operands)                                                                    \
  /* The driver's shader compiler can crash on 64-bit subgroup shuffles (llvmpipe: chained 64-bit \
     ShuffleUp, LLVM 15 SelectionDAG): each moves the value's bits as a uvec2 instead. */          \
  CAP(splits_64bit_shuffles)                                                                        \
  /* The driver runs an ordered atomic like a workgroup control barrier: a loop around one stops    \
     early once part of the workgroup has finished (llvmpipe): Target::can_wait_on_other_workgroups. */ \
  CAP(ordered_atomics_act_as_barriers)                                                              \
  /* The driver runs a subgroup's atomics lane by lane on CPU cores, where an uncontended atomic is \
     cheaper than the subgroup operations that would combine them (llvmpipe: scattered adjoints    \
     pre-aggregated ran 1.05-1.5x slower): Target::aggregates_scattered_atomics. */                  \
  CAP(cheap_scattered_atomics)                                                                      \
  /* The driver's GLSL.std.450 f16 / f32 asin acos atan atan2 tanh log are within the Vulkan      \
     spec's loose bounds but far from the C library (llvmpipe, max ulp over [-8, 8]: asin / acos   \
     3800, tanh 1855, log 380 near 1, atan / atan2 330): needs_math_library builds those from f64. */ \
  CAP(inexact_float_math)                                                                           \
  /* The device runs on the host's CPU cores (llvmpipe): f64 as fast as f32, and an invocation's    \
     consecutive loads stream from cache lines of their own. Deterministic mode's same-address     \
     sums then take the cpu's chunks (1024 consecutive iterations, summed in f64 where exact).   */ \
  CAP(cpu_device)                                                                                   \
  CAP(subgroup_basic) CAP(subgroup_vote) CAP(subgroup_arithmetic) CAP(subgroup_ballot)              \
  CAP(subgroup_shuffle) CAP(subgroup_shuffle_relative) CAP(subgroup_clustered) CAP(subgroup_quad)   \
  CAP(subgroup_extended_types) /* shaderSubgroupExtendedTypes: 8/16/64-bit ints, f16 in subgroup ops */ \
  CAP(host_visible_buffers) /* buffers are mapped; else writes and reads are staged */
// libm: the cpu calls the C library for sin ... pow (Target::has_native_math).
#define QD_CAPS(CAP, SPACED) QD_VULKAN_CAPS(CAP, SPACED) CAP(libm)

#define QD_CAP_ENUM(x) x,
#define QD_CAP_ENUM_SPACED(x) x##_buffer, x##_shared,
enum class Cap : uint8_t { QD_CAPS(QD_CAP_ENUM, QD_CAP_ENUM_SPACED) };
#undef QD_CAP_ENUM
#undef QD_CAP_ENUM_SPACED
#define QD_CAP_COUNT(x) +1
#define QD_CAP_COUNT_SPACED(x) +2
inline constexpr size_t kNumCaps = 0 QD_CAPS(QD_CAP_COUNT, QD_CAP_COUNT_SPACED);
#undef QD_CAP_COUNT
#undef QD_CAP_COUNT_SPACED

const char *cap_name(Cap c);
std::optional<Cap> cap_from_name(std::string_view name);
// The x_shared capability of x_buffer for Workgroup memory; `buffer_cap` itself otherwise.
inline Cap in_shared_memory(Cap buffer_cap, bool shared) {
  return shared ? static_cast<Cap>(static_cast<int>(buffer_cap) + 1) : buffer_cap;
}

struct CapSet {
  std::bitset<kNumCaps> bits;
  CapSet() = default;
  CapSet(std::initializer_list<Cap> caps) {
    for (Cap c : caps) set(c);
  }
  bool has(Cap c) const { return bits.test(static_cast<size_t>(c)); }
  void set(Cap c, bool on = true) { bits.set(static_cast<size_t>(c), on); }
};

// What a target's device has: its capabilities and the facts that are not yes / no.
struct TargetFeatures {
  CapSet caps;
  int cuda_sm = 0;                      // 90 for sm_90; 0: $QD_CUDA_ARCH, else the default
  std::string amdgpu_gfx;               // "gfx942"; empty: $QD_AMDGPU_ARCH, else the default
  int64_t max_shared_memory_bytes = 0;  // the device's own limit per block; 0: the architecture's
  int subgroup_size = 0;                // Vulkan: the device's subgroupSize; 0: unknown
  int vector_bits = 0;                  // cpu: the host's widest vector registers (512: AVX-512); 0: unknown
  // Not the device's but the compile's: atomics on a subgroup-uniform address are combined per
  // subgroup (transforms/subgroup_atomics.cpp) and compactions batched (transforms/compaction.cpp);
  // qd.init(subgroup_aggregation=False), named "no_subgroup_aggregation" at the Python boundary,
  // turns both off.
  bool subgroup_aggregation = true;
  // Also the compile's: constants folded (transforms/fold.cpp); qd.init(constant_folding=False),
  // "no_constant_folding" at the Python boundary, turns it off.
  bool constant_folding = true;
  // Also the compile's: cpu loops of the all-pairs shape run 8 iterations side by side
  // (transforms/interleave.cpp); qd.init(interleave_iterations=False), "no_interleave_iterations"
  // at the Python boundary, turns it off.
  bool interleave_iterations = true;
  // Also the compile's, for the LLVM targets (SPIR-V's is Target::fast_math): qd.init(fast_math=True)
  // lets LLVM reassociate and contract float arithmetic, use reciprocals and approximate functions,
  // and ignore the sign of zero (the reference's flags but inf and NaN, which stay IEEE); what
  // legalization wrote (Stmt::exact) is never affected.
  bool fast_math = false;
  bool has(Cap c) const { return caps.has(c); }
};

// The Python boundary. Features by name: capability names, "sm_90", "gfx942",
// "max_shared_memory_bytes=N", "subgroup_size=N", "no_subgroup_aggregation", "no_constant_folding" and "no_interleave_iterations"; an unknown name is a RuntimeError listing the known ones.
TargetFeatures features_from_names(const std::vector<std::string> &names);
std::vector<std::string> feature_names(const TargetFeatures &f);
// Capabilities to hide (qd.init(vulkan_disable_caps=...)): names of capabilities only.
CapSet caps_from_names(const std::vector<std::string> &names);

}  // namespace qd
