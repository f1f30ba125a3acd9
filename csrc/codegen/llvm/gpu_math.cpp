// In-module f64 math for the GPU targets (see gpu_math.h). Everything is straight-line code with
// selects, so it costs no divergence; special values (NaN, +-inf, +-0) are patched in at the end
// of each function.
#include "codegen/llvm/gpu_math.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>

#include <cmath>
#include <limits>

#include "codegen/f64_math_constants.h"

namespace qd::llvm_gpu {

namespace {

using llvm::Value;

using namespace f64_math;

class MathBuilder {
 public:
  explicit MathBuilder(llvm::IRBuilderBase &b) : b_(b) {}

  Value *build(const std::string &name, const std::vector<Value *> &a) {
    if (name == "sin") return sin_cos(a[0], 0);
    if (name == "cos") return sin_cos(a[0], 1);
    if (name == "tan") return tan(a[0]);
    if (name == "exp") return exp(a[0]);
    if (name == "log") return log(a[0]);
    if (name == "tanh") return tanh(a[0]);
    if (name == "atan") return atan(a[0]);
    if (name == "atan2") return atan2(a[0], a[1]);
    if (name == "asin") return atan2(a[0], sqrt_one_minus_sq(a[0]));
    if (name == "acos") return atan2(sqrt_one_minus_sq(a[0]), a[0]);
    if (name == "pow") return pow(a[0], a[1]);
    return nullptr;
  }

 private:
  // ------------------------------------------------------------------ small helpers
  Value *c(double v) { return llvm::ConstantFP::get(b_.getDoubleTy(), v); }
  Value *add(Value *x, Value *y) { return b_.CreateFAdd(x, y); }
  Value *sub(Value *x, Value *y) { return b_.CreateFSub(x, y); }
  Value *mul(Value *x, Value *y) { return b_.CreateFMul(x, y); }
  Value *div(Value *x, Value *y) { return b_.CreateFDiv(x, y); }
  Value *neg(Value *x) { return b_.CreateFNeg(x); }
  Value *fma(Value *x, Value *y, Value *z) {
    return b_.CreateIntrinsic(llvm::Intrinsic::fma, {b_.getDoubleTy()}, {x, y, z});
  }
  Value *fabs(Value *x) { return b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x); }
  Value *floor(Value *x) { return b_.CreateUnaryIntrinsic(llvm::Intrinsic::floor, x); }
  Value *rint(Value *x) { return b_.CreateUnaryIntrinsic(llvm::Intrinsic::rint, x); }
  Value *sqrt(Value *x) { return b_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, x); }
  Value *copysign(Value *mag, Value *sign) {
    return b_.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, mag, sign);
  }
  Value *sel(Value *cond, Value *x, Value *y) { return b_.CreateSelect(cond, x, y); }
  Value *lt(Value *x, Value *y) { return b_.CreateFCmpOLT(x, y); }
  Value *gt(Value *x, Value *y) { return b_.CreateFCmpOGT(x, y); }
  Value *eq(Value *x, Value *y) { return b_.CreateFCmpOEQ(x, y); }
  Value *ne(Value *x, Value *y) { return b_.CreateFCmpUNE(x, y); }
  Value *is_nan(Value *x) { return b_.CreateFCmpUNO(x, x); }
  Value *is_inf(Value *x) { return eq(fabs(x), c(kInf)); }
  Value *signbit(Value *x) {
    return b_.CreateICmpSLT(b_.CreateBitCast(x, b_.getInt64Ty()), b_.getInt64(0));
  }
  Value *both(Value *p, Value *q) { return b_.CreateAnd(p, q); }
  Value *either(Value *p, Value *q) { return b_.CreateOr(p, q); }
  Value *is_int(Value *x) { return eq(floor(x), x); }  // true for +-inf too

  // coef[0] + x * (coef[1] + x * (...)), with fused multiply-adds.
  Value *horner(Value *x, const std::vector<double> &coef) {
    Value *acc = c(coef.back());
    for (size_t i = coef.size() - 1; i-- > 0;) acc = fma(acc, x, c(coef[i]));
    return acc;
  }

  // ------------------------------------------------------------------ sin, cos, tan
  // x = n * pi/2 + r with |r| <= ~pi/4; q = n mod 4 as a double (NaN for an infinite x).
  void reduce_pio2(Value *x, Value *&r, Value *&q) {
    Value *n = rint(mul(x, c(k2OverPi)));
    r = sub(sub(sub(x, mul(n, c(kPio2_1))), mul(n, c(kPio2_2))), mul(n, c(kPio2_3)));
    q = sub(n, mul(c(4), floor(mul(n, c(0.25)))));
  }
  Value *sin_poly(Value *r, Value *r2) {  // |r| <= pi/4: the first omitted term is below 2^-60
    return fma(mul(r, r2), horner(r2, inverse_factorials(3, 2, 8, -1, true)), r);
  }
  Value *cos_poly(Value *r2) { return horner(r2, inverse_factorials(0, 2, 10, 1, true)); }

  // which = 0: sin, 1: cos (cos(x) = sin(x + pi/2) shifts the quadrant by one).
  Value *sin_cos(Value *x, int which) {
    Value *r, *q;
    reduce_pio2(x, r, q);
    Value *r2 = mul(r, r);
    Value *s = sin_poly(r, r2), *co = cos_poly(r2);
    if (which == 1) {
      q = add(q, c(1));
      q = sel(eq(q, c(4)), c(0), q);
    }
    Value *res = sel(eq(q, c(0)), s, sel(eq(q, c(1)), co, sel(eq(q, c(2)), neg(s), neg(co))));
    // sin(x) rounds to x below 2^-27, which also keeps the sign of -0.
    return which == 0 ? sel(lt(fabs(x), c(0x1p-27)), x, res) : res;
  }

  Value *tan(Value *x) {
    Value *r, *q;
    reduce_pio2(x, r, q);
    Value *r2 = mul(r, r);
    Value *s = sin_poly(r, r2), *co = cos_poly(r2);
    Value *odd = either(eq(q, c(1)), eq(q, c(3)));
    Value *res = sel(odd, neg(div(co, s)), div(s, co));
    return sel(lt(fabs(x), c(0x1p-27)), x, res);
  }

  // ------------------------------------------------------------------ exp, log
  // exp(x) * (1 + tail), for |tail| tiny; tail = 0 when there is none.
  Value *exp_with_tail(Value *x, Value *tail) {
    // Clamping keeps n in int range; exp(+-1500) already over/underflows. NaN fails both tests.
    Value *xc = sel(gt(x, c(1500)), c(1500), sel(lt(x, c(-1500)), c(-1500), x));
    Value *n = rint(mul(xc, c(kLog2e)));
    Value *r = sub(sub(xc, mul(n, c(kLn2Hi))), mul(n, c(kLn2Lo)));  // |r| <= ~0.347
    Value *p = horner(r, inverse_factorials(0, 1, 14, 1, false));
    p = fma(p, tail, p);
    Value *ni = b_.CreateFPToSI(n, b_.getInt32Ty());
    Value *res = b_.CreateIntrinsic(llvm::Intrinsic::ldexp, {b_.getDoubleTy(), b_.getInt32Ty()}, {p, ni});
    return sel(is_nan(x), x, res);
  }
  Value *exp(Value *x) { return exp_with_tail(x, c(0)); }

  // For finite x > 0: log(x) = e*ln2 + f - t exactly up to rounding in t (|t| < 0.07 |f|),
  // from x = 2^e * (1 + f), 1 + f in [sqrt(1/2), sqrt(2)), s = f / (2 + f),
  // log(1 + f) = 2 atanh(s) = f - s*(f - R), R = sum 2 s^2k / (2k + 1).
  struct LogParts {
    Value *e, *f, *t, *t_lo;  // t_lo: most of t's rounding error, for log_dd
  };
  LogParts log_parts(Value *x) {
    Value *tiny = lt(x, c(0x1p-1022));  // subnormals: scale into the normal range first
    Value *xs = sel(tiny, mul(x, c(0x1p54)), x);
    Value *bits = b_.CreateBitCast(xs, b_.getInt64Ty());
    Value *biased = b_.CreateAnd(b_.CreateLShr(bits, 52), 0x7ff);
    Value *e = b_.CreateSIToFP(b_.CreateSub(biased, sel(tiny, b_.getInt64(1023 + 54), b_.getInt64(1023))),
                               b_.getDoubleTy());
    Value *mbits = b_.CreateOr(b_.CreateAnd(bits, 0x000fffffffffffffULL), 0x3ff0000000000000ULL);
    Value *m = b_.CreateBitCast(mbits, b_.getDoubleTy());  // in [1, 2)
    Value *big = gt(m, c(kSqrt2));
    m = sel(big, mul(m, c(0.5)), m);
    e = sel(big, add(e, c(1)), e);
    Value *f = sub(m, c(1));
    Value *d = add(c(2), f);
    Value *s = div(f, d);
    Value *s2 = mul(s, s);
    Value *big_r = mul(s2, horner(s2, odd_reciprocals(11, 2, false)));
    Value *g = sub(f, big_r);
    Value *t = mul(s, g);
    // Error terms (error-free transforms): 2 + f = d + d_lo, f/(2 + f) = s + s_lo, f - R = g + g_lo.
    Value *d_lo = add(sub(c(2), d), f);
    Value *s_lo = div(sub(fma(neg(s), d, f), mul(s, d_lo)), d);
    Value *g_lo = sub(sub(f, g), big_r);
    Value *t_lo = add(fma(s, g, neg(t)), add(mul(s, g_lo), mul(s_lo, g)));
    return {e, f, t, t_lo};
  }
  // log's values at 0, negatives, +inf and NaN, else `finite`.
  Value *log_specials(Value *x, Value *finite) {
    Value *res = sel(eq(x, c(kInf)), c(kInf), finite);
    res = sel(lt(x, c(0)), c(kNaN), res);
    res = sel(eq(x, c(0)), c(-kInf), res);
    return sel(is_nan(x), x, res);
  }
  Value *log(Value *x) {
    LogParts p = log_parts(x);
    Value *res = add(mul(p.e, c(kLn2Hi)), add(sub(p.f, p.t), mul(p.e, c(kLn2Lo))));
    return log_specials(x, res);
  }
  // log(x) as hi + lo, well below an ulp of error: what pow needs to stay within a few ulp.
  void log_dd(Value *x, Value *&hi, Value *&lo) {
    LogParts p = log_parts(x);
    Value *a = mul(p.e, c(kLn2Hi));  // exact
    Value *s = add(a, p.f);           // two-sum of a and f
    Value *bb = sub(s, a);
    Value *err = add(sub(a, sub(s, bb)), sub(p.f, bb));
    err = add(err, sub(sub(mul(p.e, c(kLn2Lo)), p.t), p.t_lo));
    hi = add(s, err);
    lo = sub(err, sub(hi, s));
    Value *finite = both(gt(x, c(0)), lt(x, c(kInf)));
    hi = log_specials(x, hi);
    lo = sel(finite, lo, c(0));
  }

  // ------------------------------------------------------------------ pow
  Value *pow(Value *x, Value *y) {
    Value *lh, *ll;
    log_dd(fabs(x), lh, ll);
    Value *zh = mul(y, lh);
    Value *zl = add(fma(y, lh, neg(zh)), mul(y, ll));  // y*log|x| = zh + zl
    // The tail matters up to the overflow/underflow edge (|y*log x| < 746); drop it beyond, and for inf/NaN.
    zl = sel(both(lt(fabs(zh), c(746)), b_.CreateNot(is_nan(zl))), zl, c(0));
    Value *r = exp_with_tail(zh, zl);
    Value *half = mul(y, c(0.5));
    Value *y_odd = both(is_int(y), ne(floor(half), half));
    r = sel(both(signbit(x), y_odd), neg(r), r);
    // A finite negative base needs an integer exponent (-0 and -inf do not: C99 pow).
    Value *neg_finite = both(lt(x, c(0)), gt(x, c(-kInf)));
    r = sel(both(neg_finite, b_.CreateNot(is_int(y))), c(kNaN), r);
    // pow(1, y) = pow(x, +-0) = pow(-1, +-inf) = 1, NaN operands included.
    Value *one = either(eq(x, c(1)), eq(y, c(0)));
    one = either(one, both(eq(x, c(-1)), is_inf(y)));
    return sel(one, c(1), r);
  }

  // ------------------------------------------------------------------ tanh
  Value *tanh(Value *x) {
    Value *a = fabs(x), *u = mul(c(2), a);
    // |x| < 0.5: tanh = expm1(2|x|) / (expm1(2|x|) + 2), expm1 by its series (no cancellation).
    Value *em1 = mul(u, horner(u, inverse_factorials(1, 1, 18, 1, false)));
    Value *small = div(em1, add(em1, c(2)));
    Value *large = sub(c(1), div(c(2), add(exp(u), c(1))));
    return copysign(sel(lt(a, c(0.5)), small, large), x);
  }

  // ------------------------------------------------------------------ atan, atan2, asin, acos
  // atan for t in [0, 1]: t > tan(pi/12) moves to pi/6 + atan((sqrt3 t - 1) / (sqrt3 + t)).
  Value *atan_unit(Value *t) {
    Value *red = gt(t, c(kTanPi_12));
    Value *u = sel(red, div(fma(t, c(kSqrt3), c(-1)), add(c(kSqrt3), t)), t);
    Value *u2 = mul(u, u);
    Value *p = fma(mul(u, u2), horner(u2, odd_reciprocals(14, 1, true)), u);
    return sel(red, add(c(kPi_6), p), p);
  }
  Value *atan(Value *x) {
    Value *a = fabs(x);
    Value *inv = gt(a, c(1));
    Value *p = atan_unit(sel(inv, div(c(1), a), a));
    return copysign(sel(inv, sub(c(kPi_2), p), p), x);
  }
  Value *atan2(Value *y, Value *x) {
    Value *ax = fabs(x), *ay = fabs(y);
    Value *swap = gt(ay, ax);
    Value *a = atan_unit(div(sel(swap, ax, ay), sel(swap, ay, ax)));
    a = sel(swap, sub(c(kPi_2), a), a);
    Value *west = signbit(x);
    a = sel(west, sub(c(kPi), a), a);
    // 0/0 and inf/inf have no quotient: their angles by the C99 rules.
    a = sel(both(eq(ax, c(0)), eq(ay, c(0))), sel(west, c(kPi), c(0)), a);
    a = sel(both(is_inf(ax), is_inf(ay)), sel(west, c(k3Pi_4), c(kPi_4)), a);
    return sel(either(is_nan(x), is_nan(y)), add(x, y), copysign(a, y));
  }
  // sqrt(1 - x^2) as sqrt((1 - x)(1 + x)): exact factors near |x| = 1; NaN for |x| > 1.
  Value *sqrt_one_minus_sq(Value *x) { return sqrt(mul(sub(c(1), x), add(c(1), x))); }

  llvm::IRBuilderBase &b_;
};

unsigned arity(const std::string &name) {
  static const char *unary[] = {"sin", "cos", "tan", "exp", "log", "tanh", "asin", "acos", "atan"};
  for (const char *n : unary)
    if (name == n) return 1;
  return name == "atan2" || name == "pow" ? 2 : 0;
}

llvm::Function *define(llvm::Module &m, const std::string &name) {
  std::string symbol = "qd_math_" + name;
  if (llvm::Function *fn = m.getFunction(symbol)) return fn;
  llvm::LLVMContext &ctx = m.getContext();
  llvm::Type *d = llvm::Type::getDoubleTy(ctx);
  auto *fty = llvm::FunctionType::get(d, std::vector<llvm::Type *>(arity(name), d), false);
  auto *fn = llvm::Function::Create(fty, llvm::Function::InternalLinkage, symbol, m);
  fn->setDoesNotAccessMemory();
  fn->setDoesNotThrow();
  fn->addFnAttr(llvm::Attribute::WillReturn);
  llvm::IRBuilder<> fb(llvm::BasicBlock::Create(ctx, "entry", fn));
  std::vector<Value *> args;
  for (llvm::Argument &a : fn->args()) args.push_back(&a);
  fb.CreateRet(MathBuilder(fb).build(name, args));
  return fn;
}

}  // namespace

bool has_gpu_math(const std::string &name) { return arity(name) != 0; }

llvm::Value *emit_math_call(llvm::IRBuilderBase &b, llvm::Module &m, const std::string &name,
                            const std::vector<llvm::Value *> &args) {
  if (!has_gpu_math(name) || args.size() != arity(name)) return nullptr;
  llvm::Type *ty = args[0]->getType();
  if (!ty->isFloatingPointTy()) return nullptr;
  std::vector<Value *> wide;
  for (Value *a : args) wide.push_back(ty->isDoubleTy() ? a : b.CreateFPExt(a, b.getDoubleTy()));
  Value *r = b.CreateCall(define(m, name), wide);
  return ty->isDoubleTy() ? r : b.CreateFPTrunc(r, ty);
}

}  // namespace qd::llvm_gpu
