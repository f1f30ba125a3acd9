#pragma once
// Primitive data types of the language and Quadrants' promotion rules.
#include <cstdint>
#include <string>

namespace qd {

enum class DataType : uint8_t { i8, i16, i32, i64, u8, u16, u32, u64, f16, f32, f64, u1, none };

inline bool is_real(DataType t) { return t == DataType::f16 || t == DataType::f32 || t == DataType::f64; }
inline bool is_integral(DataType t) { return t <= DataType::u64 || t == DataType::u1; }
inline bool is_signed(DataType t) { return t <= DataType::i64 || is_real(t); }
inline bool is_unsigned(DataType t) { return is_integral(t) && !is_signed(t); }

inline int bit_width(DataType t) {
  switch (t) {
    case DataType::u1: return 1;
    case DataType::i8: case DataType::u8: return 8;
    case DataType::i16: case DataType::u16: case DataType::f16: return 16;
    case DataType::i32: case DataType::u32: case DataType::f32: return 32;
    case DataType::i64: case DataType::u64: case DataType::f64: return 64;
    default: return 0;
  }
}
inline int byte_size(DataType t) { return t == DataType::u1 ? 1 : bit_width(t) / 8; }

const char *dtype_name(DataType t);
DataType dtype_from_name(const std::string &name);  // throws std::invalid_argument

// The integer type of the same width (used to move floats through integer atomics).
DataType int_of_width(int bits, bool is_signed = true);

// Quadrants' binary-op promotion: float beats int (wider float wins), wider int beats narrower,
// unsigned beats signed at equal width.
DataType promoted_type(DataType a, DataType b);

}  // namespace qd
