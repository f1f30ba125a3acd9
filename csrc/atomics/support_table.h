#pragma once
// THE atomic support table: for every (backend, op, dtype, memory space, device capability) it says
// whether the op is a native instruction, a CAS loop, a CAS loop on the 32-bit word holding a narrow
// element (i8/i16/u8/u16, and f16 where the target has no 16-bit atomics), or rejected with a
// reason. The type checker reads it to raise QuadrantsTypeError, each codegen reads it to pick the
// lowering, and the tables in docs/atomics.md are generated from it.
#include <string>
#include <vector>

#include "atomics/atomic_ops.h"
#include "ir/types.h"
#include "target/capabilities.h"

namespace qd {

enum class Backend { Cpu, Cuda, Amdgpu, Vulkan, Metal };
const char *backend_name(Backend b);

enum class MemorySpace { Global, Shared };

// WordCasLoop: the element is narrower than any atomic the target has; legalization updates its lane
// of the containing aligned 32-bit word with a compare-exchange loop on the word (as CUDA's 16-bit
// atomics do), leaving the word's other elements as they are.
enum class Lowering { Native, CasLoop, WordCasLoop, Rejected };

struct AtomicLowering {
  Lowering kind;
  std::string reason;    // why rejected; empty otherwise
  std::string capability;  // the capability (or gfx) that made it native, if any (for docs and tests)
};

// Dtypes that atomics on memory accept at all; the others get a QuadrantsTypeError.
const std::vector<DataType> &atomic_dtypes();

AtomicLowering atomic_lowering(Backend backend, AtomicOp op, DataType dtype, MemorySpace space,
                               const TargetFeatures &features);

// The features of the default target of a backend: what the docs' tables assume.
TargetFeatures default_features(Backend backend);

// Markdown tables (one per backend) describing the table above; docs/atomics.md embeds them.
std::string atomic_support_markdown();

}  // namespace qd
