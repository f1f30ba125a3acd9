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

uint32_t spirv_scope(MemScope s) {
  // Vulkan allows no memory scope wider than Device in shaders (CrossDevice is invalid there, and
  // QueueFamily needs the Vulkan memory model): System is Device, and the host sees the writes
  // once the submission completes.
  return static_cast<uint32_t>(s == MemScope::Block ? spirv::Scope::Workgroup : spirv::Scope::Device);
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

// On shared (workgroup) arrays the storage-class bit is WorkgroupMemory (0x100) instead.
std::string spirv_semantics_text(MemoryOrder o) {
  static const char *names[] = {"Relaxed (0x0)", "Acquire\\|UniformMemory (0x42)", "Release\\|UniformMemory (0x44)",
                                "AcquireRelease\\|UniformMemory (0x48)"};
  (void)spirv_semantics(o);
  return names[static_cast<int>(o)];
}

std::string spirv_scope_text(MemScope s) { return spirv_scope(s) == 2 ? "Workgroup (2)" : "Device (1)"; }

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
  const char *inst[] = {"`OpAtomic<Op>`", "`OpAtomicLoad`", "`OpAtomicStore`", "`OpMemoryBarrier`"};
  if (k == MemOpKind::Fence) {
    const char *names[] = {"", "Acquire\\|UniformMemory\\|WorkgroupMemory (0x142)",
                           "Release\\|UniformMemory\\|WorkgroupMemory (0x144)",
                           "SequentiallyConsistent\\|UniformMemory\\|WorkgroupMemory (0x150)"};
    return std::string("`OpMemoryBarrier`, semantics ") + names[static_cast<int>(o)];
  }
  return std::string(inst[static_cast<int>(k)]) + ", semantics " + spirv_semantics_text(o);
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
