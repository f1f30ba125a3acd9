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
  // Links host object code (emit_object's, possibly from the on-disk cache) into a JITDylib of its
  // own, so kernels' symbol names need not be unique; returns it for lookup().
  llvm::orc::JITDylib &add_object(const std::string &object);
  void *lookup(llvm::orc::JITDylib &lib, const std::string &symbol);
  // Frees the code and symbols of one add_object.
  void remove(llvm::orc::JITDylib &lib);
  // O3 for the host, without adding (qd.compile uses it too).
  static void optimize_for_host(llvm::Module &m);
  // Machine code for the host as an ELF object (the module is optimised already).
  static std::string emit_object(llvm::Module &m);
  // What host object code depends on besides the module: LLVM's version, the host CPU and features.
  static std::string host_id();
  // The width of the host's widest vector registers in bits: 512 with AVX-512F, 256 with AVX, else 128.
  static int host_vector_bits();

 private:
  std::unique_ptr<llvm::orc::LLJIT> jit_;
  int num_libs_ = 0;
};

}  // namespace qd
