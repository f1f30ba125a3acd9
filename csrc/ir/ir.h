#pragma once
// The core IR: a tree of blocks holding statements; each value-producing statement is its own SSA
// value. Built by ir/builder.h (driven from Python), checked as it is built, lowered by transforms/,
// emitted by codegen/.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "atomics/memory_model.h"
#include "atomics/support_table.h"
#include "ir/ops.h"
#include "common/error.h"
#include "ir/types.h"

namespace qd {

enum class StmtKind {
  Const, Arg, GlobalPtr, GlobalLoad, GlobalStore, Alloca, LocalLoad, LocalStore,
  Unary, Binary, Select, Atomic, Fence, If, While, RangeFor, LoopIndex, Break, Continue, Return,
  Simt,  // a block / grid operation (barrier, fence, thread index): `op` is a SimtOp
  // qd.math.fns(mask: u32, base: u32, offset: i32) -> u32, CUDA's __fns: the position of the
  // |offset|-th set bit of mask from bit base up (offset > 0) or down (< 0), inclusive; offset 0:
  // base if set; 0xFFFFFFFF if none. Native PTX fns.b32 on CUDA (base clamped by legalization),
  // a 32-step loop elsewhere.
  Fns,
  // One operation over n contiguous elements (`op` a SpanOp, ir/ops.h), emitted as a vector loop
  // (codegen/llvm/span_llvm.cpp). Made only for the cpu (qd.algorithms, transforms/compaction.cpp).
  Span,
  // Real function calls (a recursive @qd.real_func, KernelIR::functions): Param is the function's
  // parameter `ival` (inside its code only); Call calls function `ival` with the operands as its
  // arguments (no value of its own; it may read and write any global memory); CallResult is the
  // call's (operands[0]) return value `ival`.
  Param, Call, CallResult,
};


struct Block;
struct Stmt;

// A memory object a kernel reads or writes. Fields have a static shape; ndarrays are arguments
// whose data pointer comes with the launch and whose shape lives in argument slots.
// Private: a per-thread copy of a field (privatized histograms), placed by the codegen in the
// thread's stack; no memory is bound for it.
// Shared: a block-shared array (qd.simt.block.SharedArray), one copy per block of the parallel
// loop that uses it; placed by the codegen in workgroup / addrspace(3) memory, never bound.
// Scratch (cpu): temporary memory of one launch that the runtime provides (a bucketed scatter's
// counters and pairs, transforms/scatter.cpp): shape[0] + scratch_per_item * items elements, where
// items is the launch's Task::scratch_items; indexed by one flat index.
enum class BufferKind { Field, Ndarray, Temps, Result, Private, Shared, Scratch };
struct BufferDesc {
  BufferKind kind;
  DataType dtype;
  std::vector<int64_t> shape;     // fields: the full shape (element dims included)
  int ndim = 0;                   // ndarrays: the number of dims (element dims included)
  int shape_arg_slot = -1;        // ndarrays: args[slot + k] holds dim k
  std::vector<int64_t> static_tail;  // ndarrays: the static element dims (vector ndarrays)
  int64_t field_id = -1;          // fields: the runtime's buffer id
  std::string name;
  SourceLoc loc;                  // shared arrays: where the SharedArray was created
  // Shared arrays in a task with dynamic shared memory (target/shared_memory.h): the byte offset in
  // it; -1 for a statically allocated array.
  int64_t shared_offset = -1;
  int64_t scratch_per_item = 0;   // Scratch: elements per item (see above)
};

struct Stmt {
  StmtKind kind;
  DataType dtype = DataType::none;  // the value's type; none for statements without a value
  std::vector<Stmt *> operands;
  SourceLoc loc;
  Block *parent = nullptr;
  int id = -1;  // set by the printer / codegen numbering

  // Payload; which members matter depends on `kind` (documented at the builder).
  int64_t ival = 0;        // Const (ints), Arg (slot), GlobalPtr (buffer), Atomic (op)
  int64_t byte_offset = 0; // GlobalPtr into the temps/result buffers
  double fval = 0;         // Const (floats)
  int op = 0;              // Unary/Binary op
  DataType cast_from = DataType::none;
  bool is_volatile = false;     // GlobalLoad
  bool is_atomic = false;       // GlobalLoad / GlobalStore: qd.atomic_load / qd.atomic_store
  // GlobalStore: a streaming store, a hint that the line will not be read again soon (LLVM's
  // !nontemporal: on the cpu a non-temporal store, which writes a whole line without first reading
  // it and leaves the caches alone, the task function then ending in a fence; SPIR-V: a plain
  // store). The same result either way.
  bool nontemporal = false;
  // Atomic, atomic GlobalLoad / GlobalStore, Fence: the memory order and scope (memory-model.md)
  MemoryOrder order = MemoryOrder::Relaxed;
  MemScope scope = MemScope::Device;
  bool serialize = false;       // RangeFor
  // Serial RangeFor: no iteration reads or writes global memory another one writes (a pass made
  // the loop from a parallel one's iterations). LLVM: its global accesses are marked parallel
  // (llvm.loop.parallel_accesses), so the vectorizer need not prove that loads and stores do not alias.
  bool independent = false;
  // Serial RangeFor, LLVM: the vectorisation width to use (llvm.loop.vectorize.width); 0: the cost
  // model's choice.
  int vector_width = 0;
  // Binary: a privatized reduction's combine, which may be reassociated (the atomics it replaced
  // were unordered); float min/max operands are then never NaN (reductions.cpp). cpu: fast-math.
  bool reassoc = false;
  // Float arithmetic legalization wrote (error-free transforms, the math library): rounded exactly
  // as written even under fast_math (SPIR-V: NoContraction always).
  bool exact = false;
  Lowering lowering = Lowering::Native;  // Atomic: the support table's verdict, decided once (decide_atomics)
  int block_dim = 0;            // RangeFor
  // RangeFor of a parallel task on a GPU (legalization's grid-stride loop): this thread's first
  // index (in the task's prologue) and its next one (the first statement of the body, computed from
  // the index); both stop at the end without overflowing. Null: every index from begin, step 1.
  Stmt *first_index = nullptr, *next_index = nullptr;
  // While: a name for the loop in emitted code ("cas.loop"); RangeFor: what rewrote it, printed
  // in the IR ("batched compaction")
  const char *label = nullptr;
  // cpu: the first of `lanes` statements in a row that are copies of one statement, one per
  // iteration run side by side (transforms/interleave.cpp); the LLVM codegen emits them as one
  // vector instruction where it can (same operation lane by lane, so the same results), one by one
  // elsewhere. 0 on every other statement.
  int lanes = 0;
  std::unique_ptr<Block> body, else_body;  // If (then/else), While/RangeFor (body)

  Stmt(StmtKind k, DataType t) : kind(k), dtype(t) {}
  AtomicOp atomic_op() const { return static_cast<AtomicOp>(ival); }
  bool is_pure() const;  // no side effects: may be recomputed or dropped
};

struct Block {
  std::vector<std::unique_ptr<Stmt>> stmts;
  Stmt *owner = nullptr;  // the If/While/RangeFor holding this block; null for the kernel body

  Stmt *push(std::unique_ptr<Stmt> s);
};

struct ArgDesc {
  enum Kind { Scalar, Ndarray } kind;
  DataType dtype;
  std::string name;
  int slot = -1;    // scalars: args[slot]
  int buffer = -1;  // ndarrays: the buffer index
};

// One offloaded task: serial code, or one parallel range-for.
struct Task {
  bool parallel = false;
  Block prologue;  // parallel: pure code computing the loop bounds (recomputed by every thread)
  Block body;      // serial: the code; parallel: exactly one RangeFor, whose operands live in prologue
  // parallel: code each thread runs before and after its share of the loop (privatized
  // reductions: accumulators start at the op's identity, and are flushed with one atomic each)
  Block pre_loop, post_loop;
  // parallel, cpu: iterations per thread chunk that amortise setting up and flushing private
  // copies of fields (privatized histograms)
  int64_t min_chunk = 0;
  // parallel: the bytes of block-shared memory its shared arrays take (target/shared_memory.h), and
  // whether they live in dynamic shared memory, sized at launch (CUDA above 48 KiB).
  int64_t shared_bytes = 0;
  bool dynamic_shared = false;
  // cpu: a task whose prologue value `scratch_items` (i64) sizes the kernel's Scratch buffers; the
  // runtime evaluates it with the loop bounds, before the task runs. When it can provide them (a
  // negative count: it cannot), the tasks
  // marked WithScratch run and those marked WithoutScratch are skipped; otherwise the reverse (a
  // rewrite's tasks and the original loop as their fallback, transforms/scatter.cpp).
  Stmt *scratch_items = nullptr;
  enum class When { Always, WithScratch, WithoutScratch } when = When::Always;
  // parallel, cpu: the loop runs block by block (transforms/cpu_blocks.cpp): its index steps by
  // this many iterations (one block) and the runtime hands out whole blocks; 0 otherwise.
  int cpu_block_dim = 0;
  Stmt *loop() const { return parallel ? body.stmts[0].get() : nullptr; }
};

// A real function (a recursive @qd.real_func specialized for its compile-time arguments): typed
// scalar parameters and returns (vectors, matrices and structs are passed as their entries). Its
// code is one serial task's body whose Return statements return `returns`; it reaches the kernel's
// buffers and arguments as the kernel's tasks do.
struct FunctionDesc {
  std::string name;
  std::vector<DataType> params, returns;
  SourceLoc loc;  // where it was first called
  std::unique_ptr<Task> code;
};

struct KernelIR {
  std::string name;
  Block body;
  std::vector<ArgDesc> args;
  std::vector<BufferDesc> buffers;
  int num_arg_slots = 0;
  std::vector<DataType> returns;
  std::vector<FunctionDesc> functions;  // called by StmtKind::Call (ival: the index)
  // After offloading:
  std::vector<Task> tasks;
  int64_t temps_bytes = 0;
  // Slot ranges {first, count} of the temps that the kernel's own tasks zero before using them (a
  // deterministic sum's fallback, transforms/deterministic.cpp): the cpu runtime skips them at launch.
  std::vector<std::pair<int64_t, int64_t>> temps_zeroed_by_tasks;
  // Slot ranges {first, count} of the temps that the kernel's tasks leave zero when they end (a
  // deterministic field sum's slots on Vulkan, zeroed again by its final pass): the Vulkan runtime
  // fills them at the kernel's first launch only.
  std::vector<std::pair<int64_t, int64_t>> temps_left_zero;
  int temps_buffer = -1, result_buffer = -1;
  // Debug mode: bounds checks report through two result slots (message index + 1, the bad index).
  bool debug = false;
  // Deterministic mode (transforms/deterministic.cpp, docs/atomics.md): the same bits on every run.
  bool deterministic = false;
  int error_slot = -1;
  std::vector<std::string> error_messages;
  // Automatic differentiation (transforms/autodiff.cpp): this is the kernel's adjoint (Reverse) or
  // dual (Forward) version; companion[b]: the buffer holding buffer b's gradient (.grad) or
  // tangent (.dual), -1 where it has none.
  // Validation: the global data access rule checked (companion[b]: buffer b's check bits, set by
  // reads; a write of an element already read puts check_message[b] into the assertion word,
  // buffer check_word).
  enum class Autodiff { None, Reverse, Forward, Validation } autodiff = Autodiff::None;
  std::vector<int> companion;
  std::vector<int> check_message;
  int check_word = -1;
  int ad_stack_size = 1024;  // Reverse: iterations of a dynamic loop whose carried state is saved

  int add_buffer(BufferDesc d) {
    buffers.push_back(std::move(d));
    return static_cast<int>(buffers.size()) - 1;
  }
};

std::string print_ir(const KernelIR &k);

// Small editing helpers for passes.
void for_each_stmt(Block &b, const std::function<void(Stmt &)> &f);  // pre-order, nested blocks too
void replace_uses(Block &b, Stmt *from, Stmt *to);
std::unique_ptr<Stmt> clone_leaf(const Stmt &s);  // payload and operands, not child blocks
// Statements and their copies, for passes that copy code.
using CloneMap = std::unordered_map<const Stmt *, Stmt *>;
Stmt *mapped(const CloneMap &m, Stmt *s);  // s's copy in m, or s itself
// Appends copies of src's statements (child blocks included) to dst, operands renamed by m (which
// learns each copy).
void clone_into(const Block &src, Block &dst, CloneMap &m);
Stmt *insert_before(Stmt *anchor, std::unique_ptr<Stmt> s);
// The first Call statement in b (nested blocks too), or null.
const Stmt *first_call(Block &b);

}  // namespace qd
