#pragma once
// Metal Shading Language from SPIR-V, through SPIRV-Cross's C API (Debian's libspirv-cross-c-shared).
#include <cstdint>
#include <string>
#include <vector>

namespace qd::spirv {

// One MSL translation unit per entry point (Metal compiles each into its own library), joined
// with a "// entry point: NAME" line before each. Storage buffer binding i of set 0 becomes
// [[buffer(i)]] in every unit. Throws std::runtime_error with SPIRV-Cross's message when it
// cannot translate the module.
std::string to_msl(const std::vector<uint32_t> &words, const std::vector<std::string> &entry_points,
                   uint32_t num_bindings);

}  // namespace qd::spirv
