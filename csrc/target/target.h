#pragma once
// A compilation target: the backend, the device's capabilities (or the GPU architecture), the
// options that change code generation, and the legality facts legalization reads.
#include "atomics/support_table.h"

namespace qd {

struct Target {
  Backend backend = Backend::Cpu;
  TargetFeatures features;  // device capabilities ("float32_atomic_add_buffer"), or "sm_90" / "gfx942"
  bool fast_math = false;   // SPIR-V: allow reassociation and contraction of float arithmetic

  // Float Rem is exact (C's fmod): true on the cpu (LLVM's frem calls fmod); SPIR-V's OpFRem and
  // NVPTX's frem compute a - b * trunc(a / b), so legalization expands it there.
  bool has_exact_float_rem() const { return backend == Backend::Cpu; }
  // RoundEven on f64 rounds half to even: lavapipe's rounds 1.5 to 1.0, so SPIR-V gets floor-based.
  bool has_exact_f64_round_even() const { return backend != Backend::Vulkan && backend != Backend::Metal; }
};

}  // namespace qd
