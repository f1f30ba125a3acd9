// qd.compile for vulkan and metal: the artefacts of a kernel, made without a device.
#include "codegen/spirv/codegen_spirv.h"
#include "codegen/spirv/spirv_msl.h"
#include "codegen/spirv/spirv_tools.h"
#include "transforms/passes.h"

namespace qd {

std::map<std::string, std::string> spirv_artifacts(KernelIR &k, const Target &t) {
  run_passes(k, t);
  Backend backend = t.backend;
  SpirvTarget target;
  target.backend = backend;
  target.features = t.features;
  target.fast_math = t.fast_math;
  SpirvModule m = codegen_spirv(k, target);
  std::map<std::string, std::string> out;
  out["ir"] = print_ir(k);
  out["spirv"] = std::string(reinterpret_cast<const char *>(m.words.data()), m.words.size() * sizeof(uint32_t));
  out["spirv_asm"] = spirv::disassemble(m.words);
  if (backend == Backend::Metal) {
    std::vector<std::string> entries;
    for (const SpirvTaskInfo &t : m.tasks) entries.push_back(t.entry);
    try {
      out["msl"] = spirv::to_msl(m.words, entries, m.args_binding + 1);
    } catch (const std::runtime_error &e) {
      throw CompileError(ErrorKind::Codegen, "kernel '" + k.name + "': " + e.what());
    }
  }
  return out;
}

}  // namespace qd
