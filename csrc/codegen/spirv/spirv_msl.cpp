#include "codegen/spirv/spirv_msl.h"

#include <spirv_cross_c.h>

#include <memory>
#include <stdexcept>

namespace qd::spirv {

namespace {

struct ContextDeleter {
  void operator()(spvc_context c) const { spvc_context_destroy(c); }
};
using Context = std::unique_ptr<spvc_context_s, ContextDeleter>;

void check(spvc_result r, spvc_context ctx, const char *what) {
  if (r == SPVC_SUCCESS) return;
  throw std::runtime_error(std::string("SPIRV-Cross could not translate the SPIR-V to MSL (") + what +
                           "): " + spvc_context_get_last_error_string(ctx));
}

std::string one_entry_point(spvc_context ctx, spvc_parsed_ir ir, const std::string &entry, uint32_t num_bindings) {
  spvc_compiler compiler = nullptr;
  check(spvc_context_create_compiler(ctx, SPVC_BACKEND_MSL, ir, SPVC_CAPTURE_MODE_COPY, &compiler), ctx,
        "create compiler");
  check(spvc_compiler_set_entry_point(compiler, entry.c_str(), SpvExecutionModelGLCompute), ctx, entry.c_str());
  spvc_compiler_options options = nullptr;
  check(spvc_compiler_create_compiler_options(compiler, &options), ctx, "options");
  // MSL 2.1 (macOS 10.14+): device-memory atomics and everything the codegen emits.
  check(spvc_compiler_options_set_uint(options, SPVC_COMPILER_OPTION_MSL_VERSION, SPVC_MAKE_MSL_VERSION(2, 1, 0)),
        ctx, "MSL version");
  check(spvc_compiler_install_compiler_options(compiler, options), ctx, "options");
  for (uint32_t i = 0; i < num_bindings; i++) {
    spvc_msl_resource_binding binding;
    spvc_msl_resource_binding_init(&binding);
    binding.stage = SpvExecutionModelGLCompute;
    binding.desc_set = 0;
    binding.binding = i;
    binding.msl_buffer = i;
    check(spvc_compiler_msl_add_resource_binding(compiler, &binding), ctx, "buffer binding");
  }
  const char *source = nullptr;
  check(spvc_compiler_compile(compiler, &source), ctx, entry.c_str());
  return source;
}

}  // namespace

std::string to_msl(const std::vector<uint32_t> &words, const std::vector<std::string> &entry_points,
                   uint32_t num_bindings) {
  if (entry_points.empty()) return "";  // an empty kernel
  spvc_context raw = nullptr;
  if (spvc_context_create(&raw) != SPVC_SUCCESS) throw std::runtime_error("SPIRV-Cross: cannot create a context");
  Context ctx(raw);
  spvc_parsed_ir ir = nullptr;
  check(spvc_context_parse_spirv(raw, words.data(), words.size(), &ir), raw, "parse");
  std::string out;
  for (const std::string &entry : entry_points)
    out += "// entry point: " + entry + "\n" + one_entry_point(raw, ir, entry, num_bindings) + "\n";
  return out;
}

}  // namespace qd::spirv
