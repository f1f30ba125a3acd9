#include "target/shared_memory.h"

#include <map>
#include <set>
#include <string>

#include "ir/ir.h"

namespace qd {

namespace {

constexpr int64_t kAlign = 16;  // every shared array starts 16-byte aligned (as the codegens place them)

// CUDA's maximum shared memory per block with the opt-in (cudaFuncAttributeMaxDynamicSharedMemorySize),
// by compute capability (CUDA C Programming Guide, "Technical Specifications per Compute Capability").
int64_t cuda_arch_limit(int cc) {
  constexpr int64_t KiB = 1024;
  if (cc >= 100) return cc == 100 || cc == 101 || cc == 103 ? 227 * KiB : 99 * KiB;
  switch (cc) {
    case 90: return 227 * KiB;
    case 80: case 87: return 163 * KiB;
    case 86: case 89: return 99 * KiB;
    case 75: return 64 * KiB;
    case 70: case 72: return 96 * KiB;
    default: return 48 * KiB;
  }
}

std::string kib(int64_t bytes) {
  std::string s = std::to_string(bytes) + " bytes";
  if (bytes % 1024 == 0) s += " (" + std::to_string(bytes / 1024) + " KiB)";
  return s;
}

std::string target_name(const Target &t) {
  std::string name = backend_name(t.backend);
  if (t.backend == Backend::Cuda && t.features.cuda_sm) name += " sm_" + std::to_string(t.features.cuda_sm);
  if (t.backend == Backend::Amdgpu && !t.features.amdgpu_gfx.empty()) name += " " + t.features.amdgpu_gfx;
  return name;
}

}  // namespace

int64_t max_shared_bytes(const Target &target) {
  if (target.features.max_shared_memory_bytes) return target.features.max_shared_memory_bytes;
  switch (target.backend) {
    case Backend::Cpu: return kCpuSharedBytes;  // on the worker's stack (cpu_blocks.cpp)
    case Backend::Cuda: return cuda_arch_limit(target.features.cuda_sm);  // 48 KiB for an unknown sm
    case Backend::Amdgpu: return 64 * 1024;
    case Backend::Vulkan: case Backend::Metal: return 32 * 1024;
  }
  return 0;
}

void plan_shared_memory(KernelIR &k, const Target &target) {
  // On SPIR-V an 8 / 16-bit shared array updated atomically is kept in 32-bit words
  // (codegen_spirv_memory.cpp).
  std::set<int64_t> atomic_narrow;
  for (Task &t : k.tasks)
    for_each_stmt(t.body, [&](Stmt &s) {
      if (s.kind == StmtKind::Atomic && s.operands[0]->kind == StmtKind::GlobalPtr) atomic_narrow.insert(s.operands[0]->ival);
    });
  auto element_bytes = [&](int64_t buffer) -> int64_t {
    DataType t = k.buffers[buffer].dtype;
    if (target.is_spirv() && bit_width(t) < 32 && atomic_narrow.count(buffer)) return 4;
    return byte_size(t);
  };
  int64_t limit = max_shared_bytes(target);
  for (Task &t : k.tasks) {
    std::map<int64_t, int64_t> arrays;  // buffer -> bytes, in creation order
    for (Block *b : {&t.prologue, &t.pre_loop, &t.body, &t.post_loop})
      for_each_stmt(*b, [&](Stmt &s) {
        if (s.kind != StmtKind::GlobalPtr || k.buffers[s.ival].kind != BufferKind::Shared) return;
        int64_t n = 1;
        for (int64_t d : k.buffers[s.ival].shape) n *= d;
        arrays[s.ival] = n * element_bytes(s.ival);
      });
    int64_t total = 0;
    for (auto &[buffer, bytes] : arrays) total += (bytes + kAlign - 1) / kAlign * kAlign;
    t.shared_bytes = total;
    if (total > limit) {
      const Stmt *loop = t.loop();
      std::string msg = "kernel '" + k.name + "': the block-shared arrays of this parallel loop take " + kib(total) +
                        ", more than the " + kib(limit) + " of shared memory one block can use on " +
                        target_name(target) + ":";
      for (auto &[buffer, bytes] : arrays) {
        const BufferDesc &d = k.buffers[buffer];
        msg += "\n    " + std::to_string(bytes) + " bytes: SharedArray of " + dtype_name(d.dtype) + " at " +
               (d.loc.file.empty() ? "?" : d.loc.file) + ":" + std::to_string(d.loc.line);
        if (!d.loc.text.empty()) msg += ": " + d.loc.text;
      }
      // A RuntimeError, as the spec (simt.md, errors) says, naming the loop's line.
      throw RuntimeError(CompileError::format(msg, loop ? loop->loc : SourceLoc{}));
    }
    if (target.backend == Backend::Cuda && total > kCudaStaticSharedBytes) {
      t.dynamic_shared = true;
      int64_t offset = 0;
      for (auto &[buffer, bytes] : arrays) {
        k.buffers[buffer].shared_offset = offset;
        offset += (bytes + kAlign - 1) / kAlign * kAlign;
      }
    }
  }
}

}  // namespace qd
