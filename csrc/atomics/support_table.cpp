#include "atomics/support_table.h"

#include <sstream>

namespace qd {

namespace {

using enum AtomicOp;
using enum DataType;
using Ops = std::vector<AtomicOp>;
using Dtypes = std::vector<DataType>;

enum class Space { Any, Global, Shared };

// What a row needs of the target: a capability (named by its _buffer one: the access's memory
// space picks _buffer or _shared), or the AMDGPU architecture.
struct Need {
  std::optional<Cap> cap;
  const char *gfx = nullptr;
  Need() = default;
  Need(Cap c) : cap(c) {}
  Need(const char *g) : gfx(g) {}
};

struct Row {
  Backend backend;
  Ops ops;
  Dtypes dtypes;
  Lowering lowering;
  Need need;
  Space space = Space::Any;
  const char *reason = "";    // for Rejected rows
};

const Ops kAll = {Add, Sub, Mul, Min, Max, And, Or, Xor, Exchange, Cas, Inc, Dec};
const Ops kIncDec = {Inc, Dec};
const Ops kIntNative = {Add, Sub, Min, Max, And, Or, Xor, Exchange, Cas};  // all but mul
const Ops kAddSub = {Add, Sub};
const Dtypes kInt32 = {i32, u32};
const Dtypes kInt64 = {i64, u64};
const Dtypes kInts = {i32, u32, i64, u64};
const Dtypes kF32F64 = {f32, f64};
const Dtypes kNarrow = {i8, i16, u8, u16};

const char *kMetal64 =
    "64-bit integer atomics are not portable to Metal: Metal only has 64-bit atomic min/max on "
    "unsigned values (Apple GPU family 9+), and no 64-bit add/sub/mul/bitwise/exchange/cas on any "
    "Apple GPU; use i32/u32";
const char *kVulkanInt64 =
    "64-bit integer atomics on Vulkan need the device's int64 atomics (VK_KHR_shader_atomic_int64)";
const char *kMetalNarrow =
    "atomics on i8/i16/u8/u16 are not supported on Metal yet (their CAS loop on the containing 32-bit word "
    "needs a word view of the buffer); use i32/u32";
const char *kSpirvF16 =
    "f16 atomics on SPIR-V need the device's float16 atomic add capability; other f16 atomics are not "
    "supported there";

// First matching row wins. Rows that name a capability match only when the target has it.
const std::vector<Row> &rows() {
  static const std::vector<Row> table = {
      // CPU (x86_64 LLVM): atomicrmw where LLVM has one, cmpxchg loops for the rest.
      {Backend::Cpu, kIntNative, kInts, Lowering::Native},
      {Backend::Cpu, kAddSub, kF32F64, Lowering::Native},
      {Backend::Cpu, {Exchange}, kF32F64, Lowering::Native},
      // Narrow integers everywhere: a CAS loop on the containing aligned 32-bit word (legalize.cpp).
      {Backend::Cpu, kAll, kNarrow, Lowering::WordCasLoop},
      {Backend::Cpu, kAll, {}, Lowering::CasLoop},
      // CUDA (NVPTX, sm_60+): atom.global.* for ints, f32/f64 add and exchange.
      {Backend::Cuda, kIntNative, kInts, Lowering::Native},
      {Backend::Cuda, kIncDec, {u32}, Lowering::Native},  // atom.global.inc/dec.u32
      {Backend::Cuda, kAddSub, kF32F64, Lowering::Native},
      {Backend::Cuda, {Exchange}, kF32F64, Lowering::Native},
      {Backend::Cuda, kAll, kNarrow, Lowering::WordCasLoop},
      {Backend::Cuda, kAll, {}, Lowering::CasLoop},
      // AMDGPU at syncscope("agent"): float atomics are native only on gfx942 (spec footnote 2).
      {Backend::Amdgpu, kIntNative, kInts, Lowering::Native},
      {Backend::Amdgpu, kIncDec, {u32, u64}, Lowering::Native},  // atomicrmw uinc_wrap / udec_wrap
      {Backend::Amdgpu, {Exchange}, kF32F64, Lowering::Native},
      {Backend::Amdgpu, kAddSub, kF32F64, Lowering::Native, "gfx942"},
      {Backend::Amdgpu, {Min, Max}, {f64}, Lowering::Native, "gfx942"},
      {Backend::Amdgpu, kAll, kNarrow, Lowering::WordCasLoop},
      {Backend::Amdgpu, kAll, {}, Lowering::CasLoop},
      // Vulkan (SPIR-V, Scope Device): float add native with the device's capability.
      {Backend::Vulkan, kIntNative, kInt32, Lowering::Native},
      {Backend::Vulkan, kIntNative, kInt64, Lowering::Native, Cap::int64_atomics_buffer},
      {Backend::Vulkan, {Mul, Inc, Dec}, kInt32, Lowering::CasLoop},
      {Backend::Vulkan, {Mul, Inc, Dec}, kInt64, Lowering::CasLoop, Cap::int64_atomics_buffer},
      {Backend::Vulkan, kAll, kInt64, Lowering::Rejected, {}, Space::Any, kVulkanInt64},
      {Backend::Vulkan, kAddSub, {f16}, Lowering::Native, Cap::float16_atomic_add_buffer},
      // Shared narrow elements (f16, i8/i16/u8/u16) updated atomically are each a 32-bit word holding
      // the zero-extended bits (SPIR-V has no narrower atomics, and a Workgroup array has one
      // element type): exchange and compare-exchange work on the widened bits, the rest are CAS loops
      // on them. In buffers, a CAS loop on the 32-bit word holding the element.
      {Backend::Vulkan, {Exchange}, {f16}, Lowering::Native, {}, Space::Shared},
      {Backend::Vulkan, {Exchange, Cas}, kNarrow, Lowering::Native, {}, Space::Shared},
      {Backend::Vulkan, kAll, {f16}, Lowering::CasLoop, {}, Space::Shared},
      {Backend::Vulkan, kAll, kNarrow, Lowering::CasLoop, {}, Space::Shared},
      {Backend::Vulkan, kAll, {f16}, Lowering::WordCasLoop},
      {Backend::Vulkan, kAll, kNarrow, Lowering::WordCasLoop},
      {Backend::Vulkan, kAddSub, {f32}, Lowering::Native, Cap::float32_atomic_add_buffer},
      {Backend::Vulkan, kAddSub, {f64}, Lowering::Native, Cap::float64_atomic_add_buffer},
      // OpAtomicFMin/FMaxEXT (VK_EXT_shader_atomic_float2) keep minNum / maxNum on the devices we
      // checked (lavapipe: a NaN operand loses, tests/python/test_simt_shared_atomics.py).
      {Backend::Vulkan, {Min, Max}, {f32}, Lowering::Native, Cap::float32_atomic_minmax_buffer},
      {Backend::Vulkan, {Min, Max}, {f64}, Lowering::Native, Cap::float64_atomic_minmax_buffer},
      {Backend::Vulkan, {Exchange}, {f32}, Lowering::Native},
      {Backend::Vulkan, {Exchange}, {f64}, Lowering::Native, Cap::int64_atomics_buffer},
      {Backend::Vulkan, kAll, {f32}, Lowering::CasLoop},
      {Backend::Vulkan, kAll, {f64}, Lowering::CasLoop, Cap::int64_atomics_buffer},
      {Backend::Vulkan, kAll, {f64}, Lowering::Rejected, {}, Space::Any,
       "f64 atomics on Vulkan need 64-bit integer atomics for their CAS loop or exchange"},
      // Metal (SPIR-V -> MSL via SPIRV-Cross): float add is a CAS loop, no 64-bit anything.
      {Backend::Metal, kAll, kInt64, Lowering::Rejected, {}, Space::Any, kMetal64},
      {Backend::Metal, kAll, kNarrow, Lowering::Rejected, {}, Space::Any, kMetalNarrow},
      {Backend::Metal, kIntNative, kInt32, Lowering::Native},
      {Backend::Metal, {Mul, Inc, Dec}, kInt32, Lowering::CasLoop},
      {Backend::Metal, kAll, {f16}, Lowering::Rejected, {}, Space::Any, kSpirvF16},
      {Backend::Metal, kAll, {f64}, Lowering::Rejected, {}, Space::Any, "Metal has no 64-bit floats"},
      {Backend::Metal, {Exchange}, {f32}, Lowering::Native},
      {Backend::Metal, kAll, {f32}, Lowering::CasLoop},
  };
  return table;
}

template <class T>
bool contains(const std::vector<T> &v, T x) {
  for (auto &e : v)
    if (e == x) return true;
  return false;
}

}  // namespace

const char *backend_name(Backend b) {
  static const char *names[] = {"cpu", "cuda", "amdgpu", "vulkan", "metal"};
  return names[static_cast<int>(b)];
}

const std::vector<DataType> &atomic_dtypes() {
  static const std::vector<DataType> v = {i8, u8, i16, u16, i32, u32, i64, u64, f16, f32, f64};
  return v;
}

AtomicLowering atomic_lowering(Backend backend, AtomicOp op, DataType dtype, MemorySpace space,
                               const TargetFeatures &features) {
  const auto &info = atomic_op_info(op);
  std::string what = std::string("atomic_") + info.name + " on " + dtype_name(dtype);
  if (!contains(atomic_dtypes(), dtype))
    return {Lowering::Rejected, what + " is not supported: atomics on memory take integers and floats "
                                       "(i8/u8/i16/u16/i32/u32/i64/u64/f16/f32/f64); use i32/u32"};
  if (info.dtypes == DtypeClass::UnsignedOnly && !is_unsigned(dtype))
    return {Lowering::Rejected,
            what + " is not supported: atomic_" + info.name + " takes unsigned integers (u8/u16/u32/u64)"};
  if (info.dtypes == DtypeClass::IntOnly && is_real(dtype))
    return {Lowering::Rejected, what + " is not supported: atomic_" + info.name +
                                    " takes integer dtypes only (i8/u8/i16/u16/i32/u32/i64/u64)"};
  for (const Row &row : rows()) {
    if (row.backend != backend || !contains(row.ops, op)) continue;
    if (!row.dtypes.empty() && !contains(row.dtypes, dtype)) continue;
    if (row.space == Space::Global && space != MemorySpace::Global) continue;
    if (row.space == Space::Shared && space != MemorySpace::Shared) continue;
    std::optional<Cap> cap;
    if (row.need.cap) cap = in_shared_memory(*row.need.cap, space == MemorySpace::Shared);
    if (cap && !features.has(*cap)) continue;
    if (row.need.gfx && features.amdgpu_gfx != row.need.gfx) continue;
    if (row.lowering == Lowering::Rejected)
      return {Lowering::Rejected, what + " is not supported on " + backend_name(backend) + ": " + row.reason};
    return {row.lowering, "", cap ? cap_name(*cap) : row.need.gfx ? row.need.gfx : ""};
  }
  return {Lowering::Rejected, what + " is not supported on " + backend_name(backend)};
}

TargetFeatures default_features(Backend backend) {
  TargetFeatures f;
  if (backend == Backend::Amdgpu) f.amdgpu_gfx = "gfx942";
  if (backend == Backend::Vulkan)  // a capable desktop GPU; the docs footnote which cells depend on these
    f.caps = {Cap::float32_atomic_add_buffer, Cap::float32_atomic_add_shared, Cap::int64_atomics_buffer,
              Cap::int64_atomics_shared, Cap::vulkan_memory_model, Cap::vulkan_memory_model_device_scope};
  return f;
}

namespace {

const char *verdict_name(Lowering l) {
  return l == Lowering::Native ? "native" : l == Lowering::CasLoop ? "CAS loop"
         : l == Lowering::WordCasLoop ? "word CAS loop" : "rejected";
}

std::string cell(Backend backend, AtomicOp op, DataType dtype, MemorySpace space) {
  auto base = atomic_lowering(backend, op, dtype, space, default_features(backend));
  if (base.kind == Lowering::Native)
    return base.capability.empty() ? "native" : "native (needs `" + base.capability + "`)";
  // Otherwise: say whether some device capability would do better (Vulkan float16 add, float
  // min/max, ...).
  for (Cap cap : {Cap::float16_atomic_add_buffer, Cap::float32_atomic_minmax_buffer, Cap::float64_atomic_minmax_buffer,
                  Cap::float64_atomic_add_buffer, Cap::int64_atomics_buffer}) {
    auto f = default_features(backend);
    Cap c = in_shared_memory(cap, space == MemorySpace::Shared);
    if (f.has(c)) continue;
    f.caps.set(c);
    auto with = atomic_lowering(backend, op, dtype, space, f);
    if (static_cast<int>(with.kind) < static_cast<int>(base.kind))
      return std::string(verdict_name(with.kind)) + " with `" + cap_name(c) + "`, else " + verdict_name(base.kind);
  }
  return verdict_name(base.kind);
}

void table(std::ostringstream &os, Backend b, MemorySpace space) {
  os << "| op |";
  for (DataType t : atomic_dtypes()) os << " " << dtype_name(t) << " |";
  os << "\n|---|";
  for (size_t i = 0; i < atomic_dtypes().size(); i++) os << "---|";
  os << "\n";
  for (const auto &info : atomic_ops()) {
    os << "| `atomic_" << info.name << "` |";
    for (DataType t : atomic_dtypes()) os << " " << cell(b, info.op, t, space) << " |";
    os << "\n";
  }
  os << "\n";
}

}  // namespace

std::string atomic_support_markdown() {
  std::ostringstream os;
  const Backend backends[] = {Backend::Cpu, Backend::Cuda, Backend::Amdgpu, Backend::Vulkan, Backend::Metal};
  for (Backend b : backends) {
    os << "#### " << backend_name(b) << "\n\n";
    table(os, b, MemorySpace::Global);
  }
  // Block-shared memory (qd.simt.block.SharedArray; GPU arches only), where it differs.
  for (Backend b : backends) {
    if (b == Backend::Cpu) continue;
    bool differs = false;
    for (const auto &info : atomic_ops())
      for (DataType t : atomic_dtypes())
        differs = differs || cell(b, info.op, t, MemorySpace::Global) != cell(b, info.op, t, MemorySpace::Shared);
    os << "#### " << backend_name(b) << ", shared memory\n\n";
    if (differs) table(os, b, MemorySpace::Shared);
    else os << "As on global memory.\n\n";
  }
  return os.str();
}

}  // namespace qd
