#include "runtime/cpu/cpu_jit.h"

#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/TargetParser/Host.h>

#include <mutex>

#include "common/error.h"
#include "runtime/cpu/half_builtins.h"

namespace qd {

namespace {

void init_native_target() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
}

template <class T>
T check(llvm::Expected<T> v, const char *what) {
  if (!v) throw RuntimeError(std::string(what) + ": " + llvm::toString(v.takeError()));
  return std::move(*v);
}

std::unique_ptr<llvm::TargetMachine> host_machine() {
  auto jtmb = check(llvm::orc::JITTargetMachineBuilder::detectHost(), "detecting the host CPU");
  jtmb.setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
  return check(jtmb.createTargetMachine(), "creating the host target machine");
}

}  // namespace

CpuJit::CpuJit() {
  init_native_target();
  jit_ = check(llvm::orc::LLJITBuilder().create(), "creating the JIT");
  // Kernels call libm (tanhf, atan2, ...): resolve from the process.
  auto gen = check(llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
                       jit_->getDataLayout().getGlobalPrefix()),
                   "opening the process symbols");
  jit_->getMainJITDylib().addGenerator(std::move(gen));
  // compiler-rt's f64 -> f16 conversion, which LLVM calls and the process may lack.
  auto &es = jit_->getExecutionSession();
  llvm::orc::SymbolMap builtins;
  builtins[es.intern("__truncdfhf2")] = {llvm::orc::ExecutorAddr::fromPtr(&qd_truncdfhf2),
                                        llvm::JITSymbolFlags::Exported | llvm::JITSymbolFlags::Callable};
  if (auto err = jit_->getMainJITDylib().define(llvm::orc::absoluteSymbols(std::move(builtins))))
    throw RuntimeError("registering JIT builtins: " + llvm::toString(std::move(err)));
}

void CpuJit::optimize_for_host(llvm::Module &m) {
  init_native_target();
  auto tm = host_machine();
  m.setTargetTriple(tm->getTargetTriple().str());
  m.setDataLayout(tm->createDataLayout());
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions tuning;
  tuning.SLPVectorization = true;  // off by default in LLVM's PassBuilder (clang turns it on at -O2 and up)
  llvm::PassBuilder pb(tm.get(), tuning);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3).run(m, mam);
}

llvm::orc::ResourceTrackerSP CpuJit::add(std::unique_ptr<llvm::Module> m, std::unique_ptr<llvm::LLVMContext> ctx) {
  auto tracker = jit_->getMainJITDylib().createResourceTracker();
  if (auto err = jit_->addIRModule(tracker, llvm::orc::ThreadSafeModule(std::move(m), std::move(ctx))))
    throw RuntimeError("adding a module to the JIT: " + llvm::toString(std::move(err)));
  return tracker;
}

void CpuJit::remove(const llvm::orc::ResourceTrackerSP &tracker) {
  llvm::consumeError(tracker->remove());  // nothing useful to do if it fails: the memory stays
}

void *CpuJit::lookup(const std::string &symbol) {
  auto addr = check(jit_->lookup(symbol), "looking up a kernel symbol");
  return addr.toPtr<void *>();
}

std::string CpuJit::emit_object(llvm::Module &m) {
  init_native_target();
  // The machine the JIT itself compiles IR with (LLJIT's default for the host).
  auto jtmb = check(llvm::orc::JITTargetMachineBuilder::detectHost(), "detecting the host CPU");
  auto tm = check(jtmb.createTargetMachine(), "creating the host target machine");
  llvm::SmallVector<char, 0> buffer;
  llvm::raw_svector_ostream os(buffer);
  llvm::legacy::PassManager pm;
  if (tm->addPassesToEmitFile(pm, os, nullptr, llvm::CodeGenFileType::ObjectFile))
    throw RuntimeError("the host target cannot emit object code");
  pm.run(m);
  return std::string(buffer.begin(), buffer.end());
}

std::string CpuJit::host_id() {
  init_native_target();
  std::string id = std::string("llvm ") + LLVM_VERSION_STRING + "; " + llvm::sys::getProcessTriple() + "; " +
                   llvm::sys::getHostCPUName().str() + ";";
  for (auto &[feature, on] : llvm::sys::getHostCPUFeatures()) id += (on ? " +" : " -") + feature.str();
  return id;
}

int CpuJit::host_vector_bits() {
  static const int bits = [] {
    auto features = llvm::sys::getHostCPUFeatures();
    auto has = [&](const char *f) { return features.lookup(f); };
    return has("avx512f") ? 512 : has("avx") ? 256 : 128;
  }();
  return bits;
}

llvm::orc::JITDylib &CpuJit::add_object(const std::string &object) {
  auto created = jit_->createJITDylib("kernel" + std::to_string(num_libs_++));
  if (!created) throw RuntimeError("creating a JIT library: " + llvm::toString(created.takeError()));
  llvm::orc::JITDylib &lib = *created;
  lib.addToLinkOrder(jit_->getMainJITDylib());  // libm and the builtins above
  auto buffer = llvm::MemoryBuffer::getMemBufferCopy(object, "kernel.o");
  if (auto err = jit_->addObjectFile(lib, std::move(buffer)))
    throw RuntimeError("adding object code to the JIT: " + llvm::toString(std::move(err)));
  return lib;
}

void CpuJit::remove(llvm::orc::JITDylib &lib) {
  llvm::consumeError(jit_->getExecutionSession().removeJITDylib(lib));  // if it fails, the memory stays
}

void *CpuJit::lookup(llvm::orc::JITDylib &lib, const std::string &symbol) {
  auto addr = check(jit_->lookup(lib, symbol), "looking up a kernel symbol");
  return addr.toPtr<void *>();
}

}  // namespace qd
