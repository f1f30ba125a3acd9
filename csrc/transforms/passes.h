#pragma once
#include "atomics/support_table.h"
#include "ir/ir.h"
#include "target/target.h"

namespace qd {

// Constant folding (transforms/fold.cpp): pure operations on constants become constants, with the
// value the cpu backend computes at run time bit for bit (the language's semantics as legalization
// writes them, f32 in float, math functions by the C library's calls); IEEE-exact identities
// (x * 1.0, x + -0.0, integer x * 0, ...) drop their operation; what folding leaves unused goes.
// Run first and again after legalization; off with qd.init(constant_folding=False).
void fold_constants(KernelIR &k);

// Splits the kernel body into tasks: each outermost non-serialised range-for is a parallel task,
// the code between them serial tasks. Top-level variables move to a temps buffer, since tasks run
// as separate functions; pure values used across tasks are recomputed where used.
void offload(KernelIR &k);

// Debug mode: every field / ndarray index is checked; an out-of-range index records an error
// (reported by the launcher) and is replaced by 0 so the access stays in bounds.
void insert_bounds_checks(KernelIR &k);

// `atomic` becomes a plain read-modify-write returning the old value (its users in `scope` rewired).
void demote_atomic(Block &scope, Stmt *atomic);

// Atomics on kernel locals become plain read-modify-writes that still return the old value.
void demote_local_atomics(KernelIR &k);
// So do atomics on addresses only one parallel iteration touches (x[i] in `for i in range(n)`,
// when every access to x in the loop is x[i]).
void demote_unique_atomics(KernelIR &k);

// Atomics with unused results on loop-invariant addresses in a parallel loop are accumulated per
// thread in a variable (Task::pre_loop) and applied once per thread (Task::post_loop).
// The combining operations are marked reassociable (Stmt::reassoc), so the cpu loop vectorises
// with several accumulators. With `cpu`, small fields updated only by such atomics (histograms),
// when native, get a private copy per thread (a Private buffer), and float min/max accumulate
// their non-NaN operands only (a form LLVM vectorises).
void privatize_reductions(KernelIR &k, bool cpu);

// The same value on every thread of a parallel loop: constants, kernel arguments and pure
// arithmetic on them (subgroup aggregation, batched compaction).
bool thread_uniform(const Stmt *s);
// A pointer to such an element of a field, an ndarray or a kernel-scope variable (`c[None]`).
bool thread_uniform_address(const KernelIR &k, const Stmt &ptr);

// A parallel task whose loop synchronizes through memory (fences, atomic loads / stores, ordered
// atomics): its atomics stay where and as they are.
bool synchronizes(Task &t);

// GPU targets: relaxed reducible atomics on an address the same for every lane (constant and
// argument indices) are combined over the subgroup's active lanes first and applied by one lane;
// a used old value becomes the elected lane's plus the lane's exclusive prefix
// (transforms/subgroup_atomics.cpp). Off without the target's subgroup operations
// (Target::has_subgroup_reduce) or with qd.init(subgroup_aggregation=False).
void aggregate_subgroup_atomics(KernelIR &k, const Target &target);

// SPIR-V targets: in a parallel loop, plain loads of a field element at constant indices or of a
// kernel-scope variable, from a buffer nothing in the task writes, are read once per thread before
// its share of the loop (Task::pre_loop) into a variable the loop reads (transforms/hoist.cpp).
void hoist_invariant_loads(KernelIR &k);

// Vulkan and the cpu: a parallel loop `if cond: out[qd.atomic_add(c[None], 1)] = ...` (a compaction:
// loads and arithmetic, then one `if` with a counter atomic, loads and stores) handles a batch of
// elements per thread with one atomic per batch (and subgroup), on Vulkan the passing elements'
// values moved to the first lanes, on the cpu without a branch per element where the body only
// stores at out[slot] (transforms/compaction.cpp). Runs before aggregate_subgroup_atomics, under
// the same switch.
void batch_compactions(KernelIR &k, const Target &target);
// Deterministic mode's stable compaction: `loop`, a serial loop of task t over one chunk whose body
// has that form, handing out the slots from the variable `run` (the chunk's next slot) in iteration
// order, runs as batches, each taking its slots from `run`: on the cpu of listed passing elements;
// on Vulkan, where the chunk is run by the subgroup_chunk_lanes(target) lanes of a subgroup
// together (the same chunk and loop bounds in each), of subgroup rounds; with count_only (Vulkan)
// each lane's `run` advances by the slots of its own elements (to be added over the subgroup after
// the loop). Returns whether it did; under the same switch.
bool batch_chunk_compaction(KernelIR &k, const Target &target, Task &t, Stmt *loop, Stmt *run, bool count_only = false);
// Vulkan with compactions batched and a known subgroup size: that size; else 0.
int subgroup_chunk_lanes(const Target &target);
// GPUs: the elements per lane in one batch (one round of a deterministic chunk).
constexpr int kGpuCompactionBatch = 16;

// cpu: a parallel loop whose only effects are reducible atomics with unused results into one
// large field (scatter-add) runs as a bucketing of its updates by destination range, each bucket
// applied by one thread with plain read-modify-writes; where the runtime has no scratch memory
// for it, the original loop runs as one part of the field per thread, each replaying the loop and
// applying its part's updates (scatter.cpp, docs/atomics.md).
void partition_scatters(KernelIR &k);

// The bucketing of partition_scatters for a pass that applies the buckets its own way (the cpu's
// deterministic f32 scatter, deterministic.cpp): t's loop, when it suits one, as its first three
// tasks (count, offsets, fill; When::WithScratch, appended to `out`), buckets of at most
// 2^max_shift consecutive elements of the target's flat index. Bucket b's updates are
// indices[o] / values[o] for o in [starts[b], starts[b + 1]) (Scratch buffers, i32 / the atomics'
// type; values are the atomics' operands, a sub's not negated). Returns false, adding nothing,
// where the loop does not suit one or its atomics are not exactly `atomics`.
struct ScatterBuckets {
  int64_t target = -1, size = 0, buckets = 0;  // the field, its elements, the buckets
  int shift = 0;                               // bucket b: elements [b << shift, (b + 1) << shift)
  int starts = -1, indices = -1, values = -1;  // buffers
};
bool bucket_scatter(KernelIR &k, const Task &t, const std::vector<Stmt *> &atomics, int max_shift,
                    std::vector<Task> &out, ScatterBuckets *b);

// cpu: a parallel loop using block / subgroup operations or shared arrays runs block by block,
// each block's logical threads region by region between barriers on one worker
// (transforms/cpu_blocks.cpp, docs/backends.md); serial code is a one-thread block.
constexpr int kCpuDefaultBlockDim = 128;
constexpr int kCpuMaxBlockDim = 1024;
constexpr int kCpuSubgroupSize = 32;
void run_blocks_on_cpu(KernelIR &k);

// cpu: a parallel loop of straight-line code around one inner loop of the same trip count in
// every iteration (all pairs: n-body, distance sums) runs 8 iterations side by side in one inner
// loop, each in its own order (bit for bit the loop as written), for LLVM's SLP vectorizer
// (transforms/interleave.cpp).
void interleave_iterations(KernelIR &k);

// Deterministic mode (KernelIR::deterministic; transforms/deterministic.cpp, docs/atomics.md): f32
// atomic sums become exact integer sums of fixed-point limbs rounded once after the loop, slot
// counters hand out slots in iteration order, and atomics whose outcome is the schedule's are a
// QuadrantsTypeError naming the line. Runs after demotion and before the verdicts, so every
// later rewrite (privatization, bucketing, subgroup aggregation) sees integer atomics.
void make_deterministic(KernelIR &k, const Target &target);

// Stores the support table's verdict on every atomic on memory (Stmt::lowering); raises
// QuadrantsTypeError (naming the source line) for atomics the target cannot do.
void decide_atomics(KernelIR &k, const Target &target);

// Rewrites the language's operations into the primitives every codegen maps one-to-one
// (transforms/legalize.cpp).
void legalize(KernelIR &k, const Target &target);

// Automatic differentiation (transforms/autodiff.cpp, docs/autodiff.md), first of all passes: the
// reverse-mode adjoint kernel (the primal replayed without global writes, then its chain rule
// backwards, adjoints accumulated into KernelIR::companion buffers by atomic adds), and the
// forward-mode dual kernel (each real value's tangent next to it). Unsupported shapes (a while loop
// or break through differentiated values, a float atomic other than add / sub) raise
// QuadrantsSyntaxError / QuadrantsTypeError naming the line.
void make_adjoint(KernelIR &k, int stack_size);
void make_dual(KernelIR &k);
// qd.ad.Tape(validation=True): reads of a checked buffer set the element's check bit; a write of an
// element whose bit is set (read, then written, in one launch) reports the buffer's message.
void check_data_access(KernelIR &k);

// Runs everything after building, in order.
void run_passes(KernelIR &k, const Target &target);

}  // namespace qd
