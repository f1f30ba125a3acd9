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
  // Optimises the module in place for the host (so the caller can print what will run), then JITs it.
  void add(std::unique_ptr<llvm::Module> m, std::unique_ptr<llvm::LLVMContext> ctx);
  void *lookup(const std::string &symbol);
  // O3 for the host, without adding (qd.compile uses it too).
  static void optimize_for_host(llvm::Module &m);

 private:
  std::unique_ptr<llvm::orc::LLJIT> jit_;
};

}  // namespace qd
