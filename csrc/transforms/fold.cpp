// Constant folding: pure operations whose operands are all constants become constants, and a few
// algebraic identities that hold exactly under IEEE drop an operation. Runs first in run_passes, so
// that every later pass sees the folded IR and legalization never expands the language's // % **
// or the math library (math_library.cpp: dozens of f64 operations per call on GPUs) for
// constants, and once more after legalization, on the constant operands its expansions make
// (a constant divisor's safety test, a constant shift amount's range test).
//
// The rule: a folded value is the value the unfolded statement computes at run time, bit for bit,
// on the cpu backend, so folding changes no result there. That is why
//  - constants are read as the codegens emit them (an f32 constant is its double rounded to f32;
//    an integer one its low bits), and f32 operations are computed in float, not in double;
//  - the language's operations are computed as legalization writes them (legalize.cpp): integers
//    wrap, a zero divisor or MIN / -1 divides by 1, shifts by the width or more give 0 or the
//    sign, // and % follow Python (for floats the same sequence of IEEE operations as
//    float_floordiv / float_mod, so even the rounding agrees);
//  - sin ... pow, atan2, sqrt, floor ... are the C library calls the cpu backend makes (LLVM lowers
//    llvm.sin.f32 to sinf, ...: same process, same libm). On GPUs the driver's f32 functions or
//    the core's f64 math library may differ from libm in the last bits: folding there changes a
//    result by at most that function's documented error (docs/performance.md);
//  - where the run time's value is not fixed by the language, the statement is left alone: a float
//    -> int cast out of range or of NaN (x86 gives INT_MIN, PTX saturates, LLVM's own folder
//    poison), float min / max of two NaNs or of +0.0 and -0.0 (either operand may come back),
//    an integer Rem primitive by zero, a bitcast that makes a signalling NaN (a constant stores
//    a double, whose conversion would quieten it), and anything in f16 (its constants round
//    differently in the LLVM and SPIR-V codegens).
// Only IEEE-exact identities are used: x * 1, x / 1, x + (-0.0), x - (+0.0) are x for every x;
// x * 0.0 and x + 0.0 are not (NaN, inf, -0.0), so they stay. For integers x + 0, x - 0, x * 1,
// x * 0, x | 0, x & 0, ... hold for every value.
// Folded statements become constants in place (their users and the pointers passes keep, such as
// a loop's next_index, stay valid); statements replaced by an operand, and the operands nothing
// uses any more, are removed.
#include <math.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "transforms/passes.h"

namespace qd {

namespace {

using B = BinaryOp;
using U = UnaryOp;

// The C library's functions, by precision: the calls the cpu backend's code makes.
template <class F> struct Libm;
template <> struct Libm<float> {
  static float sqrt(float x) { return ::sqrtf(x); }
  static float sin(float x) { return ::sinf(x); }
  static float cos(float x) { return ::cosf(x); }
  static float tan(float x) { return ::tanf(x); }
  static float exp(float x) { return ::expf(x); }
  static float log(float x) { return ::logf(x); }
  static float tanh(float x) { return ::tanhf(x); }
  static float asin(float x) { return ::asinf(x); }
  static float acos(float x) { return ::acosf(x); }
  static float atan(float x) { return ::atanf(x); }
  static float floor(float x) { return ::floorf(x); }
  static float ceil(float x) { return ::ceilf(x); }
  static float trunc(float x) { return ::truncf(x); }
  static float rint(float x) { return ::rintf(x); }
  static float fabs(float x) { return ::fabsf(x); }
  static float pow(float x, float y) { return ::powf(x, y); }
  static float atan2(float y, float x) { return ::atan2f(y, x); }
  static float fmod(float x, float y) { return ::fmodf(x, y); }
};
template <> struct Libm<double> {
  static double sqrt(double x) { return ::sqrt(x); }
  static double sin(double x) { return ::sin(x); }
  static double cos(double x) { return ::cos(x); }
  static double tan(double x) { return ::tan(x); }
  static double exp(double x) { return ::exp(x); }
  static double log(double x) { return ::log(x); }
  static double tanh(double x) { return ::tanh(x); }
  static double asin(double x) { return ::asin(x); }
  static double acos(double x) { return ::acos(x); }
  static double atan(double x) { return ::atan(x); }
  static double floor(double x) { return ::floor(x); }
  static double ceil(double x) { return ::ceil(x); }
  static double trunc(double x) { return ::trunc(x); }
  static double rint(double x) { return ::rint(x); }
  static double fabs(double x) { return ::fabs(x); }
  static double pow(double x, double y) { return ::pow(x, y); }
  static double atan2(double y, double x) { return ::atan2(y, x); }
  static double fmod(double x, double y) { return ::fmod(x, y); }
};

// A constant's value in its type. Integers: the low bits, sign-extended for signed types and
// zero-extended for unsigned ones (u64 above 2^63 as its bit pattern), as ConstantInt::get /
// OpConstant take them from Stmt::ival.
struct Num {
  DataType t = DataType::none;
  int64_t i = 0;
  float f32 = 0;
  double f64 = 0;
};

int64_t wrap(DataType t, uint64_t v) {
  int w = bit_width(t);
  if (w == 64) return static_cast<int64_t>(v);
  uint64_t mask = (uint64_t(1) << w) - 1;
  v &= mask;
  if (is_signed(t) && (v >> (w - 1)) & 1) v |= ~mask;
  return static_cast<int64_t>(v);
}
uint64_t low_bits(DataType t, int64_t v) {
  int w = bit_width(t);
  return w == 64 ? static_cast<uint64_t>(v) : static_cast<uint64_t>(v) & ((uint64_t(1) << w) - 1);
}
int64_t min_of(DataType t) { return wrap(t, uint64_t(1) << (bit_width(t) - 1)); }

Num int_num(DataType t, uint64_t v) { return Num{t, wrap(t, v)}; }
Num f32_num(float v) { return Num{DataType::f32, 0, v}; }
Num f64_num(double v) { return Num{DataType::f64, 0, 0, v}; }
Num bool_num(bool v) { return Num{DataType::i32, v ? 1 : 0}; }
template <class F> Num float_num(F v) {
  if constexpr (std::is_same_v<F, float>) return f32_num(v);
  else return f64_num(v);
}
template <class F> F float_of(const Num &n) {
  if constexpr (std::is_same_v<F, float>) return n.f32;
  else return n.f64;
}

// The types this pass computes in: integers (u1 only as a cast or a condition), f32, f64.
bool foldable(DataType t) { return t != DataType::none && t != DataType::f16; }

std::optional<Num> constant(const Stmt *s) {
  if (s->kind != StmtKind::Const || !foldable(s->dtype)) return std::nullopt;
  if (s->dtype == DataType::f32) return f32_num(static_cast<float>(s->fval));
  if (s->dtype == DataType::f64) return f64_num(s->fval);
  return int_num(s->dtype, static_cast<uint64_t>(s->ival));
}

// A value's truth, as conditions, `not`, `and` and `or` take it: nonzero (a NaN is true).
bool truth(const Num &n) {
  if (n.t == DataType::f32) return n.f32 != 0;
  if (n.t == DataType::f64) return n.f64 != 0;
  return n.i != 0;
}

bool is_signalling_nan(float f) { return f != f && !(std::bit_cast<uint32_t>(f) & 0x00400000u); }
bool is_signalling_nan(double f) { return f != f && !(std::bit_cast<uint64_t>(f) & (uint64_t(1) << 51)); }

// ---- floats ---------------------------------------------------------------------------------

// legalize.cpp's signbit and zero_signed_like: x < 0 or 1 / x < 0 (so not for NaN).
template <class F> bool sign_of(F x) { return x < 0 || F(1) / x < 0; }
template <class F> F zero_signed_like(F x, F sign) { return x == 0 ? (sign_of(sign) ? F(-0.0) : F(0.0)) : x; }

// Python's float % and //, the IEEE operations of legalize.cpp's float_mod / float_floordiv in
// the same order (each rounded in F as there); fmod is exact on every target.
template <class F> F python_mod(F a, F b) {
  F m = Libm<F>::fmod(a, b);
  bool signs_differ = (m < 0) != (b < 0);
  if (m != 0 && signs_differ) m = m + b;
  return zero_signed_like(m, b);
}
template <class F> F python_floordiv(F a, F b) {
  F m = Libm<F>::fmod(a, b);
  F div = (a - m) / b;
  bool signs_differ = (m < 0) != (b < 0);
  if (m != 0 && signs_differ) div = div - F(1);
  F fl = Libm<F>::floor(div);
  if (div - fl > F(0.5)) fl = fl + F(1);
  F q = a / b;
  fl = zero_signed_like(fl, q);
  if (b == 0) return q;
  return m != m ? std::numeric_limits<F>::quiet_NaN() : fl;
}

template <class F> std::optional<Num> float_unary(U op, F x) {
  using M = Libm<F>;
  switch (op) {
    case U::Neg: return float_num<F>(-x);
    case U::Abs: return float_num(M::fabs(x));
    case U::Sqrt: return float_num(M::sqrt(x));
    case U::Sin: return float_num(M::sin(x));
    case U::Cos: return float_num(M::cos(x));
    case U::Tan: return float_num(M::tan(x));
    case U::Exp: return float_num(M::exp(x));
    case U::Log: return float_num(M::log(x));
    case U::Tanh: return float_num(M::tanh(x));
    case U::Asin: return float_num(M::asin(x));
    case U::Acos: return float_num(M::acos(x));
    case U::Atan: return float_num(M::atan(x));
    case U::Floor: return float_num(M::floor(x));
    case U::Ceil: return float_num(M::ceil(x));
    case U::Trunc: return float_num(M::trunc(x));
    case U::Round: return float_num(M::rint(x));  // half to even (llvm.rint, RoundEven)
    default: return std::nullopt;
  }
}

template <class F> std::optional<Num> float_binary(B op, F a, F b) {
  using M = Libm<F>;
  switch (op) {
    case B::Add: return float_num<F>(a + b);
    case B::Sub: return float_num<F>(a - b);
    case B::Mul: return float_num<F>(a * b);
    case B::Div: return float_num<F>(a / b);
    case B::Rem: return float_num(M::fmod(a, b));
    case B::FloorDiv: return float_num(python_floordiv(a, b));
    case B::Mod: return float_num(python_mod(a, b));
    case B::Pow: return float_num(M::pow(a, b));
    case B::Atan2: return float_num(M::atan2(a, b));
    case B::Min: case B::Max: {
      // minNum / maxNum: a NaN operand loses. Two NaNs, or +0.0 against -0.0: which operand comes
      // back differs between instruction sequences, so the run time decides.
      if (a != a && b != b) return std::nullopt;
      if (a != a) return float_num(b);
      if (b != b) return float_num(a);
      if (a == b && std::signbit(a) != std::signbit(b)) return std::nullopt;
      bool first = op == B::Min ? !(b < a) : !(a < b);
      return float_num(first ? a : b);
    }
    case B::Eq: return bool_num(a == b);
    case B::Ne: return bool_num(a != b);  // unordered: true for NaN
    case B::Lt: return bool_num(a < b);
    case B::Le: return bool_num(a <= b);
    case B::Gt: return bool_num(a > b);
    case B::Ge: return bool_num(a >= b);
    default: return std::nullopt;
  }
}

// ---- integers -------------------------------------------------------------------------------

std::optional<Num> int_unary(U op, DataType t, int64_t x) {
  uint64_t u = low_bits(t, x);
  int w = bit_width(t);
  switch (op) {
    case U::Neg: return int_num(t, uint64_t(0) - u);
    case U::BitNot: return int_num(t, ~u);
    case U::Abs: return int_num(t, is_signed(t) && x < 0 ? uint64_t(0) - u : u);  // abs(MIN) is MIN
    case U::PopCount: return int_num(t, std::popcount(u));
    case U::Clz: return int_num(t, u == 0 ? w : std::countl_zero(u) - (64 - w));
    case U::Ctz: return int_num(t, u == 0 ? w : std::countr_zero(u));
    default: return std::nullopt;
  }
}

// a op b in t (b in its own type `bt` for shifts), as legalization defines the language's
// operations and the primitives they become.
std::optional<Num> int_binary(B op, DataType t, int64_t a, int64_t b, DataType bt) {
  bool sg = is_signed(t);
  uint64_t ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
  auto less = [&](int64_t x, int64_t y) { return sg ? x < y : static_cast<uint64_t>(x) < static_cast<uint64_t>(y); };
  // legalize.cpp's safe_divisor: a zero divisor, or MIN / -1, divides by 1 instead.
  bool unsafe = b == 0 || (sg && a == min_of(t) && b == -1);
  int64_t d = unsafe ? 1 : b;
  switch (op) {
    case B::Add: return int_num(t, ua + ub);
    case B::Sub: return int_num(t, ua - ub);
    case B::Mul: return int_num(t, ua * ub);
    case B::Div: return int_num(t, sg ? static_cast<uint64_t>(a / d) : ua / static_cast<uint64_t>(d));
    case B::Rem:  // the primitive: legalization made its divisor safe; an unsafe one is not ours to decide
      if (unsafe) return std::nullopt;
      return int_num(t, sg ? static_cast<uint64_t>(a % b) : ua % ub);
    case B::FloorDiv: case B::Mod: {
      if (!sg) {
        uint64_t q = ua / static_cast<uint64_t>(d), r = ua % static_cast<uint64_t>(d);
        return int_num(t, op == B::FloorDiv ? q : r);
      }
      int64_t q = a / d, r = a % d;
      bool adjust = r != 0 && (r ^ d) < 0;  // Python: the remainder takes the divisor's sign
      if (op == B::FloorDiv) return int_num(t, static_cast<uint64_t>(q) - (adjust ? 1 : 0));
      return int_num(t, static_cast<uint64_t>(r) + (adjust ? static_cast<uint64_t>(d) : 0));
    }
    case B::Pow: {  // legalize.cpp's int_pow: square-and-multiply, wrapping; 1 / base**-n below 0
      if (sg && b < 0) return int_num(t, a == 1 ? 1 : a == -1 ? ((b & 1) ? ~uint64_t(0) : 1) : 0);
      uint64_t r = 1, x = ua;
      for (uint64_t n = ub; n > 0; n >>= 1) {
        if (n & 1) r *= x;
        x *= x;
      }
      return int_num(t, r);
    }
    case B::Min: return int_num(t, less(b, a) ? ub : ua);
    case B::Max: return int_num(t, less(a, b) ? ub : ua);
    case B::BitAnd: return int_num(t, ua & ub);
    case B::BitOr: return int_num(t, ua | ub);
    case B::BitXor: return int_num(t, ua ^ ub);
    case B::Shl: case B::Shr: {
      // legalize.cpp's shift: the amount's bits as unsigned; the width or more gives 0, or the
      // sign for >> of a signed value.
      int w = bit_width(t);
      uint64_t amount = low_bits(bt, b);
      bool too_far = amount >= static_cast<uint64_t>(w);
      if (op == B::Shl) return int_num(t, too_far ? 0 : ua << amount);
      if (sg) return int_num(t, static_cast<uint64_t>(a >> (too_far ? 63 : amount)));
      return int_num(t, too_far ? 0 : ua >> amount);
    }
    case B::Eq: return bool_num(a == b);
    case B::Ne: return bool_num(a != b);
    case B::Lt: return bool_num(less(a, b));
    case B::Le: return bool_num(!less(b, a));
    case B::Gt: return bool_num(less(b, a));
    case B::Ge: return bool_num(!less(a, b));
    default: return std::nullopt;
  }
}

// ---- conversions ------------------------------------------------------------------------------

template <class F> std::optional<Num> float_to(DataType to, F x) {
  if (to == DataType::u1) return int_num(to, x != 0);
  if (to == DataType::f32) return f32_num(static_cast<float>(x));
  if (to == DataType::f64) return f64_num(static_cast<double>(x));
  // fptosi / fptoui: defined only where the truncated value fits (NaN does not).
  double tr = static_cast<double>(Libm<F>::trunc(x));
  int w = bit_width(to);
  double lo = is_signed(to) ? -std::ldexp(1.0, w - 1) : 0.0;
  double hi = std::ldexp(1.0, is_signed(to) ? w - 1 : w);  // exclusive
  if (!(tr >= lo && tr < hi)) return std::nullopt;
  if (is_signed(to)) return int_num(to, static_cast<uint64_t>(static_cast<int64_t>(tr)));
  return int_num(to, static_cast<uint64_t>(tr));
}

std::optional<Num> cast(const Num &x, DataType to) {
  if (x.t == DataType::f32) return float_to(to, x.f32);
  if (x.t == DataType::f64) return float_to(to, x.f64);
  if (to == DataType::u1) return int_num(to, x.i != 0);
  // Integers are sign- or zero-extended by their own type, then truncated: x's canonical value.
  if (to == DataType::f32) return f32_num(is_signed(x.t) ? static_cast<float>(x.i) : static_cast<float>(static_cast<uint64_t>(x.i)));
  if (to == DataType::f64) return f64_num(is_signed(x.t) ? static_cast<double>(x.i) : static_cast<double>(static_cast<uint64_t>(x.i)));
  return int_num(to, static_cast<uint64_t>(x.i));
}

std::optional<Num> bitcast(const Num &x, DataType to) {
  if (bit_width(x.t) != bit_width(to) || x.t == DataType::u1) return std::nullopt;
  uint64_t bits = x.t == DataType::f32 ? std::bit_cast<uint32_t>(x.f32)
                  : x.t == DataType::f64 ? std::bit_cast<uint64_t>(x.f64)
                                          : low_bits(x.t, x.i);
  if (to == DataType::f32) {
    float f = std::bit_cast<float>(static_cast<uint32_t>(bits));
    if (is_signalling_nan(f)) return std::nullopt;
    return f32_num(f);
  }
  if (to == DataType::f64) {
    double f = std::bit_cast<double>(bits);
    if (is_signalling_nan(f)) return std::nullopt;
    return f64_num(f);
  }
  return int_num(to, bits);
}

// ---- statements -------------------------------------------------------------------------------

std::optional<Num> fold_unary(const Stmt &s, const Num &x) {
  auto op = static_cast<U>(s.op);
  if (op == U::Cast) return cast(x, s.dtype);
  if (op == U::Bitcast) return bitcast(x, s.dtype);
  if (op == U::Not) return bool_num(!truth(x));
  if (x.t != s.dtype || x.t == DataType::u1) return std::nullopt;
  if (x.t == DataType::f32) return float_unary(op, x.f32);
  if (x.t == DataType::f64) return float_unary(op, x.f64);
  return int_unary(op, x.t, x.i);
}

std::optional<Num> fold_binary(const Stmt &s, const Num &a, const Num &b) {
  auto op = static_cast<B>(s.op);
  if (op == B::LogicalAnd) return bool_num(truth(a) && truth(b));
  if (op == B::LogicalOr) return bool_num(truth(a) || truth(b));
  bool shift = op == B::Shl || op == B::Shr;
  if (a.t == DataType::u1 || b.t == DataType::u1 || (!shift && a.t != b.t)) return std::nullopt;
  std::optional<Num> r = a.t == DataType::f32   ? float_binary(op, a.f32, b.f32)
                         : a.t == DataType::f64 ? float_binary(op, a.f64, b.f64)
                                                : int_binary(op, a.t, a.i, b.i, b.t);
  if (r && r->t != s.dtype) return std::nullopt;  // not a shape this pass knows
  return r;
}

bool is_float_const(const Stmt *s, double v, bool negative) {
  return s->kind == StmtKind::Const && is_real(s->dtype) && s->fval == v && std::signbit(s->fval) == negative;
}

// A statement whose value is an i32 0 or 1 (a comparison, `not`, `and`, `or`): its truth is itself.
bool is_boolean(const Stmt *s) {
  if (s->dtype != DataType::i32) return false;
  if (s->kind == StmtKind::Unary) return static_cast<U>(s->op) == U::Not;
  if (s->kind != StmtKind::Binary) return false;
  auto op = static_cast<B>(s->op);
  return is_comparison(op) || op == B::LogicalAnd || op == B::LogicalOr;
}

class Folder {
 public:
  explicit Folder(KernelIR &k) : k_(k) {}

  void run() {
    for (Block *b : blocks()) for_each_stmt(*b, [&](Stmt &s) { visit(s); });
    // Rewire what still reads a replaced statement (passes' own pointers included), then drop the
    // statements folding left without users.
    for (Block *b : blocks())
      for_each_stmt(*b, [&](Stmt &s) {
        for (Stmt *&o : s.operands) o = resolve(o);
        if (s.first_index) s.first_index = resolve(s.first_index);
        if (s.next_index) s.next_index = resolve(s.next_index);
      });
    for (Task &t : k_.tasks)
      if (t.scratch_items) t.scratch_items = resolve(t.scratch_items);
    remove_dead();
  }

 private:
  // Before offloading the kernel body; after it, every block of every task.
  std::vector<Block *> blocks() {
    if (k_.tasks.empty()) return {&k_.body};
    std::vector<Block *> r;
    for (Task &t : k_.tasks)
      for (Block *b : {&t.prologue, &t.pre_loop, &t.body, &t.post_loop}) r.push_back(b);
    return r;
  }

  Stmt *resolve(Stmt *s) {
    for (auto it = replaced_.find(s); it != replaced_.end(); it = replaced_.find(s)) s = it->second;
    return s;
  }

  void visit(Stmt &s) {
    for (Stmt *&o : s.operands) o = resolve(o);  // operands come first: already folded
    if (s.kind == StmtKind::Select) return select(s);
    if (s.kind != StmtKind::Unary && s.kind != StmtKind::Binary) return;
    std::vector<std::optional<Num>> v;
    for (Stmt *o : s.operands) v.push_back(constant(o));
    std::optional<Num> r;
    if (foldable(s.dtype) && s.kind == StmtKind::Unary && v[0]) r = fold_unary(s, *v[0]);
    if (foldable(s.dtype) && s.kind == StmtKind::Binary && v[0] && v[1]) r = fold_binary(s, *v[0], *v[1]);
    if (r) make_constant(s, *r);
    else if (s.kind == StmtKind::Binary) simplify(s);
  }

  // A constant condition picks its operand; so do two equal operands.
  void select(Stmt &s) {
    if (std::optional<Num> c = constant(s.operands[0])) replace(s, s.operands[truth(*c) ? 1 : 2]);
    else if (s.operands[1] == s.operands[2]) replace(s, s.operands[1]);
  }

  // One constant operand: the identities exact for every value of the other.
  void simplify(Stmt &s) {
    auto op = static_cast<B>(s.op);
    bool c_right = s.operands[1]->kind == StmtKind::Const;
    if (!c_right && s.operands[0]->kind != StmtKind::Const) return;
    Stmt *cs = s.operands[c_right ? 1 : 0], *x = s.operands[c_right ? 0 : 1];
    std::optional<Num> c = constant(cs);  // none for f16
    if (op == B::LogicalAnd || op == B::LogicalOr) {
      if (!c) return;
      bool t = truth(*c);
      if (op == B::LogicalAnd && !t) return make_constant(s, bool_num(false));
      if (op == B::LogicalOr && t) return make_constant(s, bool_num(true));
      if (is_boolean(x)) replace(s, x);  // true and x, false or x: x's truth, which is x
      return;
    }
    if (x->dtype != s.dtype) return;  // comparisons, shifts of another type: nothing to drop
    if (is_real(s.dtype)) {  // f16 included: these are exact in every IEEE format
      bool one = is_float_const(cs, 1.0, false);
      if ((op == B::Mul && one) || (op == B::Div && one && c_right) ||
          (op == B::Add && is_float_const(cs, 0.0, true)) ||
          (op == B::Sub && c_right && is_float_const(cs, 0.0, false)))
        replace(s, x);
      return;
    }
    if (!c || s.dtype == DataType::u1) return;
    uint64_t bits = low_bits(c->t, c->i), ones = low_bits(c->t, -1);
    switch (op) {
      case B::Add: case B::BitOr: case B::BitXor:
        if (bits == 0) replace(s, x);
        break;
      case B::Sub: case B::Shl: case B::Shr:
        if (bits == 0 && c_right) replace(s, x);
        break;
      case B::Mul:
        if (bits == 0) make_constant(s, int_num(s.dtype, 0));
        else if (bits == 1) replace(s, x);
        break;
      case B::Div: case B::FloorDiv:  // x / 1, x // 1: legalization's forms give x
        if (bits == 1 && c_right) replace(s, x);
        break;
      case B::Mod:
        if (bits == 1 && c_right) make_constant(s, int_num(s.dtype, 0));
        break;
      case B::BitAnd:
        if (bits == 0) make_constant(s, int_num(s.dtype, 0));
        else if (bits == ones) replace(s, x);
        break;
      default: break;
    }
  }

  void make_constant(Stmt &s, const Num &v) {
    for (Stmt *o : s.operands) maybe_dead_.push_back(o);
    s.kind = StmtKind::Const;
    s.operands.clear();
    s.op = 0;
    s.cast_from = DataType::none;
    s.reassoc = false;
    s.exact = false;
    s.ival = is_real(s.dtype) ? 0 : v.i;
    s.fval = s.dtype == DataType::f32 ? static_cast<double>(v.f32) : s.dtype == DataType::f64 ? v.f64 : 0.0;
  }

  void replace(Stmt &s, Stmt *by) {
    replaced_[&s] = by;
    maybe_dead_.push_back(&s);
  }

  // Pure statements left without users by folding, and what only they used.
  void remove_dead() {
    std::unordered_map<const Stmt *, int> uses;
    for (Block *b : blocks())
      for_each_stmt(*b, [&](Stmt &s) {
        for (Stmt *o : s.operands) uses[o]++;
        for (Stmt *p : {s.first_index, s.next_index})
          if (p) uses[p]++;
      });
    for (Task &t : k_.tasks)
      if (t.scratch_items) uses[t.scratch_items]++;
    std::unordered_set<Stmt *> dead;
    while (!maybe_dead_.empty()) {
      Stmt *s = maybe_dead_.back();
      maybe_dead_.pop_back();
      if (uses[s] != 0 || !s->is_pure() || !dead.insert(s).second) continue;
      for (Stmt *o : s->operands)
        if (--uses[o] == 0) maybe_dead_.push_back(o);
    }
    std::unordered_set<Block *> blocks_with_dead;
    for (Stmt *s : dead) blocks_with_dead.insert(s->parent);
    for (Block *b : blocks_with_dead) std::erase_if(b->stmts, [&](auto &p) { return dead.count(p.get()) > 0; });
  }

  KernelIR &k_;
  std::unordered_map<Stmt *, Stmt *> replaced_;
  std::vector<Stmt *> maybe_dead_;
};

}  // namespace

void fold_constants(KernelIR &k) { Folder(k).run(); }

}  // namespace qd
