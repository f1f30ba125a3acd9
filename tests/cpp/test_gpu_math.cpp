// The GPU targets' in-module math (codegen/llvm/gpu_math): the same LLVM IR is JIT-compiled for
// the host here and compared with the C library, in ulps, on ordinary and special arguments.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <llvm/IR/IRBuilder.h>

#include "codegen/llvm/gpu_math.h"
#include "runtime/cpu/cpu_jit.h"

namespace {

using F1 = double (*)(double);
using F2 = double (*)(double, double);
using F1f = float (*)(float);

// JITs `qd_test_<name>` (f64 and, as `..._f32`, f32 wrappers) around the in-module math function.
class MathJit {
 public:
  void *get(const std::string &name, bool f32) {
    auto ctx = std::make_unique<llvm::LLVMContext>();
    auto m = std::make_unique<llvm::Module>("math", *ctx);
    llvm::IRBuilder<> b(*ctx);
    llvm::Type *t = f32 ? b.getFloatTy() : b.getDoubleTy();
    unsigned n = (name == "pow" || name == "atan2") ? 2 : 1;
    std::string sym = "qd_test_" + name + (f32 ? "_f32" : "") + std::to_string(counter_++);
    auto *fn = llvm::Function::Create(llvm::FunctionType::get(t, std::vector<llvm::Type *>(n, t), false),
                                      llvm::Function::ExternalLinkage, sym, *m);
    b.SetInsertPoint(llvm::BasicBlock::Create(*ctx, "entry", fn));
    std::vector<llvm::Value *> args;
    for (auto &a : fn->args()) args.push_back(&a);
    b.CreateRet(qd::llvm_gpu::emit_math_call(b, *m, name, args));
    qd::CpuJit::optimize_for_host(*m);
    jit_.add(std::move(m), std::move(ctx));
    return jit_.lookup(sym);
  }

 private:
  qd::CpuJit jit_;
  int counter_ = 0;
};

MathJit &jit() {
  static MathJit j;
  return j;
}

// Distance in ulps between two doubles (0 when both are NaN or they are equal, +-0 included).
double ulps(double got, double want) {
  if (std::isnan(got) && std::isnan(want)) return 0;
  if (got == want) return 0;
  if (std::isnan(got) || std::isnan(want) || std::isinf(got) || std::isinf(want)) return 1e300;
  auto key = [](double d) {
    int64_t i;
    std::memcpy(&i, &d, 8);
    return i < 0 ? INT64_MIN - i : i;  // monotonic in d
  };
  int64_t a = key(got), b = key(want);
  return static_cast<double>(a > b ? static_cast<uint64_t>(a) - static_cast<uint64_t>(b)
                                   : static_cast<uint64_t>(b) - static_cast<uint64_t>(a));
}

std::vector<double> samples(double lo, double hi, int n, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v;
  for (int i = 0; i < n; i++) v.push_back(u(rng));
  return v;
}

const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();
const std::vector<double> kSpecials = {0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, 1e-310, -1e-310, 1e-20, 1e300,
                                       -1e300, kInf, -kInf, kNaN, 710.0, -745.5, 3.0, -3.0};

double worst_unary(const std::string &name, double (*ref)(double), const std::vector<double> &xs) {
  auto f = reinterpret_cast<F1>(jit().get(name, false));
  double worst = 0;
  for (double x : xs) {
    double e = ulps(f(x), ref(x));
    if (e > worst) {
      worst = e;
      UNSCOPED_INFO(name << "(" << x << ") = " << f(x) << ", libm " << ref(x) << ": " << e << " ulp");
    }
  }
  return worst;
}

std::vector<double> with_specials(std::vector<double> v) {
  v.insert(v.end(), kSpecials.begin(), kSpecials.end());
  return v;
}

}  // namespace

TEST_CASE("gpu math: sin cos tan within 2 ulp for |x| < 1e5", "[gpu][math]") {
  auto xs = with_specials(samples(-10, 10, 4000, 1));
  auto big = samples(-1e5, 1e5, 2000, 2);
  xs.insert(xs.end(), big.begin(), big.end());
  xs.erase(std::remove_if(xs.begin(), xs.end(), [](double x) { return std::abs(x) > 1e5 && std::isfinite(x); }),
           xs.end());
  CHECK(worst_unary("sin", [](double x) { return std::sin(x); }, xs) <= 2);
  CHECK(worst_unary("cos", [](double x) { return std::cos(x); }, xs) <= 2);
  CHECK(worst_unary("tan", [](double x) { return std::tan(x); }, xs) <= 3);
}

TEST_CASE("gpu math: exp log within 2 ulp, tanh within 3", "[gpu][math]") {
  auto xs = with_specials(samples(-745, 709, 4000, 3));
  CHECK(worst_unary("exp", [](double x) { return std::exp(x); }, xs) <= 2);
  auto pos = with_specials(samples(0, 1e6, 2000, 4));
  auto small = samples(1e-300, 3, 2000, 5);
  pos.insert(pos.end(), small.begin(), small.end());
  CHECK(worst_unary("log", [](double x) { return std::log(x); }, pos) <= 2);
  auto t = with_specials(samples(-25, 25, 4000, 6));
  auto t_small = samples(-0.6, 0.6, 2000, 7);
  t.insert(t.end(), t_small.begin(), t_small.end());
  CHECK(worst_unary("tanh", [](double x) { return std::tanh(x); }, t) <= 3);
}

TEST_CASE("gpu math: atan asin acos atan2 within 3 ulp", "[gpu][math]") {
  auto xs = with_specials(samples(-50, 50, 3000, 8));
  CHECK(worst_unary("atan", [](double x) { return std::atan(x); }, xs) <= 3);
  auto unit = with_specials(samples(-1, 1, 3000, 9));
  CHECK(worst_unary("asin", [](double x) { return std::asin(x); }, unit) <= 3);
  CHECK(worst_unary("acos", [](double x) { return std::acos(x); }, unit) <= 3);
  auto f = reinterpret_cast<F2>(jit().get("atan2", false));
  double worst = 0;
  auto ys = with_specials(samples(-5, 5, 60, 10));
  for (double y : ys)
    for (double x : ys) {
      double e = ulps(f(y, x), std::atan2(y, x));
      if (e > worst) UNSCOPED_INFO("atan2(" << y << ", " << x << ") = " << f(y, x) << " vs " << std::atan2(y, x));
      worst = std::max(worst, e);
    }
  CHECK(worst <= 3);
}

TEST_CASE("gpu math: pow within 4 ulp, C99 special cases", "[gpu][math]") {
  auto f = reinterpret_cast<F2>(jit().get("pow", false));
  double worst = 0;
  auto check = [&](double x, double y) {
    double e = ulps(f(x, y), std::pow(x, y));
    if (e > worst) UNSCOPED_INFO("pow(" << x << ", " << y << ") = " << f(x, y) << " vs " << std::pow(x, y));
    worst = std::max(worst, e);
  };
  auto xs = samples(0, 100, 300, 11), ys = samples(-60, 60, 30, 12);
  for (double x : xs)
    for (double y : ys) check(x, y);
  for (double x : samples(-10, 10, 200, 13))
    for (double y : {2.0, 3.0, -3.0, 0.5, 7.0, 10.0}) check(x, y);
  for (double x : kSpecials)
    for (double y : {0.0, -0.0, 1.0, -1.0, 2.0, 3.0, -3.0, 0.5, -0.5, kInf, -kInf, kNaN, 1e300}) check(x, y);
  // Next to overflow and underflow (|y log x| in [708, 746)) the result still needs the tail term.
  for (double y : samples(1021.5, 1023.99, 40, 14)) check(2.0, y), check(0.5, y);
  for (double y : samples(-1074.5, -1020, 40, 15)) check(2.0, y);
  CHECK(worst <= 4);
}

TEST_CASE("gpu math: f32 arguments go through f64 and round once", "[gpu][math]") {
  auto f = reinterpret_cast<F1f>(jit().get("sin", true));
  auto g = reinterpret_cast<F1f>(jit().get("exp", true));
  for (float x : {0.0f, 0.5f, -1.25f, 3.0f, 100.0f, 1e-30f}) {
    CHECK(f(x) == static_cast<float>(std::sin(static_cast<double>(x))));
    CHECK(g(x) == static_cast<float>(std::exp(static_cast<double>(x))));
  }
}
