#include "runtime/cpu/half_builtins.h"

#include <cstring>

namespace qd {

uint16_t f64_to_f16_bits(double d) {
  uint64_t b;
  std::memcpy(&b, &d, sizeof b);
  uint16_t sign = static_cast<uint16_t>((b >> 48) & 0x8000);
  int exp = static_cast<int>((b >> 52) & 0x7ff);
  uint64_t mant = b & ((uint64_t(1) << 52) - 1);
  if (exp == 0x7ff) return sign | 0x7c00 | (mant ? 0x200 | static_cast<uint16_t>(mant >> 42) : 0);  // inf, NaN
  if (exp == 0) return sign;  // f64 subnormals are far below f16's smallest value
  int e = exp - 1023 + 15;    // the f16 exponent field, if the value is a normal f16
  if (e >= 31) return sign | 0x7c00;
  uint64_t sig = mant | (uint64_t(1) << 52);      // 53 significant bits
  int drop = 42 + (e <= 0 ? 1 - e : 0);           // bits below f16's last (subnormals lose more)
  if (drop >= 64) return sign;
  uint64_t q = sig >> drop, rem = sig & ((uint64_t(1) << drop) - 1), half = uint64_t(1) << (drop - 1);
  if (rem > half || (rem == half && (q & 1))) q++;  // round to nearest, ties to even
  if (e <= 0) return sign | static_cast<uint16_t>(q);  // a carry into 0x400 is the smallest normal
  uint32_t h = (static_cast<uint32_t>(e) << 10) + static_cast<uint32_t>(q - 0x400);  // a carry bumps the exponent
  return sign | static_cast<uint16_t>(h >= 0x7c00 ? 0x7c00 : h);
}

extern "C" _Float16 qd_truncdfhf2(double d) {
  uint16_t bits = f64_to_f16_bits(d);
  _Float16 h;
  std::memcpy(&h, &bits, sizeof h);
  return h;
}

}  // namespace qd
