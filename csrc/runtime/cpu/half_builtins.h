#pragma once
// Conversions LLVM lowers to compiler-rt calls on x86 (no instruction converts f64 to f16). The
// process may not carry compiler-rt, so the JIT gets these.
#include <cstdint>

namespace qd {

// f64 -> f16 bits, correctly rounded (to nearest, ties to even), as numpy's astype(float16).
uint16_t f64_to_f16_bits(double d);

extern "C" _Float16 qd_truncdfhf2(double d);

}  // namespace qd
