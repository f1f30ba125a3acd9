// The math library: sin cos tan exp log tanh asin acos atan atan2 pow, for targets that have none
// (NVPTX and AMDGPU have no libm to call; SPIR-V's GLSL.std.450 has no f64 versions). Written once
// in primitives every codegen maps to instructions: f64 + - * /, floor, sqrt, abs, round to even,
// selects, and shifts / masks of the u64 bits. Straight-line code (no divergence, no loops);
// special values (NaN, +-inf, +-0) are patched in at the end of each function. Within 3 ulp of
// the C library (4 for pow; tests/cpp/test_math_library.cpp). f16 / f32 arguments are computed in
// f64 and rounded once. Cody-Waite argument reduction, Taylor polynomials, and for log / pow
// error-free transforms (exact_float.h), which need the arithmetic rounded exactly as written.
#include "transforms/math_library.h"

#include "transforms/exact_float.h"
#include "transforms/math_constants.h"

namespace qd {

namespace {

using B = BinaryOp;
using U = UnaryOp;
using namespace f64_math;
constexpr DataType F = DataType::f64;

bool is_library_unary(U op) {
  switch (op) {
    case U::Sin: case U::Cos: case U::Tan: case U::Exp: case U::Log: case U::Tanh:
    case U::Asin: case U::Acos: case U::Atan: return true;
    default: return false;
  }
}

class MathLibrary {
 public:
  MathLibrary(IrEmitter &e, const Target &target) : e_(e), target_(target) {}

  Stmt *unary(U op, Stmt *x) {
    switch (op) {
      case U::Sin: return sin_cos(x, 0);
      case U::Cos: return sin_cos(x, 1);
      case U::Tan: return tan(x);
      case U::Exp: return exp_with_tail(x, c(0));
      case U::Log: return log(x);
      case U::Tanh: return tanh(x);
      case U::Asin: return atan2(x, sqrt_one_minus_sq(x));
      case U::Acos: return atan2(sqrt_one_minus_sq(x), x);
      default: return atan(x);
    }
  }

  Stmt *atan2(Stmt *y, Stmt *x) {
    Stmt *ax = fabs(x), *ay = fabs(y);
    Stmt *swap = gt(ay, ax);
    Stmt *a = atan_unit(div(sel(swap, ax, ay), sel(swap, ay, ax)));
    a = sel(swap, sub(c(kPi_2), a), a);
    Stmt *west = signbit(x);
    a = sel(west, sub(c(kPi), a), a);
    // 0/0 and inf/inf have no quotient: their angles by the C99 rules.
    a = sel(both(eq(ax, c(0)), eq(ay, c(0))), sel(west, c(kPi), c(0)), a);
    a = sel(both(is_inf(ax), is_inf(ay)), sel(west, c(k3Pi_4), c(kPi_4)), a);
    return sel(either(is_nan(x), is_nan(y)), add(x, y), copysign(a, y));
  }

  Stmt *pow(Stmt *x, Stmt *y) {
    Stmt *lh, *ll;
    log_dd(fabs(x), lh, ll);
    Stmt *zh = mul(y, lh);
    Stmt *zl = add(exact_float::product_error(e_, y, lh, zh), mul(y, ll));  // y log|x| = zh + zl
    // No tail where the result is 0 or inf anyway, for inf and NaN, or where the split
    // overflowed (|y| > 2^996).
    zl = sel(both(lt(fabs(zh), c(746)), e_.not_(is_nan(zl))), zl, c(0));
    Stmt *r = exp_with_tail(zh, zl);
    Stmt *half = mul(y, c(0.5));
    Stmt *y_odd = both(is_int(y), ne(floor(half), half));
    r = sel(both(signbit(x), y_odd), neg(r), r);
    // A finite negative base needs an integer exponent (-0 and -inf do not: C99 pow).
    Stmt *neg_finite = both(lt(x, c(0)), gt(x, c(-kInf)));
    r = sel(both(neg_finite, e_.not_(is_int(y))), c(kNaN), r);
    // pow(1, y) = pow(x, +-0) = pow(-1, +-inf) = 1, NaN operands included.
    Stmt *one = either(either(eq(x, c(1)), eq(y, c(0))), both(eq(x, c(-1)), is_inf(y)));
    return sel(one, c(1), r);
  }

 private:
  // ---- primitives -------------------------------------------------------------------------
  Stmt *c(double v) { return e_.c(F, v); }
  Stmt *add(Stmt *x, Stmt *y) { return e_.bin(B::Add, x, y); }
  Stmt *sub(Stmt *x, Stmt *y) { return e_.bin(B::Sub, x, y); }
  Stmt *mul(Stmt *x, Stmt *y) { return e_.bin(B::Mul, x, y); }
  Stmt *div(Stmt *x, Stmt *y) { return e_.bin(B::Div, x, y); }
  Stmt *neg(Stmt *x) { return e_.un(U::Neg, x); }
  Stmt *fabs(Stmt *x) { return e_.un(U::Abs, x); }
  Stmt *floor(Stmt *x) {
    return target_.has_exact_f64_rounding() || x->dtype != DataType::f64 ? e_.un(U::Floor, x)
                                                                         : exact_float::floor_by_adds(e_, x);
  }
  Stmt *sqrt(Stmt *x) { return e_.un(U::Sqrt, x); }
  Stmt *rint(Stmt *x) {
    return target_.has_exact_f64_rounding() ? e_.un(U::Round, x) : exact_float::round_half_even(e_, x);
  }
  Stmt *sel(Stmt *cond, Stmt *x, Stmt *y) { return e_.sel(cond, x, y); }
  Stmt *lt(Stmt *x, Stmt *y) { return e_.bin(B::Lt, x, y); }
  Stmt *gt(Stmt *x, Stmt *y) { return e_.bin(B::Gt, x, y); }
  Stmt *eq(Stmt *x, Stmt *y) { return e_.bin(B::Eq, x, y); }
  Stmt *ne(Stmt *x, Stmt *y) { return e_.bin(B::Ne, x, y); }
  Stmt *both(Stmt *p, Stmt *q) { return e_.both(p, q); }
  Stmt *either(Stmt *p, Stmt *q) { return e_.either(p, q); }
  Stmt *is_nan(Stmt *x) { return ne(x, x); }
  Stmt *is_inf(Stmt *x) { return eq(fabs(x), c(kInf)); }
  Stmt *is_int(Stmt *x) { return eq(floor(x), x); }  // true for +-inf too
  Stmt *signbit(Stmt *x) { return exact_float::signbit(e_, x); }
  Stmt *copysign(Stmt *mag, Stmt *sign) { return sel(signbit(sign), neg(fabs(mag)), fabs(mag)); }
  Stmt *u64(int64_t v) { return e_.ci(DataType::u64, v); }
  // 2^k for an integral k in [-1022, 1023], from its bits.
  Stmt *pow2(Stmt *k) {
    Stmt *biased = e_.bin(B::Add, e_.cast(k, DataType::i64), e_.ci(DataType::i64, 1023));
    return e_.bitcast(e_.bin(B::Shl, biased, e_.ci(DataType::i64, 52)), F);
  }

  // coef[0] + x * (coef[1] + x * (...)).
  Stmt *horner(Stmt *x, const std::vector<double> &coef) {
    Stmt *acc = c(coef.back());
    for (size_t i = coef.size() - 1; i-- > 0;) acc = add(mul(acc, x), c(coef[i]));
    return acc;
  }

  // ---- sin, cos, tan ----------------------------------------------------------------------
  // x = n * pi/2 + r with |r| <= ~pi/4; q = n mod 4 as a double (NaN for an infinite x).
  void reduce_pio2(Stmt *x, Stmt *&r, Stmt *&q) {
    Stmt *n = rint(mul(x, c(k2OverPi)));
    r = sub(sub(sub(x, mul(n, c(kPio2_1))), mul(n, c(kPio2_2))), mul(n, c(kPio2_3)));
    q = sub(n, mul(c(4), floor(mul(n, c(0.25)))));
  }
  Stmt *sin_poly(Stmt *r, Stmt *r2) {  // |r| <= pi/4: the first omitted term is below 2^-60
    return add(mul(mul(r, r2), horner(r2, inverse_factorials(3, 2, 8, -1, true))), r);
  }
  Stmt *cos_poly(Stmt *r2) { return horner(r2, inverse_factorials(0, 2, 10, 1, true)); }

  // which = 0: sin, 1: cos (cos(x) = sin(x + pi/2) shifts the quadrant by one).
  Stmt *sin_cos(Stmt *x, int which) {
    Stmt *r, *q;
    reduce_pio2(x, r, q);
    Stmt *r2 = mul(r, r), *s = sin_poly(r, r2), *co = cos_poly(r2);
    if (which == 1) {
      q = add(q, c(1));
      q = sel(eq(q, c(4)), c(0), q);
    }
    Stmt *res = sel(eq(q, c(0)), s, sel(eq(q, c(1)), co, sel(eq(q, c(2)), neg(s), neg(co))));
    // Past |x| ~ 1e6 the reduction loses accuracy; past ~1e22 it is noise: keep that in [-1, 1].
    res = sel(gt(res, c(1)), c(1), sel(lt(res, c(-1)), c(-1), res));
    return which == 0 ? sel(lt(fabs(x), c(0x1p-27)), x, res) : res;  // sin(x) = x there, -0 kept
  }

  Stmt *tan(Stmt *x) {
    Stmt *r, *q;
    reduce_pio2(x, r, q);
    Stmt *r2 = mul(r, r), *s = sin_poly(r, r2), *co = cos_poly(r2);
    Stmt *res = sel(either(eq(q, c(1)), eq(q, c(3))), neg(div(co, s)), div(s, co));
    return sel(lt(fabs(x), c(0x1p-27)), x, res);
  }

  // ---- exp, log ---------------------------------------------------------------------------
  // exp(x) * (1 + tail), for |tail| tiny; tail = 0 when there is none.
  Stmt *exp_with_tail(Stmt *x, Stmt *tail) {
    // exp(+-800) already over/underflows; the clamp keeps 2^n in two normal factors.
    Stmt *xc = sel(gt(x, c(800)), c(800), sel(lt(x, c(-800)), c(-800), x));
    Stmt *n = rint(mul(xc, c(kLog2e)));
    Stmt *r = sub(sub(xc, mul(n, c(kLn2Hi))), mul(n, c(kLn2Lo)));  // |r| <= ~0.347
    Stmt *p = horner(r, inverse_factorials(0, 1, 14, 1, false));
    p = add(mul(p, tail), p);
    // p * 2^n as (p * 2^h) * 2^(n - h): the first product is exact, the second rounds once.
    Stmt *h = floor(mul(n, c(0.5)));
    Stmt *res = mul(mul(p, pow2(h)), pow2(sub(n, h)));
    return sel(is_nan(x), x, res);
  }

  // For finite x > 0: log(x) = e*ln2 + f - t, from x = 2^e * (1 + f), 1 + f in [sqrt(1/2),
  // sqrt(2)), s = f / (2 + f), log(1 + f) = 2 atanh(s) = f - s*(f - R), R = sum 2 s^2k / (2k + 1).
  struct LogParts {
    Stmt *e, *f, *t, *t_lo;  // t_lo: most of t's rounding error, for log_dd
  };
  LogParts log_parts(Stmt *x) {
    Stmt *tiny = lt(x, c(0x1p-1022));  // subnormals: scaled into the normal range first
    Stmt *bits = e_.bitcast(sel(tiny, mul(x, c(0x1p54)), x), DataType::u64);
    Stmt *biased = e_.bin(B::BitAnd, e_.bin(B::Shr, bits, u64(52)), u64(0x7ff));
    Stmt *ex = sub(e_.cast(biased, F), sel(tiny, c(1023 + 54), c(1023)));
    Stmt *mbits = e_.bin(B::BitOr, e_.bin(B::BitAnd, bits, u64(0x000fffffffffffffLL)), u64(0x3ff0000000000000LL));
    Stmt *m = e_.bitcast(mbits, F);  // in [1, 2)
    Stmt *big = gt(m, c(kSqrt2));
    m = sel(big, mul(m, c(0.5)), m);
    ex = sel(big, add(ex, c(1)), ex);
    Stmt *f = sub(m, c(1)), *d = add(c(2), f);
    Stmt *s = div(f, d), *s2 = mul(s, s);
    Stmt *big_r = mul(s2, horner(s2, odd_reciprocals(11, 2, false)));
    Stmt *g = sub(f, big_r), *t = mul(s, g);
    // Error-free transforms: 2 + f = d + d_lo, f / (2 + f) = s + s_lo, f - R = g + g_lo.
    Stmt *d_lo = add(sub(c(2), d), f);
    Stmt *sd = mul(s, d);
    Stmt *s_lo = div(sub(sub(sub(f, sd), exact_float::product_error(e_, s, d, sd)), mul(s, d_lo)), d);
    Stmt *g_lo = sub(sub(f, g), big_r);
    Stmt *t_lo = add(exact_float::product_error(e_, s, g, t), add(mul(s, g_lo), mul(s_lo, g)));
    return {ex, f, t, t_lo};
  }
  // log's values at 0, negatives, +inf and NaN, else `finite`.
  Stmt *log_specials(Stmt *x, Stmt *finite) {
    Stmt *res = sel(eq(x, c(kInf)), c(kInf), finite);
    res = sel(lt(x, c(0)), c(kNaN), res);
    res = sel(eq(x, c(0)), c(-kInf), res);
    return sel(is_nan(x), x, res);
  }
  Stmt *log(Stmt *x) {
    LogParts p = log_parts(x);
    return log_specials(x, add(mul(p.e, c(kLn2Hi)), add(sub(p.f, p.t), mul(p.e, c(kLn2Lo)))));
  }
  // log(x) as hi + lo, well below an ulp of error: what pow needs to stay within a few ulp.
  void log_dd(Stmt *x, Stmt *&hi, Stmt *&lo) {
    LogParts p = log_parts(x);
    Stmt *a = mul(p.e, c(kLn2Hi));  // exact
    Stmt *s = add(a, p.f), *bb = sub(s, a);  // two-sum of a and f
    Stmt *err = add(sub(a, sub(s, bb)), sub(p.f, bb));
    err = add(err, sub(sub(mul(p.e, c(kLn2Lo)), p.t), p.t_lo));
    hi = add(s, err);
    lo = sub(err, sub(hi, s));
    Stmt *finite = both(gt(x, c(0)), lt(x, c(kInf)));
    hi = log_specials(x, hi);
    lo = sel(finite, lo, c(0));
  }

  // ---- tanh, atan, asin, acos -------------------------------------------------------------
  Stmt *tanh(Stmt *x) {
    Stmt *a = fabs(x), *u = mul(c(2), a);
    // |x| < 0.5: tanh = expm1(2|x|) / (expm1(2|x|) + 2), expm1 by its series (no cancellation).
    Stmt *em1 = mul(u, horner(u, inverse_factorials(1, 1, 18, 1, false)));
    Stmt *small = div(em1, add(em1, c(2)));
    Stmt *large = sub(c(1), div(c(2), add(exp_with_tail(u, c(0)), c(1))));
    return copysign(sel(lt(a, c(0.5)), small, large), x);
  }

  // atan for t in [0, 1]: t > tan(pi/12) moves to pi/6 + atan((sqrt3 t - 1) / (sqrt3 + t)).
  Stmt *atan_unit(Stmt *t) {
    Stmt *red = gt(t, c(kTanPi_12));
    Stmt *u = sel(red, div(sub(mul(t, c(kSqrt3)), c(1)), add(c(kSqrt3), t)), t);
    Stmt *u2 = mul(u, u);
    Stmt *p = add(mul(mul(u, u2), horner(u2, odd_reciprocals(14, 1, true))), u);
    return sel(red, add(c(kPi_6), p), p);
  }
  Stmt *atan(Stmt *x) {
    Stmt *a = fabs(x), *inv = gt(a, c(1));
    Stmt *p = atan_unit(sel(inv, div(c(1), a), a));
    return copysign(sel(inv, sub(c(kPi_2), p), p), x);
  }
  // sqrt(1 - x^2) as sqrt((1 - x)(1 + x)): exact factors near |x| = 1; NaN for |x| > 1.
  Stmt *sqrt_one_minus_sq(Stmt *x) { return sqrt(mul(sub(c(1), x), add(c(1), x))); }

  IrEmitter &e_;
  const Target &target_;
};

}  // namespace

bool needs_math_library(const Stmt &s, const Target &target) {
  bool library_op = s.kind == StmtKind::Unary    ? is_library_unary(static_cast<U>(s.op))
                    : s.kind == StmtKind::Binary ? static_cast<B>(s.op) == B::Pow || static_cast<B>(s.op) == B::Atan2
                                                 : false;
  if (!library_op) return false;
  DataType t = s.operands[0]->dtype;
  if (!is_real(t)) return false;
  if (!target.has_native_math(t)) return true;
  // The driver's own are thousands of ulp off (Cap::inexact_float_math); its sin cos tan exp pow
  // (within 9 ulp) stay: the f64 ones cost about 8x there.
  auto u = static_cast<U>(s.op);
  bool far_off = s.kind == StmtKind::Unary ? u == U::Asin || u == U::Acos || u == U::Atan || u == U::Tanh || u == U::Log
                                           : static_cast<B>(s.op) == B::Atan2;
  return far_off && target.features.has(Cap::inexact_float_math) && target.features.has(Cap::shader_float64);
}

Stmt *expand_math_library(IrEmitter &e, const Stmt &s, const Target &target) {
  MathLibrary lib(e, target);
  Stmt *x = e.cast(s.operands[0], F);
  Stmt *r;
  if (s.kind == StmtKind::Unary) r = lib.unary(static_cast<U>(s.op), x);
  else if (static_cast<B>(s.op) == B::Pow) r = lib.pow(x, e.cast(s.operands[1], F));
  else r = lib.atan2(x, e.cast(s.operands[1], F));
  return e.cast(r, s.dtype);
}

}  // namespace qd
