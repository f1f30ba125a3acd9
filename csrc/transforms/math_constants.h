#pragma once
// Constants and polynomial coefficients of the f64 math library (transforms/math_library.cpp).
#include <limits>
#include <vector>

namespace qd::f64_math {

// pi/2 in three parts of 33, 33 and 53 bits: n * part is exact for |n| < 2^20.
inline constexpr double kPio2_1 = 0x1.921fb544p+0;
inline constexpr double kPio2_2 = 0x1.0b4611a6p-34;
inline constexpr double kPio2_3 = 0x1.3198a2e037073p-69;
inline constexpr double k2OverPi = 0x1.45f306dc9c883p-1;
// ln 2 in two parts; the first has 32 bits, so e * kLn2Hi is exact for every binary exponent e.
inline constexpr double kLn2Hi = 0x1.62e42ffp-1;
inline constexpr double kLn2Lo = -0x1.718432a1b0e26p-35;
inline constexpr double kLog2e = 0x1.71547652b82fep+0;
inline constexpr double kPi = 0x1.921fb54442d18p+1;
inline constexpr double kPi_2 = 0x1.921fb54442d18p+0;
inline constexpr double kPi_4 = 0x1.921fb54442d18p-1;
inline constexpr double k3Pi_4 = 0x1.2d97c7f3321d2p+1;
inline constexpr double kPi_6 = 0x1.0c152382d7366p-1;
inline constexpr double kSqrt3 = 0x1.bb67ae8584caap+0;
inline constexpr double kTanPi_12 = 0x1.126145e9ecd56p-2;
inline constexpr double kSqrt2 = 0x1.6a09e667f3bcdp+0;
inline constexpr double kInf = std::numeric_limits<double>::infinity();
inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Taylor coefficients sign_i / (k0 + step*i)!: sign_0 = first_sign, then alternating when
// `alternate`. k! is exact in a double up to 22!, so each coefficient is rounded once.
inline std::vector<double> inverse_factorials(int k0, int step, int count, double first_sign, bool alternate) {
  std::vector<double> out;
  for (int i = 0; i < count; i++) {
    double f = 1;
    for (int j = 2; j <= k0 + step * i; j++) f *= j;
    out.push_back((alternate && i % 2 ? -first_sign : first_sign) / f);
  }
  return out;
}

// numerator / (2k + 1), k = 1..count, alternating when asked: the atanh and atan series.
inline std::vector<double> odd_reciprocals(int count, double numerator, bool alternate) {
  std::vector<double> out;
  for (int k = 1; k <= count; k++) out.push_back((alternate && k % 2 ? -numerator : numerator) / (2 * k + 1));
  return out;
}

}  // namespace qd::f64_math
