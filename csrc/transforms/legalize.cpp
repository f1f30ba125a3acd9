// Legalization: the language's semantics, written once. After offload and the atomic passes, this
// rewrites what the front end builds (Python's //, % and integer **, safe integer division,
// shifts by any amount, atomic_sub, CAS-loop atomics, the few operations a target's instruction
// does not compute exactly, and sin ... pow where a target has no math library: math_library.cpp)
// into primitives that every codegen maps one-to-one to instructions. Like LLVM's legalize actions: an operation is Legal (kept), Expanded (rewritten
// here) or Rejected (by decide_atomics, with the support table's reason).
#include <algorithm>
#include <cmath>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "target/target.h"
#include "transforms/exact_float.h"
#include "transforms/ir_emitter.h"
#include "transforms/math_library.h"
#include "transforms/passes.h"

namespace qd {

namespace {

using B = BinaryOp;
using U = UnaryOp;
using exact_float::ceil_by_adds;
using exact_float::floor_by_adds;
using exact_float::product_error;
using exact_float::round_half_even;
using exact_float::signbit;
using exact_float::stored_signbit;
using exact_float::trunc_by_adds;
using exact_float::zero_signed_like;

int64_t min_of(DataType t) { return bit_width(t) == 64 ? INT64_MIN : -(int64_t(1) << (bit_width(t) - 1)); }

class Legalizer {
 public:
  explicit Legalizer(const Target &target) : target_(target) {}

  void run(KernelIR &k) {
    k_ = &k;
    expand_all(k, [&](Stmt &s) { return needs_expansion(s); }, [&](IrEmitter &e, Stmt &s) { return expand(e, s); });
    if (!target_.has_exact_float_zero_operands()) {  // last: the expansions above have such operands too
      find_opaque_vars(k);
      expand_all(k, [&](Stmt &s) { return folded_zero_operand(s); },
                 [&](IrEmitter &e, Stmt &s) { return zero_operand(e, s); });
    }
  }

 private:
  // Replaces each statement `want` picks by what `expand` emits before it.
  void expand_all(KernelIR &k, const std::function<bool(Stmt &)> &want,
                  const std::function<Stmt *(IrEmitter &, Stmt &)> &expand) {
    std::vector<Stmt *> work;
    for (Task &t : k.tasks)
      for (Block *b : {&t.prologue, &t.pre_loop, &t.body, &t.post_loop})
        for_each_stmt(*b, [&](Stmt &s) {
          if (want(s)) work.push_back(&s);
        });
    // Expanded statements stay alive until their users are rewired: a new statement must not
    // reuse the address of one in `replaced`.
    std::unordered_map<Stmt *, Stmt *> replaced;
    std::vector<std::unique_ptr<Stmt>> expanded;
    for (Stmt *s : work) {
      IrEmitter e(s);
      e.mark_exact();  // rounded as written, fast_math or not
      if (Stmt *v = expand(e, *s)) replaced[s] = v;
      auto &stmts = s->parent->stmts;
      auto it = std::find_if(stmts.begin(), stmts.end(), [&](auto &p) { return p.get() == s; });
      expanded.push_back(std::move(*it));
      stmts.erase(it);
    }
    // Users of an expanded statement read its replacement.
    for (Task &t : k.tasks)
      for (Block *b : {&t.prologue, &t.pre_loop, &t.body, &t.post_loop})
        for_each_stmt(*b, [&](Stmt &s) {
          for (Stmt *&o : s.operands)
            for (auto it = replaced.find(o); it != replaced.end(); it = replaced.find(o)) o = it->second;
        });
    if (target_.backend != Backend::Cpu)
      for (Task &t : k.tasks)
        if (t.parallel) grid_stride(t);
  }

  bool needs_expansion(const Stmt &s) const {
    if (s.kind == StmtKind::Atomic) return s.operands[0]->kind == StmtKind::GlobalPtr;
    if (s.kind == StmtKind::Fns) return true;
    if (needs_math_library(s, target_)) return true;
    if (s.kind == StmtKind::Unary) {
      auto op = static_cast<U>(s.op);
      if (op == U::PopCount || op == U::Clz || op == U::Ctz) return !target_.has_bit_count(s.dtype);
      bool rounding = op == U::Round || op == U::Floor || op == U::Ceil || op == U::Trunc;
      return rounding && s.dtype == DataType::f64 && !target_.has_exact_f64_rounding();
    }
    if (s.kind != StmtKind::Binary) return false;
    DataType t = s.operands[0]->dtype;
    switch (static_cast<B>(s.op)) {
      case B::Div: return !is_real(t);
      case B::FloorDiv: case B::Mod: case B::Shl: case B::Shr: return true;
      case B::Pow: return !is_real(t);
      default: return false;
    }
  }

  static bool is_zero(const Stmt &s) { return s.kind == StmtKind::Const && s.fval == 0; }

  // ---- float arithmetic with a zero operand ------------------------------------------------
  // On a target without exact float zero operands (Target::has_exact_float_zero_operands), each
  // operand of a float + - * / that the driver might fold to a constant is tested for zero, and
  // the zero case computed per IEEE without the zero in the arithmetic. The driver folds much
  // more than literals: casts of them, locals, loops it unrolls, and integer algebra on the
  // kernel's data (x & 0, min(u, 0), a shift past the width, x - x). Once it folds the operand
  // the test folds too, so the rewrite costs nothing at run time; operands it can never fold
  // (`opaque`) and literal non-zero ones are left as they are. Its abs of a constant -0.0 is
  // -0.0 (taken for "not negative"): abs of an operand it may fold clears the sign bit instead.

  // The local variables every store to gives an opaque value (a greatest fixed point: a loop
  // carried variable stays opaque if what the loop stores is).
  void find_opaque_vars(KernelIR &k) {
    std::vector<Stmt *> writes;
    for (Task &t : k.tasks)
      for (Block *b : {&t.prologue, &t.pre_loop, &t.body, &t.post_loop})
        for_each_stmt(*b, [&](Stmt &s) {
          if ((s.kind == StmtKind::LocalStore || s.kind == StmtKind::Atomic) && s.operands[0]->kind == StmtKind::Alloca)
            writes.push_back(&s);
        });
    for (Stmt *w : writes) opaque_vars_.insert(w->operands[0]);
    for (bool changed = true; changed;) {
      changed = false;
      opaque_memo_.clear();
      for (Stmt *w : writes)
        if (opaque_vars_.count(w->operands[0]) && (w->kind == StmtKind::Atomic || !opaque(w->operands[1])))
          changed = opaque_vars_.erase(w->operands[0]) > 0 || changed;
    }
    opaque_memo_.clear();
  }

  // Whether the driver can never make s a constant: a value read from memory or an argument, or
  // a conversion or IEEE + - * / of one. Integer arithmetic and comparisons are not (see above),
  // nor loop indices (unrolled loops), nor float min / max / pow (min(x, -inf) is -inf).
  bool opaque(const Stmt *s) {
    auto it = opaque_memo_.find(s);
    if (it != opaque_memo_.end()) return it->second;
    bool r = false;
    switch (s->kind) {
      case StmtKind::GlobalLoad: case StmtKind::Arg: case StmtKind::Atomic: r = true; break;
      case StmtKind::LocalLoad: r = opaque_vars_.count(s->operands[0]) > 0; break;
      case StmtKind::Unary: r = static_cast<U>(s->op) != U::Not && opaque(s->operands[0]); break;
      case StmtKind::Select: r = opaque(s->operands[1]) && opaque(s->operands[2]); break;
      case StmtKind::Binary: {
        if (!is_real(s->dtype)) break;
        auto op = static_cast<B>(s->op);
        bool a = opaque(s->operands[0]), c = opaque(s->operands[1]);
        r = op == B::Add || op == B::Sub || op == B::Mul || op == B::Div ? a || c : a && c;
        break;
      }
      default: break;
    }
    return opaque_memo_[s] = r;
  }

  // An operand that needs the zero test: a literal zero, or a value the driver may fold.
  bool may_fold_to_zero(const Stmt &x) {
    if (x.kind == StmtKind::Const) return x.fval == 0;
    return !opaque(&x);
  }

  bool folded_zero_operand(const Stmt &s) {
    if (s.kind == StmtKind::Unary && static_cast<U>(s.op) == U::Abs)  // abs(-0.0) stays -0.0 there too
      return is_real(s.dtype) && !opaque(s.operands[0]);
    if (s.kind != StmtKind::Binary || !is_real(s.operands[0]->dtype)) return false;
    auto op = static_cast<B>(s.op);
    if (op != B::Add && op != B::Sub && op != B::Mul && op != B::Div) return false;
    return may_fold_to_zero(*s.operands[0]) || may_fold_to_zero(*s.operands[1]);
  }

  // a op c, the zero cases of the operands that may fold computed per IEEE without the zero in
  // the arithmetic.
  Stmt *zero_operand(IrEmitter &e, Stmt &s) {
    if (s.kind == StmtKind::Unary) {  // abs: the sign bit cleared
      DataType t = s.dtype, bits = bit_width(t) == 16 ? DataType::u16 : bit_width(t) == 32 ? DataType::u32 : DataType::u64;
      Stmt *magnitude = e.bin(B::BitAnd, e.bitcast(s.operands[0], bits), e.ci(bits, int64_t(~0ull >> (65 - bit_width(t)))));
      return e.bitcast(magnitude, t);
    }
    auto op = static_cast<B>(s.op);
    Stmt *a = s.operands[0], *c = s.operands[1];
    DataType t = a->dtype;
    Stmt *zero = e.c(t, 0.0);
    Stmt *r = nullptr;
    for (int left : {0, 1}) {  // c's zero case, then a's (a zero a with a zero c: the latter)
      Stmt *z = left ? a : c, *x = left ? c : a;
      if (!may_fold_to_zero(*z)) continue;
      Stmt *when_zero = zero_case(e, op, x, z, left);
      if (z->kind == StmtKind::Const) r = when_zero;  // a literal zero
      else r = e.sel(e.bin(B::Eq, z, zero), when_zero, r ? r : same_op(e, s));
    }
    return r;
  }

  Stmt *same_op(IrEmitter &e, const Stmt &s) {
    Stmt *r = e.bin(static_cast<B>(s.op), s.operands[0], s.operands[1]);
    r->reassoc = s.reassoc;
    return r;
  }

  // x op z (left: z op x) for a zero z of either sign, per IEEE.
  Stmt *zero_case(IrEmitter &e, B op, Stmt *x, Stmt *z, bool left) {
    DataType t = x->dtype;
    // x's sign matters to + and - only when x is zero too (no NaN there); z is a zero
    Stmt *zero = e.c(t, 0.0), *sx = op == B::Add || op == B::Sub ? stored_signbit(e, x) : signbit(e, x);
    Stmt *sz = z->kind == StmtKind::Const ? e.ci(DataType::i32, std::signbit(z->fval)) : stored_signbit(e, z);
    auto signed_zero = [&](Stmt *negative) { return e.sel(negative, e.c(t, -0.0), zero); };
    Stmt *x_zero = e.bin(B::Eq, x, zero), *x_nan = e.bin(B::Ne, x, x);
    switch (op) {
      case B::Add:  // x, or for two zeros -0.0 only if both are
        return e.sel(x_zero, signed_zero(e.both(sx, sz)), x);
      case B::Sub:
        if (left)  // z - x: -x, or for two zeros -0.0 only for -0.0 - +0.0
          return e.sel(x_zero, signed_zero(e.both(sz, e.not_(sx))), e.un(U::Neg, x));
        return e.sel(x_zero, signed_zero(e.both(sx, e.not_(sz))), x);
      case B::Mul: {  // x - x is NaN for inf and NaN, else +0.0; the sign is the product's
        Stmt *d = e.bin(B::Sub, x, x);
        return e.sel(e.bin(B::Ne, sx, sz), e.un(U::Neg, d), d);
      }
      default:  // Div
        if (left)  // z / x: NaN for a zero or NaN x, else a zero with the quotient's sign
          return e.sel(e.either(x_zero, x_nan), e.c(t, NAN), signed_zero(e.bin(B::Ne, sx, sz)));
        // x / z: NaN for a zero or NaN x, else an infinity with the quotient's sign
        return e.sel(e.either(x_zero, x_nan), e.c(t, NAN),
                     e.sel(e.bin(B::Ne, sx, sz), e.c(t, -INFINITY), e.c(t, INFINITY)));
    }
  }

  Stmt *expand(IrEmitter &e, Stmt &s) {
    if (s.kind == StmtKind::Atomic) return atomic(e, s);
    if (s.kind == StmtKind::Fns) return fns(e, s.operands[0], s.operands[1], s.operands[2]);
    if (needs_math_library(s, target_)) return expand_math_library(e, s, target_);
    Stmt *a = s.operands[0];
    if (s.kind == StmtKind::Unary) switch (static_cast<U>(s.op)) {
        case U::Round: return round_half_even(e, a);
        case U::Floor: return floor_by_adds(e, a);
        case U::Ceil: return ceil_by_adds(e, a);
        case U::Trunc: return trunc_by_adds(e, a);
        default: return bit_count(e, static_cast<U>(s.op), a);
      }
    Stmt *c = s.operands[1];
    switch (static_cast<B>(s.op)) {
      case B::Div: return e.bin(B::Div, a, safe_divisor(e, a, c));
      case B::FloorDiv: return is_real(a->dtype) ? float_floordiv(e, a, c) : int_floordiv(e, a, c);
      case B::Mod: return is_real(a->dtype) ? float_mod(e, a, c) : int_mod(e, a, c);
      case B::Pow: return int_pow(e, a, c);
      default: return shift(e, static_cast<B>(s.op), a, c);
    }
  }

  // ---- the parallel loop ------------------------------------------------------------------

  // On a GPU every thread of the grid runs the loop from begin + its global index, stepping by the
  // number of threads in the grid. i32 arithmetic wraps, so neither the first index nor a step may
  // pass `end`: an index stepped past INT_MAX would be negative, below `end` again, and rerun the
  // range. (The cpu runs chunks [lo, hi) of the range with step 1: nothing to do.)
  void grid_stride(Task &t) {
    Stmt *loop = t.loop();
    Stmt *begin = loop->operands[0], *end = loop->operands[1];
    IrEmitter pro(t.prologue, loop->loc);
    Stmt *gid = pro.add(StmtKind::Simt, DataType::i32, {}, static_cast<int>(SimtOp::GlobalThreadIdx));
    Stmt *threads = pro.add(StmtKind::Simt, DataType::i32, {}, static_cast<int>(SimtOp::GridThreads));
    loop->first_index = pro.sel(pro.bin(B::Lt, begin, end), advance(pro, begin, gid, end), end);
    Block &body = *loop->body;
    IrEmitter top = body.stmts.empty() ? IrEmitter(body, loop->loc) : IrEmitter(body.stmts.front().get());
    loop->next_index = advance(top, top.add(StmtKind::LoopIndex, DataType::i32, {loop}), threads, end);
  }

  // i + by (by >= 0), or `end` where that would reach or pass it. For i < end, end - i fits in u32.
  Stmt *advance(IrEmitter &e, Stmt *i, Stmt *by, Stmt *end) {
    Stmt *left = e.bitcast(e.bin(B::Sub, end, i), DataType::u32);
    return e.sel(e.bin(B::Gt, left, e.bitcast(by, DataType::u32)), e.bin(B::Add, i, by), end);
  }

  // ---- integers ---------------------------------------------------------------------------

  // Division by zero traps on x86 and MIN / -1 overflows: such divisions divide by 1 instead (the
  // result is unspecified, as on GPUs, but the process lives).
  Stmt *safe_divisor(IrEmitter &e, Stmt *a, Stmt *c) {
    DataType t = a->dtype;
    Stmt *bad = e.bin(B::Eq, c, e.ci(t, 0));
    if (is_signed(t)) bad = e.either(bad, e.both(e.bin(B::Eq, a, e.ci(t, min_of(t))), e.bin(B::Eq, c, e.ci(t, -1))));
    return e.sel(bad, e.ci(t, 1), c);
  }

  // A nonzero remainder whose sign differs from the divisor's: Python's // and % step once more.
  Stmt *python_adjust(IrEmitter &e, Stmt *r, Stmt *c) {
    Stmt *zero = e.ci(r->dtype, 0);
    return e.both(e.bin(B::Ne, r, zero), e.bin(B::Lt, e.bin(B::BitXor, r, c), zero));
  }

  Stmt *int_floordiv(IrEmitter &e, Stmt *a, Stmt *c) {
    c = safe_divisor(e, a, c);
    Stmt *q = e.bin(B::Div, a, c);
    if (!is_signed(a->dtype)) return q;
    Stmt *adjust = python_adjust(e, e.bin(B::Rem, a, c), c);
    return e.sel(adjust, e.bin(B::Sub, q, e.ci(q->dtype, 1)), q);
  }

  Stmt *int_mod(IrEmitter &e, Stmt *a, Stmt *c) {
    c = safe_divisor(e, a, c);
    Stmt *r = e.bin(B::Rem, a, c);
    if (!is_signed(a->dtype)) return r;
    return e.sel(python_adjust(e, r, c), e.bin(B::Add, r, c), r);
  }

  // Square-and-multiply. A negative exponent is 1 / base**-n in integer division: 1 for base 1,
  // +-1 for base -1, else 0.
  Stmt *int_pow(IrEmitter &e, Stmt *base, Stmt *exp) {
    DataType t = base->dtype;
    Stmt *r = e.var(t, e.ci(t, 1)), *x = e.var(t, base), *n = e.var(t, exp);
    {
      IrEmitter loop = e.while_();
      Stmt *nv = loop.load(n);
      loop.if_(loop.bin(B::Le, nv, loop.ci(t, 0))).break_();
      Stmt *xv = loop.load(x), *rv = loop.load(r);
      Stmt *odd = loop.bin(B::Ne, loop.bin(B::BitAnd, nv, loop.ci(t, 1)), loop.ci(t, 0));
      loop.store(r, loop.sel(odd, loop.bin(B::Mul, rv, xv), rv));
      loop.store(x, loop.bin(B::Mul, xv, xv));
      loop.store(n, shift(loop, B::Shr, nv, loop.ci(t, 1)));
    }
    Stmt *result = e.load(r);
    if (!is_signed(t)) return result;
    Stmt *one = e.ci(t, 1), *minus_one = e.ci(t, -1), *zero = e.ci(t, 0);
    Stmt *odd = e.bin(B::Ne, e.bin(B::BitAnd, exp, one), zero);
    Stmt *inverse = e.sel(e.bin(B::Eq, base, one), one,
                          e.sel(e.bin(B::Eq, base, minus_one), e.sel(odd, minus_one, one), zero));
    return e.sel(e.bin(B::Lt, exp, zero), inverse, result);
  }

  // Shifts by the bit width or more (or by a negative amount) give 0, or the sign for an
  // arithmetic right shift, as PTX does; the primitive shift then always has an amount < bits.
  Stmt *shift(IrEmitter &e, B op, Stmt *a, Stmt *amount) {
    DataType t = a->dtype;
    int bits = bit_width(t);
    DataType ut = int_of_width(bit_width(amount->dtype), false);
    Stmt *too_far = e.bin(B::Ge, e.bitcast(amount, ut), e.ci(ut, bits));
    bool arithmetic = op == B::Shr && is_signed(t);
    Stmt *n = e.sel(too_far, e.ci(t, arithmetic ? bits - 1 : 0), e.cast(amount, t));
    Stmt *shifted = e.bin(op, a, n);
    return arithmetic ? shifted : e.sel(too_far, e.ci(t, 0), shifted);
  }

  // PopCount / Clz / Ctz through 32-bit ones: a narrower x zero-extended (leading zeros less the
  // added ones, trailing zeros at most the width), a 64-bit x as its two halves.
  Stmt *bit_count(IrEmitter &e, U op, Stmt *x) {
    DataType t = x->dtype, u32 = DataType::u32;
    int bits = bit_width(t);
    Stmt *u = e.bitcast(x, int_of_width(bits, false));
    if (bits < 32) {
      Stmt *r = e.un(op, e.cast(u, u32));
      if (op == U::Clz) r = e.bin(B::Sub, r, e.ci(u32, 32 - bits));
      if (op == U::Ctz) r = e.bin(B::Min, r, e.ci(u32, bits));
      return e.cast(r, t);
    }
    Stmt *lo = e.cast(u, u32), *hi = e.cast(e.bin(B::Shr, u, e.ci(u->dtype, 32)), u32);
    Stmt *r;
    if (op == U::PopCount) {
      r = e.bin(B::Add, e.un(op, lo), e.un(op, hi));
    } else {  // Clz counts from the high half, Ctz from the low one; an empty half adds 32
      Stmt *first = op == U::Clz ? hi : lo, *second = op == U::Clz ? lo : hi;
      r = e.sel(e.bin(B::Eq, first, e.ci(u32, 0)), e.bin(B::Add, e.un(op, second), e.ci(u32, 32)), e.un(op, first));
    }
    return e.cast(r, t);
  }

  // qd.math.fns (ir.h). PTX's fns.b32 is undefined for base > 31: nothing lies at or above such a
  // base (offset >= 0), and a downward search starts at bit 31. Elsewhere a branch-free 32-step loop
  // over the bits, upward or downward, counting the set ones in range.
  Stmt *fns(IrEmitter &e, Stmt *mask, Stmt *base, Stmt *offset) {
    DataType u32 = DataType::u32, i32 = DataType::i32;
    Stmt *none = e.ci(u32, 0xFFFFFFFF), *zero = e.ci(i32, 0);
    Stmt *past = e.bin(B::Gt, base, e.ci(u32, 31));
    Stmt *clamped = e.sel(past, e.ci(u32, 31), base);
    if (target_.has_native_fns()) {
      Stmt *f = e.add(StmtKind::Fns, u32, {mask, clamped, offset});
      return e.sel(e.both(past, e.bin(B::Ge, offset, zero)), none, f);
    }
    Stmt *bit_at = e.bin(B::BitAnd, e.bin(B::Shr, mask, clamped), e.ci(u32, 1));
    Stmt *at_base = e.sel(e.both(e.not_(past), e.bin(B::Ne, bit_at, e.ci(u32, 0))), base, none);
    Stmt *up = e.bin(B::Gt, offset, zero);
    Stmt *result = e.var(u32, none), *left = e.var(i32, e.un(U::Abs, offset)), *i = e.var(u32, e.ci(u32, 0));
    {
      IrEmitter loop = e.while_();
      Stmt *iv = loop.load(i);
      loop.if_(loop.bin(B::Ge, iv, loop.ci(u32, 32))).break_();
      Stmt *pos = loop.sel(up, iv, loop.bin(B::Sub, loop.ci(u32, 31), iv));
      Stmt *in_range = loop.sel(up, loop.bin(B::Ge, pos, base), loop.bin(B::Le, pos, base));
      Stmt *set = loop.bin(B::Ne, loop.bin(B::BitAnd, loop.bin(B::Shr, mask, pos), loop.ci(u32, 1)), loop.ci(u32, 0));
      Stmt *n = loop.load(left);
      Stmt *hit = loop.both(loop.both(in_range, set), loop.bin(B::Gt, n, loop.ci(i32, 0)));
      Stmt *after = loop.sel(hit, loop.bin(B::Sub, n, loop.ci(i32, 1)), n);
      loop.store(result, loop.sel(loop.both(hit, loop.bin(B::Eq, after, loop.ci(i32, 0))), pos, loop.load(result)));
      loop.store(left, after);
      loop.store(i, loop.bin(B::Add, iv, loop.ci(u32, 1)));
    }
    return e.sel(e.bin(B::Eq, offset, zero), at_base, e.load(result));
  }

  // ---- floats -----------------------------------------------------------------------------

  // r mod t for 0 <= r < t * 2^(mantissa bits - 2): q = trunc(r / t) is then off by at most one,
  // and r - q * t is computed exactly (r - p is exact by Sterbenz's lemma, then the product's
  // rounding error is taken off; the true remainder is representable). A huge t would overflow the
  // split in product_error: such rungs are computed scaled down by a power of two (exact there).
  Stmt *exact_step(IrEmitter &e, Stmt *r, Stmt *t) {
    DataType ft = r->dtype;
    int shift = ft == DataType::f64 ? 64 : ft == DataType::f32 ? 20 : 8;
    double huge = std::ldexp(1.0, ft == DataType::f64 ? 960 : ft == DataType::f32 ? 100 : 9);
    Stmt *big = e.bin(B::Ge, t, e.c(ft, huge));
    Stmt *down = e.sel(big, e.c(ft, std::ldexp(1.0, -shift)), e.c(ft, 1));
    Stmt *up = e.sel(big, e.c(ft, std::ldexp(1.0, shift)), e.c(ft, 1));
    r = e.bin(B::Mul, r, down);
    t = e.bin(B::Mul, t, down);
    // r / t >= 0: its floor from adds (floor_by_adds), not the target's Floor / Trunc, which
    // lavapipe emulates inexactly above 2^24 on some host CPUs (docs/backends.md, "lavapipe").
    Stmt *q = floor_by_adds(e, e.bin(B::Div, r, t));
    Stmt *p = e.bin(B::Mul, q, t);
    Stmt *x = e.bin(B::Sub, e.bin(B::Sub, r, p), product_error(e, q, t, p));
    x = e.sel(e.bin(B::Lt, x, e.c(ft, 0)), e.bin(B::Add, x, t), x);
    x = e.sel(e.bin(B::Ge, x, t), e.bin(B::Sub, x, t), x);
    return e.bin(B::Mul, x, up);
  }

  // C's fmod(a, b), exact on every target (SPIR-V's OpFRem and NVPTX's frem are a - b*trunc(a/b),
  // wrong when the quotient is not small). |a| is reduced against b * 2^(k*s) for a falling k, one
  // exact step per s bits of the quotient: a bounded loop (at most ~40 rounds for f64).
  Stmt *fmod(IrEmitter &e, Stmt *a, Stmt *b) {
    if (target_.has_exact_float_rem()) return e.bin(B::Rem, a, b);
    DataType t = a->dtype;
    int mantissa = t == DataType::f64 ? 53 : t == DataType::f32 ? 24 : 11;
    double ladder = std::ldexp(1.0, mantissa - 2), unladder = std::ldexp(1.0, 2 - mantissa);
    Stmt *ra = e.un(U::Abs, a), *d = e.un(U::Abs, b);
    Stmt *r = e.var(t, ra);
    Stmt *finite = e.both(e.bin(B::Lt, ra, e.c(t, INFINITY)), e.bin(B::Gt, d, e.c(t, 0)));
    {
      IrEmitter work = e.if_(e.both(finite, e.bin(B::Ge, ra, d)));
      Stmt *step = work.var(t, d);
      {  // climb: step = d * 2^(k*s) with r / step < 2^s
        IrEmitter up = work.while_();
        Stmt *next = up.bin(B::Mul, up.load(step), up.c(t, ladder));
        up.if_(up.not_(up.bin(B::Le, next, up.load(r)))).break_();
        up.store(step, next);
      }
      {  // descend: reduce r against each rung, down to d itself
        IrEmitter down = work.while_();
        Stmt *sv = down.load(step);
        down.store(r, exact_step(down, down.load(r), sv));
        down.if_(down.bin(B::Le, sv, d)).break_();
        down.store(step, down.bin(B::Mul, sv, down.c(t, unladder)));
      }
    }
    Stmt *mag = e.load(r);
    Stmt *result = e.sel(e.bin(B::Lt, a, e.c(t, 0)), e.un(U::Neg, mag), mag);
    // |a| < |b| (and +-0 with its sign, a finite a over an infinite b): a itself. NaN operands,
    // an infinite a or a zero b: NaN.
    Stmt *nan = e.c(t, NAN);
    Stmt *smaller = e.bin(B::Lt, ra, d);
    result = e.sel(smaller, a, result);
    return e.sel(e.either(e.not_(finite), e.bin(B::Ne, b, b)), e.sel(smaller, a, nan), result);
  }

  // Python's float %: the result takes the divisor's sign (0 takes it too).
  Stmt *float_mod(IrEmitter &e, Stmt *a, Stmt *b) {
    DataType t = a->dtype;
    Stmt *zero = e.c(t, 0);
    Stmt *m = fmod(e, a, b);
    Stmt *signs_differ = e.bin(B::Ne, e.bin(B::Lt, m, zero), e.bin(B::Lt, b, zero));
    m = e.sel(e.both(e.bin(B::Ne, m, zero), signs_differ), e.bin(B::Add, m, b), m);
    return zero_signed_like(e, m, b);
  }

  // Python's float //: (a - a % b) / b rounded to the nearest integer, which is exact where
  // floor(a / b) is not (1.0 // 0.1 is 9.0, as 1.0 % 0.1 is 0.0999...).
  Stmt *float_floordiv(IrEmitter &e, Stmt *a, Stmt *b) {
    DataType t = a->dtype;
    Stmt *zero = e.c(t, 0), *one = e.c(t, 1);
    Stmt *m = fmod(e, a, b);
    Stmt *div = e.bin(B::Div, e.bin(B::Sub, a, m), b);
    Stmt *signs_differ = e.bin(B::Ne, e.bin(B::Lt, m, zero), e.bin(B::Lt, b, zero));
    div = e.sel(e.both(e.bin(B::Ne, m, zero), signs_differ), e.bin(B::Sub, div, one), div);
    Stmt *fl = floor_by_adds(e, div);  // not the target's Floor (see exact_step)
    fl = e.sel(e.bin(B::Gt, e.bin(B::Sub, div, fl), e.c(t, 0.5)), e.bin(B::Add, fl, one), fl);
    // A zero quotient takes the sign of a / b; a zero or NaN divisor gives a / b's inf or NaN.
    Stmt *q = e.bin(B::Div, a, b);
    fl = zero_signed_like(e, fl, q);
    // A zero divisor gives a / b's inf or NaN; otherwise a NaN remainder (a NaN operand, an
    // infinite a) gives NaN, as in CPython.
    return e.sel(e.bin(B::Eq, b, zero), q, e.sel(e.bin(B::Ne, m, m), e.c(t, NAN), fl));
  }

  // ---- atomics ----------------------------------------------------------------------------

  // Native atomics stay (float atomic_sub as atomic_add of the negated operand, float exchange as an
  // exchange of the bits); CAS-loop atomics become a loop over the compare-exchange primitive:
  //   expected = load(x); loop { seen = cas(x, expected, op(expected, v)); if seen == expected:
  //   break; expected = seen }; old = expected
  // on the value's bits, so a NaN in memory compares equal to itself and cannot spin the loop.
  // A word CAS loop (an element narrower than the target's atomics) runs the same loop on the
  // aligned 32-bit word holding the element, replacing only the element's lane (see Word).
  Stmt *atomic(IrEmitter &e, Stmt &s) {
    AtomicOp op = s.atomic_op();
    Stmt *ptr = s.operands[0], *val = s.operands[1];
    DataType t = s.dtype;
    if (op == AtomicOp::Sub && is_real(t)) {  // no float sub instruction anywhere
      op = AtomicOp::Add;
      val = e.un(U::Neg, val);
    }
    DataType bits = is_real(t) ? int_of_width(bit_width(t), false) : t;
    if (s.lowering == Lowering::Native) {
      if (op == AtomicOp::Exchange && bits != t)
        return e.bitcast(primitive(e, AtomicOp::Exchange, bits, {ptr, e.bitcast(val, bits)}, s), t);
      std::vector<Stmt *> operands = {ptr, val};
      if (op == AtomicOp::Cas) operands.push_back(s.operands[2]);
      return primitive(e, op, t, operands, s);
    }
    // An ordered CAS loop: relaxed compare-exchanges between fences (a release fence before the
    // loop, an acquire fence after it), which order at least as much as the ordered
    // compare-exchange would. lavapipe miscompiles ordered compare-exchanges in a retry loop.
    bool release = s.order == MemoryOrder::Release || s.order == MemoryOrder::AcqRel;
    bool acquire = s.order == MemoryOrder::Acquire || s.order == MemoryOrder::AcqRel;
    if (release) fence(e, MemoryOrder::Release, s.scope);
    Word w = s.lowering == Lowering::WordCasLoop ? word_of(e, *ptr, t) : Word{ptr, bits};
    Stmt *load = e.add(StmtKind::GlobalLoad, w.dtype, {w.ptr});
    load->is_volatile = true;  // a first guess, re-read every call; the CAS checks it
    Stmt *expected = e.var(w.dtype, load);
    {
      IrEmitter loop = e.while_("cas.loop");
      Stmt *old_bits = loop.load(expected);
      Stmt *old = extract(loop, w, old_bits, t);
      Stmt *updated = op == AtomicOp::Exchange ? val
                      : op == AtomicOp::Sub  ? loop.bin(B::Sub, old, val)
                      : op == AtomicOp::Inc || op == AtomicOp::Dec ? wrapped(loop, op, old, val)
                      : op == AtomicOp::Cas ? loop.sel(loop.bin(B::Eq, old, val), s.operands[2], old)
                                             : loop.bin(*atomic_op_info(op).combine, old, val);
      Stmt *seen = primitive(loop, AtomicOp::Cas, w.dtype, {w.ptr, old_bits, insert(loop, w, old_bits, updated)}, s);
      seen->order = MemoryOrder::Relaxed;
      loop.if_(loop.bin(B::Eq, seen, old_bits)).break_();
      loop.store(expected, seen);
    }
    if (acquire) fence(e, MemoryOrder::Acquire, s.scope);
    return extract(e, w, e.load(expected), t);
  }

  // What a CAS loop compare-exchanges: the element's own bits, or (shift set) the aligned u32 word
  // holding a narrow element, whose bits are the word's `shift`..`shift + width` (little-endian).
  // Buffers start 4-byte aligned and end on a whole word (the runtimes pad their allocations, shared
  // arrays are padded, numpy arguments are staged when misaligned), so element i of a buffer of
  // n-byte elements is lane i % (4 / n) of word i / (4 / n), and its word lies inside the buffer.
  // A kernel-scope variable's 8-byte slot holds it in its first bytes: lane 0 of the slot's word.
  struct Word {
    Stmt *ptr;
    DataType dtype;
    Stmt *shift = nullptr;  // u32: the element's first bit in the word
    Stmt *keep = nullptr;   // u32: the word's other bits
  };

  Word word_of(IrEmitter &e, const Stmt &ptr, DataType t) {
    const BufferDesc &d = k_->buffers[ptr.ival];
    int width = bit_width(t), per_word = 32 / width;
    Word w{nullptr, DataType::u32};
    if (d.kind == BufferKind::Temps) {
      w.ptr = e.add(StmtKind::GlobalPtr, DataType::u32, {});
      w.ptr->byte_offset = ptr.byte_offset;
      w.shift = e.ci(DataType::u32, 0);
    } else {
      Stmt *i = linear_index(e, ptr);
      w.ptr = e.add(StmtKind::GlobalPtr, DataType::u32, {e.bin(B::Shr, i, e.ci(i->dtype, per_word == 4 ? 2 : 1))});
      Stmt *lane = e.cast(e.bin(B::BitAnd, i, e.ci(i->dtype, per_word - 1)), DataType::u32);
      w.shift = e.bin(B::Mul, lane, e.ci(DataType::u32, width));
    }
    w.ptr->ival = ptr.ival;
    Stmt *mask = e.bin(B::Shl, e.ci(DataType::u32, (int64_t(1) << width) - 1), w.shift);
    w.keep = e.un(U::BitNot, mask);
    return w;
  }

  // The row-major element index of a field / ndarray / shared-array pointer (as the codegens
  // compute it), in the target's index type.
  Stmt *linear_index(IrEmitter &e, const Stmt &ptr) {
    const BufferDesc &d = k_->buffers[ptr.ival];
    DataType t = target_.index_type();
    size_t runtime_dims = d.kind == BufferKind::Ndarray ? d.ndim - d.static_tail.size() : 0;
    Stmt *linear = nullptr;
    for (size_t i = 0; i < ptr.operands.size(); i++) {
      Stmt *idx = e.cast(ptr.operands[i], t);
      if (!linear) {
        linear = idx;
        continue;
      }
      Stmt *dim;
      if (d.kind != BufferKind::Ndarray) {
        dim = e.ci(t, d.shape[i]);
      } else if (i < runtime_dims) {
        dim = e.add(StmtKind::Arg, t, {});  // the 8-byte slot holds the shape at any width
        dim->ival = d.shape_arg_slot + static_cast<int64_t>(i);
      } else {
        dim = e.ci(t, d.static_tail[i - runtime_dims]);
      }
      linear = e.bin(B::Add, e.bin(B::Mul, linear, dim), idx);
    }
    return linear ? linear : e.ci(t, 0);
  }

  // The element (dtype t) in `bits`.
  Stmt *extract(IrEmitter &e, const Word &w, Stmt *bits, DataType t) {
    if (!w.shift) return e.bitcast(bits, t);
    DataType lane = int_of_width(bit_width(t), false);
    return e.bitcast(e.cast(e.bin(B::Shr, bits, w.shift), lane), t);
  }

  // `bits` with the element replaced by `v`.
  Stmt *insert(IrEmitter &e, const Word &w, Stmt *bits, Stmt *v) {
    if (!w.shift) return e.bitcast(v, w.dtype);
    Stmt *lane = e.cast(e.bitcast(v, int_of_width(bit_width(v->dtype), false)), DataType::u32);  // zero-extended
    return e.bin(B::BitOr, e.bin(B::BitAnd, bits, w.keep), e.bin(B::Shl, lane, w.shift));
  }

  // The primitive keeps the source atomic's memory order and scope (a CAS loop's compare-exchange
  // is the access that publishes or acquires; its first, plain load only guesses).
  Stmt *primitive(IrEmitter &e, AtomicOp op, DataType t, std::vector<Stmt *> operands, const Stmt &from) {
    Stmt *a = e.add(StmtKind::Atomic, t, std::move(operands));
    a->ival = static_cast<int64_t>(op);
    a->lowering = Lowering::Native;
    a->order = from.order;
    a->scope = from.scope;
    return a;
  }

  void fence(IrEmitter &e, MemoryOrder order, MemScope scope) {
    Stmt *f = e.add(StmtKind::Fence, DataType::none, {});
    f->order = order;
    f->scope = scope;
  }

  // PTX atom.inc: old >= bound ? 0 : old + 1; atom.dec: (old == 0 || old > bound) ? bound : old - 1.
  Stmt *wrapped(IrEmitter &e, AtomicOp op, Stmt *old, Stmt *bound) {
    DataType t = old->dtype;
    if (op == AtomicOp::Inc) return e.sel(e.bin(B::Ge, old, bound), e.ci(t, 0), e.bin(B::Add, old, e.ci(t, 1)));
    Stmt *wrap = e.either(e.bin(B::Eq, old, e.ci(t, 0)), e.bin(B::Gt, old, bound));
    return e.sel(wrap, bound, e.bin(B::Sub, old, e.ci(t, 1)));
  }

  const Target &target_;
  const KernelIR *k_ = nullptr;
  std::unordered_map<const Stmt *, bool> opaque_memo_;
  std::unordered_set<const Stmt *> opaque_vars_;  // local variables only ever given opaque values
};

}  // namespace

void legalize(KernelIR &k, const Target &target) { Legalizer(target).run(k); }

}  // namespace qd
