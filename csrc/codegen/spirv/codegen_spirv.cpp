// SPIR-V codegen, part 1: the module, one entry point per task, statements and structured
// control flow. Memory, arithmetic and atomics live in the other codegen_spirv_*.cpp files.
#include "codegen/spirv/codegen_spirv_impl.h"

#include <algorithm>

#include "codegen/spirv/spirv_tools.h"
#include "target/launch_bounds.h"

namespace qd {

using spirv::BuiltIn;

namespace {

// SPIR-V 1.3 (Vulkan 1.1): the oldest version the Vulkan runtime accepts, and one SPIRV-Cross
// reads; the Vulkan memory model, where the device has it, through SPV_KHR_vulkan_memory_model.
constexpr uint32_t kSpirvVersion = 0x00010300;

// Whether a kernel synchronizes through memory: ordered atomics, atomic loads / stores, fences, or
// atomics at System scope (whose scope only the Vulkan memory model can widen).
bool synchronizes(const KernelIR &k) {
  bool sync = false;
  for (const Task &t : k.tasks)
    for_each_stmt(const_cast<Block &>(t.body), [&](Stmt &s) {
      sync |= s.kind == StmtKind::Fence || s.is_atomic ||
              (s.kind == StmtKind::Atomic && (s.order != MemoryOrder::Relaxed || s.scope == MemScope::System));
    });
  return sync;
}

// The Vulkan memory model for kernels that synchronize, where the device has it (with Device
// scope, which every kernel uses); GLSL450 elsewhere, and always for Metal: SPIRV-Cross's MSL
// output keeps to GLSL450 modules. Kernels that do not synchronize gain nothing from the Vulkan
// model and keep GLSL450: there a volatile load (a CAS loop's first guess) would need
// MakePointerVisible, which lavapipe runs as a memory barrier, and so as the control barrier of
// its bug (docs/atomics.md, "Memory order and scope").
spirv::MemoryModelKind memory_model_for(const SpirvTarget &t, const KernelIR &k) {
  bool vulkan = t.backend == Backend::Vulkan && t.features.has(Cap::vulkan_memory_model) &&
                t.features.has(Cap::vulkan_memory_model_device_scope) && synchronizes(k);
  return vulkan ? spirv::MemoryModelKind::Vulkan : spirv::MemoryModelKind::GLSL450;
}

}  // namespace

std::optional<Cap> shader_feature(DataType t) {
  switch (t) {
    case DataType::i8: case DataType::u8: return Cap::shader_int8;
    case DataType::i16: case DataType::u16: return Cap::shader_int16;
    case DataType::i64: case DataType::u64: return Cap::shader_int64;
    case DataType::f16: return Cap::shader_float16;
    case DataType::f64: return Cap::shader_float64;
    default: return std::nullopt;
  }
}

std::optional<Cap> storage_feature(DataType t) {
  switch (bit_width(t)) {
    case 1: case 8: return Cap::int8_storage;
    case 16: return Cap::float16_storage;  // VK 16-bit storage: ints and floats alike
    default: return std::nullopt;
  }
}

SpirvCodegen::SpirvCodegen(const KernelIR &k, const SpirvTarget &target)
    : k_(k),
      target_(target),
      b_(memory_model_for(target, k), kSpirvVersion),
      args_binding_(static_cast<uint32_t>(k.buffers.size())) {}

SpirvModule SpirvCodegen::run() {
  check_types();
  // A kernel that synchronizes through memory (ordered atomics, atomic loads / stores, fences)
  // publishes plain writes too (a spin lock's critical section): its buffers are Coherent (its
  // plain accesses NonPrivatePointer under the Vulkan memory model).
  b_.set_coherent_buffers(synchronizes(k_));
  if (!target_.fast_math) {
    std::set<uint32_t> widths;
    if (target_.features.has(Cap::signed_zero_inf_nan_preserve_float16)) widths.insert(16);
    if (target_.features.has(Cap::signed_zero_inf_nan_preserve_float32)) widths.insert(32);
    if (target_.features.has(Cap::signed_zero_inf_nan_preserve_float64)) widths.insert(64);
    b_.preserve_ieee(widths);
  }
  plan_views();
  SpirvModule m;
  m.args_binding = args_binding_;
  for (size_t i = 0; i < k_.tasks.size(); i++) {
    const Task &task = k_.tasks[i];
    SpirvTaskInfo info;
    info.entry = k_.name + "_t" + std::to_string(i);
    info.parallel = task.parallel;
    info.block_dim = task.parallel ? block_dim_of(*task.loop()) : 1;
    info.has_effects = has_effects(task);
    b_.begin_kernel(info.entry, info.block_dim);
    values_.clear();
    addresses_.clear();
    private_.clear();
    block_dim_ = info.block_dim;
    if (task.parallel) emit_parallel_loop(task);
    else emit_block(task.body);
    b_.end_function();
    m.tasks.push_back(info);
  }
  m.words = b_.finish();
  if (k_.tasks.empty()) return m;  // an empty kernel: no entry point, nothing to validate or launch
  std::string error = spirv::validate(m.words, spirv::TargetEnv::Vulkan1_1);
  if (!error.empty())
    throw CompileError(ErrorKind::Codegen,
                       "internal: the SPIR-V generated for kernel '" + k_.name + "' is invalid: " + error);
  return m;
}

// A kernel that uses a type the device lacks fails here, naming the line, instead of at launch.
void SpirvCodegen::check_types() {
  auto require = [&](std::optional<Cap> feature, DataType t, const Stmt &s, const char *where) {
    if (target_.backend == Backend::Metal && t == DataType::f64)
      type_error("f64 is not supported on metal: Metal has no 64-bit floats; use f32", s.loc);
    if (!target_.device_features || !feature || target_.features.has(*feature)) return;
    type_error(std::string(dtype_name(t)) + where + " needs the device capability '" + cap_name(*feature) +
                   "', which this Vulkan device lacks",
               s.loc);
  };
  auto check = [&](Stmt &s) {
    for (DataType t : {s.dtype, s.cast_from})
      if (t != DataType::none) require(shader_feature(t), t, s, "");
    if (s.kind != StmtKind::GlobalPtr) return;
    const BufferDesc &d = k_.buffers[s.ival];
    if (d.kind != BufferKind::Field && d.kind != BufferKind::Ndarray) return;
    require(storage_feature(d.dtype), d.dtype, s, " in a field or ndarray");
    if (d.dtype == DataType::u1) require(Cap::shader_int8, d.dtype, s, " in a field or ndarray");
  };
  for (const Task &t : k_.tasks)
    for (const Block *b : {&t.prologue, &t.pre_loop, &t.body, &t.post_loop}) for_each_stmt(const_cast<Block &>(*b), check);
}

uint32_t SpirvCodegen::block_dim_of(const Stmt &loop) const {
  uint32_t dim = loop.block_dim > 0 ? static_cast<uint32_t>(loop.block_dim) : kDefaultBlockDim;
  if (dim > target_.max_block_dim)
    type_error("block_dim " + std::to_string(dim) + " exceeds the largest workgroup of this target (" +
                   std::to_string(target_.max_block_dim) + ")",
               loop.loc);
  return dim;
}

// A grid-stride loop: invocation g runs begin + g, then steps by the whole grid, so any range
// runs on any number of workgroups (the runtime sizes the grid from the range when it can).
void SpirvCodegen::emit_parallel_loop(const Task &task) {
  emit_block(task.prologue);
  // Legalization's grid-stride loop: the prologue ends with this invocation's first index, and the
  // body starts with its next one.
  const Stmt &loop = *task.loop();
  Id i32 = b_.t_i32(), end = value(loop.operands[1]);
  Id counter = b_.local_var(i32);
  b_.store(counter, value(loop.first_index));
  emit_block(task.pre_loop);
  b_.begin_loop();
  Id i = b_.load(i32, counter);
  b_.loop_condition(b_.lt(i32, i, end));
  values_[&loop] = i;
  emit_block(*loop.body);
  b_.begin_continue();
  b_.store(counter, value(loop.next_index));
  b_.end_loop();
  emit_block(task.post_loop);
}

void SpirvCodegen::emit_block(const Block &blk) {
  for (auto &s : blk.stmts) {
    emit(*s);
    // What follows a jump in its block is unreachable, and SPIR-V rejects its branch back to the loop.
    if (s->kind == StmtKind::Break || s->kind == StmtKind::Continue) break;
  }
}

SpirvCodegen::Id SpirvCodegen::value(const Stmt *s) const {
  auto it = values_.find(s);
  if (it == values_.end())
    throw CompileError(ErrorKind::Codegen, "internal: SPIR-V codegen found a value used before it is defined", s->loc);
  return it->second;
}

void SpirvCodegen::emit(const Stmt &s) {
  Id v = 0;
  switch (s.kind) {
    case StmtKind::Const: v = constant(s); break;
    case StmtKind::Arg: v = arg_value(static_cast<int>(s.ival), s.dtype); break;
    case StmtKind::GlobalPtr: addresses_[&s] = global_address(s); break;
    case StmtKind::GlobalLoad: v = s.is_atomic ? atomic_access(s) : load(s); break;
    case StmtKind::GlobalStore:
      if (s.is_atomic) atomic_access(s);
      else store(*s.operands[0], value(s.operands[1]));
      break;
    case StmtKind::Fence: fence(s); break;
    case StmtKind::Alloca: emit_alloca(s); break;
    case StmtKind::LocalLoad: v = b_.load(type(s.dtype), value(s.operands[0])); break;
    case StmtKind::LocalStore: b_.store(value(s.operands[0]), value(s.operands[1])); break;
    case StmtKind::Unary:
    case StmtKind::Binary:
      b_.set_exact(s.exact);
      v = s.kind == StmtKind::Unary ? unary(s) : binary(s);
      b_.set_exact(false);
      break;
    case StmtKind::Select:
      v = b_.select(type(s.dtype), to_bool(value(s.operands[0]), s.operands[0]->dtype), value(s.operands[1]),
                    value(s.operands[2]));
      break;
    case StmtKind::Atomic: v = atomic(s); break;
    case StmtKind::If: emit_if(s); break;
    case StmtKind::While: emit_while(s); break;
    case StmtKind::RangeFor: emit_serial_for(s); break;
    case StmtKind::LoopIndex: v = value(s.operands[0]); break;
    case StmtKind::Break: b_.break_loop(); break;
    case StmtKind::Continue: b_.continue_loop(); break;
    case StmtKind::Return: emit_return(s); break;
    case StmtKind::Simt: v = simt(s); break;
    case StmtKind::Fns: throw std::logic_error("internal: fns reached the SPIR-V codegen unlegalized");
    case StmtKind::Span: throw std::logic_error("internal: a span statement (cpu only) reached the SPIR-V codegen");
    case StmtKind::Param: case StmtKind::Call: case StmtKind::CallResult:  // refused by run_passes (check_calls)
      throw std::logic_error("internal: a real function call reached the SPIR-V codegen");
  }
  if (v) values_[&s] = v;
}

// Variables start at zero, also when their declaration is reached again in a loop.
void SpirvCodegen::emit_alloca(const Stmt &s) {
  Id var = b_.local_var(type(s.dtype));
  b_.store(var, b_.c_null(type(s.dtype)));
  values_[&s] = var;
}

void SpirvCodegen::emit_if(const Stmt &s) {
  b_.begin_if(to_bool(value(s.operands[0]), s.operands[0]->dtype));
  emit_block(*s.body);
  if (s.else_body) {
    b_.begin_else();
    emit_block(*s.else_body);
  }
  b_.end_if();
}

// `while True`: the body leaves with break.
void SpirvCodegen::emit_while(const Stmt &s) {
  b_.begin_loop();
  emit_block(*s.body);
  b_.end_loop();
}

void SpirvCodegen::emit_serial_for(const Stmt &s) {
  Id i32 = b_.t_i32();
  Id counter = b_.local_var(i32);
  b_.store(counter, value(s.operands[0]));
  b_.begin_loop();
  Id i = b_.load(i32, counter);
  b_.loop_condition(b_.lt(i32, i, value(s.operands[1])));
  values_[&s] = i;
  emit_block(*s.body);
  b_.begin_continue();
  b_.store(counter, b_.add(i32, b_.load(i32, counter), b_.c_i32(1)));
  b_.end_loop();
}

void SpirvCodegen::emit_return(const Stmt &s) {
  for (size_t i = 0; i < s.operands.size(); i++)
    store_slot(k_.result_buffer, 2 * static_cast<int64_t>(i), s.operands[i]->dtype, value(s.operands[i]));
  b_.ret();
}

SpirvModule codegen_spirv(const KernelIR &k, const SpirvTarget &target) {
  if (target.backend != Backend::Vulkan && target.backend != Backend::Metal)
    throw std::logic_error("codegen_spirv: only vulkan and metal are SPIR-V targets");
  return SpirvCodegen(k, target).run();
}

}  // namespace qd
