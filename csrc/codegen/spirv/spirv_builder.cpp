#include "codegen/spirv/spirv_builder.h"

#include <bit>
#include <stdexcept>

namespace qd::spirv {

namespace {

constexpr uint32_t kMagic = 0x07230203;

// Literal strings: UTF-8, nul-terminated, packed little-endian into whole words.
void append_string(std::vector<uint32_t> &out, const std::string &s) {
  std::vector<uint32_t> words(s.size() / 4 + 1, 0);
  for (size_t i = 0; i < s.size(); ++i) words[i / 4] |= uint32_t(uint8_t(s[i])) << (8 * (i % 4));
  out.insert(out.end(), words.begin(), words.end());
}

// IEEE binary32 -> binary16 bits, round to nearest even.
uint16_t float_to_half(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t exp = (x >> 23) & 0xff, mant = x & 0x7fffff;
  if (exp == 0xff) return uint16_t(sign | 0x7c00 | (mant ? 0x200 | (mant >> 13) : 0));
  int e = int(exp) - 127 + 15;
  if (e >= 31) return uint16_t(sign | 0x7c00);
  if (e <= 0) {  // half subnormal (or zero)
    if (e < -10) return uint16_t(sign);
    mant |= 0x800000;
    int shift = 14 - e;
    uint32_t m = mant >> shift, rest = mant & ((1u << shift) - 1), halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (m & 1))) ++m;
    return uint16_t(sign | m);
  }
  uint32_t h = sign | (uint32_t(e) << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;  // a carry may round up to inf: correct
  return uint16_t(h);
}

}  // namespace

void Builder::misuse(const std::string &msg) { throw std::logic_error("SPIR-V builder: " + msg); }

Builder::Builder(MemoryModelKind model, uint32_t version) : model_(model), version_(version) {
  if (version < 0x00010300) misuse("SPIR-V 1.3 or newer is required (StorageBuffer class)");
  capability(Capability::Shader);
  if (model == MemoryModelKind::Vulkan) {
    capability(Capability::VulkanMemoryModel);
    if (version < 0x00010500) extension("SPV_KHR_vulkan_memory_model");
  }
}

void Builder::capability(Capability cap) { capabilities_.insert(uint32_t(cap)); }

void Builder::extension(const std::string &name) { extensions_.insert(name); }

Id Builder::glsl_std_450() {
  if (!glsl_ext_) {
    glsl_ext_ = new_id();
    std::vector<uint32_t> ops{glsl_ext_};
    append_string(ops, "GLSL.std.450");
    inst(ext_imports_, Op::ExtInstImport, ops);
  }
  return glsl_ext_;
}

void Builder::name(Id id, const std::string &debug_name) {
  std::vector<uint32_t> ops{id};
  append_string(ops, debug_name);
  inst(debug_, Op::Name, ops);
}

void Builder::decorate(Id target, Decoration d, std::initializer_list<uint32_t> args) {
  std::vector<uint32_t> ops{target, uint32_t(d)};
  ops.insert(ops.end(), args);
  inst(annotations_, Op::Decorate, ops);
}

void Builder::member_decorate(Id type, uint32_t member, Decoration d,
                              std::initializer_list<uint32_t> args) {
  std::vector<uint32_t> ops{type, member, uint32_t(d)};
  ops.insert(ops.end(), args);
  inst(annotations_, Op::MemberDecorate, ops);
}

void Builder::inst(std::vector<uint32_t> &out, Op op, const std::vector<uint32_t> &operands) const {
  out.push_back(uint32_t(operands.size() + 1) << 16 | uint32_t(op));
  out.insert(out.end(), operands.begin(), operands.end());
}

// ---- types ----

Id Builder::intern_type(const std::vector<uint32_t> &key, const TypeInfo &info,
                        const std::vector<uint32_t> &operands) {
  auto it = type_ids_.find(key);
  if (it != type_ids_.end()) return it->second;
  Id id = new_id();
  std::vector<uint32_t> ops{id};
  ops.insert(ops.end(), operands.begin(), operands.end());
  inst(globals_, Op(key[0]), ops);
  type_ids_[key] = id;
  types_[id] = info;
  return id;
}

Id Builder::t_void() { return intern_type({uint32_t(Op::TypeVoid)}, {TypeInfo::Void}, {}); }

Id Builder::t_bool() { return intern_type({uint32_t(Op::TypeBool)}, {TypeInfo::Bool}, {}); }

Id Builder::t_int(uint32_t width, bool is_signed) {
  if (width == 8) capability(Capability::Int8);
  else if (width == 16) capability(Capability::Int16);
  else if (width == 64) capability(Capability::Int64);
  else if (width != 32) misuse("unsupported int width " + std::to_string(width));
  TypeInfo info{TypeInfo::Int, width, is_signed};
  return intern_type({uint32_t(Op::TypeInt), width, is_signed}, info, {width, is_signed});
}

void Builder::preserve_ieee(std::set<uint32_t> preserve_widths) {
  ieee_ = true;
  preserve_widths_ = std::move(preserve_widths);
}

Id Builder::t_float(uint32_t width) {
  float_widths_.insert(width);
  if (width == 16) capability(Capability::Float16);
  else if (width == 64) capability(Capability::Float64);
  else if (width != 32) misuse("unsupported float width " + std::to_string(width));
  TypeInfo info{TypeInfo::Float, width};
  return intern_type({uint32_t(Op::TypeFloat), width}, info, {width});
}

Id Builder::t_vector(Id component, uint32_t n) {
  TypeInfo info{TypeInfo::Vector, 0, false, component, n};
  return intern_type({uint32_t(Op::TypeVector), component, n}, info, {component, n});
}

Id Builder::t_array(Id elem, uint32_t length, uint32_t stride) {
  Id len = c_u32(length);
  std::vector<uint32_t> key{uint32_t(Op::TypeArray), elem, len, stride};
  bool fresh = !type_ids_.count(key);
  Id id = intern_type(key, {TypeInfo::Array, 0, false, elem, length}, {elem, len});
  if (fresh && stride) decorate(id, Decoration::ArrayStride, {stride});
  return id;
}

Id Builder::t_runtime_array(Id elem, uint32_t stride) {
  std::vector<uint32_t> key{uint32_t(Op::TypeRuntimeArray), elem, stride};
  bool fresh = !type_ids_.count(key);
  Id id = intern_type(key, {TypeInfo::RuntimeArray, 0, false, elem, 0}, {elem});
  if (fresh && stride) decorate(id, Decoration::ArrayStride, {stride});
  return id;
}

Id Builder::t_struct(const std::vector<Id> &members, const std::vector<uint32_t> &offsets,
                     bool block) {
  if (!offsets.empty() && offsets.size() != members.size()) misuse("one offset per member");
  std::vector<uint32_t> key{uint32_t(Op::TypeStruct)};
  key.insert(key.end(), members.begin(), members.end());
  key.push_back(~0u);  // separates members from layout in the key
  key.insert(key.end(), offsets.begin(), offsets.end());
  key.push_back(block);
  bool fresh = !type_ids_.count(key);
  Id id = intern_type(key, {TypeInfo::Struct, 0, false, 0, uint32_t(members.size())}, members);
  if (!fresh) return id;
  for (size_t i = 0; i < offsets.size(); ++i)
    member_decorate(id, uint32_t(i), Decoration::Offset, {offsets[i]});
  if (block) decorate(id, Decoration::Block);
  return id;
}

Id Builder::t_pointer(StorageClass sc, Id pointee) {
  TypeInfo info{TypeInfo::Pointer, 0, false, pointee, 0, sc};
  return intern_type({uint32_t(Op::TypePointer), uint32_t(sc), pointee}, info,
                     {uint32_t(sc), pointee});
}

Id Builder::t_function(Id ret, const std::vector<Id> &params) {
  std::vector<uint32_t> operands{ret};
  operands.insert(operands.end(), params.begin(), params.end());
  std::vector<uint32_t> key{uint32_t(Op::TypeFunction)};
  key.insert(key.end(), operands.begin(), operands.end());
  return intern_type(key, {TypeInfo::Function, 0, false, ret}, operands);
}

const TypeInfo &Builder::type_info(Id type) const {
  auto it = types_.find(type);
  if (it == types_.end()) misuse("%" + std::to_string(type) + " is not a type of this module");
  return it->second;
}

Id Builder::type_of(Id value) const {
  auto it = value_types_.find(value);
  return it == value_types_.end() ? 0 : it->second;
}

const TypeInfo &Builder::scalar_info(Id type) const {
  const TypeInfo &t = type_info(type);
  return t.kind == TypeInfo::Vector ? type_info(t.elem) : t;
}

uint32_t Builder::size_of(Id type) const {
  const TypeInfo &t = type_info(type);
  switch (t.kind) {
    case TypeInfo::Int: case TypeInfo::Float: return t.width / 8;
    case TypeInfo::Vector: return t.count * size_of(t.elem);
    default: return 0;
  }
}

// ---- constants ----

Id Builder::intern_constant(Op op, Id type, const std::vector<uint32_t> &values) {
  std::vector<uint32_t> key{uint32_t(op), type};
  key.insert(key.end(), values.begin(), values.end());
  auto it = constant_ids_.find(key);
  if (it != constant_ids_.end()) return it->second;
  Id id = new_id();
  std::vector<uint32_t> ops{type, id};
  ops.insert(ops.end(), values.begin(), values.end());
  inst(globals_, op, ops);
  constant_ids_[key] = id;
  value_types_[id] = type;
  return id;
}

Id Builder::c_bool(bool v) {
  return intern_constant(v ? Op::ConstantTrue : Op::ConstantFalse, t_bool(), {});
}

Id Builder::c_int(Id int_type, int64_t v) {
  const TypeInfo &t = type_info(int_type);
  if (t.kind != TypeInfo::Int) misuse("c_int needs an int type");
  uint64_t u = uint64_t(v);
  if (t.width == 64) return intern_constant(Op::Constant, int_type, {uint32_t(u), uint32_t(u >> 32)});
  if (t.width < 32) {  // narrow literals are sign- or zero-extended to a word
    uint32_t bits = uint32_t(u) & ((1u << t.width) - 1);
    if (t.is_signed && (bits >> (t.width - 1))) bits |= ~((1u << t.width) - 1);
    return intern_constant(Op::Constant, int_type, {bits});
  }
  return intern_constant(Op::Constant, int_type, {uint32_t(u)});
}

Id Builder::c_float(Id float_type, double v) {
  const TypeInfo &t = type_info(float_type);
  if (t.kind != TypeInfo::Float) misuse("c_float needs a float type");
  if (t.width == 64) {
    uint64_t u = std::bit_cast<uint64_t>(v);
    return intern_constant(Op::Constant, float_type, {uint32_t(u), uint32_t(u >> 32)});
  }
  if (t.width == 16) return intern_constant(Op::Constant, float_type, {float_to_half(float(v))});
  return intern_constant(Op::Constant, float_type, {std::bit_cast<uint32_t>(float(v))});
}

Id Builder::c_null(Id type) { return intern_constant(Op::ConstantNull, type, {}); }

Id Builder::c_composite(Id type, const std::vector<Id> &parts) {
  return intern_constant(Op::ConstantComposite, type, parts);
}

// ---- variables ----

Id Builder::global_var(StorageClass sc, Id pointee, Id initializer) {
  if (sc == StorageClass::Function) misuse("use local_var for Function variables");
  Id ptr = t_pointer(sc, pointee);
  Id id = new_id();
  std::vector<uint32_t> ops{ptr, id, uint32_t(sc)};
  if (initializer) ops.push_back(initializer);
  inst(globals_, Op::Variable, ops);
  value_types_[id] = ptr;
  interface_.push_back({id, sc});
  return id;
}

void Builder::add_storage_capabilities(Id elem_type) {
  const TypeInfo &t = type_info(elem_type);
  if (t.kind == TypeInfo::Vector || t.kind == TypeInfo::Array) return add_storage_capabilities(t.elem);
  if (t.kind != TypeInfo::Int && t.kind != TypeInfo::Float) return;
  if (t.width == 8) {
    capability(Capability::StorageBuffer8BitAccess);
    if (version_ < 0x00010500) extension("SPV_KHR_8bit_storage");
  } else if (t.width == 16) {
    capability(Capability::StorageBuffer16BitAccess);  // core since SPIR-V 1.3
  }
}

StorageBuffer Builder::storage_buffer(Id elem_type, uint32_t set, uint32_t binding, uint32_t stride) {
  if (!stride) stride = size_of(elem_type);
  if (!stride) misuse("storage_buffer: give the stride of a non-scalar element");
  add_storage_capabilities(elem_type);
  Id block = t_struct({t_runtime_array(elem_type, stride)}, {0}, true);
  StorageBuffer buf;
  buf.var = global_var(StorageClass::StorageBuffer, block);
  buf.elem_type = elem_type;
  buf.elem_ptr_type = t_pointer(StorageClass::StorageBuffer, elem_type);
  decorate(buf.var, Decoration::DescriptorSet, {set});
  decorate(buf.var, Decoration::Binding, {binding});
  if (coherent_ && model_ != MemoryModelKind::Vulkan) decorate(buf.var, Decoration::Coherent);
  return buf;
}

Id Builder::workgroup_array(Id elem_type, uint32_t length) {
  return global_var(StorageClass::Workgroup, t_array(elem_type, length));
}

Id Builder::builtin_var(BuiltIn b) {
  auto it = builtins_.find(uint32_t(b));
  if (it != builtins_.end()) return it->second;
  bool scalar = false;
  switch (b) {
    case BuiltIn::SubgroupSize: case BuiltIn::SubgroupLocalInvocationId:
    case BuiltIn::NumSubgroups: case BuiltIn::SubgroupId:
      capability(Capability::GroupNonUniform);
      scalar = true;
      break;
    case BuiltIn::LocalInvocationIndex:
      scalar = true;
      break;
    default:
      break;
  }
  Id type = scalar ? t_u32() : t_vector(t_u32(), 3);
  Id var = global_var(StorageClass::Input, type);
  decorate(var, Decoration::BuiltIn, {uint32_t(b)});
  builtins_[uint32_t(b)] = var;
  return var;
}

Id Builder::load_builtin(BuiltIn b, int component) {
  Id var = builtin_var(b);
  Id type = type_info(type_of(var)).elem;
  Id v = load(type, var);
  if (component < 0) return v;
  if (type_info(type).kind != TypeInfo::Vector) misuse("component of a scalar builtin");
  return extract(t_u32(), v, uint32_t(component));
}

Id Builder::local_var(Id pointee, Id initializer) {
  if (!in_function_) misuse("local_var outside a function");
  Id ptr = t_pointer(StorageClass::Function, pointee);
  Id id = new_id();
  std::vector<uint32_t> ops{ptr, id, uint32_t(StorageClass::Function)};
  if (initializer) ops.push_back(initializer);
  inst(fn_locals_, Op::Variable, ops);
  value_types_[id] = ptr;
  return id;
}

// ---- functions ----

Id Builder::begin_function(Id ret_type, const std::vector<Id> &param_types) {
  if (in_function_) misuse("nested begin_function");
  Id fn_type = t_function(ret_type, param_types);
  Id fn = new_id();
  in_function_ = true;
  fn_header_.clear(), fn_locals_.clear(), fn_body_.clear(), fn_params_.clear();
  inst(fn_header_, Op::Function, {ret_type, fn, 0, fn_type});
  for (Id p : param_types) {
    Id id = new_id();
    inst(fn_header_, Op::FunctionParameter, {p, id});
    value_types_[id] = p;
    fn_params_.push_back(id);
  }
  inst(fn_header_, Op::Label, {new_label()});
  block_open_ = true;
  value_types_[fn] = ret_type;
  return fn;
}

void Builder::end_function() {
  if (!in_function_) misuse("end_function without begin_function");
  if (!frames_.empty()) misuse("end_function inside an unfinished if or loop");
  if (block_open_) {
    // Falling off the end of a void function returns; of any other, cannot happen.
    bool is_void = type_info(fn_header_[1]).kind == TypeInfo::Void;
    emit_void(is_void ? Op::Return : Op::Unreachable, {});
  }
  functions_.insert(functions_.end(), fn_header_.begin(), fn_header_.end());
  functions_.insert(functions_.end(), fn_locals_.begin(), fn_locals_.end());
  functions_.insert(functions_.end(), fn_body_.begin(), fn_body_.end());
  inst(functions_, Op::FunctionEnd, {});
  in_function_ = false;
}

Id Builder::begin_kernel(const std::string &entry_name, uint32_t lx, uint32_t ly, uint32_t lz) {
  Id fn = begin_function(t_void());
  entry_points_.push_back({fn, entry_name, {lx, ly, lz}});
  name(fn, entry_name);
  return fn;
}

Id Builder::call(Id ret_type, Id fn, const std::vector<Id> &args) {
  std::vector<uint32_t> ops{fn};
  ops.insert(ops.end(), args.begin(), args.end());
  return emit(Op::FunctionCall, ret_type, ops);
}

void Builder::ret() { emit_void(Op::Return, {}); }

void Builder::ret_value(Id v) { emit_void(Op::ReturnValue, {v}); }

// ---- blocks and structured control flow ----

void Builder::require_block(const char *what) {
  if (!in_function_) misuse(std::string(what) + " outside a function");
  if (!block_open_) start_block(new_label());
}

void Builder::start_block(Id label) {
  if (!in_function_) misuse("start_block outside a function");
  if (block_open_) branch(label);  // fall through into the new block
  inst(fn_body_, Op::Label, {label});
  block_open_ = true;
}

void Builder::branch(Id target) { emit_void(Op::Branch, {target}); }

void Builder::branch_cond(Id cond, Id if_true, Id if_false) {
  emit_void(Op::BranchConditional, {cond, if_true, if_false});
}

void Builder::begin_if(Id cond) {
  ControlFrame f{ControlFrame::If};
  f.merge = new_label();
  f.else_label = new_label();
  Id then_label = new_label();
  emit_void(Op::SelectionMerge, {f.merge, 0});
  branch_cond(cond, then_label, f.else_label);
  frames_.push_back(f);
  start_block(then_label);
}

void Builder::begin_else() {
  if (frames_.empty() || frames_.back().kind != ControlFrame::If || frames_.back().has_else)
    misuse("begin_else without a matching begin_if");
  ControlFrame &f = frames_.back();
  f.has_else = true;
  if (block_open_) branch(f.merge);
  start_block(f.else_label);
}

void Builder::end_if() {
  if (frames_.empty() || frames_.back().kind != ControlFrame::If)
    misuse("end_if without a matching begin_if");
  ControlFrame f = frames_.back();
  frames_.pop_back();
  if (block_open_) branch(f.merge);
  if (!f.has_else) {  // the false edge still needs its own block, which just leaves
    start_block(f.else_label);
    branch(f.merge);
  }
  start_block(f.merge);
}

void Builder::begin_loop() {
  ControlFrame f{ControlFrame::Loop};
  f.header = new_label();
  f.merge = new_label();
  f.continue_label = new_label();
  Id body = new_label();
  require_block("begin_loop");
  start_block(f.header);
  emit_void(Op::LoopMerge, {f.merge, f.continue_label, 0});
  branch(body);
  frames_.push_back(f);
  start_block(body);
}

void Builder::loop_condition(Id cond) {
  ControlFrame &f = innermost_loop("loop_condition");
  Id body = new_label();
  branch_cond(cond, body, f.merge);  // an exit to the loop's merge needs no selection merge
  start_block(body);
}

void Builder::begin_continue() {
  if (frames_.empty() || frames_.back().kind != ControlFrame::Loop || frames_.back().in_continue)
    misuse("begin_continue outside a loop body");
  ControlFrame &f = frames_.back();
  f.in_continue = true;
  if (block_open_) branch(f.continue_label);
  start_block(f.continue_label);
}

void Builder::end_loop() {
  if (frames_.empty() || frames_.back().kind != ControlFrame::Loop)
    misuse("end_loop without a matching begin_loop");
  if (!frames_.back().in_continue) begin_continue();
  ControlFrame f = frames_.back();
  frames_.pop_back();
  if (block_open_) branch(f.header);
  start_block(f.merge);
}

Builder::ControlFrame &Builder::innermost_loop(const char *what) {
  for (auto it = frames_.rbegin(); it != frames_.rend(); ++it)
    if (it->kind == ControlFrame::Loop) return *it;
  misuse(std::string(what) + " outside a loop");
}

void Builder::break_loop() { branch(innermost_loop("break_loop").merge); }

void Builder::continue_loop() { branch(innermost_loop("continue_loop").continue_label); }

// ---- output ----

std::vector<uint32_t> Builder::finish() {
  if (in_function_) misuse("finish inside an unfinished function");
  // The mode goes on every width of a float type and, where the module has floats, of an integer
  // type: Mesa's SPIR-V front end (lavapipe) takes a conversion's mode from its SOURCE width, and
  // folds an inexact i64 -> f32 -> i64 (or i32 -> f16 -> i32) round trip to the identity unless the
  // integer's width is preserved too (docs/backends.md). Declaring a width no float uses is valid
  // and changes nothing else.
  std::set<uint32_t> widths = float_widths_;
  if (!widths.empty())
    for (const auto &[id, t] : types_)
      if (t.kind == TypeInfo::Int && t.width >= 16) widths.insert(t.width);
  std::vector<uint32_t> preserved;
  for (uint32_t w : widths)
    if (preserve_widths_.count(w)) preserved.push_back(w);
  if (!preserved.empty()) {
    capability(Capability::SignedZeroInfNanPreserve);
    if (version_ < 0x00010400) extension("SPV_KHR_float_controls");
  }
  std::vector<uint32_t> out{kMagic, version_, 0, next_id_, 0};
  for (uint32_t cap : capabilities_) inst(out, Op::Capability, {cap});
  for (const std::string &ext : extensions_) {
    std::vector<uint32_t> ops;
    append_string(ops, ext);
    inst(out, Op::Extension, ops);
  }
  out.insert(out.end(), ext_imports_.begin(), ext_imports_.end());
  MemoryModel mm = model_ == MemoryModelKind::Vulkan ? MemoryModel::Vulkan : MemoryModel::GLSL450;
  inst(out, Op::MemoryModel, {uint32_t(AddressingModel::Logical), uint32_t(mm)});
  for (const EntryPoint &ep : entry_points_) {
    std::vector<uint32_t> ops{uint32_t(ExecutionModel::GLCompute), ep.fn};
    append_string(ops, ep.name);
    for (auto [var, sc] : interface_)
      if (version_ >= 0x00010400 || sc == StorageClass::Input || sc == StorageClass::Output)
        ops.push_back(var);
    inst(out, Op::EntryPoint, ops);
  }
  for (const EntryPoint &ep : entry_points_) {
    inst(out, Op::ExecutionMode, {ep.fn, uint32_t(ExecutionMode::LocalSize), ep.local_size[0],
                                  ep.local_size[1], ep.local_size[2]});
    for (uint32_t w : preserved) inst(out, Op::ExecutionMode, {ep.fn, uint32_t(ExecutionMode::SignedZeroInfNanPreserve), w});
  }
  for (const auto *section : {&debug_, &annotations_, &globals_, &functions_})
    out.insert(out.end(), section->begin(), section->end());
  return out;
}

}  // namespace qd::spirv
