#pragma once
// SPIRV-Tools, used in-process: validation of what the codegen emits, and disassembly for
// debugging and tests.
#include <cstdint>
#include <string>
#include <vector>

namespace qd::spirv {

// The environment a module is validated for. Vulkan 1.2 takes SPIR-V up to 1.5 and Vulkan 1.3
// up to 1.6; both accept the Vulkan memory model.
enum class TargetEnv { Vulkan1_1, Vulkan1_2, Vulkan1_3, Universal1_5 };

// Empty when the module is valid, else the validator's message (with the failing
// instruction's disassembly when SPIRV-Tools provides it).
std::string validate(const std::vector<uint32_t> &words, TargetEnv env = TargetEnv::Vulkan1_2);

// The module with one entry point: the others, their execution modes, and the functions only
// they reach (with the names and decorations of what those define) are left out. A driver
// translates a whole module per pipeline, so a kernel of n tasks made from one module of n entry
// points cost n^2. Unchanged if there is no entry point of that name.
std::vector<uint32_t> extract_entry_point(const std::vector<uint32_t> &words, const std::string &entry);

// Text form of the module, one instruction per line with friendly names. On malformed input the
// result starts with "error: ".
std::string disassemble(const std::vector<uint32_t> &words);

}  // namespace qd::spirv
