#pragma once
// Float building blocks for legalization's expansions (legalize.cpp, math_library.cpp): each is
// exact under IEEE arithmetic, rounded as written (the emitter marks its statements exact, so no
// target contracts or reassociates them, fast_math or not).
#include <cmath>

#include "transforms/ir_emitter.h"

namespace qd::exact_float {

// The sign bit of x (-0.0 included, NaN excluded).
inline Stmt *signbit(IrEmitter &e, Stmt *x) {
  Stmt *zero = e.c(x->dtype, 0);
  return e.either(e.bin(BinaryOp::Lt, x, zero), e.bin(BinaryOp::Lt, e.bin(BinaryOp::Div, e.c(x->dtype, 1), x), zero));
}

// The sign bit as stored (NaN's too), read by an integer compare on the bits: no division, and
// nothing a driver's float folding touches.
inline Stmt *stored_signbit(IrEmitter &e, Stmt *x) {
  DataType bits = int_of_width(bit_width(x->dtype), true);
  return e.bin(BinaryOp::Lt, e.bitcast(x, bits), e.ci(bits, 0));
}

// x, or when x is zero, a zero with the sign bit of `sign`.
inline Stmt *zero_signed_like(IrEmitter &e, Stmt *x, Stmt *sign) {
  DataType t = x->dtype;
  Stmt *signed_zero = e.sel(signbit(e, sign), e.c(t, -0.0), e.c(t, 0.0));
  return e.sel(e.bin(BinaryOp::Eq, x, e.c(t, 0)), signed_zero, x);
}

// a * b - p, exactly, for p = a * b rounded (Dekker's product with Veltkamp's split); a target's
// fma need not be fused (lavapipe's is not), so it cannot give this term. |a|, |b| < 2^996.
inline Stmt *product_error(IrEmitter &e, Stmt *a, Stmt *b, Stmt *p) {
  using B = BinaryOp;
  DataType t = a->dtype;
  double splitter = t == DataType::f64 ? 134217729.0 : t == DataType::f32 ? 4097.0 : 65.0;  // 2^ceil(p/2) + 1
  auto split = [&](Stmt *x, Stmt *&hi, Stmt *&lo) {
    Stmt *s = e.bin(B::Mul, x, e.c(t, splitter));
    hi = e.bin(B::Sub, s, e.bin(B::Sub, s, x));
    lo = e.bin(B::Sub, x, hi);
  };
  Stmt *ah, *al, *bh, *bl;
  split(a, ah, al);
  split(b, bh, bl);
  Stmt *err = e.bin(B::Add, e.bin(B::Sub, e.bin(B::Mul, ah, bh), p), e.bin(B::Mul, ah, bl));
  return e.bin(B::Add, e.bin(B::Add, err, e.bin(B::Mul, al, bh)), e.bin(B::Mul, al, bl));
}

// floor(x) from adds, subtracts and compares, exact under IEEE rounding to nearest, for every x
// (-0.0, inf and NaN as floor's): for |x| < 2^(p-1) (p: the type's precision), |x| + 2^(p-1) lands
// where the spacing is 1, so it rounds |x| to an integer, and taking 2^(p-1) off again is exact;
// past 2^(p-1) every float is an integer. No driver rounding instruction is used: lavapipe emulates
// f64 Floor / Trunc on some host CPUs with a threshold right for f32 only (docs/backends.md).
inline Stmt *floor_by_adds(IrEmitter &e, Stmt *x) {
  using B = BinaryOp;
  DataType t = x->dtype;
  Stmt *big = e.c(t, std::ldexp(1.0, t == DataType::f64 ? 52 : t == DataType::f32 ? 23 : 10));
  Stmt *one = e.c(t, 1);
  Stmt *ax = e.un(UnaryOp::Abs, x);
  Stmt *near = e.bin(B::Sub, e.bin(B::Add, ax, big), big);
  Stmt *down = e.sel(e.bin(B::Gt, near, ax), e.bin(B::Sub, near, one), near);  // trunc(|x|)
  Stmt *neg = e.bin(B::Lt, x, e.c(t, 0));
  Stmt *fl = e.sel(neg, e.un(UnaryOp::Neg, e.sel(e.bin(B::Eq, down, ax), down, e.bin(B::Add, down, one))), down);
  return e.sel(e.bin(B::Lt, ax, big), zero_signed_like(e, fl, x), x);  // floor(-0.0) is -0.0
}

// ceil, trunc and round-half-even made the same way (for targets whose own are inexact).
inline Stmt *ceil_by_adds(IrEmitter &e, Stmt *x) {
  return e.un(UnaryOp::Neg, floor_by_adds(e, e.un(UnaryOp::Neg, x)));
}

inline Stmt *trunc_by_adds(IrEmitter &e, Stmt *x) {
  return e.sel(e.bin(BinaryOp::Lt, x, e.c(x->dtype, 0)), ceil_by_adds(e, x), floor_by_adds(e, x));
}

// Round half to even from floor_by_adds, for targets whose RoundEven is wrong (lavapipe's on f64).
inline Stmt *round_half_even(IrEmitter &e, Stmt *x) {
  using B = BinaryOp;
  DataType t = x->dtype;
  Stmt *half = e.c(t, 0.5), *one = e.c(t, 1);
  Stmt *fl = floor_by_adds(e, x);
  Stmt *frac = e.bin(B::Sub, x, fl);
  Stmt *fl_even = e.bin(B::Eq, floor_by_adds(e, e.bin(B::Mul, fl, half)), e.bin(B::Mul, fl, half));
  Stmt *up = e.either(e.bin(B::Gt, frac, half), e.both(e.bin(B::Eq, frac, half), e.not_(fl_even)));
  return zero_signed_like(e, e.sel(up, e.bin(B::Add, fl, one), fl), x);  // round(-0.4) is -0.0
}

}  // namespace qd::exact_float
