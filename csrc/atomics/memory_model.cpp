#include "atomics/memory_model.h"

#include <sstream>

#include "codegen/spirv/spirv_enums.h"

namespace qd {

const char *memory_order_name(MemoryOrder o) {
  static const char *names[] = {"Relaxed", "Acquire", "Release", "AcqRel"};
  return names[static_cast<int>(o)];
}

const char *mem_scope_name(MemScope s) {
  static const char *names[] = {"Block", "Device", "System"};
  return names[static_cast<int>(s)];
}

const char *mem_op_name(MemOpKind k) {
  static const char *names[] = {"read-modify-write atomic", "qd.atomic_load", "qd.atomic_store", "qd.atomic_fence"};
  return names[static_cast<int>(k)];
}

std::optional<std::string> memory_order_error(MemOpKind kind, MemoryOrder order) {
  std::string o = std::string("MemoryOrder.") + memory_order_name(order);
  switch (kind) {
    case MemOpKind::Rmw: return std::nullopt;
    case MemOpKind::Load:
      if (order == MemoryOrder::Relaxed || order == MemoryOrder::Acquire) return std::nullopt;
      return "qd.atomic_load takes memory_order=MemoryOrder.Relaxed or MemoryOrder.Acquire, not " + o +
             " (a load cannot release)";
    case MemOpKind::Store:
      if (order == MemoryOrder::Relaxed || order == MemoryOrder::Release) return std::nullopt;
      return "qd.atomic_store takes memory_order=MemoryOrder.Relaxed or MemoryOrder.Release, not " + o +
             " (a store cannot acquire)";
    case MemOpKind::Fence:
      if (order != MemoryOrder::Relaxed) return std::nullopt;
      return "qd.atomic_fence takes memory_order=MemoryOrder.Acquire, Release or AcqRel, not " + o +
             " (a relaxed fence orders nothing)";
  }
  return std::nullopt;
}

std::optional<std::string> memory_model_unsupported(Backend backend, MemOpKind kind, MemoryOrder order, MemScope) {
  if (backend != Backend::Metal) return std::nullopt;
  if (kind == MemOpKind::Fence)
    return "qd.atomic_fence is not supported on Metal: the Metal Shading Language has no fence that orders "
           "device memory between threads of different threadgroups";
  if (order != MemoryOrder::Relaxed)
    return std::string("memory_order=MemoryOrder.") + memory_order_name(order) +
           " is not supported on Metal: Metal Shading Language atomics are memory_order_relaxed only";
  return std::nullopt;
}

const char *llvm_ordering(MemoryOrder o) {
  static const char *names[] = {"monotonic", "acquire", "release", "acq_rel"};
  return names[static_cast<int>(o)];
}

const char *llvm_fence_ordering(MemoryOrder o) { return o == MemoryOrder::AcqRel ? "seq_cst" : llvm_ordering(o); }

const char *llvm_cmpxchg_failure_ordering(MemoryOrder o) {
  // A failed compare-exchange only reads: it keeps the acquire part of the order.
  return o == MemoryOrder::Acquire || o == MemoryOrder::AcqRel ? "acquire" : "monotonic";
}

const char *amdgpu_syncscope(MemScope s) {
  static const char *names[] = {"workgroup", "agent", ""};
  return names[static_cast<int>(s)];
}

const char *ptx_sem(MemOpKind kind, MemoryOrder o) {
  if (kind == MemOpKind::Fence) return o == MemoryOrder::AcqRel ? ".sc" : ".acq_rel";
  static const char *names[] = {".relaxed", ".acquire", ".release", ".acq_rel"};
  return names[static_cast<int>(o)];
}

const char *ptx_scope(MemScope s) {
  static const char *names[] = {".cta", ".gpu", ".sys"};
  return names[static_cast<int>(s)];
}

uint32_t spirv_scope(MemScope s, bool vulkan_memory_model) {
  // Vulkan shaders may not use CrossDevice scope at all (no Vulkan memory scope reaches the host or
  // another device during a dispatch), and QueueFamily only under the Vulkan memory model: System
  // is the widest scope there is, QueueFamily under the Vulkan model and Device under GLSL450; the
  // host sees the writes once the submission completes.
  if (s == MemScope::Block) return static_cast<uint32_t>(spirv::Scope::Workgroup);
  if (s == MemScope::System && vulkan_memory_model) return static_cast<uint32_t>(spirv::Scope::QueueFamily);
  return static_cast<uint32_t>(spirv::Scope::Device);
}

uint32_t spirv_semantics(MemoryOrder o) {
  using namespace spirv::semantics;
  switch (o) {
    case MemoryOrder::Relaxed: return Relaxed;
    case MemoryOrder::Acquire: return Acquire | UniformMemory;
    case MemoryOrder::Release: return Release | UniformMemory;
    case MemoryOrder::AcqRel: return AcquireRelease | UniformMemory;
  }
  return Relaxed;
}

uint32_t spirv_fence_semantics(MemoryOrder o) {
  using namespace spirv::semantics;
  // A fence orders both storage buffers and shared (workgroup) memory.
  return (o == MemoryOrder::AcqRel ? SequentiallyConsistent | UniformMemory : spirv_semantics(o)) | WorkgroupMemory;
}

namespace {

// Semantics bits as SPIR-V names them, and in hex.
std::string spirv_bits_text(uint32_t bits) {
  using namespace spirv::semantics;
  static const std::pair<uint32_t, const char *> names[] = {
      {Acquire, "Acquire"}, {Release, "Release"}, {AcquireRelease, "AcquireRelease"},
      {SequentiallyConsistent, "SequentiallyConsistent"}, {UniformMemory, "UniformMemory"},
      {WorkgroupMemory, "WorkgroupMemory"}, {MakeAvailable, "MakeAvailable"}, {MakeVisible, "MakeVisible"}};
  std::string text;
  for (auto [bit, name] : names)
    if (bits & bit) text += (text.empty() ? "" : "\\|") + std::string(name);
  std::ostringstream hex;
  hex << std::hex << bits;
  return (text.empty() ? "Relaxed" : text) + " (0x" + hex.str() + ")";
}

// GLSL450's semantics (also Metal's), then the Vulkan memory model's where they differ. On shared
// (workgroup) arrays the storage-class bit is WorkgroupMemory (0x100) instead of UniformMemory.
std::string spirv_semantics_text(uint32_t bits, uint32_t seq_cst_as) {
  uint32_t vk = spirv::semantics::vulkan_model(bits, seq_cst_as);
  std::string text = "semantics " + spirv_bits_text(bits);
  if (vk != bits) text += "; Vulkan memory model: " + spirv_bits_text(vk);
  return text;
}

std::string spirv_scope_text(MemScope s) {
  auto name = [](uint32_t v) {
    return std::string(v == 2 ? "Workgroup (2)" : v == 5 ? "QueueFamily (5)" : "Device (1)");
  };
  std::string vk = name(spirv_scope(s, true)), glsl = name(spirv_scope(s, false));
  return vk == glsl ? vk : vk + " under the Vulkan memory model, " + glsl + " under GLSL450 (Metal)";
}

std::string cpu_text(MemOpKind k, MemoryOrder o) {
  switch (k) {
    case MemOpKind::Rmw:
      return std::string("`atomicrmw ") + llvm_ordering(o) + "`, `cmpxchg " + llvm_ordering(o) + " " +
             llvm_cmpxchg_failure_ordering(o) + "`";
    case MemOpKind::Load: return std::string("`load atomic ") + llvm_ordering(o) + "`";
    case MemOpKind::Store: return std::string("`store atomic ") + llvm_ordering(o) + "`";
    case MemOpKind::Fence: return std::string("`fence ") + llvm_fence_ordering(o) + "`";
  }
  return "";
}

std::string ptx_text(MemOpKind k, MemoryOrder o) {
  switch (k) {
    case MemOpKind::Rmw:
      return o == MemoryOrder::Relaxed
                 ? "`atom.global.<op>` at `Device` (PTX's default is .relaxed.gpu), else `atom.relaxed<scope>.global.<op>`"
                 : std::string("`atom") + ptx_sem(k, o) + "<scope>.global.<op>`";
    case MemOpKind::Load: return std::string("`ld") + ptx_sem(k, o) + "<scope>.global`";
    case MemOpKind::Store: return std::string("`st") + ptx_sem(k, o) + "<scope>.global`";
    case MemOpKind::Fence: return std::string("`fence") + ptx_sem(k, o) + "<scope>`";
  }
  return "";
}

std::string amdgpu_text(MemOpKind k, MemoryOrder o) {
  // LLVM IR prints the syncscope before the ordering.
  switch (k) {
    case MemOpKind::Rmw:
      return std::string("`atomicrmw syncscope(<scope>) ") + llvm_ordering(o) + "`, `cmpxchg syncscope(<scope>) " +
             llvm_ordering(o) + " " + llvm_cmpxchg_failure_ordering(o) + "`";
    case MemOpKind::Load: return std::string("`load atomic syncscope(<scope>) ") + llvm_ordering(o) + "`";
    case MemOpKind::Store: return std::string("`store atomic syncscope(<scope>) ") + llvm_ordering(o) + "`";
    case MemOpKind::Fence: return std::string("`fence syncscope(<scope>) ") + llvm_fence_ordering(o) + "`";
  }
  return "";
}

std::string spirv_text(MemOpKind k, MemoryOrder o) {
  using namespace spirv::semantics;
  switch (k) {
    case MemOpKind::Rmw: return "`OpAtomic<Op>`, " + spirv_semantics_text(spirv_semantics(o), AcquireRelease);
    case MemOpKind::Load: return "`OpAtomicLoad`, " + spirv_semantics_text(spirv_semantics(o), Acquire);
    case MemOpKind::Store: return "`OpAtomicStore`, " + spirv_semantics_text(spirv_semantics(o), Release);
    case MemOpKind::Fence:
      return "`OpMemoryBarrier`, " + spirv_semantics_text(spirv_fence_semantics(o), AcquireRelease);
  }
  return "";
}

std::string metal_text(MemOpKind k, MemoryOrder o) {
  if (memory_model_unsupported(Backend::Metal, k, o, MemScope::Device)) return "compile error";
  return "`memory_order_relaxed`";
}

}  // namespace

std::string memory_model_markdown() {
  std::ostringstream os;
  const MemOpKind kinds[] = {MemOpKind::Rmw, MemOpKind::Load, MemOpKind::Store, MemOpKind::Fence};
  const MemoryOrder orders[] = {MemoryOrder::Relaxed, MemoryOrder::Acquire, MemoryOrder::Release, MemoryOrder::AcqRel};
  os << "| Operation | Order | CPU (LLVM) | CUDA (PTX) | AMDGPU (LLVM) | Vulkan (SPIR-V) | Metal (MSL) |\n";
  os << "|---|---|---|---|---|---|---|\n";
  for (MemOpKind k : kinds)
    for (MemoryOrder o : orders) {
      if (memory_order_error(k, o)) continue;
      const char *op[] = {"`atomic_<op>`", "`atomic_load`", "`atomic_store`", "`atomic_fence`"};
      os << "| " << op[static_cast<int>(k)] << " | `" << memory_order_name(o) << "` | " << cpu_text(k, o) << " | "
         << ptx_text(k, o) << " | " << amdgpu_text(k, o) << " | " << spirv_text(k, o) << " | " << metal_text(k, o)
         << " |\n";
    }
  os << "\n| Scope | CPU | CUDA `<scope>` | AMDGPU `<scope>` | Vulkan / Metal SPIR-V Scope |\n";
  os << "|---|---|---|---|---|\n";
  for (MemScope s : {MemScope::Block, MemScope::Device, MemScope::System}) {
    std::string amd = amdgpu_syncscope(s);
    os << "| `" << mem_scope_name(s) << "` | no effect (one host: LLVM's system scope) | `" << ptx_scope(s)
       << "` | " << (amd.empty() ? "none (system)" : "`\"" + amd + "\"`") << " | " << spirv_scope_text(s) << " |\n";
  }
  return os.str();
}

}  // namespace qd
