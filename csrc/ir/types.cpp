#include "ir/types.h"

#include <stdexcept>

namespace qd {

namespace {
const char *kNames[] = {"i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f16", "f32", "f64", "u1", "none"};
}

const char *dtype_name(DataType t) { return kNames[static_cast<int>(t)]; }

DataType dtype_from_name(const std::string &name) {
  for (int i = 0; i <= static_cast<int>(DataType::none); i++)
    if (name == kNames[i]) return static_cast<DataType>(i);
  throw std::invalid_argument("unknown dtype '" + name + "'");
}

DataType int_of_width(int bits, bool is_signed) {
  switch (bits) {
    case 8: return is_signed ? DataType::i8 : DataType::u8;
    case 16: return is_signed ? DataType::i16 : DataType::u16;
    case 32: return is_signed ? DataType::i32 : DataType::u32;
    case 64: return is_signed ? DataType::i64 : DataType::u64;
    default: throw std::invalid_argument("no integer type of width " + std::to_string(bits));
  }
}

DataType promoted_type(DataType a, DataType b) {
  if (a == b) return a;
  if (is_real(a) || is_real(b)) {
    if (!is_real(a)) return b;
    if (!is_real(b)) return a;
    return bit_width(a) >= bit_width(b) ? a : b;
  }
  if (a == DataType::u1) return b;
  if (b == DataType::u1) return a;
  if (bit_width(a) != bit_width(b)) return bit_width(a) > bit_width(b) ? a : b;
  return is_unsigned(a) ? a : b;
}

}  // namespace qd
