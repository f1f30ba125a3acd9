#include "codegen/spirv/spirv_tools.h"

#include <spirv-tools/libspirv.h>

#include <map>
#include <memory>
#include <set>
#include <string>

namespace qd::spirv {

namespace {

spv_target_env to_spv(TargetEnv env) {
  switch (env) {
    case TargetEnv::Vulkan1_1: return SPV_ENV_VULKAN_1_1;
    case TargetEnv::Vulkan1_2: return SPV_ENV_VULKAN_1_2;
    case TargetEnv::Vulkan1_3: return SPV_ENV_VULKAN_1_3;
    case TargetEnv::Universal1_5: return SPV_ENV_UNIVERSAL_1_5;
  }
  return SPV_ENV_VULKAN_1_2;
}

// Owning handles for the C API's objects.
struct ContextDeleter {
  void operator()(spv_context c) const { spvContextDestroy(c); }
};
struct DiagnosticDeleter {
  void operator()(spv_diagnostic d) const { spvDiagnosticDestroy(d); }
};
struct TextDeleter {
  void operator()(spv_text t) const { spvTextDestroy(t); }
};
struct OptionsDeleter {
  void operator()(spv_validator_options o) const { spvValidatorOptionsDestroy(o); }
};
using Context = std::unique_ptr<spv_context_t, ContextDeleter>;
using Diagnostic = std::unique_ptr<spv_diagnostic_t, DiagnosticDeleter>;

std::string message(spv_result_t result, spv_diagnostic diag) {
  if (diag && diag->error) return diag->error;
  return "SPIRV-Tools failed with code " + std::to_string(int(result));
}

}  // namespace

std::string validate(const std::vector<uint32_t> &words, TargetEnv env) {
  if (words.empty()) return "empty SPIR-V module";
  Context ctx(spvContextCreate(to_spv(env)));
  std::unique_ptr<spv_validator_options_t, OptionsDeleter> options(spvValidatorOptionsCreate());
  spv_const_binary_t binary{words.data(), words.size()};
  spv_diagnostic raw = nullptr;
  spv_result_t result = spvValidateWithOptions(ctx.get(), options.get(), &binary, &raw);
  Diagnostic diag(raw);
  if (result == SPV_SUCCESS) return "";
  return message(result, diag.get());
}

std::vector<uint32_t> extract_entry_point(const std::vector<uint32_t> &words, const std::string &entry) {
  struct Inst {
    size_t offset;
    uint16_t num_words, opcode;
    uint32_t result;
  };
  std::vector<Inst> insts;
  Context ctx(spvContextCreate(SPV_ENV_UNIVERSAL_1_6));
  auto on_inst = [](void *user, const spv_parsed_instruction_t *p) -> spv_result_t {
    auto *out = static_cast<std::pair<std::vector<Inst> *, const uint32_t *> *>(user);
    out->first->push_back({size_t(p->words - out->second), p->num_words, p->opcode, p->result_id});
    return SPV_SUCCESS;
  };
  std::pair<std::vector<Inst> *, const uint32_t *> user{&insts, words.data()};
  if (spvBinaryParse(ctx.get(), &user, words.data(), words.size(), nullptr, on_inst, nullptr) != SPV_SUCCESS)
    return words;
  // Opcodes (SPIR-V 1.6 spec, section 3.52).
  enum : uint16_t {
    Name = 5, MemberName = 6, EntryPoint = 15, ExecutionMode = 16, Function = 54, FunctionEnd = 56,
    FunctionCall = 57, Decorate = 71, ExecutionModeId = 331, DecorateId = 332, DecorateString = 5632
  };
  auto word = [&](const Inst &i, size_t k) { return words[i.offset + k]; };
  uint32_t entry_fn = 0;
  for (const Inst &i : insts)
    if (i.opcode == EntryPoint && std::string(reinterpret_cast<const char *>(&words[i.offset + 3])) == entry)
      entry_fn = word(i, 2);
  if (!entry_fn) return words;
  // Each function's callees, and the functions the entry point reaches.
  std::map<uint32_t, std::vector<uint32_t>> callees;
  uint32_t current = 0;
  for (const Inst &i : insts) {
    if (i.opcode == Function) current = i.result;
    if (i.opcode == FunctionCall) callees[current].push_back(word(i, 3));
  }
  std::set<uint32_t> reached{entry_fn};
  for (std::vector<uint32_t> todo{entry_fn}; !todo.empty();) {
    uint32_t f = todo.back();
    todo.pop_back();
    for (uint32_t c : callees[f])
      if (reached.insert(c).second) todo.push_back(c);
  }
  std::set<uint32_t> dropped;  // ids defined in the functions left out
  bool in_dropped = false;
  for (const Inst &i : insts) {
    if (i.opcode == Function) in_dropped = !reached.count(i.result);
    if (in_dropped && i.result) dropped.insert(i.result);
    if (i.opcode == FunctionEnd) in_dropped = false;
  }
  std::vector<uint32_t> out(words.begin(), words.begin() + 5);  // the header
  out.reserve(words.size());
  for (const Inst &i : insts) {
    if (i.opcode == Function) in_dropped = dropped.count(i.result) > 0;
    bool keep = !in_dropped;
    switch (i.opcode) {
      case EntryPoint: keep = word(i, 2) == entry_fn; break;
      case ExecutionMode: case ExecutionModeId: keep = word(i, 1) == entry_fn; break;
      case Name: case MemberName: case Decorate: case DecorateId: case DecorateString:
        keep = !dropped.count(word(i, 1));
        break;
      default: break;
    }
    if (i.opcode == FunctionEnd) in_dropped = false;
    if (keep) out.insert(out.end(), words.begin() + i.offset, words.begin() + i.offset + i.num_words);
  }
  return out;
}

std::string disassemble(const std::vector<uint32_t> &words) {
  Context ctx(spvContextCreate(SPV_ENV_UNIVERSAL_1_6));
  uint32_t flags = SPV_BINARY_TO_TEXT_OPTION_FRIENDLY_NAMES | SPV_BINARY_TO_TEXT_OPTION_INDENT;
  spv_text raw_text = nullptr;
  spv_diagnostic raw_diag = nullptr;
  spv_result_t result =
      spvBinaryToText(ctx.get(), words.data(), words.size(), flags, &raw_text, &raw_diag);
  std::unique_ptr<spv_text_t, TextDeleter> text(raw_text);
  Diagnostic diag(raw_diag);
  if (result != SPV_SUCCESS) return "error: " + message(result, diag.get());
  return std::string(text->str, text->length);
}

}  // namespace qd::spirv
