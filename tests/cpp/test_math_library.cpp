// The math library legalization builds for targets without one (transforms/math_library.cpp:
// sin ... pow on NVPTX, AMDGPU, and f64 on SPIR-V): the same IR runs here on the cpu with its
// "libm" feature disabled, compared with the C library in ulps on ordinary and special arguments.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ir/builder.h"
#include "runtime/runtime.h"

namespace {

using qd::BinaryOp;
using qd::DataType;
using qd::UnaryOp;

// Runs out[i] = op(x[i]) (or op(x[i], y[i]) for pow / atan2) for every i, in type t, on a cpu
// that builds the math library into the kernel.
class SoftMath {
 public:
  SoftMath() : rt_(qd::create_runtime(qd::Backend::Cpu, options())) {}

  std::vector<double> run(int op, bool binary, const std::vector<double> &x, const std::vector<double> &y = {},
                          DataType t = DataType::f64) {
    int64_t n = static_cast<int64_t>(x.size());
    qd::Builder b("math", qd::TypeConfig{});
    int in0 = b.add_field(0, DataType::f64, {n}, "x"), in1 = b.add_field(1, DataType::f64, {n}, "y");
    int out = b.add_field(2, DataType::f64, {n}, "out");
    qd::Stmt *loop = b.begin_range_for(b.const_int(DataType::i32, 0), b.const_int(DataType::i32, n), false, 0);
    qd::Stmt *i = b.loop_index(loop);
    qd::Stmt *a = b.cast(b.global_load(b.global_ptr(in0, {i}), false), t);
    qd::Stmt *r = binary ? b.binary(static_cast<BinaryOp>(op), a, b.cast(b.global_load(b.global_ptr(in1, {i}), false), t))
                         : b.unary(static_cast<UnaryOp>(op), a);
    b.global_store(b.global_ptr(out, {i}), b.cast(r, DataType::f64));
    b.end_range_for(loop);
    auto k = rt_->compile(b.finish());
    ir_ = k->artifacts.at("llvm_ir");
    size_t bytes = x.size() * 8;
    uint64_t mx = rt_->allocate(bytes), my = rt_->allocate(bytes), mo = rt_->allocate(bytes);
    rt_->write(mx, 0, x.data(), bytes);
    if (binary) rt_->write(my, 0, y.data(), bytes);
    rt_->launch(*k, {mx, my, mo}, {});
    std::vector<double> result(x.size());
    rt_->read(mo, 0, result.data(), bytes);
    for (uint64_t m : {mx, my, mo}) rt_->deallocate(m);
    return result;
  }
  const std::string &llvm_ir() const { return ir_; }

 private:
  static qd::RuntimeOptions options() {
    qd::RuntimeOptions o;
    o.disabled_caps = {qd::Cap::libm};
    return o;
  }
  std::unique_ptr<qd::Runtime> rt_;
  std::string ir_;
};

SoftMath &soft() {
  static SoftMath m;
  return m;
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

double worst_unary(UnaryOp op, const char *name, double (*ref)(double), const std::vector<double> &xs) {
  std::vector<double> got = soft().run(static_cast<int>(op), false, xs);
  double worst = 0;
  for (size_t i = 0; i < xs.size(); i++) {
    double e = ulps(got[i], ref(xs[i]));
    if (e > worst) {
      worst = e;
      UNSCOPED_INFO(name << "(" << xs[i] << ") = " << got[i] << ", libm " << ref(xs[i]) << ": " << e << " ulp");
    }
  }
  return worst;
}

// The worst error of op(x, y) over the pairs, in ulps.
double worst_binary(BinaryOp op, const char *name, double (*ref)(double, double), const std::vector<double> &xs,
                    const std::vector<double> &ys) {
  std::vector<double> got = soft().run(static_cast<int>(op), true, xs, ys);
  double worst = 0;
  for (size_t i = 0; i < xs.size(); i++) {
    double e = ulps(got[i], ref(xs[i], ys[i]));
    if (e > worst) {
      worst = e;
      UNSCOPED_INFO(name << "(" << xs[i] << ", " << ys[i] << ") = " << got[i] << " vs " << ref(xs[i], ys[i]));
    }
  }
  return worst;
}

std::vector<double> with_specials(std::vector<double> v) {
  v.insert(v.end(), kSpecials.begin(), kSpecials.end());
  return v;
}

}  // namespace

TEST_CASE("math library: sin cos tan within 2 ulp for |x| < 1e5", "[math]") {
  auto xs = with_specials(samples(-10, 10, 4000, 1));
  auto big = samples(-1e5, 1e5, 2000, 2);
  xs.insert(xs.end(), big.begin(), big.end());
  xs.erase(std::remove_if(xs.begin(), xs.end(), [](double x) { return std::abs(x) > 1e5 && std::isfinite(x); }),
           xs.end());
  CHECK(worst_unary(UnaryOp::Sin, "sin", [](double x) { return std::sin(x); }, xs) <= 2);
  CHECK(worst_unary(UnaryOp::Cos, "cos", [](double x) { return std::cos(x); }, xs) <= 2);
  CHECK(worst_unary(UnaryOp::Tan, "tan", [](double x) { return std::tan(x); }, xs) <= 3);
}

TEST_CASE("math library: exp log within 2 ulp, tanh within 3", "[math]") {
  auto xs = with_specials(samples(-745, 709, 4000, 3));
  CHECK(worst_unary(UnaryOp::Exp, "exp", [](double x) { return std::exp(x); }, xs) <= 2);
  auto pos = with_specials(samples(0, 1e6, 2000, 4));
  auto small = samples(1e-300, 3, 2000, 5);
  pos.insert(pos.end(), small.begin(), small.end());
  CHECK(worst_unary(UnaryOp::Log, "log", [](double x) { return std::log(x); }, pos) <= 2);
  auto t = with_specials(samples(-25, 25, 4000, 6));
  auto t_small = samples(-0.6, 0.6, 2000, 7);
  t.insert(t.end(), t_small.begin(), t_small.end());
  CHECK(worst_unary(UnaryOp::Tanh, "tanh", [](double x) { return std::tanh(x); }, t) <= 3);
}

TEST_CASE("math library: atan asin acos atan2 within 3 ulp", "[math]") {
  auto xs = with_specials(samples(-50, 50, 3000, 8));
  CHECK(worst_unary(UnaryOp::Atan, "atan", [](double x) { return std::atan(x); }, xs) <= 3);
  auto unit = with_specials(samples(-1, 1, 3000, 9));
  CHECK(worst_unary(UnaryOp::Asin, "asin", [](double x) { return std::asin(x); }, unit) <= 3);
  CHECK(worst_unary(UnaryOp::Acos, "acos", [](double x) { return std::acos(x); }, unit) <= 3);
  auto vs = with_specials(samples(-5, 5, 60, 10));
  std::vector<double> ys, xs2;
  for (double y : vs)
    for (double x : vs) ys.push_back(y), xs2.push_back(x);
  CHECK(worst_binary(BinaryOp::Atan2, "atan2", [](double y, double x) { return std::atan2(y, x); }, ys, xs2) <= 3);
}

TEST_CASE("math library: pow within 4 ulp, C99 special cases", "[math]") {
  std::vector<double> bases, exponents;
  auto check = [&](double x, double y) { bases.push_back(x), exponents.push_back(y); };
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
  CHECK(worst_binary(BinaryOp::Pow, "pow", [](double x, double y) { return std::pow(x, y); }, bases, exponents) <= 4);
}

TEST_CASE("math library: f32 arguments go through f64 and round once", "[math]") {
  std::vector<double> xs = {0.0, 0.5, -1.25, 3.0, 100.0, static_cast<float>(1e-30)};
  auto s = soft().run(static_cast<int>(UnaryOp::Sin), false, xs, {}, DataType::f32);
  auto e = soft().run(static_cast<int>(UnaryOp::Exp), false, xs, {}, DataType::f32);
  for (size_t i = 0; i < xs.size(); i++) {
    CHECK(static_cast<float>(s[i]) == static_cast<float>(std::sin(xs[i])));
    CHECK(static_cast<float>(e[i]) == static_cast<float>(std::exp(xs[i])));
  }
}

TEST_CASE("math library: built into the kernel, no call to the C library", "[math]") {
  soft().run(static_cast<int>(BinaryOp::Pow), true, {2.0}, {0.5});
  CHECK(soft().llvm_ir().find("@pow") == std::string::npos);
  soft().run(static_cast<int>(UnaryOp::Sin), false, {2.0});
  CHECK(soft().llvm_ir().find("@sin(") == std::string::npos);
  CHECK(soft().llvm_ir().find("llvm.sin") == std::string::npos);
  auto libm = qd::create_runtime(qd::Backend::Cpu, qd::RuntimeOptions{});
  qd::Builder b("with_libm", qd::TypeConfig{});
  int f = b.add_field(0, DataType::f64, {1}, "x");
  qd::Stmt *p = b.global_ptr(f, {b.const_int(DataType::i32, 0)});
  b.global_store(p, b.unary(UnaryOp::Tan, b.global_load(p, false)));
  CHECK(libm->compile(b.finish())->artifacts.at("llvm_ir").find("@tan(") != std::string::npos);
}
