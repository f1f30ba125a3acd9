#pragma once
// Float building blocks for legalization's expansions (legalize.cpp, math_library.cpp): each is
// exact under IEEE arithmetic, rounded as written (the emitter marks its statements exact, so no
// target contracts or reassociates them, fast_math or not).
#include "transforms/ir_emitter.h"

namespace qd::exact_float {

// The sign bit of x (-0.0 included, NaN excluded).
inline Stmt *signbit(IrEmitter &e, Stmt *x) {
  Stmt *zero = e.c(x->dtype, 0);
  return e.either(e.bin(BinaryOp::Lt, x, zero), e.bin(BinaryOp::Lt, e.bin(BinaryOp::Div, e.c(x->dtype, 1), x), zero));
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

// Round half to even from floor, for targets whose RoundEven is wrong (lavapipe's on f64).
inline Stmt *round_half_even(IrEmitter &e, Stmt *x) {
  using B = BinaryOp;
  DataType t = x->dtype;
  Stmt *half = e.c(t, 0.5), *one = e.c(t, 1);
  Stmt *fl = e.un(UnaryOp::Floor, x);
  Stmt *frac = e.bin(B::Sub, x, fl);
  Stmt *fl_even = e.bin(B::Eq, e.un(UnaryOp::Floor, e.bin(B::Mul, fl, half)), e.bin(B::Mul, fl, half));
  Stmt *up = e.either(e.bin(B::Gt, frac, half), e.both(e.bin(B::Eq, frac, half), e.not_(fl_even)));
  return zero_signed_like(e, e.sel(up, e.bin(B::Add, fl, one), fl), x);  // round(-0.4) is -0.0
}

}  // namespace qd::exact_float
