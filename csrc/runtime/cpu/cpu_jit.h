#pragma once
// ORC LLJIT for the host: optimises modules at O3 for the host CPU and resolves task symbols.
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/IR/Module.h>

#include <memory>
#include <string>

namespace qd {

class CpuJit {
 public:
  CpuJit();
  // JITs an (already optimised) module. Its code lives until the returned tracker is removed.
  llvm::orc::ResourceTrackerSP add(std::unique_ptr<llvm::Module> m, std::unique_ptr<llvm::LLVMContext> ctx);
  // Frees the code and symbols of one added module.
  void remove(const llvm::orc::ResourceTrackerSP &tracker);
  void *lookup(const std::string &symbol);
  // O3 for the host, without adding (qd.compile uses it too).
  static void optimize_for_host(llvm::Module &m);

 private:
  std::unique_ptr<llvm::orc::LLJIT> jit_;
};

}  // namespace qd
