#include "codegen/spirv/spirv_tools.h"

#include <spirv-tools/libspirv.h>

#include <memory>

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
