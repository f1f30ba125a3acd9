#pragma once
// Internal to the SPIR-V codegen: the class whose members are spread over codegen_spirv*.cpp
// (tasks and control flow; memory; arithmetic; atomics).
#include <functional>
#include <map>
#include <set>
#include <unordered_map>

#include "codegen/spirv/codegen_spirv.h"
#include "codegen/spirv/spirv_builder.h"

namespace qd {

class SpirvCodegen {
 public:
  using Id = spirv::Id;
  SpirvCodegen(const KernelIR &k, const SpirvTarget &target);
  SpirvModule run();

 private:
  // A GlobalPtr's value: resolved to a SPIR-V pointer only where it is used, because the view
  // (element type) of the buffer it goes through depends on the use.
  struct Address {
    int buffer = -1;
    Id index = 0;             // fields / ndarrays: the element index (i32)
    int64_t byte_offset = 0;  // temps / result: the slot's byte offset
  };
  // Which typed views of a float buffer the kernel needs (see plan_views).
  struct ViewPlan {
    bool value_view = false;  // float elements: native float atomics (OpAtomicFAddEXT)
    bool int_view = false;    // same-width integers: CAS loops and exchange
    bool words = false;       // narrow elements: word CAS loops through a u32 view
  };

  // codegen_spirv.cpp: tasks, statements, control flow.
  void check_types();
  void emit_task(const Task &task, int index);
  void emit_parallel_loop(const Task &task);
  void emit_block(const Block &b);
  void emit(const Stmt &s);
  void emit_if(const Stmt &s);
  void emit_while(const Stmt &s);
  void emit_serial_for(const Stmt &s);
  void emit_return(const Stmt &s);
  void emit_alloca(const Stmt &s);
  Id value(const Stmt *s) const;
  uint32_t block_dim_of(const Stmt &loop) const;

  // codegen_spirv_memory.cpp: buffers, argument / temps / result slots, element access.
  void plan_views();
  const spirv::StorageBuffer &view(int binding, Id elem_type);
  // Views of `buffer` with elements of dtype t: as stored, as same-width integers, or whichever
  // plain loads and stores use.
  const spirv::StorageBuffer &plain_view(int buffer, DataType t);
  const spirv::StorageBuffer &int_view(int buffer, DataType t);
  const spirv::StorageBuffer &float_view(int buffer, DataType t);
  const spirv::StorageBuffer &words(int binding);
  Id load_slot(int binding, int64_t word, DataType t);
  Id temps_index(const Address &a, DataType t);
  void store_slot(int binding, int64_t word, DataType t, Id v);
  Id arg_value(int slot, DataType t);
  Address global_address(const Stmt &s);
  Id element_ptr(const spirv::StorageBuffer &view, const Address &a);
  // Block-shared arrays: one Workgroup array per buffer, of one element type (see shared_view).
  const spirv::StorageBuffer &shared_view(int buffer);
  const spirv::StorageBuffer &private_view(int buffer);
  bool is_shared(int buffer) const { return k_.buffers[buffer].kind == BufferKind::Shared; }
  bool is_private(int buffer) const { return k_.buffers[buffer].kind == BufferKind::Private; }
  bool widened(int buffer) const;  // a shared 8 / 16-bit array updated atomically: 32-bit words
  Id to_word(Id v, DataType t);    // a narrow value's bits, zero-extended to u32
  Id from_word(Id w, DataType t);  // the narrow value in the low bits of a u32
  Id load(const Stmt &s);
  void store(const Stmt &ptr, Id v);

  // codegen_spirv_arith.cpp: types, conversions, unary and binary ops.
  Id type(DataType t);      // the register type (u1 is bool)
  Id mem_type(DataType t);  // the type in buffers (u1 is a byte)
  Id int_type(DataType t);  // the unsigned integer of t's width
  Id to_bool(Id v, DataType t);
  Id from_bool(Id b, DataType t);
  Id constant(const Stmt &s);
  Id unary(const Stmt &s);
  Id math(spirv::GLSLstd450 inst, DataType t, const std::vector<Id> &args);
  Id binary(const Stmt &s);
  Id compare(const Stmt &s);
  Id float_pow(DataType t, Id a, Id b);
  Id minmax(bool is_min, DataType t, Id a, Id b);

  // codegen_spirv_atomics.cpp
  Id atomic(const Stmt &s);
  Id simt(const Stmt &s);
  Id subgroup(const Stmt &s);
  Id atomic_access(const Stmt &s);  // an atomic GlobalLoad / GlobalStore
  void fence(const Stmt &s);
  uint32_t semantics_at(const Address &a, MemoryOrder order);
  spirv::Scope scope_of(const Stmt &s);
  const spirv::StorageBuffer &int_cell(const Address &a, DataType t);

  const KernelIR &k_;
  SpirvTarget target_;
  spirv::Builder b_;
  uint32_t block_dim_ = 1;  // of the task being emitted
  uint32_t args_binding_;
  std::unordered_map<const Stmt *, Id> values_;
  std::unordered_map<const Stmt *, Address> addresses_;
  std::map<int, ViewPlan> view_plans_;
  std::map<std::pair<int, Id>, spirv::StorageBuffer> views_;
  std::map<int, spirv::StorageBuffer> shared_;
  std::map<int, spirv::StorageBuffer> private_;  // the current task's per-invocation arrays
  std::set<int> shared_atomic_;  // shared buffers some atomic updates
};

// The Vulkan device capability a dtype needs in registers (shader_float64) or in buffers
// (int8_storage); none when every device has it.
std::optional<Cap> shader_feature(DataType t);
std::optional<Cap> storage_feature(DataType t);

}  // namespace qd
