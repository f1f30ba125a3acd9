#pragma once
// Block-shared memory per task: how many bytes a task's shared arrays (qd.simt.block.SharedArray)
// take, the target's limit for one block, and on CUDA where they live: static `.shared` arrays up
// to 48 KiB, above that one dynamic (`.extern .shared`) region sized at launch, which the runtime
// opts the kernel into (cuFuncSetAttribute MAX_DYNAMIC_SHARED_SIZE_BYTES).
#include <cstdint>
#include <optional>

#include "target/target.h"

namespace qd {

struct KernelIR;

// CUDA's limit on static shared memory per block, and on dynamic memory without the opt-in.
constexpr int64_t kCudaStaticSharedBytes = 48 * 1024;
// cpu: a block's shared arrays are on the stack of the worker running it.
constexpr int64_t kCpuSharedBytes = 64 * 1024;

// The shared memory one block may use on the target: the device's own limit where the runtime
// reported it (TargetFeatures::max_shared_memory_bytes: Vulkan's maxComputeSharedMemorySize, CUDA's
// opt-in maximum), else the architecture's (CUDA by sm_XX), AMDGPU 64 KiB of LDS, Metal and Vulkan
// 32 KiB; 0 on the cpu.
int64_t max_shared_bytes(const Target &target);

// Sets Task::shared_bytes / dynamic_shared and BufferDesc::shared_offset; a task whose arrays need
// more than max_shared_bytes is a QuadrantsCompilationError naming the kernel, the loop, each array
// and the sizes.
void plan_shared_memory(KernelIR &k, const Target &target);

}  // namespace qd
