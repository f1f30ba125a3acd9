#pragma once
// A small SPIR-V module builder for compute shaders: ids, types and constants (deduplicated),
// globals, functions, structured control flow and the instructions the codegen needs.
// Words are collected per logical-layout section and joined by finish().
#include <cstdint>
#include <initializer_list>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "codegen/spirv/spirv_enums.h"

namespace qd::spirv {

using Id = uint32_t;

enum class MemoryModelKind { GLSL450, Vulkan };

// What the builder remembers about a type id, so helpers can pick opcodes and capabilities.
struct TypeInfo {
  enum Kind { Void, Bool, Int, Float, Vector, Array, RuntimeArray, Struct, Pointer, Function };
  Kind kind = Void;
  uint32_t width = 0;           // bits, for Int / Float
  bool is_signed = false;       // for Int
  Id elem = 0;                  // component / element / pointee type
  uint32_t count = 0;           // vector size or array length
  StorageClass storage = StorageClass::Function;  // for Pointer
};

// A StorageBuffer variable holding `struct { T data[]; }`, or (workgroup) a Workgroup variable
// holding `T data[n]` (a block-shared array).
struct StorageBuffer {
  Id var = 0;
  Id elem_type = 0;
  Id elem_ptr_type = 0;  // pointer to T in StorageBuffer (Workgroup)
  bool workgroup = false;
};

class Builder {
 public:
  // `version` is the SPIR-V version word, e.g. 0x00010500 for 1.5 (Vulkan 1.2); at least 1.3.
  explicit Builder(MemoryModelKind model = MemoryModelKind::GLSL450, uint32_t version = 0x00010500);

  Id new_id() { return next_id_++; }
  MemoryModelKind memory_model() const { return model_; }
  // Storage buffers declared from now on are Coherent: under the GLSL450 memory model, plain loads
  // and stores of other invocations are ordered by atomics and barriers only then. Under the Vulkan
  // memory model the loads and stores of storage buffers are NonPrivatePointer instead.
  void set_coherent_buffers(bool c) { coherent_ = c; }
  void capability(Capability cap);
  void extension(const std::string &name);
  // IEEE arithmetic: every float add / sub / mul / div / rem / negate gets NoContraction (no fusing
  // or reassociation), and each entry point the SignedZeroInfNanPreserve execution mode for the
  // float widths in `preserve_widths` that the module uses.
  void preserve_ieee(std::set<uint32_t> preserve_widths);
  bool preserves_ieee() const { return ieee_; }
  // NoContraction on the float arithmetic emitted from now on even without preserve_ieee (the
  // exact statements of legalization, Stmt::exact).
  void set_exact(bool exact) { exact_ = exact; }
  Id glsl_std_450();  // imported on first use
  void name(Id id, const std::string &debug_name);
  void decorate(Id target, Decoration d, std::initializer_list<uint32_t> args = {});
  void member_decorate(Id type, uint32_t member, Decoration d, std::initializer_list<uint32_t> args = {});

  // Types. Identical requests return the same id.
  Id t_void();
  Id t_bool();
  Id t_int(uint32_t width, bool is_signed);
  Id t_i32() { return t_int(32, true); }
  Id t_u32() { return t_int(32, false); }
  Id t_float(uint32_t width);
  Id t_f32() { return t_float(32); }
  Id t_vector(Id component, uint32_t n);
  Id t_array(Id elem, uint32_t length, uint32_t stride = 0);  // stride 0: no ArrayStride
  Id t_runtime_array(Id elem, uint32_t stride);
  Id t_struct(const std::vector<Id> &members, const std::vector<uint32_t> &offsets = {},
              bool block = false);  // offsets empty: no Offset decorations
  Id t_pointer(StorageClass sc, Id pointee);
  Id t_function(Id ret, const std::vector<Id> &params = {});
  const TypeInfo &type_info(Id type) const;
  Id type_of(Id value) const;  // result type of an emitted value or variable; 0 if unknown
  uint32_t size_of(Id type) const;  // bytes of a scalar or vector; 0 for other types

  // Constants. Identical requests return the same id.
  Id c_bool(bool v);
  Id c_int(Id int_type, int64_t v);  // any width / signedness; truncated to the type's width
  Id c_i32(int32_t v) { return c_int(t_i32(), v); }
  Id c_u32(uint32_t v) { return c_int(t_u32(), v); }
  Id c_i64(int64_t v) { return c_int(t_int(64, true), v); }
  Id c_u64(uint64_t v) { return c_int(t_int(64, false), int64_t(v)); }
  Id c_float(Id float_type, double v);  // 16, 32 or 64 bits
  Id c_f32(float v) { return c_float(t_f32(), v); }
  Id c_null(Id type);
  Id c_composite(Id type, const std::vector<Id> &parts);
  Id c_scope(Scope s) { return c_u32(uint32_t(s)); }

  // Global variables.
  Id global_var(StorageClass sc, Id pointee, Id initializer = 0);
  StorageBuffer storage_buffer(Id elem_type, uint32_t set, uint32_t binding, uint32_t stride = 0);
  Id workgroup_array(Id elem_type, uint32_t length);
  Id builtin_var(BuiltIn b);  // Input variable, created once per builtin
  Id load_builtin(BuiltIn b, int component = -1);  // component >= 0 extracts from a uvec3
  Id local_var(Id pointee, Id initializer = 0);  // Function storage, placed in the entry block

  // Functions and entry points.
  Id begin_function(Id ret_type, const std::vector<Id> &param_types = {});
  const std::vector<Id> &params() const { return fn_params_; }
  void end_function();  // adds OpReturn if the last block is still open
  Id begin_kernel(const std::string &entry_name, uint32_t lx, uint32_t ly = 1, uint32_t lz = 1);
  Id call(Id ret_type, Id fn, const std::vector<Id> &args);
  void ret();
  void ret_value(Id v);

  // Blocks. A block is open from start_block until a terminator; instructions emitted after a
  // terminator (code after break, continue or return) go into a new unreachable block.
  Id new_label() { return new_id(); }
  void start_block(Id label);
  bool block_open() const { return block_open_; }
  void branch(Id target);
  void branch_cond(Id cond, Id if_true, Id if_false);

  // Structured control flow. if: begin_if [begin_else] end_if.
  // loop: begin_loop [loop_condition] body [begin_continue ...] end_loop; break_loop and
  // continue_loop may appear anywhere in the body, also inside ifs.
  void begin_if(Id cond);
  void begin_else();
  void end_if();
  void begin_loop();
  void loop_condition(Id cond);  // leaves the loop when cond is false; call before the body
  void begin_continue();
  void end_loop();
  void break_loop();
  void continue_loop();

  // Generic instructions: `emit` for those with a result, `emit_void` for the others.
  Id emit(Op op, Id result_type, const std::vector<uint32_t> &operands);
  template <class... A> Id emit(Op op, Id result_type, A... operands) {
    return emit(op, result_type, std::vector<uint32_t>{uint32_t(operands)...});
  }
  void emit_void(Op op, const std::vector<uint32_t> &operands);

  // Arithmetic, chosen by the operand type (int signedness / float).
  Id add(Id type, Id a, Id b);
  Id sub(Id type, Id a, Id b);
  Id mul(Id type, Id a, Id b);
  Id div(Id type, Id a, Id b);
  Id rem(Id type, Id a, Id b);  // sign of the dividend (C semantics)
  Id neg(Id type, Id a);
  Id bit_and(Id type, Id a, Id b) { return emit(Op::BitwiseAnd, type, a, b); }
  Id bit_or(Id type, Id a, Id b) { return emit(Op::BitwiseOr, type, a, b); }
  Id bit_xor(Id type, Id a, Id b) { return emit(Op::BitwiseXor, type, a, b); }
  Id bit_not(Id type, Id a) { return emit(Op::Not, type, a); }
  Id shl(Id type, Id a, Id b) { return emit(Op::ShiftLeftLogical, type, a, b); }
  Id shr(Id type, Id a, Id b);  // arithmetic for signed ints, logical for unsigned
  Id select(Id type, Id cond, Id a, Id b) { return emit(Op::Select, type, cond, a, b); }
  Id glsl(GLSLstd450 inst, Id type, const std::vector<Id> &args);
  // Comparisons; `operand_type` picks the opcode, the result is bool (or a bool vector).
  Id eq(Id operand_type, Id a, Id b);
  Id ne(Id operand_type, Id a, Id b);
  Id lt(Id operand_type, Id a, Id b);
  Id le(Id operand_type, Id a, Id b);
  Id gt(Id operand_type, Id a, Id b);
  Id ge(Id operand_type, Id a, Id b);
  Id logical_and(Id a, Id b) { return emit(Op::LogicalAnd, t_bool(), a, b); }
  Id logical_or(Id a, Id b) { return emit(Op::LogicalOr, t_bool(), a, b); }
  Id logical_not(Id a) { return emit(Op::LogicalNot, t_bool(), a); }

  // Value conversion between int / float types of any width (FConvert, SConvert, ...).
  Id convert(Id to_type, Id from_type, Id value);
  Id bitcast(Id to_type, Id value) { return emit(Op::Bitcast, to_type, value); }
  Id extract(Id type, Id composite, uint32_t index) {
    return emit(Op::CompositeExtract, type, composite, index);
  }

  // Memory. A volatile load uses the Volatile access bit; under the Vulkan memory model it also
  // makes the pointer visible at device scope, so another workgroup's writes can be observed.
  Id load(Id type, Id ptr, uint32_t access = memory_access::None);
  Id load_volatile(Id type, Id ptr);
  void store(Id ptr, Id value, uint32_t access = memory_access::None);
  Id access_chain(Id ptr_type, Id base, const std::vector<Id> &indices);
  Id element_ptr(const StorageBuffer &buf, Id index);  // &buf.data[index]

  // Atomics. Scope defaults to Device (the spec's scope for every qd.atomic_*); semantics
  // default to Relaxed, since qd atomics order only the location they touch. Under the Vulkan
  // memory model, which forbids SequentiallyConsistent, it becomes AcquireRelease, as Vulkan
  // treats it under GLSL450 anyway; atomic loads and stores, where Vulkan forbids it under
  // either model, get Acquire and Release.
  // `op` is any RMW atomic opcode: AtomicIAdd .. AtomicXor, AtomicExchange, AtomicFAddEXT,
  // AtomicFMinEXT, AtomicFMaxEXT. Capabilities and extensions are added from the value type.
  Id atomic(Op op, Id type, Id ptr, Id value, Scope scope = Scope::Device,
            uint32_t sem = semantics::Relaxed);
  Id atomic_cas(Id type, Id ptr, Id desired, Id expected, Scope scope = Scope::Device,
                uint32_t sem_equal = semantics::Relaxed, uint32_t sem_unequal = semantics::Relaxed);
  Id atomic_load(Id type, Id ptr, Scope scope = Scope::Device, uint32_t sem = semantics::Relaxed);
  void atomic_store(Id ptr, Id value, Scope scope = Scope::Device,
                    uint32_t sem = semantics::Relaxed);
  void control_barrier(Scope exec, Scope mem, uint32_t sem);
  void memory_barrier(Scope mem, uint32_t sem);

  // The finished module. The builder can keep growing afterwards; call again for new words.
  std::vector<uint32_t> finish();

 private:
  struct ControlFrame {
    enum Kind { If, Loop } kind;
    Id merge = 0;
    Id else_label = 0;      // If: the else block (or merge when there is no else)
    bool has_else = false;
    Id header = 0;          // Loop: the back-edge target
    Id continue_label = 0;  // Loop
    bool in_continue = false;
  };
  struct EntryPoint {
    Id fn;
    std::string name;
    uint32_t local_size[3];
  };

  [[noreturn]] static void misuse(const std::string &msg);  // throws std::logic_error
  Id intern_type(const std::vector<uint32_t> &key, const TypeInfo &info,
                 const std::vector<uint32_t> &operands);
  Id intern_constant(Op op, Id type, const std::vector<uint32_t> &values);
  void inst(std::vector<uint32_t> &out, Op op, const std::vector<uint32_t> &operands) const;
  void use_scope(Scope s);
  uint32_t non_private(Id ptr, uint32_t access) const;
  Id sem_operand(uint32_t bits, uint32_t seq_cst_as, bool always = false);
  void atomic_capabilities(Op op, Id type);
  void add_storage_capabilities(Id elem_type);
  ControlFrame &innermost_loop(const char *what);
  // Code emitted after a terminator (break, continue, return) opens an unreachable block.
  void require_block(const char *what);
  Id like(Id shape, Id scalar);
  Id in_int_range(Id from_type, Id value, const TypeInfo &to);  // convert()'s defined inputs
  Id splat(Id type, double v);  // `scalar`, or a vector of it as wide as `shape`
  Op pick(Id type, Op for_signed, Op for_unsigned, Op for_float) const;
  const TypeInfo &scalar_info(Id type) const;

  MemoryModelKind model_;
  bool coherent_ = false;
  uint32_t version_;
  Id next_id_ = 1;
  Id glsl_ext_ = 0;
  std::set<uint32_t> capabilities_;
  std::set<std::string> extensions_;
  bool ieee_ = false, exact_ = false;
  std::set<uint32_t> preserve_widths_, float_widths_;
  std::map<std::vector<uint32_t>, Id> type_ids_;
  std::map<Id, TypeInfo> types_;
  std::map<std::vector<uint32_t>, Id> constant_ids_;
  std::map<uint32_t, Id> builtins_;
  std::map<Id, Id> value_types_;
  // Every global variable; SPIR-V 1.4+ lists them all on each entry point, older versions only
  // the Input and Output ones.
  std::vector<std::pair<Id, StorageClass>> interface_;
  std::vector<EntryPoint> entry_points_;
  std::vector<ControlFrame> frames_;
  // Logical-layout sections.
  std::vector<uint32_t> ext_imports_, debug_, annotations_, globals_, functions_;
  // The function being built: header (OpFunction, params, entry label), locals, body.
  std::vector<uint32_t> fn_header_, fn_locals_, fn_body_;
  std::vector<Id> fn_params_;
  bool in_function_ = false;
  bool block_open_ = false;
};

}  // namespace qd::spirv
