// Deterministic mode (qd.init(deterministic=True), @qd.kernel(deterministic=True); docs/atomics.md):
// every parallel loop's atomics give the same bits whatever the schedule, thread count, block size
// or backend.
//
// - Integer add / sub / mul / min / max / and / or / xor whose old value is unused: already
//   order-independent (wrapping arithmetic), kept.
// - f32 add / sub whose old value is unused: the exact sum, rounded once (round to nearest even).
//   Each operand is split into 32-bit limbs of a fixed-point number in units of 2^-149 (the
//   smallest subnormal): its 24-bit significand shifted by its exponent touches two limbs, added
//   with i64 atomics (integer sums: any order gives the same limbs). Nine limbs cover every f32;
//   each i64 holds 2^31 such updates before it could overflow. A flags word (atomic or) records
//   +inf, -inf, NaN and whether any addend is not -0.0. After the loop a pass adds the target's
//   old value, propagates the carries and rounds once into the target.
//   Same-address targets (constant / argument indices, kernel-scope variables) use static slots of
//   the temps buffer, one per limb, so privatization and subgroup aggregation still combine them;
//   their loop runs in chunks of at most 256 additions per target (cpu: 1024), each chunk summing an
//   addend's unsplit value in one of eight i64 accumulators (by limb) and adding them, split, to the
//   slots once; on the cpu a chunk whose addends allow it is summed exactly in f64 instead
//   (fast_sum). Other targets must be fields (a static size): 10 slots per element (Layout); on the
//   cpu a small field's updates go to a private copy per thread, one unsplit sum per limb position
//   (those in the loop body itself staged a chunk at a time and summed in f64 per element while a
//   window of exponents allows it: Window; else decoded, vectorised, then applied); a larger
//   one's limb slots hold unsplit sums wrapped to 64 bits, one atomic per update with its carries
//   (unsplit_add; so on Vulkan too), those in the loop body staged a chunk at a time, their rows
//   loaded before the atomics (apply_touched). On Vulkan the slots are slot-major, one summary
//   word per field records which slots any update added to (an or at one address, privatized),
//   and the final pass loads only those slots, rounds an element with one non-zero slot from it
//   alone and lists the others for a second task that rounds all their limbs. On the cpu a scatter into a field of more than 2^16
//   elements whose loop suits scatter.cpp's bucketing runs as its buckets instead, each bucket's
//   sums made by one thread, in f64 where its values allow it, else in limbs (apply_buckets); the
//   slots are then the fallback for a launch without scratch memory.
//   The runtimes zero the temps before every launch: no pass zeroes the slots (but the cpu's, for
//   a bucketed scatter's fallback: KernelIR::temps_zeroed_by_tasks).
// - A counter whose old value is used (`slot = qd.atomic_add(c[None], k)`, integer): the loop runs
//   as a stable compaction, in fixed chunks of the iteration range: a pass counts each chunk's
//   increments, a serial scan gives each chunk its first slot, and a second pass hands out the
//   slots in iteration order (what a serial run of the loop would return). On the cpu a chunk
//   whose body has the batched compaction's form runs as its batches (batch_chunk_compaction).
// - Everything else whose outcome depends on the order (exchange, cas, inc, dec, float mul / min /
//   max, a float's old value, ordered atomics, fences, atomic loads / stores, subgroup and block
//   operations, block-shared arrays) is a QuadrantsTypeError naming the line.
#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "transforms/ir_emitter.h"
#include "transforms/passes.h"

namespace qd {

namespace {

using B = BinaryOp;
using T = DataType;

constexpr int kLimbs = 9;           // limb k holds bits [32k, 32k + 32) of the value / 2^-149
constexpr int kSlots = kLimbs + 1;  // and a flags word
constexpr int kRow = 8;             // a large field element's flags and limbs 1..7 (Layout)
constexpr int64_t kSpreadElements = 4096;  // SPIR-V: fields up to this size spread their slots (Layout)
constexpr int64_t kCachedElements = 65536;  // fields up to this size: their slots stay in the caches
constexpr int64_t kMaxTempsSlots = int64_t(1) << 27;  // 1 GiB of accumulators per kernel
constexpr int32_t kChunks = 4096;   // stable compaction: the iteration range in this many chunks
constexpr int64_t kChunkAdds = 256;  // same-address sums: unsplit addends (< 2^55) per i64 accumulator
constexpr int64_t kCpuChunkAdds = 1024;  // cpu: addends per chunk (fast_sum), decoded 256 at a time
constexpr int kCpuSpan = 19;  // cpu: 1024 addends within 19 exponents: f64 partial sums below 2^(24 + 19 + 10)
constexpr int64_t kMaxPrivateElements = 1024;  // cpu: private sums (72 KiB per thread) up to this many elements
constexpr int kPrivSlots = kLimbs;  // a private copy's slots per element: eight unsplit sums, the flags
// cpu, a bucketed scatter: buckets of at most 2^13 elements (private arrays of 64 KiB of f64 sums,
// 32 KiB of counts and, for the exact path, 640 KiB of limbs)
constexpr int kBucketShift = 13;
enum : int64_t { kPosInf = 1, kNegInf = 2, kNaN = 4, kNotNegZero = 8 };
// SPIR-V, a field (field_sum): the kernel's summary word for it has bit kSlotBits + k where any
// element's slot k was added to, and kElementFlags where any element's flags word was or'ed.
constexpr int kSlotBits = 4;
constexpr int64_t kElementFlags = int64_t(1) << (kSlotBits + kLimbs);

[[noreturn]] void reject(const std::string &why, const SourceLoc &loc) {
  type_error("deterministic mode (qd.init(deterministic=True) / @qd.kernel(deterministic=True)): " + why, loc);
}

Stmt *i64(IrEmitter &e, int64_t v) { return e.ci(T::i64, v); }
Stmt *u64(IrEmitter &e, int64_t v) { return e.ci(T::u64, v); }

// An f32 operand as limb contributions: the signed value sw (|sw| < 2^55) at limb `limb`, split
// as lo (its low 32 bits, in [0, 2^32)) to limb `limb` and hi (sw >> 32, signed) to limb
// `limb + 1`, and its flags.
struct Parts {
  Stmt *limb, *sw, *lo, *hi, *flags;
};

// `it`: the integer type of the work up to the shift. i32 (the scalar paths: narrower operations)
// or i64 (the vectorised chunk sums: their limb compares then select i64 lanes directly, without
// widening each i32 mask).
Parts decode(IrEmitter &e, Stmt *v, DataType it = T::i32) {
  auto c = [&](int64_t x) { return e.ci(it, x); };
  Stmt *b = it == T::i32 ? e.bitcast(v, T::i32) : e.cast(e.bitcast(v, T::u32), T::i64);  // (i64: zero-extended)
  Stmt *exp = e.bin(B::BitAnd, e.bin(B::Shr, b, c(23)), c(255));
  Stmt *frac = e.bin(B::BitAnd, b, c(0x7FFFFF));
  Stmt *neg = e.bin(B::Ne, e.bin(B::BitAnd, e.bin(B::Shr, b, c(31)), c(1)), c(0));
  Stmt *special = e.bin(B::Eq, exp, c(255));
  Stmt *mant = e.sel(e.bin(B::Eq, exp, c(0)), frac, e.bin(B::BitOr, frac, c(0x800000)));
  mant = e.sel(special, c(0), mant);
  Stmt *shift = e.bin(B::Sub, e.bin(B::Max, exp, c(1)), c(1));  // value = mant << shift
  Stmt *w = e.bin(B::Shl, e.cast(mant, T::i64), e.cast(e.bin(B::BitAnd, shift, c(31)), T::i64));  // < 2^55
  Stmt *sw = e.sel(neg, e.un(UnaryOp::Neg, w), w);
  Stmt *lo = e.bin(B::BitAnd, sw, i64(e, 0xFFFFFFFF)), *hi = e.bin(B::Shr, sw, i64(e, 32));  // (arithmetic)
  Stmt *inf = e.sel(neg, c(kNegInf), c(kPosInf));
  Stmt *code = e.sel(special, e.sel(e.bin(B::Ne, frac, c(0)), c(kNaN), inf), c(0));
  Stmt *neg_zero = it == T::i32 ? c(std::numeric_limits<int32_t>::min()) : c(0x80000000LL);
  Stmt *flags = e.bin(B::BitOr, code, e.sel(e.bin(B::Ne, b, neg_zero), c(kNotNegZero), c(0)));
  return {e.cast(e.bin(B::Shr, shift, c(5)), T::i64), sw, lo, hi, e.cast(flags, T::i64)};
}

// What limb k receives from p.
Stmt *contribution(IrEmitter &e, const Parts &p, int k) {
  return e.sel(e.bin(B::Eq, p.limb, i64(e, k)), p.lo, e.sel(e.bin(B::Eq, p.limb, i64(e, k - 1)), p.hi, i64(e, 0)));
}

// The f64 paths (fast_sum, Window): a chunk's smallest and largest non-zero magnitude, kept as
// the u32 minimum of (bits << 1) - 1 (zeros wrap to the largest) and maximum of bits << 1.
void track_range(IrEmitter &e, Stmt *bits, Stmt *low, Stmt *high) {
  Stmt *mag = e.bin(B::Shl, bits, e.ci(T::u32, 1));
  e.store(low, e.bin(B::Min, e.load(low), e.bin(B::Sub, mag, e.ci(T::u32, 1))));
  e.store(high, e.bin(B::Max, e.load(high), mag));
}

// bits << 1 (track_range's) -> s, the exponent of the addend's value m 2^s in units of 2^-149.
Stmt *exponent_s(IrEmitter &e, Stmt *mag) {
  Stmt *ex = e.cast(e.bin(B::Shr, mag, e.ci(T::u32, 24)), T::i64);
  return e.bin(B::Sub, e.bin(B::Max, ex, i64(e, 1)), i64(e, 1));
}

// An exact f64 sum of addends (a multiple of 2^p units) as the integer count of 2^p units.
Stmt *units(IrEmitter &e, Stmt *sum, Stmt *p) {
  Stmt *scale = e.bitcast(e.bin(B::Shl, e.bin(B::Sub, i64(e, 1023 + 149), p), i64(e, 52)), T::f64);  // 2^(149 - p)
  return e.cast(e.bin(B::Mul, sum, scale), T::i64);
}

// Carries propagated: ten digits, 0..8 in [0, 2^32), the last the signed rest.
std::vector<Stmt *> normalise(IrEmitter &e, const std::vector<Stmt *> &limbs) {
  std::vector<Stmt *> d;
  Stmt *carry = i64(e, 0);
  for (Stmt *l : limbs) {
    Stmt *v = e.bin(B::Add, l, carry);
    d.push_back(e.bin(B::BitAnd, v, i64(e, 0xFFFFFFFF)));
    carry = e.bin(B::Shr, v, i64(e, 32));
  }
  d.push_back(carry);
  return d;
}

// The f32 nearest (ties to even) to (-1)^neg (w + a fraction, non-zero if `sticky`) 2^base in units
// of 2^-149 (w: u64, base: i64 >= 0; a non-zero fraction only where w >= 2^24), the flags' zero sign
// and inf / NaN applied.
Stmt *round_bits(IrEmitter &e, Stmt *w, Stmt *base, Stmt *sticky, Stmt *neg, Stmt *flags) {
  auto u = [&](Stmt *x) { return e.cast(x, T::u64); };
  Stmt *top = e.bin(B::Sub, i64(e, 63), e.cast(e.un(UnaryOp::Clz, w), T::i64));  // w's highest bit
  Stmt *p = e.bin(B::Add, base, top);
  // q in [2^23, 2^24]: w shifted right by `shift` (rounded) or left by `left` (exact)
  Stmt *shift = u(e.bin(B::Max, e.bin(B::Sub, top, i64(e, 23)), i64(e, 0)));
  Stmt *left = u(e.bin(B::Max, e.bin(B::Sub, i64(e, 23), top), i64(e, 0)));
  Stmt *q = e.bin(B::Shl, e.bin(B::Shr, w, shift), left);
  Stmt *rem = e.bin(B::BitAnd, w, e.bin(B::Sub, e.bin(B::Shl, u64(e, 1), shift), u64(e, 1)));
  Stmt *half = e.bin(B::Shr, e.bin(B::Shl, u64(e, 1), shift), u64(e, 1));
  Stmt *odd = e.bin(B::Ne, e.bin(B::BitAnd, q, u64(e, 1)), u64(e, 0));
  Stmt *up = e.both(e.bin(B::Ne, shift, u64(e, 0)),
                    e.either(e.bin(B::Gt, rem, half), e.both(e.bin(B::Eq, rem, half), e.either(sticky, odd))));
  // the exponent field (p - 22) plus the significand's bits, a carry included
  Stmt *bits = e.bin(B::Add, e.bin(B::Shl, u(e.bin(B::Sub, p, i64(e, 23))), u64(e, 23)), q);
  bits = e.bin(B::Add, bits, e.cast(up, T::u64));
  bits = e.bin(B::Min, bits, u64(e, 0x7F800000));           // overflow: infinity
  bits = e.sel(e.bin(B::Lt, p, i64(e, 24)), w, bits);         // below 2^-125: exact, bits = value
  bits = e.bin(B::BitOr, bits, e.bin(B::Shl, e.cast(neg, T::u64), u64(e, 31)));
  auto has = [&](int64_t f) { return e.bin(B::Ne, e.bin(B::BitAnd, flags, i64(e, f)), i64(e, 0)); };
  Stmt *zero = e.sel(has(kNotNegZero), u64(e, 0), u64(e, 0x80000000LL));  // -0.0 only if every addend is
  bits = e.sel(e.bin(B::Eq, w, u64(e, 0)), zero, bits);
  bits = e.sel(has(kNegInf), u64(e, 0xFF800000LL), bits);
  bits = e.sel(has(kPosInf), u64(e, 0x7F800000), bits);
  bits = e.sel(e.either(has(kNaN), e.both(has(kPosInf), has(kNegInf))), u64(e, 0x7FC00000), bits);
  return e.bitcast(e.cast(bits, T::u32), T::f32);
}

// The f32 nearest (ties to even) to the exact sum the limbs and flags hold.
Stmt *round_f32(IrEmitter &e, const std::vector<Stmt *> &limbs, Stmt *flags) {
  Stmt *neg = e.bin(B::Lt, normalise(e, limbs).back(), i64(e, 0));
  std::vector<Stmt *> mag;
  for (Stmt *l : limbs) mag.push_back(e.sel(neg, e.un(UnaryOp::Neg, l), l));
  std::vector<Stmt *> d = normalise(e, mag);  // |sum| < 2^308: d[9] < 2^20
  auto u = [&](Stmt *x) { return e.cast(x, T::u64); };
  auto pair = [&](int k) { return e.bin(B::BitOr, e.bin(B::Shl, u(d[k]), u64(e, 32)), u(d[k - 1])); };
  // The two digits from the highest nonzero one down (W), whether any lower digit is nonzero, and
  // W's place.
  Stmt *w = pair(1), *sticky = e.ci(T::i32, 0), *base = i64(e, 0), *below = i64(e, 0);
  for (int k = 2; k < kSlots; k++) {
    below = e.bin(B::BitOr, below, d[k - 2]);
    Stmt *nz = e.bin(B::Ne, d[k], i64(e, 0));
    w = e.sel(nz, pair(k), w);
    sticky = e.sel(nz, e.bin(B::Ne, below, i64(e, 0)), sticky);
    base = e.sel(nz, i64(e, 32 * (k - 1)), base);
  }
  return round_bits(e, w, base, sticky, neg, flags);
}

// round_f32 of a value held in one digit position, the signed v (|v| < 2^63) times 2^(32 k) (k:
// i64), no inf / NaN in `flags`, where that is not below 2^-126 (`normal`; zero counts): the
// conversion to f32 rounds v once to the nearest, ties to even (Vulkan: correctly rounded), and
// scaling by a power of two is exact while the result is normal (an exponent past 254 is the
// rounded sum's overflow: an infinity). No integer rounding: lavapipe has no vector clz.
struct Single {
  Stmt *value, *normal;
};
Single round_single(IrEmitter &e, Stmt *v, Stmt *k, Stmt *flags) {
  auto c = [&](int64_t x) { return e.ci(T::i32, x); };
  Stmt *rb = e.bitcast(e.cast(v, T::f32), T::i32);
  Stmt *exp = e.bin(B::Add, e.bin(B::BitAnd, e.bin(B::Shr, rb, c(23)), c(255)),
                    e.bin(B::Sub, e.bin(B::Mul, e.cast(k, T::i32), c(32)), c(149)));  // the result's exponent field
  Stmt *sign = e.bin(B::BitAnd, rb, c(std::numeric_limits<int32_t>::min()));
  Stmt *bits = e.bin(B::BitOr, e.bin(B::BitAnd, rb, c(0x807FFFFF)), e.bin(B::Shl, e.bin(B::Min, exp, c(255)), c(23)));
  bits = e.sel(e.bin(B::Ge, exp, c(255)), e.bin(B::BitOr, sign, c(0x7F800000)), bits);
  Stmt *zero = e.bin(B::Eq, v, i64(e, 0));  // -0.0 only if every addend is
  Stmt *nnz = e.bin(B::Ne, e.bin(B::BitAnd, flags, i64(e, kNotNegZero)), i64(e, 0));
  bits = e.sel(zero, e.sel(nnz, c(0), c(std::numeric_limits<int32_t>::min())), bits);
  return {e.bitcast(bits, T::f32), e.either(zero, e.bin(B::Ge, exp, c(1)))};
}

Stmt *atomic(IrEmitter &e, AtomicOp op, Stmt *ptr, Stmt *v) {
  Stmt *a = e.add(StmtKind::Atomic, v->dtype, {ptr, v});
  a->ival = static_cast<int64_t>(op);
  return a;
}

Stmt *range_for(IrEmitter &e, Stmt *begin, Stmt *end, bool serial) {
  Stmt *loop = e.add(StmtKind::RangeFor, T::none, {begin, end});
  loop->serialize = serial;
  loop->body = std::make_unique<Block>();
  loop->body->owner = loop;
  return loop;
}

// A parallel task `for e in range(n)`; its loop's body is where the caller emits.
Task parallel_task(int64_t n, const SourceLoc &loc, Stmt *&loop) {
  Task t;
  t.parallel = true;
  IrEmitter pe(t.prologue, loc);
  loop = range_for(pe, pe.ci(T::i32, 0), pe.ci(T::i32, n), false);
  t.body.push(std::move(t.prologue.stmts.back()));  // the loop belongs in the body, its bounds in the prologue
  t.prologue.stmts.pop_back();
  return t;
}

int64_t numel(const BufferDesc &d) {
  int64_t n = 1;
  for (int64_t s : d.shape) n *= s;
  return n;
}

class Determinizer {
 public:
  Determinizer(KernelIR &k, const qd::Target &target)
      : k_(k), target_(target), cpu_(target.backend == Backend::Cpu),
        spirv_(target.backend == Backend::Vulkan || target.backend == Backend::Metal) {}

  void run() {
    std::vector<Task> out;
    for (Task &t : k_.tasks) {
      std::vector<Task> before, after;
      if (t.parallel) rewrite(t, before, after);
      for (Task &b : before) out.push_back(std::move(b));
      out.push_back(std::move(t));
      for (Task &a : after) out.push_back(std::move(a));
    }
    k_.tasks = std::move(out);
    for (Task &t : k_.tasks)  // (the tasks moved: their blocks' statements point at where they are now)
      for (Block *b : {&t.prologue, &t.body, &t.pre_loop, &t.post_loop})
        for (auto &s : b->stmts) s->parent = b;
  }

 private:
  // Where a field's n elements keep their ten slots (i32 slot indices from the region's first).
  // A field the caches hold: element el's flags, then its limbs 0..8, at 10 el. A larger one
  // (cache misses): el's flags and limbs 1..7 are its row of kRow slots (8 el .. 8 el + 7, one
  // 64-byte line: an update of a magnitude in [2^-94, 2^98) touches one line), limbs 0 and 8
  // (the smallest and largest magnitudes) at 8n + 2 el and 8n + 2 el + 1.
  struct Layout {
    int64_t n;
    bool slot_major = false;  // SPIR-V: the flags of every element, then slot 0 of every element, ...
    int64_t spread = 1;       // slot_major: slots `spread` apart (8: each in a cache line of its own)
    bool rows() const { return n > kCachedElements && !slot_major; }
    Stmt *spaced(IrEmitter &e, Stmt *i) const { return spread == 1 ? i : e.bin(B::Mul, i, e.ci(T::i32, spread)); }
    Stmt *flags(IrEmitter &e, Stmt *el) const {
      return slot_major ? spaced(e, el) : e.bin(B::Mul, el, e.ci(T::i32, rows() ? kRow : kSlots));
    }
    Stmt *limb(IrEmitter &e, Stmt *el, Stmt *k) const {  // k: i32
      if (slot_major)
        return spaced(e, e.bin(B::Add, e.bin(B::Mul, e.bin(B::Add, k, e.ci(T::i32, 1)), e.ci(T::i32, n)), el));
      if (!rows()) return e.bin(B::Add, flags(e, el), e.bin(B::Add, k, e.ci(T::i32, 1)));
      Stmt *in_row = e.both(e.bin(B::Ge, k, e.ci(T::i32, 1)), e.bin(B::Lt, k, e.ci(T::i32, kRow)));
      Stmt *side = e.bin(B::Add, e.ci(T::i32, kRow * n), e.bin(B::Add, e.bin(B::Mul, el, e.ci(T::i32, 2)), e.bin(B::Shr, k, e.ci(T::i32, 3))));
      return e.sel(in_row, e.bin(B::Add, flags(e, el), k), side);
    }
  };

  struct Target {
    std::vector<Stmt *> atomics;
    bool dynamic = false;  // an array of slots per element of a field
  };

  // A slot region of the temps buffer: `count` i64 slots from slot `first`.
  // (The runtimes zero the temps before every launch.) `align`: first is a multiple of it.
  int64_t reserve(int64_t count, const SourceLoc &loc, int64_t align = 1) {
    if (k_.temps_buffer < 0) k_.temps_buffer = k_.add_buffer(BufferDesc{BufferKind::Temps, T::u8});
    int64_t first = (k_.temps_bytes / 8 + align - 1) / align * align;
    if (first + count > kMaxTempsSlots)
      reject("the f32 sums' exact accumulators would take more than 1 GiB (10 x 8 bytes per element of the "
             "target fields, 11 x 8 on Vulkan)", loc);
    k_.temps_bytes = 8 * (first + count);
    return first;
  }
  Stmt *slot(IrEmitter &e, int64_t s, Stmt *index = nullptr) {
    Stmt *p = e.add(StmtKind::GlobalPtr, T::i64, index ? std::vector<Stmt *>{index} : std::vector<Stmt *>{});
    p->ival = k_.temps_buffer;
    p->byte_offset = 8 * s;
    return p;
  }

  // The key of a same-address pointer: buffer, slot offset and its constant / argument indices.
  using Key = std::tuple<int64_t, int64_t, std::vector<std::tuple<int, int64_t, int>>>;
  static bool invariant(const Stmt &ptr) {
    for (const Stmt *i : ptr.operands)
      if (i->kind != StmtKind::Const && i->kind != StmtKind::Arg) return false;
    return true;
  }
  static Key key(const Stmt &ptr) {
    Key k{ptr.ival, ptr.byte_offset, {}};
    for (const Stmt *i : ptr.operands) std::get<2>(k).emplace_back(static_cast<int>(i->kind), i->ival, static_cast<int>(i->dtype));
    return k;
  }

  // Whether some real function has an atomic on memory (its code is not rewritten here).
  bool calls_atomics() const {
    bool found = false;
    for (const FunctionDesc &f : k_.functions)
      for_each_stmt(f.code->body, [&](Stmt &s) {
        found |= s.kind == StmtKind::Atomic && s.operands[0]->kind == StmtKind::GlobalPtr;
      });
    return found;
  }

  void check(Task &t, const std::unordered_set<const Stmt *> &used, std::vector<Stmt *> &floats,
             std::vector<Stmt *> &counters) {
    for_each_stmt(*t.loop()->body, [&](Stmt &s) {
      if (s.kind == StmtKind::Call && calls_atomics())
        reject("a call of a recursive qd.real_func with atomics in a parallel loop: its atomics are not made "
               "deterministic", s.loc);
      if (s.kind == StmtKind::Fence) reject("qd.atomic_fence orders accesses whose interleaving is the schedule's", s.loc);
      if (s.is_atomic)
        reject("qd.atomic_load / qd.atomic_store in a parallel loop observe or race with other threads", s.loc);
      if (s.kind == StmtKind::Simt) {
        auto op = static_cast<SimtOp>(s.op);
        if (op != SimtOp::BlockSync && op != SimtOp::SubgroupSync)
          reject(std::string("qd.simt ") + simt_op_name(op) + " depends on the block / subgroup layout", s.loc);
      }
      if (s.kind == StmtKind::GlobalPtr && k_.buffers[s.ival].kind == BufferKind::Shared)
        reject("a block-shared array holds what the iterations of one block put there: which iterations share "
               "a block is the block size's",
               s.loc);
      if (s.kind != StmtKind::Atomic || s.operands[0]->kind != StmtKind::GlobalPtr) return;
      AtomicOp op = s.atomic_op();
      std::string name = std::string("qd.atomic_") + atomic_op_info(op).name;
      bool is_used = used.count(&s) > 0;
      if (s.order != MemoryOrder::Relaxed) reject(name + " with an ordering synchronizes through memory", s.loc);
      switch (op) {
        case AtomicOp::Exchange: case AtomicOp::Cas: case AtomicOp::Inc: case AtomicOp::Dec:
          reject(name + " in a parallel loop: which thread's update comes last is the schedule's", s.loc);
        default: break;
      }
      if (is_real(s.dtype)) {
        if (is_used) reject(name + " on a float whose old value is used: it depends on the order of the updates", s.loc);
        if (op != AtomicOp::Add && op != AtomicOp::Sub)
          reject(name + " on floats: only float add / sub have a deterministic lowering (float min / max depend on "
                        "the order for -0.0 / +0.0 and NaN; use an integer key)", s.loc);
        if (s.dtype != T::f32) reject(name + " on " + dtype_name(s.dtype) + ": deterministic float sums are f32 only", s.loc);
        floats.push_back(&s);
        return;
      }
      if (!is_used) {  // integer, unused: any order gives the same bits (and may step a counter)
        if ((op == AtomicOp::Add || op == AtomicOp::Sub) && invariant(*s.operands[0])) steps_.push_back(&s);
        return;
      }
      if ((op != AtomicOp::Add && op != AtomicOp::Sub) || !thread_uniform_address(k_, *s.operands[0]))
        reject(name + " whose old value is used: only a counter (qd.atomic_add(c[None], k) on one integer "
                      "element, the result used as a slot) has a deterministic lowering", s.loc);
      counters.push_back(&s);
    });
  }

  // Every access in the loop to the buffers in `targets` is one of `atomics`.
  void check_exclusive(Task &t, const std::vector<Stmt *> &atomics, const std::set<std::pair<int64_t, int64_t>> &targets) {
    std::unordered_set<const Stmt *> ptrs;
    for (Stmt *a : atomics) ptrs.insert(a->operands[0]);
    for_each_stmt(*t.loop()->body, [&](Stmt &s) {
      for (size_t i = 0; i < s.operands.size(); i++) {
        Stmt *o = s.operands[i];
        if (o->kind != StmtKind::GlobalPtr) continue;
        int64_t off = k_.buffers[o->ival].kind == BufferKind::Temps ? o->byte_offset : 0;
        if (!targets.count({o->ival, off})) continue;
        bool mine = i == 0 && s.kind == StmtKind::Atomic && ptrs.count(o);
        if (!mine)
          reject("'" + (k_.buffers[o->ival].name.empty() ? std::string("a kernel variable") : k_.buffers[o->ival].name) +
                     "' is read or written in the parallel loop that accumulates into it atomically: what it sees "
                     "depends on the schedule",
                 s.loc);
      }
    });
  }

  void rewrite(Task &t, std::vector<Task> &before, std::vector<Task> &after) {
    // Values with a live use: a store to a variable nobody reads (the value of `x[i] += v` with a
    // computed vector component, which the front end keeps in a variable) is not one.
    std::unordered_map<const Stmt *, std::vector<const Stmt *>> users;
    for_each_stmt(t.body, [&](Stmt &s) {
      for (Stmt *o : s.operands) users[o].push_back(&s);
    });
    auto has_users = [&](const Stmt *v) { return users.count(v) > 0; };  // (no insertion while iterating)
    auto read = [&](const Stmt *var) {
      for (const Stmt *u : users.at(var))
        if (u->kind == StmtKind::LocalLoad && has_users(u)) return true;
      return false;
    };
    std::unordered_set<const Stmt *> used;
    for (auto &[v, us] : users)
      for (const Stmt *u : us)
        if (!(u->kind == StmtKind::LocalStore && u->operands[1] == v && u->operands[0] != v && !read(u->operands[0])))
          used.insert(v);
    std::vector<Stmt *> floats, counters;
    steps_.clear();
    loop_body_ = t.loop()->body.get();
    chunk_outer_ = chunk_inner_ = chunk_lo_ = chunk_trips_ = nullptr;
    chunk_ = 1;
    chunk_sums_ = staged_ = false;
    check(t, used, floats, counters);
    if (!floats.empty() && !counters.empty())
      reject("a float atomic sum and a slot counter in one parallel loop; put them in separate loops", counters[0]->loc);
    if (!floats.empty()) sums(t, floats, before, after);
    if (!counters.empty()) compaction(t, counters, before);
  }

  // Removes a rewritten atomic; what still names its value is dead (a variable nobody reads).
  // `scope`: where its uses are (default: the loop body).
  void drop_atomic(Stmt *a, Block *scope = nullptr) {
    IrEmitter e(a);
    replace_uses(scope ? *scope : *loop_body_, a, e.c(a->dtype, 0));
    std::erase_if(a->parent->stmts, [&](auto &s) { return s.get() == a; });
  }

  // --- f32 sums -------------------------------------------------------------------------------

  void sums(Task &t, const std::vector<Stmt *> &floats, std::vector<Task> &before, std::vector<Task> &after) {
    std::set<std::pair<int64_t, int64_t>> targets;
    std::map<int64_t, std::vector<Stmt *>> by_buffer;
    for (Stmt *a : floats) {
      const Stmt &p = *a->operands[0];
      bool temps = k_.buffers[p.ival].kind == BufferKind::Temps;
      targets.insert({p.ival, temps ? p.byte_offset : 0});
      by_buffer[p.ival].push_back(a);
    }
    check_exclusive(t, floats, targets);
    Task serial_after;
    std::vector<std::vector<Stmt *>> uniform_targets;
    std::vector<std::pair<int64_t, std::vector<Stmt *>>> field_targets;
    for (auto &[buffer, atomics] : by_buffer) {
      const BufferDesc d = k_.buffers[buffer];
      std::map<Key, std::vector<Stmt *>> keys;
      bool any_arg = false, all_invariant = true;
      for (Stmt *a : atomics) {
        const Stmt &p = *a->operands[0];
        all_invariant = all_invariant && invariant(p);
        for (const Stmt *i : p.operands) any_arg = any_arg || i->kind == StmtKind::Arg;
        keys[key(p)].push_back(a);
      }
      // Same-address slots need distinct keys to be distinct elements: constants only, or one key.
      bool uniform = all_invariant && (keys.size() == 1 || !any_arg || d.kind == BufferKind::Temps);
      if (uniform) {
        for (auto &[key, list] : keys) uniform_targets.push_back(list);
        continue;
      }
      if (d.kind != BufferKind::Field)
        reject("qd.atomic_add of f32 into '" + d.name + "' at a computed index: deterministic sums into an ndarray "
                   "need the same element in every iteration (constant indices); use a field for a scatter",
               atomics[0]->loc);
      field_targets.emplace_back(buffer, atomics);
    }
    // Same-address sums whose atomics run at most once per iteration each (not in an inner loop):
    // the loop runs in chunks that their accumulators cannot overflow (uniform_sum). Not with
    // barriers: every thread of a block must reach them equally often.
    // On the cpu a small field's updates in the loop body itself (not in an if or an inner loop)
    // are decoded a chunk at a time into arrays (a vectorised loop) and applied to the thread's
    // private copy after the chunk (field_sum).
    size_t most = 0;
    bool barrier = false, once = true, staged = false, skips = false;  // skips: an update may not run
    for_each_stmt(*loop_body_, [&](Stmt &s) {
      barrier = barrier || s.kind == StmtKind::Simt;
      skips = skips || s.kind == StmtKind::Continue || s.kind == StmtKind::Break || s.kind == StmtKind::Return;
    });
    for (const auto &list : uniform_targets) {
      most = std::max(most, list.size());
      for (Stmt *a : list)
        for (Block *b = a->parent; b != loop_body_; b = b->owner->parent) once = once && b->owner->kind == StmtKind::If;
    }
    for (const auto &[buffer, atomics] : field_targets)
      for (Stmt *a : atomics) staged = staged || (cpu_ && a->parent == loop_body_);  // (field_sum: a window or touched rows)
    staged = staged && !skips;
    skips_ = skips;
    chunk_sums_ = !barrier && most > 0 && once && static_cast<int64_t>(most) <= kChunkAdds;
    staged_ = !barrier && staged;
    // (Vulkan on a CPU device, Cap::cpu_device: the staged form needs per-thread arrays)
    replay_ = (cpu_ || (target_.features.has(Cap::cpu_device) && target_.features.has(Cap::shader_float64))) &&
              uniform_targets.size() == 1 && field_targets.empty() && effects_only(floats);
    const int64_t adds = cpu_ || replay_ ? kCpuChunkAdds : kChunkAdds;
    // cpu: a scatter into one large field, the loop's only sums, runs bucketed where the runtime
    // has the scratch memory for it (bucketed_sum); the loop's lowering below is its fallback.
    fallback_ = cpu_ && uniform_targets.empty() && field_targets.size() == 1 &&
                bucketed_sum(t, field_targets[0].first, field_targets[0].second, before);
    if (chunk_sums_ || staged_) chunk_loop(t, chunk_sums_ ? adds / static_cast<int64_t>(most) : adds);
    for (const auto &list : uniform_targets) uniform_sum(t, list, serial_after);
    for (auto &[buffer, atomics] : field_targets) field_sum(t, buffer, atomics, before, after, serial_after);
    if (!serial_after.body.stmts.empty()) after.push_back(std::move(serial_after));
  }

  // The loop body has no effect but `atomics`: it only computes (loads, arithmetic, its own
  // variables, control flow), so running an iteration again gives the same addends (fast_sum).
  bool effects_only(const std::vector<Stmt *> &atomics) const {
    std::unordered_set<const Stmt *> mine(atomics.begin(), atomics.end()), vars;
    bool pure = true;
    for_each_stmt(*loop_body_, [&](Stmt &s) {
      switch (s.kind) {
        case StmtKind::Const: case StmtKind::Arg: case StmtKind::GlobalPtr: case StmtKind::LocalLoad:
        case StmtKind::Unary: case StmtKind::Binary: case StmtKind::Select: case StmtKind::If: case StmtKind::While:
        case StmtKind::RangeFor: case StmtKind::LoopIndex: case StmtKind::Break: case StmtKind::Continue:
        case StmtKind::Fns: break;
        case StmtKind::Alloca: vars.insert(&s); break;  // (before its stores)
        case StmtKind::LocalStore: pure = pure && vars.count(s.operands[0]); break;
        case StmtKind::GlobalLoad: pure = pure && !s.is_atomic && !s.is_volatile; break;
        case StmtKind::Atomic: pure = pure && mine.count(&s); break;
        default: pure = false;
      }
    });
    return pure;
  }

  // An atomic's addend (sub adds the negation).
  static Stmt *addend(IrEmitter &e, Stmt *a) {
    return a->atomic_op() == AtomicOp::Sub ? e.un(UnaryOp::Neg, a->operands[1]) : a->operands[1];
  }

  // The parallel loop as chunks of at most `size` iterations: a new parallel loop over the chunks,
  // each running the original loop over its chunk, serially. On the cpu chunk c is `size`
  // consecutive iterations (one thread's vectorised run); on a GPU it is every count-th iteration
  // from begin + c (count chunks), so that neighbouring threads read neighbouring elements; but on
  // a CPU device (Cap::cpu_device, under replay_) consecutive ones as on the cpu: lavapipe loads an
  // invocation's elements lane by lane, and each lane then reads a line of its own in order (a
  // 2^22 sum: 0.69-0.72x the mode-off one, against 1.12-1.14x strided).
  void chunk_loop(Task &t, int64_t size) {
    Stmt *loop = t.loop();
    const SourceLoc loc = loop->loc;
    IrEmitter pe(t.prologue, loc);
    Stmt *begin = pe.cast(loop->operands[0], T::i64), *end = pe.cast(loop->operands[1], T::i64);
    Stmt *n = pe.bin(B::Max, pe.bin(B::Sub, end, begin), i64(pe, 0));
    Stmt *count = pe.cast(pe.bin(B::Div, pe.bin(B::Add, n, i64(pe, size - 1)), i64(pe, size)), T::i32);
    Stmt *outer = range_for(pe, pe.ci(T::i32, 0), count, false);
    outer->block_dim = loop->block_dim;
    std::unique_ptr<Stmt> inner = std::move(t.body.stmts[0]);
    t.body.stmts.clear();
    t.body.push(std::move(t.prologue.stmts.back()));
    t.prologue.stmts.pop_back();
    IrEmitter e(*outer->body, loc);
    Stmt *c = e.cast(e.add(StmtKind::LoopIndex, T::i32, {outer}), T::i64);
    DataType it = inner->operands[0]->dtype;
    if (cpu_ || replay_) {  // consecutive iterations (a CPU device too: replay_)
      Stmt *lo = e.bin(B::Add, begin, e.bin(B::Mul, c, i64(e, size)));
      Stmt *hi = e.bin(B::Min, e.bin(B::Add, lo, i64(e, size)), end);
      inner->operands = {e.cast(lo, it), e.cast(hi, it)};
      chunk_lo_ = e.cast(lo, T::i32);
      chunk_trips_ = e.cast(e.bin(B::Sub, hi, lo), T::i32);
    } else {  // trips j = 0 .. (n - c - 1) / count, iteration begin + c + j * count
      Stmt *count64 = e.cast(count, T::i64);
      Stmt *trips = e.bin(B::Div, e.bin(B::Add, e.bin(B::Sub, n, c), e.bin(B::Sub, count64, i64(e, 1))), count64);
      inner->operands = {e.ci(it, 0), e.cast(trips, it)};
      std::vector<Stmt *> indices;
      for_each_stmt(*inner->body, [&](Stmt &x) {
        if (x.kind == StmtKind::LoopIndex && x.operands[0] == inner.get()) indices.push_back(&x);
      });
      IrEmitter in(inner->body->stmts[0].get());  // (the body has the sums' atomics)
      Stmt *j = in.cast(in.add(StmtKind::LoopIndex, T::i32, {inner.get()}), T::i64);
      Stmt *i = in.cast(in.bin(B::Add, in.bin(B::Add, begin, c), in.bin(B::Mul, j, count64)), it);
      for (Stmt *x : indices) replace_uses(*inner->body, x, i);
    }
    inner->serialize = true;
    inner->block_dim = 0;
    inner->label = "deterministic chunk";
    chunk_inner_ = outer->body->push(std::move(inner));
    chunk_outer_ = outer;
    chunk_ = size;
  }

  // Atomics on one element: ten static slots (privatized and aggregated as any kernel variable).
  // In a chunked loop (chunk_loop) an addend is its unsplit signed value sw added to one of eight
  // i64 accumulators of the chunk (the one of its limb: 256 adds of |sw| < 2^55 cannot overflow),
  // and each accumulator goes to the slots, split, after the chunk: four operations per limb
  // fewer per addend, the same integers in the slots. On the cpu the chunk first sums its addends
  // in f64 (fast_sum); only a chunk that sum cannot hold exactly decodes them.
  void uniform_sum(Task &t, const std::vector<Stmt *> &atomics, Task &finish) {
    const SourceLoc loc = atomics[0]->loc;
    const Stmt *ptr = atomics[0]->operands[0];  // (the atomics go; their pointer stays in the loop)
    int64_t first = reserve(kSlots, loc);  // (zeroed by the runtime at launch)
    if (chunk_sums_) {
      IrEmitter pre(chunk_inner_);
      std::vector<Stmt *> acc;
      for (int k = 0; k < kLimbs - 1; k++) acc.push_back(pre.var(T::i64, i64(pre, 0)));
      Stmt *flags = pre.var(T::i64, i64(pre, 0));
      auto accumulate = [&](IrEmitter &e, Stmt *v) {
        Parts p = decode(e, v, T::i64);
        for (int k = 0; k < kLimbs - 1; k++)
          e.store(acc[k], e.bin(B::Add, e.load(acc[k]), e.sel(e.bin(B::Eq, p.limb, i64(e, k)), p.sw, i64(e, 0))));
        e.store(flags, e.bin(B::BitOr, e.load(flags), p.flags));
      };
      // Eight accumulator values (unsplit, by limb) and flags into the slots, split.
      auto to_slots = [&](IrEmitter &post, const std::vector<Stmt *> &values, Stmt *fl) {
        Stmt *hi = i64(post, 0);  // the previous accumulator's high part
        for (int k = 0; k < kLimbs; k++) {
          Stmt *v = hi;
          if (k < kLimbs - 1) {
            v = post.bin(B::Add, post.bin(B::BitAnd, values[k], i64(post, 0xFFFFFFFF)), hi);
            hi = post.bin(B::Shr, values[k], i64(post, 32));
          }
          atomic(post, AtomicOp::Add, slot(post, first + k), v);
        }
        atomic(post, AtomicOp::Or, slot(post, first + kLimbs), fl);
      };
      // The accumulators into the slots, and zero again.
      auto flush = [&](IrEmitter &post) {
        std::vector<Stmt *> values;
        for (int k = 0; k < kLimbs - 1; k++) values.push_back(post.load(acc[k]));
        to_slots(post, values, post.load(flags));
        for (int k = 0; k < kLimbs - 1; k++) post.store(acc[k], i64(post, 0));
        post.store(flags, i64(post, 0));
      };
      if (cpu_ || replay_) {
        fast_sum(t, atomics, accumulate, to_slots, flush);
      } else {
        for (Stmt *a : atomics) {
          IrEmitter e(a);
          accumulate(e, addend(e, a));
          drop_atomic(a);
        }
        IrEmitter post(*chunk_outer_->body, loc);
        flush(post);
      }
    } else {
      for (Stmt *a : atomics) {
        IrEmitter e(a);
        Parts p = decode(e, addend(e, a));
        for (int k = 0; k < kLimbs; k++) atomic(e, AtomicOp::Add, slot(e, first + k), contribution(e, p, k));
        atomic(e, AtomicOp::Or, slot(e, first + kLimbs), p.flags);
        drop_atomic(a);
      }
    }
    // After the loop: the target's value joins the sum, which is rounded into it.
    IrEmitter f(finish.body, loc);
    auto target = clone_leaf(*ptr);
    for (Stmt *&idx : target->operands) idx = f.insert(clone_leaf(*idx));
    Stmt *tp = f.insert(std::move(target));
    Parts init = decode(f, f.add(StmtKind::GlobalLoad, T::f32, {tp}));
    std::vector<Stmt *> limbs;
    for (int k = 0; k < kLimbs; k++)
      limbs.push_back(f.bin(B::Add, f.add(StmtKind::GlobalLoad, T::i64, {slot(f, first + k)}), contribution(f, init, k)));
    Stmt *flags = f.bin(B::BitOr, f.add(StmtKind::GlobalLoad, T::i64, {slot(f, first + kLimbs)}), init.flags);
    f.add(StmtKind::GlobalStore, T::none, {tp, round_f32(f, limbs, flags)});
  }

  // cpu, a chunked same-address sum: the chunk's addends summed in f64, exactly when they allow
  // it. Every addend is an integer m 2^s in units of 2^-149 (m < 2^24, s = max(exponent field, 1) - 1);
  // with at most 1024 of them, all of the non-zero ones with s in [smin, smin + 19], every partial
  // sum, in any order, is a multiple of 2^smin below 2^53 2^smin: an f64 holds it exactly, so the
  // add may be reassociated (LLVM vectorises it). Beside it the loop keeps the smallest and largest
  // non-zero |addend| (track_range) and stores each
  // addend's bits in a per-chunk array (-0.0, which adds nothing, first where an iteration may have
  // none: the atomic under an if, or a continue / break / return in the loop); a loop body whose
  // only effects are these atomics (replay_) stores nothing: a chunk that needs them runs its
  // iterations again.
  // After the chunk: if the range holds (some addend non-zero, so the flags are just kNotNegZero;
  // smax <= 251: no inf / NaN, all below 2^126; smin <= 223), the sum joins the thread's f64 total
  // (a window, as Window's: exact while chunks * 1024 * 2^(hi - lo) <= 2^29), which goes to the
  // slots, an integer N < 2^53 times 2^lo split at limb lo / 32, when a chunk does not fit it and
  // after the thread's share; otherwise a second loop decodes the stored bits (`accumulate`),
  // flushing the accumulators every 256 (or runs the chunk's iterations again, 256 / k at a time
  // for k atomics, decoding the addends).
  void fast_sum(Task &task, const std::vector<Stmt *> &atomics, const std::function<void(IrEmitter &, Stmt *)> &accumulate,
                const std::function<void(IrEmitter &, const std::vector<Stmt *> &, Stmt *)> &to_slots,
                const std::function<void(IrEmitter &)> &flush) {
    const SourceLoc loc = atomics[0]->loc;
    // The thread's window: the f64 total of its chunks since the last flush, all their non-zero
    // addends with s in [lo, hi], `chunks` chunks of them.
    // (the cpu only: a GPU invocation's chunks go to the slots one by one, below)
    Stmt *total = nullptr, *wlo = nullptr, *whi = nullptr, *wchunks = nullptr;
    if (cpu_) {
      IrEmitter pl(task.pre_loop, loc);
      pl.mark_exact();
      total = pl.var(T::f64, pl.c(T::f64, 0.0));
      wlo = pl.var(T::i64, i64(pl, kNoWindow));
      whi = pl.var(T::i64, i64(pl, -kNoWindow));
      wchunks = pl.var(T::i64, i64(pl, 0));
    }
    IrEmitter pre(chunk_inner_);
    pre.mark_exact();
    Stmt *sum = pre.var(T::f64, pre.c(T::f64, 0.0));
    Stmt *low = pre.var(T::u32, pre.ci(T::u32, 0xFFFFFFFF)), *high = pre.var(T::u32, pre.ci(T::u32, 0));
    // The 32-bit work (the magnitudes' minimum and maximum) at the host's full width, the f64 sums
    // in two registers: eight lanes with AVX2, sixteen with AVX-512; the cost model's choice (the
    // f64 width) runs it at half (benchmarks/deterministic.py; on an AVX-512 Zen 5 eight lanes
    // cost 1.56-1.62x the mode-off sum, sixteen 1.34-1.41x).
    if (cpu_) chunk_inner_->vector_width = target_.features.vector_bits >= 512 ? 16 : 8;
    std::unique_ptr<Stmt> again;  // replay_: the chunk's loop once more, decoding
    if (replay_) {
      again = std::make_unique<Stmt>(StmtKind::RangeFor, T::none);
      again->serialize = true;
      again->body = std::make_unique<Block>();
      again->body->owner = again.get();
      CloneMap m{{chunk_inner_, again.get()}};
      clone_into(*chunk_inner_->body, *again->body, m);
      for (Stmt *a : atomics) {
        Stmt *c = m.at(a);
        IrEmitter e(c);
        e.mark_exact();
        accumulate(e, addend(e, c));
        drop_atomic(c, again->body.get());
      }
    }
    std::vector<int> bits;
    for (Stmt *a : atomics) {
      IrEmitter e(a);
      e.mark_exact();
      Stmt *v = addend(e, a);
      Stmt *u = e.bitcast(v, T::u32);
      track_range(e, u, low, high);
      Stmt *add = e.bin(B::Add, e.load(sum), e.cast(v, T::f64));
      add->reassoc = true;
      e.store(sum, add);
      if (!replay_) {
        int b = stage("sum.bits", T::i32);
        bits.push_back(b);
        if (skips_ || a->parent != loop_body_) {  // an iteration may not store: -0.0 first
          Stmt *j;
          IrEmitter fill = pre.for_(pre.ci(T::i32, 0), chunk_trips_, j);
          fill.add(StmtKind::GlobalStore, T::none, {private_ptr(fill, b, j), fill.ci(T::i32, std::numeric_limits<int32_t>::min())});
        }
        Stmt *i = e.bin(B::Sub, e.add(StmtKind::LoopIndex, T::i32, {chunk_inner_}), chunk_lo_);
        e.add(StmtKind::GlobalStore, T::none, {private_ptr(e, b, i), e.bitcast(u, T::i32)});
      }
      drop_atomic(a);
    }
    IrEmitter post(*chunk_outer_->body, loc);
    post.mark_exact();
    Stmt *lo = post.load(low), *hi = post.load(high);
    Stmt *smin = exponent_s(post, post.bin(B::Add, lo, post.ci(T::u32, 1))), *smax = exponent_s(post, hi);
    // The window holds while chunks * 1024 * 2^(hi - lo) <= 2^29 (so hi - lo <= 19 = kCpuSpan).
    static_assert((kCpuChunkAdds << kCpuSpan) == int64_t(1) << 29);
    auto holds = [&](IrEmitter &e, Stmt *l, Stmt *h, Stmt *chunks) {
      Stmt *shift = e.bin(B::Min, e.bin(B::Max, e.bin(B::Sub, h, l), i64(e, 0)), i64(e, 29));  // (a defined shift)
      return e.bin(B::Le, e.bin(B::Shl, e.bin(B::Mul, chunks, i64(e, kCpuChunkAdds)), shift), i64(e, int64_t(1) << 29));
    };
    // An exact sum, N 2^p with |N| < 2^53, into the slots.
    auto sum_to_slots = [&](IrEmitter &some, Stmt *exact, Stmt *p) {
      Stmt *n = units(some, exact, p);
      Stmt *limb = some.bin(B::Shr, p, i64(some, 5)), *r = some.bin(B::BitAnd, p, i64(some, 31));
      Stmt *at = some.bin(B::BitAnd, some.bin(B::Shl, n, r), i64(some, 0xFFFFFFFF));  // N 2^r's low 32 bits: limb p / 32
      Stmt *above = some.bin(B::Shr, n, some.bin(B::Sub, i64(some, 32), r));          // the rest: the next limb
      std::vector<Stmt *> values;
      for (int k = 0; k < kLimbs - 1; k++)
        values.push_back(some.sel(some.bin(B::Eq, limb, i64(some, k)), at,
                                  some.sel(some.bin(B::Eq, limb, i64(some, k - 1)), above, i64(some, 0))));
      to_slots(some, values, i64(some, kNotNegZero));
    };
    // The window's total, N 2^lo with |N| < 2^53, into the slots; an empty window again.
    auto flush_window = [&](IrEmitter &e) {
      IrEmitter some = e.if_(e.bin(B::Gt, e.load(wchunks), i64(e, 0)));
      sum_to_slots(some, some.load(total), some.load(wlo));
      e.store(total, e.c(T::f64, 0.0));
      e.store(wlo, i64(e, kNoWindow));
      e.store(whi, i64(e, -kNoWindow));
      e.store(wchunks, i64(e, 0));
    };
    // A chunk the window can take: some addend non-zero, none an inf / NaN or from 2^126 (smax <= 251),
    // smin <= 223 (the window's total in units of 2^lo is then below 2^53), a span the bound allows.
    Stmt *fits = post.both(post.both(post.bin(B::Ne, lo, post.ci(T::u32, 0xFFFFFFFF)), post.bin(B::Le, smax, i64(post, 251))),
                           post.both(post.bin(B::Le, smin, i64(post, 223)), holds(post, smin, smax, i64(post, 1))));
    auto widened = [&](IrEmitter &e) {
      return std::pair{e.bin(B::Min, e.load(wlo), smin), e.bin(B::Max, e.load(whi), smax)};
    };
    if (cpu_) {
      {
        auto [l, h] = widened(post);
        IrEmitter full = post.if_(post.both(fits, post.not_(holds(post, l, h, post.bin(B::Add, post.load(wchunks), i64(post, 1))))));
        flush_window(full);
      }
      IrEmitter fast = post.if_(fits);
      auto [l, h] = widened(fast);
      fast.store(wlo, l);
      fast.store(whi, h);
      fast.store(wchunks, fast.bin(B::Add, fast.load(wchunks), i64(fast, 1)));
      fast.store(total, fast.bin(B::Add, fast.load(total), fast.load(sum)));
      IrEmitter share_end(task.post_loop, loc);  // (the thread's share done)
      share_end.mark_exact();
      flush_window(share_end);
    } else {  // a GPU invocation's share is about one chunk: each chunk's sum to the slots at once
      // (in the loop, so its atomics are privatized and combined over the subgroup as the decoding
      // chunks' are; in post_loop they would be every lane's own)
      IrEmitter fast = post.if_(fits);
      sum_to_slots(fast, fast.load(sum), smin);
    }
    IrEmitter slow = post.if_(post.not_(fits));
    if (again) {  // kChunkAdds / k iterations at a time
      Stmt *begin = chunk_inner_->operands[0], *end = chunk_inner_->operands[1];
      DataType it = begin->dtype;
      const int64_t per = kChunkAdds / static_cast<int64_t>(atomics.size());
      Stmt *part;
      IrEmitter parts = slow.for_(slow.ci(T::i32, 0), slow.bin(B::Div, slow.bin(B::Add, chunk_trips_, slow.ci(T::i32, per - 1)),
                                                           slow.ci(T::i32, per)), part);
      Stmt *from = parts.bin(B::Add, begin, parts.cast(parts.bin(B::Mul, part, parts.ci(T::i32, per)), it));
      again->operands = {from, parts.bin(B::Min, parts.bin(B::Add, from, parts.ci(it, per)), end)};
      parts.insert(std::move(again));
      flush(parts);
    }
    for (int b : bits) {  // kChunkAdds at a time: what the accumulators hold
      Stmt *part;
      IrEmitter parts = slow.for_(slow.ci(T::i32, 0), slow.bin(B::Div, slow.bin(B::Add, chunk_trips_, slow.ci(T::i32, kChunkAdds - 1)),
                                                           slow.ci(T::i32, kChunkAdds)), part);
      Stmt *from = parts.bin(B::Mul, part, parts.ci(T::i32, kChunkAdds));
      Stmt *j;
      IrEmitter in = parts.for_(from, parts.bin(B::Min, parts.bin(B::Add, from, parts.ci(T::i32, kChunkAdds)), chunk_trips_), j);
      accumulate(in, in.bitcast(in.add(StmtKind::GlobalLoad, T::i32, {private_ptr(in, b, j)}), T::f32));
      flush(parts);
    }
  }

  // Atomics on a field at computed indices: ten slots per element, reached by i64 atomics.
  // (fallback_: the bucketed tasks' fallback, which zeroes its slots itself, in `before`.)
  void field_sum(Task &t, int64_t buffer, const std::vector<Stmt *> &atomics, std::vector<Task> &before,
                 std::vector<Task> &after, Task &serial_after) {
    const BufferDesc d = k_.buffers[buffer];
    const SourceLoc loc = atomics[0]->loc;
    int64_t n = numel(d);
    if (n * kSlots >= (int64_t(1) << 31)) reject("the field '" + d.name + "' is too large for deterministic sums", loc);
    // SPIR-V, a small field (a histogram's bins, updated from every thread): each slot in a cache
    // line of its own, so that updates of neighbouring elements do not contend for a line (lavapipe,
    // 256 bins: 16.3-18.5 -> 14.9-15.5 ms at 2^20 updates, most of it the i64 atomic).
    const int64_t spread = spirv_ && n <= kSpreadElements ? kRow : 1;
    int64_t first = reserve(n * kSlots * spread, loc, /*align=*/kRow);  // (the runtime zeroes the temps at launch)
    if (fallback_) {
      k_.temps_zeroed_by_tasks.emplace_back(first, n * kSlots);
      Stmt *loop;
      Task zero = parallel_task(n * kSlots, loc, loop);
      zero.when = Task::When::WithoutScratch;
      IrEmitter z(*loop->body, loc);
      z.add(StmtKind::GlobalStore, T::none, {slot(z, first, z.add(StmtKind::LoopIndex, T::i32, {loop})), i64(z, 0)});
      before.push_back(std::move(zero));
    }
    auto load = [&](IrEmitter &e, Stmt *ptr, bool atomic) {
      Stmt *s = e.add(StmtKind::GlobalLoad, T::i64, {ptr});
      s->is_atomic = atomic;
      return s;
    };
    // SPIR-V reaches the temps array atomically only (by element index); the cpu's final pass reads
    // it plainly (after the loop's task).
    const bool gpu = !cpu_;
    auto zero = [&](IrEmitter &e, Stmt *ptr) {  // (GPUs reach temps arrays with atomics only)
      e.add(StmtKind::GlobalStore, T::none, {ptr, i64(e, 0)})->is_atomic = gpu;
    };
    // cpu, a small field (a histogram): the updates go to a private copy per thread (in its stack),
    // applied with atomics when the thread's share of the loop ends (flush_private). Element el's
    // slot el * kPrivSlots + k sums the unsplit values sw of limb k (k < 8), its last one the flags.
    int priv = -1;
    if (cpu_ && n <= kMaxPrivateElements) {
      BufferDesc copy{BufferKind::Private, T::i64, {n * kPrivSlots}};
      copy.name = d.name + ".limbs";
      priv = k_.add_buffer(copy);
    }
    // cpu and SPIR-V, no private copy: slot k of an element holds the wrapped sum of its unsplit
    // values of limb k (unsplit_add); the final pass splits them. (CUDA / AMDGPU keep the two split
    // adds, which need no returned value.)
    const bool unsplit = (cpu_ || spirv_) && priv < 0;
    // SPIR-V: slot-major slots; a summary word `any` records which slots any element's updates
    // added to (an or at one address: privatized), so that an update is one atomic add and the
    // final pass loads only those slots, and an element's flags only where some update or'ed them
    // (each load of a storage buffer is a per-lane access on lavapipe). (spirv_add)
    const bool slot_bits = spirv_ && unsplit;
    const Layout lay{n, slot_bits, spread};
    const int64_t any = slot_bits ? reserve(1, loc) : -1;
    std::vector<Stmt *> staged;  // (see Window)
    for (Stmt *a : atomics)
      if (priv >= 0 && staged_ && a->parent == loop_body_) staged.push_back(a);
    Window w;
    if (!staged.empty()) w = window(t, d, n, staged, loc);
    std::vector<Touched> touched;
    for (Stmt *a : atomics) {
      IrEmitter e(a);
      const Stmt &p = *a->operands[0];
      Stmt *flat = nullptr;
      for (size_t i = 0; i < p.operands.size(); i++) {
        Stmt *x = e.cast(p.operands[i], T::i32);
        flat = flat ? e.bin(B::Add, e.bin(B::Mul, flat, e.ci(T::i32, d.shape[i])), x) : x;
      }
      Stmt *el = flat ? flat : e.ci(T::i32, 0);
      if (!w.staged.empty() && a->parent == loop_body_) {  // staged: its element and bits, applied after the chunk
        Stmt *j = e.bin(B::Sub, e.add(StmtKind::LoopIndex, T::i32, {chunk_inner_}), chunk_lo_);
        Staged st{stage(d.name + ".el", T::i32), stage(d.name + ".bits", T::i32), stage(d.name + ".limb", T::i32),
                  stage(d.name + ".sw", T::i64), stage(d.name + ".flags", T::i64)};
        e.mark_exact();
        Stmt *u = e.bitcast(addend(e, a), T::u32);
        e.add(StmtKind::GlobalStore, T::none, {private_ptr(e, st.el, j), el});
        e.add(StmtKind::GlobalStore, T::none, {private_ptr(e, st.bits, j), e.bitcast(u, T::i32)});
        track_range(e, u, w.low, w.high);
        w.arrays.push_back(st);
        drop_atomic(a);
        continue;
      }
      if (unsplit && staged_ && a->parent == loop_body_) {  // its element and bits, applied after the chunk
        Stmt *j = e.bin(B::Sub, e.add(StmtKind::LoopIndex, T::i32, {chunk_inner_}), chunk_lo_);
        Touched st{stage(d.name + ".el", T::i32), stage(d.name + ".bits", T::i32), stage(d.name + ".seen", T::i64)};
        e.add(StmtKind::GlobalStore, T::none, {private_ptr(e, st.el, j), el});
        e.add(StmtKind::GlobalStore, T::none, {private_ptr(e, st.bits, j), e.bitcast(addend(e, a), T::i32)});
        touched.push_back(st);
        drop_atomic(a);
        continue;
      }
      Parts q = decode(e, addend(e, a));
      Stmt *k = e.cast(q.limb, T::i32);
      if (priv >= 0) {
        private_update(e, priv, first, lay, el, k, q.sw, q.flags);
      } else {
        Stmt *flags = lay.flags(e, el);
        if (unsplit) {
          unsplit_add(e, first, lay, el, k, q.sw, slot_bits ? q.flags : nullptr, any);
        } else {
          Stmt *limb = lay.limb(e, el, k), *next = lay.limb(e, el, e.bin(B::Add, k, e.ci(T::i32, 1)));
          atomic(e, AtomicOp::Add, slot(e, first, limb), q.lo);
          atomic(e, AtomicOp::Add, slot(e, first, next), q.hi);
        }
        if (!slot_bits && lay.rows()) {  // (slot bits: unsplit_add ors the flags)
          atomic(e, AtomicOp::Or, slot(e, first, flags), q.flags);
        } else if (!slot_bits) {  // a field the caches hold (a histogram): most updates find their flags set already
          or_flags(e, slot(e, first, flags), load(e, slot(e, first, flags), true), q.flags);
        }
      }
      drop_atomic(a);
    }
    if (!touched.empty()) apply_touched(touched, first, lay, loc);
    if (!w.staged.empty()) apply_window(t, w, n, priv, first, lay, loc);
    if (priv >= 0) flush_private(t, priv, first, lay, loc);
    // The final pass: element el's target pointer, old value (decoded) and stored flags.
    struct Element {
      Stmt *tp;
      Parts init;
      Stmt *stored;
    };
    // `summary` (slot bits): the summary word, loaded; the flags are loaded only where some update
    // or'ed any element's.
    auto element = [&](IrEmitter &f, Stmt *el, Stmt *summary, bool clear = false) {
      std::vector<Stmt *> idx(d.shape.size());
      Stmt *rest = el;
      for (size_t i = d.shape.size(); i-- > 0;) {
        if (i == 0) {
          idx[i] = rest;
          break;
        }
        Stmt *dim = f.ci(T::i32, d.shape[i]);
        Stmt *q = f.bin(B::Div, rest, dim);  // (non-negative: truncation is floor)
        idx[i] = f.bin(B::Sub, rest, f.bin(B::Mul, q, dim));
        rest = q;
      }
      Stmt *tp = f.add(StmtKind::GlobalPtr, T::f32, idx);
      tp->ival = buffer;
      Parts init = decode(f, f.add(StmtKind::GlobalLoad, T::f32, {tp}));
      if (!summary) return Element{tp, init, load(f, slot(f, first, lay.flags(f, el)), gpu)};
      Stmt *stored = f.var(T::i64, i64(f, 0));
      IrEmitter has = f.if_(f.bin(B::Ne, f.bin(B::BitAnd, summary, i64(f, kElementFlags)), i64(f, 0)));
      has.store(stored, load(has, slot(has, first, lay.flags(has, el)), gpu));
      if (clear) zero(has, slot(has, first, lay.flags(has, el)));
      return Element{tp, init, f.load(stored)};
    };
    // Slot bits: "not -0.0" where a slot holds a non-zero value (unsplit_add).
    auto not_neg_zero = [&](IrEmitter &f, Stmt *v) { return f.sel(f.bin(B::Ne, v, i64(f, 0)), i64(f, kNotNegZero), i64(f, 0)); };
    // Every slot's limbs (those whose bit the summary has, with slot bits), normalised and rounded.
    // clear (slot bits): each slot loaded is zeroed again (the kernel leaves its temps zero).
    auto general = [&](IrEmitter &f, Stmt *el, const Element &x, Stmt *summary, bool clear = false) {
      std::vector<Stmt *> limbs;
      Stmt *high = i64(f, 0);  // (unsplit) the previous slot's high part, signed
      Stmt *flags = f.bin(B::BitOr, x.stored, x.init.flags);
      for (int k = 0; k < kLimbs; k++) {
        Stmt *v;
        if (slot_bits) {  // (zero where not updated)
          Stmt *var = f.var(T::i64, i64(f, 0));
          Stmt *bit = f.bin(B::BitAnd, summary, i64(f, int64_t(1) << (kSlotBits + k)));
          IrEmitter has = f.if_(f.bin(B::Ne, bit, i64(f, 0)));
          has.store(var, load(has, slot(has, first, lay.limb(has, el, has.ci(T::i32, k))), gpu));
          if (clear) zero(has, slot(has, first, lay.limb(has, el, has.ci(T::i32, k))));
          v = f.load(var);
          flags = f.bin(B::BitOr, flags, not_neg_zero(f, v));
        } else {
          v = load(f, slot(f, first, lay.limb(f, el, f.ci(T::i32, k))), gpu);
        }
        if (unsplit) {  // limb k: slot k's low 32 bits (the last slot: all of it) and slot k - 1's high part
          Stmt *low = k < kLimbs - 1 ? f.bin(B::BitAnd, v, i64(f, 0xFFFFFFFF)) : v;
          Stmt *sum = f.bin(B::Add, low, high);
          high = f.bin(B::Shr, v, i64(f, 32));
          v = sum;
        }
        limbs.push_back(f.bin(B::Add, v, contribution(f, x.init, k)));
      }
      f.add(StmtKind::GlobalStore, T::none, {x.tp, round_f32(f, limbs, flags)});
    };
    auto finish = [&](Task &&task) {
      if (fallback_) task.when = Task::When::WithoutScratch;
      after.push_back(std::move(task));
    };
    Stmt *loop;
    Task fin = parallel_task(n, loc, loop);
    IrEmitter f(*loop->body, loc);
    Stmt *el = f.add(StmtKind::LoopIndex, T::i32, {loop});
    // (slot bits) the summary word, loaded once per invocation, before its grid-stride loop
    auto summary = [&](Task &task) -> Stmt * {
      if (!slot_bits) return nullptr;
      IrEmitter e(task.pre_loop, loc);
      return load(e, slot(e, any), gpu);
    };
    Stmt *word = summary(fin);
    const Element x = element(f, el, word);
    if (!slot_bits) {
      general(f, el, x, nullptr);
    } else {
      // The slots the summary names are loaded (one where every update of the kernel went to one
      // slot). An element with at most one of them non-zero (slot k, value v), its old value in
      // the same limb (or zero) and no inf / NaN has for exact sum v plus the old value's unsplit
      // value, one i64 to round (round_single, where the result is normal): no carries over ten
      // digits. The other elements are listed (a count, then the elements, in `list`) for a
      // second task, so that this one has none of the general rounding's code (lavapipe runs both
      // sides of a branch, masked). k: the old value's limb where no slot is non-zero.
      Stmt *kv = f.var(T::i64, x.init.limb), *vv = f.var(T::i64, i64(f, 0)), *nonzero = f.var(T::i32, f.ci(T::i32, 0));
      for (int s = 0; s < kLimbs; s++) {
        IrEmitter has = f.if_(f.bin(B::Ne, f.bin(B::BitAnd, word, i64(f, int64_t(1) << (kSlotBits + s))), i64(f, 0)));
        Stmt *ls = load(has, slot(has, first, lay.limb(has, el, has.ci(T::i32, s))), gpu);
        Stmt *nz = has.bin(B::Ne, ls, i64(has, 0));
        has.store(kv, has.sel(nz, i64(has, s), has.load(kv)));
        has.store(vv, has.sel(nz, ls, has.load(vv)));
        has.store(nonzero, has.bin(B::Add, has.load(nonzero), has.cast(nz, T::i32)));
      }
      Stmt *k = f.load(kv), *v = f.load(vv);
      Stmt *flags = f.bin(B::BitOr, f.bin(B::BitOr, x.stored, x.init.flags), not_neg_zero(f, v));
      Stmt *same = f.either(f.bin(B::Eq, x.init.sw, i64(f, 0)), f.bin(B::Eq, x.init.limb, k));
      Stmt *small = f.bin(B::Lt, f.bitcast(f.bin(B::Add, v, i64(f, int64_t(1) << 62)), T::u64),
                          u64(f, std::numeric_limits<int64_t>::min()));  // |v| < 2^62: adding sw cannot overflow
      Stmt *finite = f.bin(B::Eq, f.bin(B::BitAnd, flags, i64(f, kPosInf | kNegInf | kNaN)), i64(f, 0));
      Stmt *sum = f.bin(B::Add, v, f.sel(f.bin(B::Eq, x.init.limb, k), x.init.sw, i64(f, 0)));
      const Single r = round_single(f, sum, k, flags);
      Stmt *one = f.bin(B::Le, f.load(nonzero), f.ci(T::i32, 1));
      Stmt *fast = f.both(f.both(f.both(one, same), f.both(small, finite)), r.normal);
      IrEmitter single = f.if_(fast);
      single.add(StmtKind::GlobalStore, T::none, {x.tp, r.value});
      // Its slots zero again (the listed elements': in the second task, after it reads them), so
      // that the kernel leaves these temps zero: the runtime fills them at the first launch only
      // (KernelIR::temps_left_zero; a 2^20-element field's 88 MiB took ~13 ms a launch on lavapipe).
      for (int s = 0; s < kLimbs; s++) {
        IrEmitter has = single.if_(single.bin(B::Ne, single.bin(B::BitAnd, word, i64(single, int64_t(1) << (kSlotBits + s))),
                                              i64(single, 0)));
        zero(has, slot(has, first, lay.limb(has, el, has.ci(T::i32, s))));
      }
      {
        IrEmitter has = single.if_(single.bin(B::Ne, single.bin(B::BitAnd, word, i64(single, kElementFlags)), i64(single, 0)));
        zero(has, slot(has, first, lay.flags(has, el)));
      }
      const int64_t list = reserve(n + 1, loc);  // (zero at launch: filled the first time, then left so; an atomic add stores)
      IrEmitter rest = f.if_(f.not_(fast));
      Stmt *j = atomic(rest, AtomicOp::Add, slot(rest, list), i64(rest, 1));
      atomic(rest, AtomicOp::Add, slot(rest, list + 1, rest.cast(j, T::i32)), rest.cast(el, T::i64));
      finish(std::move(fin));
      // The listed elements: `lanes` invocations, each taking every lanes-th entry (at most
      // 2^27 / 4096 each: lavapipe stops loops after 65535 iterations).
      const int64_t lanes = std::min<int64_t>(n, 4096);
      Stmt *gl;
      fin = parallel_task(lanes, loc, gl);
      IrEmitter g(*gl->body, loc);
      Stmt *pos = g.var(T::i64, g.cast(g.add(StmtKind::LoopIndex, T::i32, {gl}), T::i64));
      Stmt *word = summary(fin);
      Stmt *count = load(g, slot(g, list), gpu);
      IrEmitter each = g.while_("deterministic listed elements");
      each.if_(each.bin(B::Ge, each.load(pos), count)).break_();
      Stmt *entry = each.cast(each.load(pos), T::i32);
      Stmt *listed = each.cast(load(each, slot(each, list + 1, entry), gpu), T::i32);
      zero(each, slot(each, list + 1, entry));
      general(each, listed, element(each, listed, word, true), word, true);
      each.store(pos, each.bin(B::Add, each.load(pos), i64(each, lanes)));
      // After both tasks (every invocation has read them): the summary and the list's count.
      IrEmitter after_all(serial_after.body, loc);
      zero(after_all, slot(after_all, any));
      zero(after_all, slot(after_all, list));
      k_.temps_left_zero.emplace_back(first, n * kSlots * spread);
      k_.temps_left_zero.emplace_back(any, 1);
      k_.temps_left_zero.emplace_back(list, n + 1);
    }
    finish(std::move(fin));
  }

  // cpu: a scatter into a large field whose loop suits scatter.cpp's bucketing (bucket_scatter:
  // the loop's only effects are these atomics and writes of the iteration's own elements) runs as
  // its passes 1-3, which bucket the updates by 2^shift consecutive elements, then apply_buckets.
  // The loop (as lowered for the field's slots) stays as the fallback where the runtime has no
  // scratch memory: then the buckets' tasks are skipped, otherwise the loop's.
  bool bucketed_sum(Task &t, int64_t buffer, const std::vector<Stmt *> &atomics, std::vector<Task> &before) {
    ScatterBuckets b;
    if (numel(k_.buffers[buffer]) <= kCachedElements || !bucket_scatter(k_, t, atomics, kBucketShift, before, &b))
      return false;
    before.push_back(apply_buckets(b, atomics[0]->atomic_op() == AtomicOp::Sub, atomics[0]->loc));
    t.when = Task::When::WithoutScratch;
    return true;
  }

  // One bucket per iteration, its elements' sums made and rounded into the field by one thread.
  // A first loop adds each update (its addend widened to f64) to its element's f64 sum, which
  // starts at -0.0, counts the element's updates, and keeps the smallest and largest non-zero
  // magnitude (track_range); a second takes the elements' largest count, and the magnitudes of
  // the old values of the elements updated. Every f32 is m 2^s in units of 2^-149 (m < 2^24); if
  // every such value and addend has s in [smin, smax], none is an inf or NaN (nor the old value of
  // one not updated), and (most updates + 1) 2^(smax - smin) <= 2^29, each element's partial sums
  // in any order are multiples of 2^smin below 2^(smin + 53): exact, and the old value added to
  // the sum and rounded to f32 (IEEE: to nearest even, past the largest to inf) is the exact sum
  // rounded once; the sum of -0.0 and addends is -0.0 only if they all are. Otherwise
  // (bucket_limbs) the bucket's updates are decoded into limbs.
  Task apply_buckets(const ScatterBuckets &b, bool sub, const SourceLoc &loc) {
    const int64_t size = int64_t(1) << b.shift;
    auto scratch = [&](IrEmitter &e, int buffer, Stmt *i) {
      Stmt *p = e.add(StmtKind::GlobalPtr, k_.buffers[buffer].dtype, {i});
      p->ival = buffer;
      return e.add(StmtKind::GlobalLoad, k_.buffers[buffer].dtype, {p});
    };
    auto private_array = [&](const std::string &name, DataType dt, int64_t count) {
      BufferDesc a{BufferKind::Private, dt, {count}};
      a.name = k_.buffers[b.target].name + name;
      return k_.add_buffer(a);
    };
    int sums = private_array(".bucket.f64", T::f64, size), counts = private_array(".bucket.count", T::i32, size);
    Stmt *loop;
    Task p = parallel_task(b.buckets, loc, loop);
    p.when = Task::When::WithScratch;
    IrEmitter e(*loop->body, loc);
    e.mark_exact();
    Stmt *bucket = e.add(StmtKind::LoopIndex, T::i32, {loop});
    Bucket bk;
    bk.target = b.target;
    bk.base = e.bin(B::Shl, bucket, e.ci(T::i32, b.shift));
    bk.count = e.bin(B::Min, e.ci(T::i32, size), e.bin(B::Sub, e.ci(T::i32, b.size), bk.base));
    bk.lo = scratch(e, b.starts, bucket);
    bk.hi = scratch(e, b.starts, e.bin(B::Add, bucket, e.ci(T::i32, 1)));
    // An update's element in the bucket (clamped: a body whose passes disagree on the indices
    // stays in the arrays) and addend.
    bk.element = [&, b](IrEmitter &x, Stmt *o) {
      Stmt *j = x.bin(B::Sub, scratch(x, b.indices, o), bk.base);
      return x.bin(B::Max, x.bin(B::Min, j, x.bin(B::Sub, bk.count, x.ci(T::i32, 1))), x.ci(T::i32, 0));
    };
    bk.addend = [&, b, sub](IrEmitter &x, Stmt *o) {
      Stmt *v = scratch(x, b.values, o);
      return sub ? x.un(UnaryOp::Neg, v) : v;
    };
    Stmt *j;
    IrEmitter zero = e.for_(e.ci(T::i32, 0), bk.count, j);
    zero.add(StmtKind::GlobalStore, T::none, {private_ptr(zero, sums, j), zero.c(T::f64, -0.0)});
    zero.add(StmtKind::GlobalStore, T::none, {private_ptr(zero, counts, j), zero.ci(T::i32, 0)});
    Stmt *low = e.var(T::u32, e.ci(T::u32, 0xFFFFFFFF)), *high = e.var(T::u32, e.ci(T::u32, 0));
    Stmt *top = e.var(T::u32, e.ci(T::u32, 0));  // the old values' largest bits << 1
    Stmt *most = e.var(T::i32, e.ci(T::i32, 0));
    Stmt *o;
    IrEmitter add = e.for_(bk.lo, bk.hi, o);
    Stmt *el = bk.element(add, o);
    Stmt *v = bk.addend(add, o);
    track_range(add, add.bitcast(v, T::u32), low, high);
    Stmt *sp = private_ptr(add, sums, el), *cp = private_ptr(add, counts, el);
    add.add(StmtKind::GlobalStore, T::none, {sp, add.bin(B::Add, add.add(StmtKind::GlobalLoad, T::f64, {sp}), add.cast(v, T::f64))});
    add.add(StmtKind::GlobalStore, T::none, {cp, add.bin(B::Add, add.add(StmtKind::GlobalLoad, T::i32, {cp}), add.ci(T::i32, 1))});
    auto target = [&](IrEmitter &x, Stmt *j) {  // the field's element base + j (one flat index)
      Stmt *tp = x.add(StmtKind::GlobalPtr, T::f32, {x.bin(B::Add, bk.base, j)});
      tp->ival = b.target;
      return tp;
    };
    IrEmitter scan = e.for_(e.ci(T::i32, 0), bk.count, j);
    Stmt *c = scan.add(StmtKind::GlobalLoad, T::i32, {private_ptr(scan, counts, j)});
    scan.store(most, scan.bin(B::Max, scan.load(most), c));
    Stmt *bits = scan.bitcast(scan.add(StmtKind::GlobalLoad, T::f32, {target(scan, j)}), T::u32);
    scan.store(top, scan.bin(B::Max, scan.load(top), scan.bin(B::Shl, bits, scan.ci(T::u32, 1))));
    track_range(scan, scan.sel(scan.bin(B::Gt, c, scan.ci(T::i32, 0)), bits, scan.ci(T::u32, 0)), low, high);
    Stmt *lv = e.load(low), *hv = e.load(high);
    Stmt *span = e.bin(B::Sub, exponent_s(e, hv), exponent_s(e, e.bin(B::Add, lv, e.ci(T::u32, 1))));  // (0: no non-zero)
    Stmt *span29 = e.bin(B::Min, span, i64(e, 29));  // (a defined shift)
    Stmt *adds = e.bin(B::Shl, e.cast(e.bin(B::Add, e.load(most), e.ci(T::i32, 1)), T::i64), span29);
    Stmt *fits = e.both(e.both(e.bin(B::Lt, e.bin(B::Max, hv, e.load(top)), e.ci(T::u32, 0xFF000000)),
                               e.bin(B::Le, span, i64(e, 29))),
                        e.bin(B::Le, adds, i64(e, int64_t(1) << 29)));
    IrEmitter fast = e.if_(fits);
    IrEmitter round = fast.for_(fast.ci(T::i32, 0), bk.count, j);
    Stmt *tp = target(round, j);
    Stmt *sum = round.bin(B::Add, round.add(StmtKind::GlobalLoad, T::f64, {private_ptr(round, sums, j)}),
                          round.cast(round.add(StmtKind::GlobalLoad, T::f32, {tp}), T::f64));
    round.add(StmtKind::GlobalStore, T::none, {tp, round.cast(sum, T::f32)});
    IrEmitter slow = e.if_(e.not_(fits));
    bucket_limbs(slow, bk, size, target);
    return p;
  }

  // A bucket of apply_buckets: its first element, elements and updates [lo, hi).
  struct Bucket {
    int64_t target;
    Stmt *base, *count, *lo, *hi;
    std::function<Stmt *(IrEmitter &, Stmt *)> element;  // update o's element - base
    std::function<Stmt *(IrEmitter &, Stmt *)> addend;
  };

  // A bucket's exact sums (apply_buckets): its updates decoded into ten split slots per element of
  // a private array (limbs 0..8, lo and hi: at most 2^31 updates; the flags), then each element's
  // limbs with its old value's, rounded into the field. (One array for the whole bucket: a pass over
  // the updates per part of it would take a mispredicted branch per update and part.)
  void bucket_limbs(IrEmitter &e, const Bucket &bk, int64_t size,
                    const std::function<Stmt *(IrEmitter &, Stmt *)> &target) {
    BufferDesc a{BufferKind::Private, T::i64, {size * kSlots}};
    a.name = k_.buffers[bk.target].name + ".bucket.limbs";
    int limbs = k_.add_buffer(a);
    Stmt *j;
    IrEmitter zero = e.for_(e.ci(T::i32, 0), e.bin(B::Mul, bk.count, e.ci(T::i32, kSlots)), j);
    zero.add(StmtKind::GlobalStore, T::none, {private_ptr(zero, limbs, j), i64(zero, 0)});
    auto at = [&](IrEmitter &x, Stmt *el, Stmt *k) {
      return private_ptr(x, limbs, x.bin(B::Add, x.bin(B::Mul, el, x.ci(T::i32, kSlots)), k));
    };
    auto plus = [&](IrEmitter &x, Stmt *ptr, B op, Stmt *v) {
      x.add(StmtKind::GlobalStore, T::none, {ptr, x.bin(op, x.add(StmtKind::GlobalLoad, T::i64, {ptr}), v)});
    };
    Stmt *o;
    IrEmitter add = e.for_(bk.lo, bk.hi, o);
    Stmt *el = bk.element(add, o);
    Parts q = decode(add, bk.addend(add, o));
    Stmt *k = add.cast(q.limb, T::i32);
    plus(add, at(add, el, k), B::Add, q.lo);
    plus(add, at(add, el, add.bin(B::Add, k, add.ci(T::i32, 1))), B::Add, q.hi);
    plus(add, at(add, el, add.ci(T::i32, kLimbs)), B::BitOr, q.flags);
    IrEmitter round = e.for_(e.ci(T::i32, 0), bk.count, j);
    Stmt *tp = target(round, j);
    Parts init = decode(round, round.add(StmtKind::GlobalLoad, T::f32, {tp}));
    std::vector<Stmt *> sum;
    for (int k = 0; k < kLimbs; k++)
      sum.push_back(round.bin(B::Add, round.add(StmtKind::GlobalLoad, T::i64, {at(round, j, round.ci(T::i32, k))}),
                              contribution(round, init, k)));
    Stmt *flags = round.bin(B::BitOr, round.add(StmtKind::GlobalLoad, T::i64, {at(round, j, round.ci(T::i32, kLimbs))}),
                            init.flags);
    round.add(StmtKind::GlobalStore, T::none, {tp, round_f32(round, sum, flags)});
  }

  Stmt *private_ptr(IrEmitter &e, int buffer, Stmt *i) {
    Stmt *p = e.add(StmtKind::GlobalPtr, k_.buffers[buffer].dtype, {i});
    p->ival = buffer;
    return p;
  }

  // A chunk's updates of one atomic (field_sum), one entry per iteration of the chunk: the element
  // and the addend's bits, and (a chunk the window does not take) its decoded limb, value, flags.
  struct Staged {
    int el, bits, k, sw, flags;
  };

  // cpu, a small field's staged updates: summed in f64 per element while a window allows it.
  // Every addend is m 2^s in units of 2^-149 (m < 2^24, s = max(exponent field, 1) - 1). While
  // every non-zero addend of the updates since the last flush has s in [lo, hi], hi - lo = span,
  // lo <= 223, and chunks * (staged atomics) * chunk size * 2^span <= 2^29, each element's f64 sum is a
  // multiple of 2^lo below 2^(lo + 53): exact. It starts at -0.0, and IEEE addition keeps -0.0
  // only while every addend is -0.0: its sign bit is the flags' "not -0.0". A chunk with an inf /
  // NaN, a span the bound does not allow for the chunk alone or an s over 223 goes the decoded way;
  // a chunk the window cannot take otherwise first flushes the f64 sums into the private copy (each
  // an integer N < 2^53 times 2^lo: two private_update) and starts a new window; so does the end of
  // the thread's share.
  struct Window {
    std::vector<Stmt *> staged;
    std::vector<Staged> arrays;
    int sums = -1;                                        // the f64 per element (thread-private)
    Stmt *lo = nullptr, *hi = nullptr, *chunks = nullptr;  // i64 variables of the thread
    Stmt *low = nullptr, *high = nullptr;                  // u32, the chunk's: min (bits << 1) - 1, max bits << 1
  };
  static constexpr int64_t kNoWindow = int64_t(1) << 20;

  Window window(Task &t, const BufferDesc &d, int64_t n, const std::vector<Stmt *> &staged, const SourceLoc &loc) {
    Window w;
    w.staged = staged;
    BufferDesc sums{BufferKind::Private, T::f64, {n}};
    sums.name = d.name + ".f64";
    w.sums = k_.add_buffer(sums);
    IrEmitter pl(t.pre_loop, loc);
    w.lo = pl.var(T::i64, i64(pl, kNoWindow));
    w.hi = pl.var(T::i64, i64(pl, -kNoWindow));
    w.chunks = pl.var(T::i64, i64(pl, 0));
    Stmt *el;
    IrEmitter z = pl.for_(pl.ci(T::i32, 0), pl.ci(T::i32, n), el);
    z.add(StmtKind::GlobalStore, T::none, {private_ptr(z, w.sums, el), z.c(T::f64, -0.0)});
    t.min_chunk += (2 * n + chunk_ - 1) / chunk_;
    IrEmitter pre(chunk_inner_);
    w.low = pre.var(T::u32, pre.ci(T::u32, 0xFFFFFFFF));
    w.high = pre.var(T::u32, pre.ci(T::u32, 0));
    return w;
  }

  // The f64 sums into the private copy, -0.0 again, no window.
  void flush_window(IrEmitter &e, const Window &w, int64_t n, int priv, int64_t first, const Layout &lay) {
    Stmt *el;
    IrEmitter in = e.for_(e.ci(T::i32, 0), e.ci(T::i32, n), el);
    in.mark_exact();
    Stmt *sp = private_ptr(in, w.sums, el);
    Stmt *f = in.add(StmtKind::GlobalLoad, T::f64, {sp});
    IrEmitter some = in.if_(in.bin(B::Ne, in.bitcast(f, T::i64), i64(in, std::numeric_limits<int64_t>::min())));
    Stmt *p = some.bin(B::Min, some.load(w.lo), i64(some, 223));  // (no window: the sum is +0.0)
    Stmt *v = units(some, f, p);
    Stmt *k = some.cast(some.bin(B::Shr, p, i64(some, 5)), T::i32), *r = some.bin(B::BitAnd, p, i64(some, 31));
    private_update(some, priv, first, lay, el, k, some.bin(B::BitAnd, some.bin(B::Shl, v, r), i64(some, 0xFFFFFFFF)),
                   i64(some, kNotNegZero));
    private_update(some, priv, first, lay, el, some.bin(B::Add, k, some.ci(T::i32, 1)),
                   some.bin(B::Shr, v, some.bin(B::Sub, i64(some, 32), r)), i64(some, 0));
    some.add(StmtKind::GlobalStore, T::none, {private_ptr(some, w.sums, el), some.c(T::f64, -0.0)});
    e.store(w.lo, i64(e, kNoWindow));
    e.store(w.hi, i64(e, -kNoWindow));
    e.store(w.chunks, i64(e, 0));
  }

  // After each chunk: the window's sums or the decoded updates; the last flush after the thread's share.
  void apply_window(Task &t, const Window &w, int64_t n, int priv, int64_t first, const Layout &lay, const SourceLoc &loc) {
    IrEmitter post(*chunk_outer_->body, loc);
    post.mark_exact();
    const int64_t count = static_cast<int64_t>(w.staged.size());
    Stmt *low = post.load(w.low), *high = post.load(w.high);
    Stmt *any = post.bin(B::Ne, low, post.ci(T::u32, 0xFFFFFFFF));
    Stmt *cmin = exponent_s(post, post.bin(B::Add, low, post.ci(T::u32, 1))), *cmax = exponent_s(post, high);
    auto fits = [&](IrEmitter &e, Stmt *lo, Stmt *hi, Stmt *chunks) {
      Stmt *span = e.bin(B::Sub, hi, lo);
      Stmt *shift = e.bin(B::Min, e.bin(B::Max, span, i64(e, 0)), i64(e, 29));  // (a defined shift either way)
      Stmt *adds = e.bin(B::Shl, e.bin(B::Mul, chunks, i64(e, count * chunk_)), shift);
      return e.both(e.bin(B::Le, span, i64(e, 21)), e.bin(B::Le, adds, i64(e, int64_t(1) << 29)));
    };
    auto widened = [&](IrEmitter &e) {  // the window with this chunk's addends
      return std::pair{e.sel(any, e.bin(B::Min, e.load(w.lo), cmin), e.load(w.lo)),
                       e.sel(any, e.bin(B::Max, e.load(w.hi), cmax), e.load(w.hi))};
    };
    Stmt *alone = post.both(post.bin(B::Lt, high, post.ci(T::u32, 0xFF000000)),
                            post.either(post.not_(any), post.both(post.bin(B::Le, cmin, i64(post, 223)),
                                                                  fits(post, cmin, cmax, i64(post, 1)))));
    {
      auto [lo, hi] = widened(post);
      IrEmitter full = post.if_(post.both(alone, post.not_(fits(post, lo, hi, post.bin(B::Add, post.load(w.chunks), i64(post, 1))))));
      flush_window(full, w, n, priv, first, lay);
    }
    IrEmitter fast = post.if_(alone);
    auto [lo, hi] = widened(fast);
    fast.store(w.lo, lo);
    fast.store(w.hi, hi);
    fast.store(w.chunks, fast.bin(B::Add, fast.load(w.chunks), i64(fast, 1)));
    IrEmitter slow = post.if_(post.not_(alone));
    for (const Staged &st : w.arrays) {
      auto get = [&](IrEmitter &e, int b, DataType dt, Stmt *j) { return e.add(StmtKind::GlobalLoad, dt, {private_ptr(e, b, j)}); };
      Stmt *j;
      IrEmitter add = fast.for_(fast.ci(T::i32, 0), chunk_trips_, j);
      Stmt *sp = private_ptr(add, w.sums, get(add, st.el, T::i32, j));
      Stmt *v = add.cast(add.bitcast(get(add, st.bits, T::i32, j), T::f32), T::f64);
      add.add(StmtKind::GlobalStore, T::none, {sp, add.bin(B::Add, add.add(StmtKind::GlobalLoad, T::f64, {sp}), v)});
      IrEmitter dec = slow.for_(slow.ci(T::i32, 0), chunk_trips_, j);
      Parts q = decode(dec, dec.bitcast(get(dec, st.bits, T::i32, j), T::f32), T::i64);
      for (auto [b, x] : {std::pair{st.k, dec.cast(q.limb, T::i32)}, {st.sw, q.sw}, {st.flags, q.flags}})
        dec.add(StmtKind::GlobalStore, T::none, {private_ptr(dec, b, j), x});
      IrEmitter in = slow.for_(slow.ci(T::i32, 0), chunk_trips_, j);
      private_update(in, priv, first, lay, get(in, st.el, T::i32, j), get(in, st.k, T::i32, j), get(in, st.sw, T::i64, j),
                     get(in, st.flags, T::i64, j));
    }
    IrEmitter end(t.post_loop, loc);
    flush_window(end, w, n, priv, first, lay);
  }
  int stage(const std::string &name, DataType dt) {
    BufferDesc b{BufferKind::Private, dt, {chunk_}};
    b.name = name;
    return k_.add_buffer(b);
  }

  // Ors the flags into a flags slot whose value `set` (loaded before) lacks some of them.
  void or_flags(IrEmitter &e, Stmt *ptr, Stmt *set, Stmt *flags) {
    IrEmitter then = e.if_(e.bin(B::Ne, e.bin(B::BitAnd, set, flags), flags));
    atomic(then, AtomicOp::Or, ptr, flags);
  }

  // cpu, a field without a private copy (field_sum): a chunk's updates in the loop body itself,
  // staged (its element and the addend's bits per iteration), applied after the chunk in two
  // loops. The first loads each update's flags slot: plain loads, which the core overlaps, bring
  // the chunk's rows into the caches (an atomic add that misses them would wait for memory, and
  // hold up the loads after it). The second decodes and adds them (unsplit_add), and ors the
  // flags only where the loaded flags lack some (flags only grow).
  struct Touched {
    int el, bits, seen;
  };
  void apply_touched(const std::vector<Touched> &touched, int64_t first, const Layout &lay, const SourceLoc &loc) {
    IrEmitter post(*chunk_outer_->body, loc);
    auto get = [&](IrEmitter &e, int b, DataType dt, Stmt *j) { return e.add(StmtKind::GlobalLoad, dt, {private_ptr(e, b, j)}); };
    auto flags_slot = [&](IrEmitter &e, Stmt *el) { return slot(e, first, lay.flags(e, el)); };
    for (const Touched &st : touched) {
      Stmt *j;
      IrEmitter touch = post.for_(post.ci(T::i32, 0), chunk_trips_, j);
      Stmt *set = touch.add(StmtKind::GlobalLoad, T::i64, {flags_slot(touch, get(touch, st.el, T::i32, j))});
      set->is_atomic = true;
      touch.add(StmtKind::GlobalStore, T::none, {private_ptr(touch, st.seen, j), set});
    }
    for (const Touched &st : touched) {
      Stmt *j;
      IrEmitter in = post.for_(post.ci(T::i32, 0), chunk_trips_, j);
      Stmt *el = get(in, st.el, T::i32, j);
      Parts q = decode(in, in.bitcast(get(in, st.bits, T::i32, j), T::f32));
      unsplit_add(in, first, lay, el, in.cast(q.limb, T::i32), q.sw, nullptr);
      or_flags(in, flags_slot(in, el), get(in, st.seen, T::i64, j), q.flags);
    }
  }

  // cpu and SPIR-V, a field without a private copy (field_sum): one atomic add of the unsplit value sw
  // (|sw| < 2^55) of limb k to element el's slot k, which holds that limb's sum wrapped to 64 bits.
  // An add that wraps (from its old value: signed overflow) carries +-2^64 in slot k's units, that
  // is +-2^32 in slot k + 1's, added the same way; slot 8 gets only carries (they cannot wrap it:
  // |sum| < 2^308 units). Whatever the order of the adds, the slots and their carries hold the
  // exact sum. One atomic per update where the split value takes two.
  // `flags` (SPIR-V, with the summary slot `any`; else null): the update's flags. Each add of a
  // non-zero value (a carry too) ors its slot's bit into the summary word (an or at one address
  // in every iteration: privatization makes it a register's); an add of 0 (a zero, an inf / NaN)
  // ors the update's flags into the element's, and so does (as "not -0.0") an add that leaves a
  // slot 0: each or sets kElementFlags in the summary too. An element whose slots end all 0 after
  // non-zero adds thus has "not -0.0" (the last add to each slot it changed left it 0); one with a
  // non-zero slot had a non-zero addend (the final pass adds "not -0.0" then). For -0.0 no or.
  // SPIR-V: the first add outside the carries' loop (lavapipe tests a loop's lanes per trip).
  void unsplit_add(IrEmitter &e, int64_t first, const Layout &lay, Stmt *el, Stmt *k, Stmt *sw, Stmt *flags,
                   int64_t any = -1) {
    auto carry = [&](IrEmitter &c, Stmt *v) {
      return c.sel(c.bin(B::Lt, v, i64(c, 0)), i64(c, -(int64_t(1) << 32)), i64(c, int64_t(1) << 32));
    };
    auto carries = [&](IrEmitter &c, Stmt *from, Stmt *v) {
      Stmt *pos = c.var(T::i32, from), *value = c.var(T::i64, v);
      IrEmitter loop = c.while_("deterministic carry");
      Stmt *lv = loop.load(value), *at = loop.load(pos);
      loop.if_(loop.not_(add_slot(loop, first, lay, el, at, lv, flags, any))).break_();
      loop.store(value, carry(loop, lv));
      loop.store(pos, loop.bin(B::Add, at, loop.ci(T::i32, 1)));
    };
    if (!flags) return carries(e, k, sw);
    IrEmitter wrapped = e.if_(add_slot(e, first, lay, el, k, sw, flags, any));
    carries(wrapped, wrapped.bin(B::Add, k, wrapped.ci(T::i32, 1)), carry(wrapped, sw));
  }
  // unsplit_add's add of v to element el's slot `at`: whether it wrapped.
  Stmt *add_slot(IrEmitter &e, int64_t first, const Layout &lay, Stmt *el, Stmt *at, Stmt *v, Stmt *flags, int64_t any) {
    Stmt *old = atomic(e, AtomicOp::Add, slot(e, first, lay.limb(e, el, at)), v);
    Stmt *now = e.bin(B::Add, old, v);
    if (flags) {  // SPIR-V: the summary word, and the element's flags where they change
      Stmt *nz = e.bin(B::Ne, v, i64(e, 0));
      Stmt *mark = e.sel(nz, e.bin(B::Eq, now, i64(e, 0)), e.bin(B::Ne, flags, i64(e, 0)));
      Stmt *bit = e.sel(nz, e.bin(B::Shl, i64(e, int64_t(1) << kSlotBits), e.cast(at, T::i64)), i64(e, 0));
      atomic(e, AtomicOp::Or, slot(e, any), e.bin(B::BitOr, bit, e.sel(mark, i64(e, kElementFlags), i64(e, 0))));
      IrEmitter set = e.if_(mark);
      atomic(set, AtomicOp::Or, slot(set, first, lay.flags(set, el)), set.sel(nz, i64(set, kNotNegZero), flags));
    }
    return e.bin(B::Lt, e.bin(B::BitAnd, e.bin(B::BitXor, old, now), e.bin(B::BitXor, v, now)), i64(e, 0));
  }

  // One update of a thread's private copy (field_sum): element el's sum of limb k's unsplit
  // values, its flags; plain read-modify-writes.
  void private_update(IrEmitter &e, int priv, int64_t first, const Layout &lay, Stmt *el, Stmt *k, Stmt *sw,
                      Stmt *flags) {
    Stmt *row = e.bin(B::Mul, el, e.ci(T::i32, kPrivSlots));
    Stmt *sp = private_ptr(e, priv, e.bin(B::Add, row, k));
    Stmt *sum = e.var(T::i64, e.add(StmtKind::GlobalLoad, T::i64, {sp}));
    // Past +-2^62 (after 128 adds or more) the slot goes to the shared limbs first: adding
    // |sw| < 2^55 to what is left cannot overflow.
    Stmt *biased = e.bin(B::Add, e.bitcast(e.load(sum), T::u64), u64(e, int64_t(1) << 62));
    IrEmitter spill = e.if_(e.bin(B::Gt, biased, u64(e, std::numeric_limits<int64_t>::min())));
    Stmt *v = spill.load(sum);
    Stmt *limb = lay.limb(spill, el, k), *next = lay.limb(spill, el, spill.bin(B::Add, k, spill.ci(T::i32, 1)));
    atomic(spill, AtomicOp::Add, slot(spill, first, limb), spill.bin(B::BitAnd, v, i64(spill, 0xFFFFFFFF)));
    atomic(spill, AtomicOp::Add, slot(spill, first, next), spill.bin(B::Shr, v, i64(spill, 32)));
    spill.store(sum, i64(spill, 0));
    e.add(StmtKind::GlobalStore, T::none, {sp, e.bin(B::Add, e.load(sum), sw)});
    Stmt *fp = private_ptr(e, priv, e.bin(B::Add, row, e.ci(T::i32, kPrivSlots - 1)));
    e.add(StmtKind::GlobalStore, T::none, {fp, e.bin(B::BitOr, e.add(StmtKind::GlobalLoad, T::i64, {fp}), flags)});
  }

  // Zeroes the private copy (field_sum) before the thread's share of the loop; after it, adds each
  // non-zero sum, split, into the shared limbs (ors the flags into the shared flags).
  void flush_private(Task &t, int priv, int64_t first, const Layout &lay, const SourceLoc &loc) {
    const int64_t count = lay.n * kPrivSlots;
    t.min_chunk += (4 * count + chunk_ - 1) / chunk_;  // iterations per chunk that amortise zeroing and flushing
    auto each = [&](Block &b, const std::function<void(IrEmitter &, Stmt *, Stmt *)> &body) {
      IrEmitter e(b, loc);
      Stmt *loop = range_for(e, e.ci(T::i32, 0), e.ci(T::i32, static_cast<int64_t>(count)), true);
      IrEmitter in(*loop->body, loc);
      Stmt *i = in.add(StmtKind::LoopIndex, T::i32, {loop});
      Stmt *p = in.add(StmtKind::GlobalPtr, T::i64, {i});
      p->ival = priv;
      body(in, i, p);
    };
    each(t.pre_loop, [&](IrEmitter &e, Stmt *, Stmt *p) { e.add(StmtKind::GlobalStore, T::none, {p, i64(e, 0)}); });
    each(t.post_loop, [&](IrEmitter &e, Stmt *i, Stmt *p) {
      Stmt *v = e.add(StmtKind::GlobalLoad, T::i64, {p});
      Stmt *el = e.bin(B::Div, i, e.ci(T::i32, kPrivSlots));
      Stmt *k = e.bin(B::Sub, i, e.bin(B::Mul, el, e.ci(T::i32, kPrivSlots)));
      Stmt *is_flags = e.bin(B::Eq, k, e.ci(T::i32, kPrivSlots - 1));
      Stmt *nz = e.bin(B::Ne, v, i64(e, 0));
      IrEmitter limb = e.if_(e.both(nz, e.not_(is_flags)));
      atomic(limb, AtomicOp::Add, slot(limb, first, lay.limb(limb, el, k)), limb.bin(B::BitAnd, v, i64(limb, 0xFFFFFFFF)));
      atomic(limb, AtomicOp::Add, slot(limb, first, lay.limb(limb, el, limb.bin(B::Add, k, limb.ci(T::i32, 1)))),
             limb.bin(B::Shr, v, i64(limb, 32)));
      IrEmitter flag = e.if_(e.both(nz, is_flags));
      atomic(flag, AtomicOp::Or, slot(flag, first, lay.flags(flag, el)), v);
    });
  }

  // --- Stable compaction -----------------------------------------------------------------------

  // The old value of a counter, and what is computed from it (through variables and loads), must
  // not decide which counter updates run or by how much: the counting pass does not know it.
  void check_slots(Task &t, const std::vector<Stmt *> &counters) {
    std::unordered_set<const Stmt *> tainted(counters.begin(), counters.end()), is_counter = tainted;
    for (bool grew = true; grew;) {
      grew = false;
      for_each_stmt(*t.loop()->body, [&](Stmt &s) {
        if (tainted.count(&s) || s.operands.empty()) return;
        bool from = false;
        for (size_t i = 0; i < s.operands.size(); i++)
          from = from || (tainted.count(s.operands[i]) && !(s.kind == StmtKind::LocalStore && i == 0));
        if (!from) return;
        if (s.kind == StmtKind::LocalStore) {
          grew = tainted.insert(s.operands[0]).second || grew;  // the variable
          return;
        }
        if (s.dtype != T::none || s.kind == StmtKind::GlobalPtr) grew = tainted.insert(&s).second || grew;
      });
    }
    for_each_stmt(*t.loop()->body, [&](Stmt &s) {
      bool control = s.kind == StmtKind::If || s.kind == StmtKind::While || s.kind == StmtKind::RangeFor;
      if (is_counter.count(&s) && tainted.count(s.operands[1]))
        reject("a slot counter's increment computed from a slot", s.loc);
      if (!control) return;
      bool uses = false;
      for (Stmt *o : s.operands) uses = uses || tainted.count(o);
      if (!uses) return;
      bool affects = false;  // what the counting pass must reproduce
      for (Block *b : {s.body.get(), s.else_body.get()}) {
        if (!b) continue;
        for_each_stmt(*b, [&](Stmt &x) {
          affects = affects || is_counter.count(&x) || x.kind == StmtKind::Break || x.kind == StmtKind::Continue ||
                    x.kind == StmtKind::Return || x.kind == StmtKind::LocalStore;
        });
      }
      if (affects)
        reject("a slot (the old value of qd.atomic_add on a counter) decides which counter updates happen: the "
               "outcome depends on the order",
               s.loc);
    });
    // The counting pass drops the stores: the loop must not read what it writes.
    std::set<std::pair<int64_t, int64_t>> written;
    auto where = [&](const Stmt &ptr) {
      return std::pair{ptr.ival, k_.buffers[ptr.ival].kind == BufferKind::Temps ? ptr.byte_offset : 0};
    };
    for_each_stmt(*t.loop()->body, [&](Stmt &s) {
      if ((s.kind == StmtKind::GlobalStore || s.kind == StmtKind::Atomic) && s.operands[0]->kind == StmtKind::GlobalPtr)
        written.insert(where(*s.operands[0]));
    });
    for_each_stmt(*t.loop()->body, [&](Stmt &s) {
      if (s.kind == StmtKind::GlobalLoad && written.count(where(*s.operands[0])))
        reject("a compaction loop (a slot counter) that reads memory it writes: its passes would see different "
               "values",
               s.loc);
    });
  }

  // for c in range(kChunks): chunk c of the loop's iterations, in order, in one thread (with lanes > 1,
  // a power of two: in the `lanes` consecutive threads of a subgroup together, the outer loop then
  // counting `lanes` threads per chunk used). The task's prologue and the loop body are copies; returns the
  // outer loop and the chunk's serial loop through `outer` and `inner`, and the copy map;
  // before_inner emits before the inner loop, given the chunk index (i32).
  Task chunked(Task &t, CloneMap &m, Stmt *&outer, Stmt *&inner, std::function<void(IrEmitter &, Stmt *)> before_inner,
               int lanes = 1) {
    Task p;
    p.parallel = true;
    clone_into(t.prologue, p.prologue, m);
    const Stmt *loop = t.loop();
    const SourceLoc loc = loop->loc;
    IrEmitter pe(p.prologue, loc);
    Stmt *begin = pe.cast(mapped(m, loop->operands[0]), T::i64);
    Stmt *n = pe.bin(B::Max, pe.bin(B::Sub, pe.cast(mapped(m, loop->operands[1]), T::i64), begin), i64(pe, 0));
    // The chunks used: all of them; with lanes, no more than one per round of lanes * 16 elements
    // (a short range in few chunks: a round evaluates that many elements, most of them past the
    // end otherwise; the loop then runs only the threads of the chunks used, the others' counts
    // stay 0). Fixed by the range (and the subgroup size) alone.
    Stmt *used = i64(pe, kChunks);
    if (lanes > 1) {
      const int64_t round = int64_t(lanes) * kGpuCompactionBatch;
      Stmt *rounds = pe.bin(B::Div, pe.bin(B::Add, n, i64(pe, round - 1)), i64(pe, round));
      used = pe.bin(B::Max, pe.bin(B::Min, rounds, used), i64(pe, 1));
    }
    outer = range_for(pe, pe.ci(T::i32, 0), pe.cast(pe.bin(B::Mul, used, i64(pe, lanes)), T::i32), false);
    outer->block_dim = loop->block_dim;
    p.body.push(std::move(p.prologue.stmts.back()));
    p.prologue.stmts.pop_back();
    IrEmitter e(*outer->body, loc);
    Stmt *chunk = e.add(StmtKind::LoopIndex, T::i32, {outer});
    int log2_lanes = 0;
    while ((1 << log2_lanes) < lanes) log2_lanes++;
    if (lanes > 1) chunk = e.bin(B::Shr, chunk, e.ci(T::i32, log2_lanes));
    Stmt *c = e.cast(chunk, T::i64);
    auto bound = [&](Stmt *q) {  // begin + min(q, used) * n / used
      return e.cast(e.bin(B::Add, begin, e.bin(B::Div, e.bin(B::Mul, e.bin(B::Min, q, used), n), used)), T::i32);
    };
    Stmt *lo = bound(c), *hi = bound(e.bin(B::Add, c, i64(e, 1)));
    before_inner(e, chunk);
    inner = range_for(e, lo, hi, true);
    m[loop] = inner;
    clone_into(*loop->body, *inner->body, m);
    return p;
  }

  void compaction(Task &t, std::vector<Stmt *> counters, std::vector<Task> &before) {
    const SourceLoc loc = counters[0]->loc;
    std::set<Key> keys;
    for (Stmt *a : counters) keys.insert(key(*a->operands[0]));
    for (Stmt *a : steps_)  // the counter's updates whose old value is unused step it too
      if (keys.count(key(*a->operands[0]))) counters.push_back(a);
    if (keys.size() != 1 || !invariant(*counters[0]->operands[0]))
      reject("slot counters in one parallel loop must be one element with constant / argument indices", loc);
    const Stmt &cptr = *counters[0]->operands[0];
    check_exclusive(t, counters, {{cptr.ival, k_.buffers[cptr.ival].kind == BufferKind::Temps ? cptr.byte_offset : 0}});
    check_slots(t, counters);
    DataType ct = counters[0]->dtype;
    int64_t first = reserve(kChunks, loc);
    auto delta = [&](IrEmitter &e, Stmt *a) {
      return a->atomic_op() == AtomicOp::Sub ? e.bin(B::Sub, e.ci(ct, 0), a->operands[1]) : a->operands[1];
    };
    auto counts = [&](IrEmitter &e, Stmt *chunk) { return slot(e, first, chunk); };
    auto atomic_io = [](Stmt *s) {
      s->is_atomic = true;  // the temps array is reached atomically only (SPIR-V: by element index)
      return s;
    };
    auto erase = [](Stmt *s) { std::erase_if(s->parent->stmts, [&](auto &x) { return x.get() == s; }); };
    // Pass 2 (serial): each chunk's first slot, from the counter's value; the counter's final value.
    auto scan_pass = [&] {
      Task s;
      IrEmitter e(s.body, loc);
      auto target = clone_leaf(cptr);
      for (Stmt *&idx : target->operands) idx = e.insert(clone_leaf(*idx));
      Stmt *tp = e.insert(std::move(target));
      Stmt *run = e.var(T::i64, e.cast(e.add(StmtKind::GlobalLoad, ct, {tp}), T::i64));
      Stmt *loop = range_for(e, e.ci(T::i32, 0), e.ci(T::i32, kChunks), true);
      IrEmitter le(*loop->body, loc);
      Stmt *c = le.add(StmtKind::LoopIndex, T::i32, {loop});
      Stmt *v = atomic_io(le.add(StmtKind::GlobalLoad, T::i64, {counts(le, c)}));
      Stmt *r = le.load(run);
      atomic_io(le.add(StmtKind::GlobalStore, T::none, {counts(le, c), r}));
      le.store(run, le.bin(B::Add, r, v));
      auto again = clone_leaf(cptr);
      for (Stmt *&idx : again->operands) idx = e.insert(clone_leaf(*idx));
      Stmt *tp2 = e.insert(std::move(again));
      e.add(StmtKind::GlobalStore, T::none, {tp2, e.cast(e.load(run), ct)});
      return s;
    };
    // Pass 3: the loop, each chunk handing out slots from its first one, in iteration order.
    auto slots_pass = [&](int lanes, CloneMap &m, Stmt *&inner, Stmt *&run) {
      Stmt *outer = nullptr;
      return chunked(t, m, outer, inner, [&](IrEmitter &e, Stmt *chunk) {
        run = e.var(ct, e.cast(atomic_io(e.add(StmtKind::GlobalLoad, T::i64, {counts(e, chunk)})), ct));
      }, lanes);
    };
    // Vulkan, a loop of the batched compaction's form: a subgroup runs each chunk in rounds of
    // consecutive elements (neighbouring lanes, neighbouring elements), the counting pass too.
    // (a workgroup of whole subgroups: a block_dim that is a multiple of the subgroup size, or the default)
    if (const int lanes = subgroup_chunk_lanes(target_);
        lanes > 0 && t.loop()->block_dim % lanes == 0 && target_.has_subgroup_reduce(ct)) {
      CloneMap m3;
      Stmt *inner = nullptr, *run = nullptr;
      Task p3 = slots_pass(lanes, m3, inner, run);
      if (batch_chunk_compaction(k_, target_, p3, inner, run)) {
        CloneMap m;
        Stmt *outer = nullptr, *cnt = nullptr, *chunk = nullptr;
        Task p1 = chunked(t, m, outer, inner, [&](IrEmitter &e, Stmt *c) {
          cnt = e.var(ct, e.ci(ct, 0));
          chunk = c;
        }, lanes);
        if (!batch_chunk_compaction(k_, target_, p1, inner, cnt, true))
          throw CompileError(ErrorKind::Codegen, "deterministic compaction: the counting pass does not batch as its slots pass did (internal)", loc);
        IrEmitter e(*outer->body, loc);  // the lanes' counts added; every lane stores the sum
        Stmt *sum = e.add(StmtKind::Simt, ct, {e.load(cnt)}, static_cast<int>(SimtOp::SubgroupReduce));
        sum->ival = static_cast<int64_t>(B::Add);
        atomic_io(e.add(StmtKind::GlobalStore, T::none, {counts(e, chunk), e.cast(sum, T::i64)}));
        before.push_back(std::move(p1));
        before.push_back(scan_pass());
        t = std::move(p3);
        return;
      }
    }

    // Pass 1: each chunk's total increment.
    {
      CloneMap m;
      Stmt *outer, *inner, *cnt = nullptr, *chunk = nullptr;
      Task p = chunked(t, m, outer, inner, [&](IrEmitter &e, Stmt *c) {
        cnt = e.var(ct, e.ci(ct, 0));
        chunk = c;
      });
      std::unordered_set<const Stmt *> mine;
      for (Stmt *a : counters) mine.insert(m.at(a));
      std::vector<Stmt *> drop;  // the loop's effects other than the counters
      for_each_stmt(*inner->body, [&](Stmt &s) {
        if (!mine.count(&s) && (s.kind == StmtKind::GlobalStore || s.kind == StmtKind::Atomic)) drop.push_back(&s);
      });
      for (Stmt *orig : counters) {
        Stmt *a = m.at(orig);
        IrEmitter e(a);
        e.store(cnt, e.bin(B::Add, e.load(cnt), delta(e, a)));
        replace_uses(*inner->body, a, e.ci(ct, 0));  // feeds only dropped stores and dead values
        erase(a);
      }
      for (Stmt *s : drop) erase(s);
      IrEmitter e(*outer->body, loc);
      atomic_io(e.add(StmtKind::GlobalStore, T::none, {counts(e, chunk), e.cast(e.load(cnt), T::i64)}));
      before.push_back(std::move(p));
    }
    before.push_back(scan_pass());
    CloneMap m;
    Stmt *inner = nullptr, *run = nullptr;
    Task p = slots_pass(1, m, inner, run);
    if (cpu_ && batch_chunk_compaction(k_, target_, p, inner, run)) {
      t = std::move(p);
      return;
    }
    for (Stmt *orig : counters) {
      Stmt *a = m.at(orig);
      IrEmitter e(a);
      Stmt *old = e.load(run);
      e.store(run, e.bin(B::Add, old, delta(e, a)));
      replace_uses(*inner->body, a, old);
      erase(a);
    }
    t = std::move(p);
  }

  KernelIR &k_;
  const qd::Target &target_;
  bool cpu_;
  bool spirv_;  // Vulkan / Metal
  std::vector<Stmt *> steps_;  // integer add / sub with unused results on invariant addresses
  Block *loop_body_ = nullptr;  // the parallel loop being rewritten
  // chunk_loop: the loop over the chunks, the original loop inside it, and the chunk's iterations
  Stmt *chunk_outer_ = nullptr, *chunk_inner_ = nullptr;
  int64_t chunk_ = 1;
  bool chunk_sums_ = false;  // the same-address sums use the chunks
  bool staged_ = false;      // a field's updates in the loop body are staged per chunk (cpu)
  bool replay_ = false;      // cpu: one same-address target, the loop's only effect (fast_sum)
  bool skips_ = false;       // the loop has a continue / break / return: an iteration may skip an update
  bool fallback_ = false;    // the loop is a bucketed scatter's fallback (bucketed_sum)
  Stmt *chunk_lo_ = nullptr, *chunk_trips_ = nullptr;  // consecutive chunks: the first iteration (i32), the trips
};

}  // namespace

void make_deterministic(KernelIR &k, const Target &target) { Determinizer(k, target).run(); }

}  // namespace qd
