// SPIR-V codegen, part 2: memory. Every kernel buffer is a storage buffer `T data[]` at its own
// binding. The argument slots, temps and the result are arrays of 32-bit words holding 8-byte
// slots, read and written as words so that no slot type needs 64-bit or narrow storage.
#include "codegen/spirv/codegen_spirv_impl.h"

namespace qd {

using spirv::Op;
using spirv::StorageBuffer;

// A float buffer gets an integer view when an atomic goes through its bits (exchange, CAS loops),
// and keeps its float view only for native float atomics; plain accesses use the integer view when
// there is one. Both views alias the same binding only in kernels that need both.
void SpirvCodegen::plan_views() {
  auto scan = [&](Stmt &s) {
    bool atomic = s.kind == StmtKind::Atomic, bits_load = s.kind == StmtKind::GlobalLoad;
    if (!(atomic || bits_load) || s.operands[0]->kind != StmtKind::GlobalPtr) return;
    int buffer = static_cast<int>(s.operands[0]->ival);
    if (atomic && is_shared(buffer)) shared_atomic_.insert(buffer);
    const BufferDesc &d = k_.buffers[buffer];
    ViewPlan &plan = view_plans_[buffer];
    bool field = d.kind == BufferKind::Field || d.kind == BufferKind::Ndarray;
    if (field && bit_width(s.dtype) == 32 && bit_width(d.dtype) < 32) plan.words = true;
    if (!is_real(d.dtype)) return;
    if (!is_real(s.dtype)) plan.int_view = true;
    else if (atomic) plan.value_view = true;
  };
  for (const Task &t : k_.tasks)
    for (const Block *b : {&t.prologue, &t.pre_loop, &t.body, &t.post_loop}) for_each_stmt(const_cast<Block &>(*b), scan);
}

// The temps buffer is also reached through typed views when a kernel-scope variable is updated
// atomically, so its views always alias.
const StorageBuffer &SpirvCodegen::view(int binding, Id elem_type) {
  if (binding < static_cast<int>(args_binding_) && is_shared(binding)) return shared_view(binding);
  if (binding < static_cast<int>(args_binding_) && is_private(binding)) return private_view(binding);
  auto key = std::make_pair(binding, elem_type);
  auto it = views_.find(key);
  if (it != views_.end()) return it->second;
  StorageBuffer buf = b_.storage_buffer(elem_type, 0, static_cast<uint32_t>(binding));
  std::string name = "args";
  if (binding < static_cast<int>(args_binding_)) {
    const BufferDesc &d = k_.buffers[binding];
    const ViewPlan &plan = view_plans_[binding];
    if ((plan.value_view && plan.int_view) || plan.words || d.kind == BufferKind::Temps)
      b_.decorate(buf.var, spirv::Decoration::Aliased);
    name = d.kind == BufferKind::Temps ? "temps" : d.kind == BufferKind::Result ? "result" : d.name;
  }
  if (!name.empty()) b_.name(buf.var, name);
  return views_[key] = buf;
}

bool SpirvCodegen::widened(int buffer) const {
  return is_shared(buffer) && bit_width(k_.buffers[buffer].dtype) < 32 && shared_atomic_.count(buffer);
}

SpirvCodegen::Id SpirvCodegen::to_word(Id v, DataType t) {
  Id lane = int_type(t);
  return b_.convert(b_.t_u32(), lane, type(t) == lane ? v : b_.bitcast(lane, v));
}

SpirvCodegen::Id SpirvCodegen::from_word(Id w, DataType t) {
  Id lane = int_type(t);
  Id bits = b_.convert(lane, b_.t_u32(), w);
  return type(t) == lane ? bits : b_.bitcast(type(t), bits);
}

// A Workgroup variable cannot alias another, so a shared array has one element type: a float array
// reached through its bits (exchange, CAS loops) holds the same-width integers, an 8 / 16-bit one
// updated atomically 32-bit words holding its zero-extended bits (SPIR-V has no narrower atomics),
// any other its element type.
const StorageBuffer &SpirvCodegen::shared_view(int buffer) {
  auto it = shared_.find(buffer);
  if (it != shared_.end()) return it->second;
  const BufferDesc &d = k_.buffers[buffer];
  const ViewPlan &plan = view_plans_[buffer];
  if (is_real(d.dtype) && plan.int_view && plan.value_view && !widened(buffer))
    throw CompileError(ErrorKind::Codegen,
                       "shared array '" + d.name + "' is updated both by native float atomics and through its "
                       "bits (exchange, CAS-loop atomics); on SPIR-V one shared array cannot do both yet: use "
                       "two arrays", SourceLoc{});
  Id elem = widened(buffer) ? b_.t_u32() : is_real(d.dtype) && plan.int_view ? int_type(d.dtype) : mem_type(d.dtype);
  int64_t n = 1;
  for (int64_t dim : d.shape) n *= dim;
  StorageBuffer v;
  v.var = b_.workgroup_array(elem, static_cast<uint32_t>(n));
  v.elem_type = elem;
  v.elem_ptr_type = b_.t_pointer(spirv::StorageClass::Workgroup, elem);
  v.workgroup = true;
  b_.name(v.var, d.name);
  return shared_[buffer] = v;
}

// A per-thread array (a Private buffer: autodiff's adstack): a Function-storage array of the
// current task's function, reached like a workgroup array (no block wrapper).
const StorageBuffer &SpirvCodegen::private_view(int buffer) {
  auto it = private_.find(buffer);
  if (it != private_.end()) return it->second;
  const BufferDesc &d = k_.buffers[buffer];
  Id elem = mem_type(d.dtype);
  int64_t n = 1;
  for (int64_t dim : d.shape) n *= dim;
  StorageBuffer v;
  v.var = b_.local_var(b_.t_array(elem, static_cast<uint32_t>(n)));
  v.elem_type = elem;
  v.elem_ptr_type = b_.t_pointer(spirv::StorageClass::Function, elem);
  v.workgroup = true;  // the array itself, indexed directly
  b_.name(v.var, d.name);
  return private_[buffer] = v;
}

const StorageBuffer &SpirvCodegen::int_view(int buffer, DataType t) { return view(buffer, int_type(t)); }

const StorageBuffer &SpirvCodegen::float_view(int buffer, DataType t) { return view(buffer, mem_type(t)); }

const StorageBuffer &SpirvCodegen::plain_view(int buffer, DataType t) {
  if (is_real(t) && view_plans_[buffer].int_view) return int_view(buffer, t);
  return float_view(buffer, t);  // for non-floats simply the element type
}

const StorageBuffer &SpirvCodegen::words(int binding) { return view(binding, b_.t_u32()); }

// Slot contents follow the host's layout: a value's little-endian bytes from the slot's start.
SpirvCodegen::Id SpirvCodegen::load_slot(int binding, int64_t word, DataType t) {
  const StorageBuffer &w = words(binding);
  Id u32 = b_.t_u32();
  auto word_at = [&](int64_t i) { return b_.load(u32, b_.element_ptr(w, b_.c_i32(static_cast<int32_t>(i)))); };
  if (bit_width(t) == 64)
    return b_.bitcast(type(t), b_.emit(Op::CompositeConstruct, b_.t_vector(u32, 2), word_at(word), word_at(word + 1)));
  Id bits = word_at(word);
  if (t == DataType::u1) return b_.ne(u32, bits, b_.c_u32(0));
  if (t == DataType::f16) return b_.extract(type(t), b_.bitcast(b_.t_vector(type(t), 2), bits), 0);
  if (bit_width(t) == 32) return t == DataType::u32 ? bits : b_.bitcast(type(t), bits);
  return b_.convert(type(t), u32, bits);  // 8 / 16-bit ints: the low bits
}

void SpirvCodegen::store_slot(int binding, int64_t word, DataType t, Id v) {
  const StorageBuffer &w = words(binding);
  Id u32 = b_.t_u32();
  auto store_word = [&](int64_t i, Id bits) {
    b_.store(b_.element_ptr(w, b_.c_i32(static_cast<int32_t>(i))), bits);
  };
  if (bit_width(t) == 64) {
    Id pair = b_.bitcast(b_.t_vector(u32, 2), v);
    store_word(word, b_.extract(u32, pair, 0));
    store_word(word + 1, b_.extract(u32, pair, 1));
    return;
  }
  Id bits;
  if (t == DataType::u1) {
    bits = b_.select(u32, v, b_.c_u32(1), b_.c_u32(0));
  } else if (t == DataType::f16) {
    Id pair = b_.emit(Op::CompositeConstruct, b_.t_vector(type(t), 2), v, b_.c_float(type(t), 0));
    bits = b_.bitcast(u32, pair);
  } else if (bit_width(t) == 32) {
    bits = t == DataType::u32 ? v : b_.bitcast(u32, v);
  } else {  // narrow ints widen with their sign, so the low bytes are the value's
    Id wide = b_.t_int(32, is_signed(t));
    bits = b_.bitcast(u32, b_.convert(wide, type(t), v));
  }
  store_word(word, bits);
}

SpirvCodegen::Id SpirvCodegen::arg_value(int slot, DataType t) { return load_slot(args_binding_, 2 * slot, t); }

// Row-major linear element index, in i32 (buffers hold fewer than 2^31 elements).
SpirvCodegen::Address SpirvCodegen::global_address(const Stmt &s) {
  Address a;
  a.buffer = static_cast<int>(s.ival);
  const BufferDesc &d = k_.buffers[a.buffer];
  if (d.kind == BufferKind::Temps || d.kind == BufferKind::Result) {
    a.byte_offset = s.byte_offset;
    // an array in the temps buffer (deterministic mode's accumulators), reached by atomics only
    if (!s.operands.empty()) a.index = value(s.operands[0]);
    return a;
  }
  Id i32 = b_.t_i32();
  size_t runtime_dims = d.ndim - d.static_tail.size();
  Id linear = b_.c_i32(0);
  for (size_t i = 0; i < s.operands.size(); i++) {
    Id idx = value(s.operands[i]);
    if (i == 0) {
      linear = idx;
      continue;
    }
    Id dim;
    if (d.kind == BufferKind::Field || d.kind == BufferKind::Shared) dim = b_.c_i32(static_cast<int32_t>(d.shape[i]));
    else if (i < runtime_dims) dim = arg_value(d.shape_arg_slot + static_cast<int>(i), DataType::i32);
    else dim = b_.c_i32(static_cast<int32_t>(d.static_tail[i - runtime_dims]));
    linear = b_.add(i32, b_.mul(i32, linear, dim), idx);
  }
  a.index = linear;
  return a;
}

SpirvCodegen::Id SpirvCodegen::element_ptr(const StorageBuffer &v, const Address &a) {
  return b_.element_ptr(v, a.index);
}

SpirvCodegen::Id SpirvCodegen::load(const Stmt &s) {
  const Address &a = addresses_.at(s.operands[0]);
  const BufferDesc &d = k_.buffers[a.buffer];
  if ((d.kind == BufferKind::Temps || d.kind == BufferKind::Result) && a.index)
    throw CompileError(ErrorKind::Codegen, "internal: a plain load from a temps array", s.loc);
  if (d.kind == BufferKind::Temps || d.kind == BufferKind::Result) return load_slot(a.buffer, a.byte_offset / 4, s.dtype);
  // A float's bits (the first guess of a CAS loop) come through the integer view, the word holding a
  // narrow element (a word CAS loop's) through the u32 view.
  bool bits = (is_real(d.dtype) && !is_real(s.dtype)) || (!is_shared(a.buffer) && bit_width(s.dtype) != bit_width(d.dtype));
  const StorageBuffer &v = bits ? int_view(a.buffer, s.dtype) : plain_view(a.buffer, d.dtype);
  Id ptr = element_ptr(v, a);
  // volatile_load: OpLoad with the Volatile memory access, so every use re-reads memory.
  Id raw = s.is_volatile ? b_.load_volatile(v.elem_type, ptr) : b_.load(v.elem_type, ptr);
  if (widened(a.buffer)) return from_word(raw, s.dtype);  // the low bits of the word
  if (d.dtype == DataType::u1) return b_.ne(v.elem_type, raw, b_.c_int(v.elem_type, 0));
  return v.elem_type == type(s.dtype) ? raw : b_.bitcast(type(s.dtype), raw);
}

void SpirvCodegen::store(const Stmt &ptr_stmt, Id v) {
  const Address &a = addresses_.at(&ptr_stmt);
  const BufferDesc &d = k_.buffers[a.buffer];
  if ((d.kind == BufferKind::Temps || d.kind == BufferKind::Result) && a.index)
    throw CompileError(ErrorKind::Codegen, "internal: a plain store to a temps array", ptr_stmt.loc);
  if (d.kind == BufferKind::Temps || d.kind == BufferKind::Result)
    return store_slot(a.buffer, a.byte_offset / 4, ptr_stmt.dtype, v);
  const StorageBuffer &view = plain_view(a.buffer, d.dtype);
  Id raw = v;
  if (widened(a.buffer)) return b_.store(element_ptr(view, a), to_word(v, ptr_stmt.dtype));
  if (d.dtype == DataType::u1) raw = b_.select(view.elem_type, v, b_.c_int(view.elem_type, 1), b_.c_int(view.elem_type, 0));
  else if (view.elem_type != type(d.dtype)) raw = b_.bitcast(view.elem_type, v);
  b_.store(element_ptr(view, a), raw);
}

}  // namespace qd
