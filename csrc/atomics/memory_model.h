#pragma once
// Memory order and scope of atomics (spec: memory-model.md). Every atomic statement carries one
// order and one scope; the default, Relaxed at Device scope, orders nothing but the location itself
// (atomics.md). What each (order, scope) becomes on each backend is written here once: the codegens
// read these functions and docs/atomics.md's table is generated from them.
#include <optional>
#include <string>

#include "atomics/support_table.h"

namespace qd {

enum class MemoryOrder : unsigned char { Relaxed, Acquire, Release, AcqRel };
enum class MemScope : unsigned char { Block, Device, System };

const char *memory_order_name(MemoryOrder o);
const char *mem_scope_name(MemScope s);

// The kinds of memory-model operation: read-modify-write atomics (cas included), atomic loads and
// stores, and fences.
enum class MemOpKind { Rmw, Load, Store, Fence };
const char *mem_op_name(MemOpKind k);

// Whether `order` makes sense for the kind of operation (Release on a load does not); nullopt if
// it does, else the reason. Backend-independent: the front end checks it.
std::optional<std::string> memory_order_error(MemOpKind kind, MemoryOrder order);
// Whether the backend can express (kind, order, scope); nullopt if it can, else the reason.
std::optional<std::string> memory_model_unsupported(Backend backend, MemOpKind kind, MemoryOrder order, MemScope scope);

// ---- what each backend emits ------------------------------------------------------------------
// LLVM (cpu, amdgpu): the atomic ordering's name as LLVM IR prints it ("monotonic", "acquire", ...);
// the failure ordering of a cmpxchg; the AMDGPU syncscope ("workgroup", "agent", "" for system).
const char *llvm_ordering(MemoryOrder o);
// A fence: AcqRel is a full fence (seq_cst), which also orders earlier stores before later loads
// (store buffering never shows); Acquire / Release fences are acquire / release.
const char *llvm_fence_ordering(MemoryOrder o);
const char *llvm_cmpxchg_failure_ordering(MemoryOrder o);
const char *amdgpu_syncscope(MemScope s);
// PTX: the .sem and .scope qualifiers (".relaxed", ".gpu", ...). A fence has only .sc and .acq_rel:
// an AcqRel fence is fence.sc (a full fence), Acquire and Release fences fence.acq_rel.
const char *ptx_sem(MemOpKind kind, MemoryOrder o);
const char *ptx_scope(MemScope s);
// SPIR-V: the Scope operand and the MemorySemantics bits (order bits, plus the storage-class bit of
// storage buffers, UniformMemory, whenever the order is not Relaxed). The scope depends on the
// module's memory model: System is QueueFamily under the Vulkan memory model, Device under GLSL450.
// Under the Vulkan memory model the SPIR-V builder adds MakeAvailable to releases and MakeVisible
// to acquires (spirv_builder_ops.cpp, sem_operand).
uint32_t spirv_scope(MemScope s, bool vulkan_memory_model);
uint32_t spirv_semantics(MemoryOrder o);
uint32_t spirv_fence_semantics(MemoryOrder o);  // AcqRel: SequentiallyConsistent | UniformMemory

// The markdown table (docs/atomics.md) of what each order and scope emits per backend.
std::string memory_model_markdown();

}  // namespace qd
