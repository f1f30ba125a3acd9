// SPIR-V codegen, part 5: f64 transcendental functions. GLSL.std.450's sin, exp, log, pow, ...
// take 16 / 32-bit floats only, so f64 gets these branch-free implementations, emitted inline:
// the algorithms (Cody-Waite reduction, Taylor polynomials, error-free transforms for pow) and
// accuracy (within 3 ulp, 4 for pow) of codegen/llvm/gpu_math.cpp, spelt in SPIR-V. Bit
// manipulation goes through the two 32-bit halves, so nothing here needs 64-bit integers.
#include <cmath>
#include <limits>

#include "codegen/f64_math_constants.h"
#include "codegen/spirv/codegen_spirv_impl.h"

namespace qd {

namespace {

using spirv::GLSLstd450;
using spirv::Op;
using Id = spirv::Id;

using namespace f64_math;

class F64Math {
 public:
  explicit F64Math(spirv::Builder &b) : b_(b), d_(b.t_float(64)) {}

  Id build(UnaryOp op, Id x) {
    switch (op) {
      case UnaryOp::Sin: return sin_cos(x, 0);
      case UnaryOp::Cos: return sin_cos(x, 1);
      case UnaryOp::Tan: return tan(x);
      case UnaryOp::Exp: return exp_with_tail(x, c(0));
      case UnaryOp::Log: return log(x);
      case UnaryOp::Tanh: return tanh(x);
      case UnaryOp::Atan: return atan(x);
      case UnaryOp::Asin: return atan2(x, sqrt_one_minus_sq(x));
      case UnaryOp::Acos: return atan2(sqrt_one_minus_sq(x), x);
      default: return 0;
    }
  }
  Id atan2(Id y, Id x);
  Id pow(Id x, Id y);

 private:
  // NoContraction (GLSL's `precise`) on every operation: the error-free transforms below rely on
  // each one being rounded exactly as written, never fused or reassociated by the driver.
  Id exact(Id v) {
    if (!b_.preserves_ieee()) b_.decorate(v, spirv::Decoration::NoContraction);
    return v;
  }
  Id c(double v) { return b_.c_float(d_, v); }
  Id add(Id x, Id y) { return exact(b_.add(d_, x, y)); }
  Id sub(Id x, Id y) { return exact(b_.sub(d_, x, y)); }
  Id mul(Id x, Id y) { return exact(b_.mul(d_, x, y)); }
  Id div(Id x, Id y) { return exact(b_.div(d_, x, y)); }
  Id neg(Id x) { return exact(b_.neg(d_, x)); }
  Id ext(GLSLstd450 f, std::vector<Id> args) { return exact(b_.glsl(f, d_, args)); }
  Id fma(Id x, Id y, Id z) { return ext(GLSLstd450::Fma, {x, y, z}); }
  Id fabs(Id x) { return ext(GLSLstd450::FAbs, {x}); }
  Id floor(Id x) { return ext(GLSLstd450::Floor, {x}); }
  Id rint(Id x) { return ext(GLSLstd450::RoundEven, {x}); }
  Id sqrt(Id x) { return ext(GLSLstd450::Sqrt, {x}); }
  Id sel(Id cond, Id x, Id y) { return b_.select(d_, cond, x, y); }
  Id lt(Id x, Id y) { return b_.lt(d_, x, y); }
  Id gt(Id x, Id y) { return b_.gt(d_, x, y); }
  Id eq(Id x, Id y) { return b_.eq(d_, x, y); }
  Id ne(Id x, Id y) { return b_.ne(d_, x, y); }
  Id both(Id p, Id q) { return b_.logical_and(p, q); }
  Id either(Id p, Id q) { return b_.logical_or(p, q); }
  Id is_nan(Id x) { return b_.emit(Op::IsNan, b_.t_bool(), x); }
  Id is_inf(Id x) { return eq(fabs(x), c(kInf)); }
  Id is_int(Id x) { return eq(floor(x), x); }  // true for +-inf too
  // The high 32 bits (sign, exponent, top of the mantissa).
  Id words(Id x) { return b_.bitcast(b_.t_vector(b_.t_u32(), 2), x); }
  Id high(Id x) { return b_.extract(b_.t_u32(), words(x), 1); }
  Id signbit(Id x) { return b_.lt(b_.t_i32(), b_.bitcast(b_.t_i32(), high(x)), b_.c_i32(0)); }
  Id copysign(Id mag, Id sign) { return sel(signbit(sign), neg(fabs(mag)), fabs(mag)); }
  Id ldexp(Id x, Id n) { return b_.glsl(GLSLstd450::Ldexp, d_, {x, b_.convert(b_.t_i32(), d_, n)}); }

  // a * b - p exactly, for p = a * b rounded (Dekker's product with Veltkamp's split): GLSL's Fma
  // need not be fused (lavapipe's is not), so it cannot give this error term.
  Id two_prod_err(Id a, Id b, Id p) {
    auto split = [&](Id x, Id &hi, Id &lo) {
      Id t = mul(x, c(134217729.0));  // 2^27 + 1
      hi = sub(t, sub(t, x));
      lo = sub(x, hi);
    };
    Id ah, al, bh, bl;
    split(a, ah, al);
    split(b, bh, bl);
    return add(add(add(sub(mul(ah, bh), p), mul(ah, bl)), mul(al, bh)), mul(al, bl));
  }

  Id horner(Id x, const std::vector<double> &coef) {  // coef[0] + x * (coef[1] + ...)
    Id acc = c(coef.back());
    for (size_t i = coef.size() - 1; i-- > 0;) acc = fma(acc, x, c(coef[i]));
    return acc;
  }

  // x = n * pi/2 + r, |r| <= ~pi/4; q = n mod 4 as a double.
  void reduce_pio2(Id x, Id &r, Id &q) {
    Id n = rint(mul(x, c(k2OverPi)));
    r = sub(sub(sub(x, mul(n, c(kPio2_1))), mul(n, c(kPio2_2))), mul(n, c(kPio2_3)));
    q = sub(n, mul(c(4), floor(mul(n, c(0.25)))));
  }
  Id sin_poly(Id r, Id r2) { return fma(mul(r, r2), horner(r2, inverse_factorials(3, 2, 8, -1, true)), r); }
  Id cos_poly(Id r2) { return horner(r2, inverse_factorials(0, 2, 10, 1, true)); }

  Id sin_cos(Id x, int which) {  // which: 0 sin, 1 cos (one quadrant on)
    Id r, q;
    reduce_pio2(x, r, q);
    Id r2 = mul(r, r), s = sin_poly(r, r2), co = cos_poly(r2);
    if (which == 1) {
      q = add(q, c(1));
      q = sel(eq(q, c(4)), c(0), q);
    }
    Id res = sel(eq(q, c(0)), s, sel(eq(q, c(1)), co, sel(eq(q, c(2)), neg(s), neg(co))));
    // Past |x| ~ 1e6 the reduction loses accuracy; past ~1e22 it is noise: keep that in [-1, 1].
    res = sel(gt(res, c(1)), c(1), sel(lt(res, c(-1)), c(-1), res));
    return which == 0 ? sel(lt(fabs(x), c(0x1p-27)), x, res) : res;  // keeps -0
  }

  Id tan(Id x) {
    Id r, q;
    reduce_pio2(x, r, q);
    Id r2 = mul(r, r), s = sin_poly(r, r2), co = cos_poly(r2);
    Id res = sel(either(eq(q, c(1)), eq(q, c(3))), neg(div(co, s)), div(s, co));
    return sel(lt(fabs(x), c(0x1p-27)), x, res);
  }

  // exp(x) * (1 + tail).
  Id exp_with_tail(Id x, Id tail) {
    Id xc = sel(gt(x, c(1500)), c(1500), sel(lt(x, c(-1500)), c(-1500), x));
    Id n = rint(mul(xc, c(kLog2e)));
    Id r = sub(sub(xc, mul(n, c(kLn2Hi))), mul(n, c(kLn2Lo)));
    Id p = horner(r, inverse_factorials(0, 1, 14, 1, false));
    p = fma(p, tail, p);
    // 2^n in two steps: Ldexp's result may not be defined past the exponent range in one.
    Id half = floor(mul(n, c(0.5)));
    Id res = ldexp(ldexp(p, half), sub(n, half));
    return sel(is_nan(x), x, res);
  }

  // x = 2^e * (1 + f), 1 + f in [sqrt(1/2), sqrt(2)); log(1 + f) = f - t with t = s (f - R).
  struct LogParts {
    Id e, f, t, t_lo;
  };
  LogParts log_parts(Id x) {
    Id u32 = b_.t_u32();
    Id tiny = lt(x, c(0x1p-1022));  // subnormals: scaled into the normal range first
    Id xs = sel(tiny, mul(x, c(0x1p54)), x);
    Id w = words(xs);
    Id hi = b_.extract(u32, w, 1), lo = b_.extract(u32, w, 0);
    Id biased = b_.bit_and(u32, b_.shr(u32, hi, b_.c_u32(20)), b_.c_u32(0x7ff));
    Id e = sub(b_.convert(d_, u32, biased), sel(tiny, c(1023 + 54), c(1023)));
    Id mhi = b_.bit_or(u32, b_.bit_and(u32, hi, b_.c_u32(0x000fffff)), b_.c_u32(0x3ff00000));
    Id m = b_.bitcast(d_, b_.emit(Op::CompositeConstruct, b_.t_vector(u32, 2), lo, mhi));  // [1, 2)
    Id big = gt(m, c(kSqrt2));
    m = sel(big, mul(m, c(0.5)), m);
    e = sel(big, add(e, c(1)), e);
    Id f = sub(m, c(1)), dd = add(c(2), f);
    Id s = div(f, dd), s2 = mul(s, s);
    Id big_r = mul(s2, horner(s2, odd_reciprocals(11, 2, false)));
    Id g = sub(f, big_r), t = mul(s, g);
    // Error-free transforms: 2 + f = dd + dd_lo, f / (2 + f) = s + s_lo, f - R = g + g_lo.
    Id dd_lo = add(sub(c(2), dd), f);
    Id sd = mul(s, dd);
    Id s_lo = div(sub(sub(sub(f, sd), two_prod_err(s, dd, sd)), mul(s, dd_lo)), dd);
    Id g_lo = sub(sub(f, g), big_r);
    Id t_lo = add(two_prod_err(s, g, t), add(mul(s, g_lo), mul(s_lo, g)));
    return {e, f, t, t_lo};
  }
  Id log_specials(Id x, Id finite) {
    Id res = sel(eq(x, c(kInf)), c(kInf), finite);
    res = sel(lt(x, c(0)), c(kNaN), res);
    res = sel(eq(x, c(0)), c(-kInf), res);
    return sel(is_nan(x), x, res);
  }
  Id log(Id x) {
    LogParts p = log_parts(x);
    return log_specials(x, add(mul(p.e, c(kLn2Hi)), add(sub(p.f, p.t), mul(p.e, c(kLn2Lo)))));
  }
  // log(x) = hi + lo, well below an ulp of error, for pow.
  void log_dd(Id x, Id &hi, Id &lo) {
    LogParts p = log_parts(x);
    Id a = mul(p.e, c(kLn2Hi));
    Id s = add(a, p.f), bb = sub(s, a);
    Id err = add(sub(a, sub(s, bb)), sub(p.f, bb));
    err = add(err, sub(sub(mul(p.e, c(kLn2Lo)), p.t), p.t_lo));
    hi = add(s, err);
    lo = sub(err, sub(hi, s));
    Id finite = both(gt(x, c(0)), lt(x, c(kInf)));
    hi = log_specials(x, hi);
    lo = sel(finite, lo, c(0));
  }

  Id tanh(Id x) {
    Id a = fabs(x), u = mul(c(2), a);
    Id em1 = mul(u, horner(u, inverse_factorials(1, 1, 18, 1, false)));  // expm1(2|x|), |x| < 0.5
    Id small = div(em1, add(em1, c(2)));
    Id large = sub(c(1), div(c(2), add(exp_with_tail(u, c(0)), c(1))));
    return copysign(sel(lt(a, c(0.5)), small, large), x);
  }

  // atan on [0, 1]: above tan(pi/12), pi/6 + atan((sqrt3 t - 1) / (sqrt3 + t)).
  Id atan_unit(Id t) {
    Id red = gt(t, c(kTanPi_12));
    Id u = sel(red, div(fma(t, c(kSqrt3), c(-1)), add(c(kSqrt3), t)), t);
    Id u2 = mul(u, u);
    Id p = fma(mul(u, u2), horner(u2, odd_reciprocals(14, 1, true)), u);
    return sel(red, add(c(kPi_6), p), p);
  }
  Id atan(Id x) {
    Id a = fabs(x), inv = gt(a, c(1));
    Id p = atan_unit(sel(inv, div(c(1), a), a));
    return copysign(sel(inv, sub(c(kPi_2), p), p), x);
  }
  Id sqrt_one_minus_sq(Id x) { return sqrt(mul(sub(c(1), x), add(c(1), x))); }

  spirv::Builder &b_;
  Id d_;
};

Id F64Math::atan2(Id y, Id x) {
  Id ax = fabs(x), ay = fabs(y);
  Id swap = gt(ay, ax);
  Id a = atan_unit(div(sel(swap, ax, ay), sel(swap, ay, ax)));
  a = sel(swap, sub(c(kPi_2), a), a);
  Id west = signbit(x);
  a = sel(west, sub(c(kPi), a), a);
  a = sel(both(eq(ax, c(0)), eq(ay, c(0))), sel(west, c(kPi), c(0)), a);  // C99's 0/0 and inf/inf angles
  a = sel(both(is_inf(ax), is_inf(ay)), sel(west, c(k3Pi_4), c(kPi_4)), a);
  return sel(either(is_nan(x), is_nan(y)), add(x, y), copysign(a, y));
}

Id F64Math::pow(Id x, Id y) {
  Id lh, ll;
  log_dd(fabs(x), lh, ll);
  Id zh = mul(y, lh);
  Id zl = add(two_prod_err(y, lh, zh), mul(y, ll));  // y log|x| = zh + zl
  // No tail where the result is 0 or inf anyway, for inf and NaN, or where the split overflowed
  // (|y| > 2^996).
  zl = sel(both(lt(fabs(zh), c(746)), b_.logical_not(is_nan(zl))), zl, c(0));
  Id r = exp_with_tail(zh, zl);
  Id half = mul(y, c(0.5));
  Id y_odd = both(is_int(y), ne(floor(half), half));
  r = sel(both(signbit(x), y_odd), neg(r), r);
  Id neg_finite = both(lt(x, c(0)), gt(x, c(-kInf)));  // needs an integer exponent (C99 pow)
  r = sel(both(neg_finite, b_.logical_not(is_int(y))), c(kNaN), r);
  Id one = either(either(eq(x, c(1)), eq(y, c(0))), both(eq(x, c(-1)), is_inf(y)));
  return sel(one, c(1), r);
}

}  // namespace

SpirvCodegen::Id SpirvCodegen::f64_unary(UnaryOp op, Id x) { return F64Math(b_).build(op, x); }

SpirvCodegen::Id SpirvCodegen::f64_atan2(Id y, Id x) { return F64Math(b_).atan2(y, x); }

SpirvCodegen::Id SpirvCodegen::f64_pow(Id x, Id y) { return F64Math(b_).pow(x, y); }

}  // namespace qd
