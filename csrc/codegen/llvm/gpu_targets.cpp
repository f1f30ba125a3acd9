// NVPTX / AMDGPU code generation with LLVM 19, plus the external tools (ptxas, ld.lld) that
// check or finish what LLVM emits. See gpu_targets.h for the contract.
#include "codegen/llvm/gpu_targets.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>

#include <llvm/ADT/SmallVector.h>
#include <llvm/Analysis/CGSCCPassManager.h>
#include <llvm/Analysis/LoopAnalysisManager.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/IntrinsicsAMDGPU.h>
#include <llvm/IR/IntrinsicsNVPTX.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Metadata.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/PassManager.h>
#include <llvm/IR/Verifier.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/OptimizationLevel.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/CodeGen.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Target/TargetOptions.h>
#include <llvm/TargetParser/Triple.h>
#include <llvm/Transforms/Utils/Cloning.h>

#include "atomics/support_table.h"
#include "common/error.h"

extern char **environ;

namespace qd::llvm_gpu {

namespace {

[[noreturn]] void fail(const std::string &msg) { throw RuntimeError(msg); }

// ------------------------------------------------------------------ target machines

std::string normalise_triple(const char *triple) { return llvm::Triple::normalize(triple); }

const llvm::Target &lookup_target(const std::string &triple) {
  init_gpu_targets();
  std::string err;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, err);
  if (!target) fail("LLVM has no target for " + triple + ": " + err);
  return *target;
}

// Checked up front: an unknown CPU makes LLVM print a warning and later abort in codegen.
void check_cpu(const llvm::Target &target, const std::string &triple, const std::string &cpu) {
  std::unique_ptr<llvm::MCSubtargetInfo> sti(target.createMCSubtargetInfo(triple, "", ""));
  if (!sti || !sti->isCPUStringValid(cpu))
    fail("'" + cpu + "' is not a processor LLVM 19 knows for " + triple);
}

std::unique_ptr<llvm::TargetMachine> make_target_machine(const std::string &triple,
                                                         const std::string &cpu,
                                                         const std::string &features) {
  const llvm::Target &target = lookup_target(triple);
  check_cpu(target, triple, cpu);
  llvm::TargetOptions options;
  std::unique_ptr<llvm::TargetMachine> tm(target.createTargetMachine(
      triple, cpu, features, options, llvm::Reloc::PIC_, std::nullopt,
      llvm::CodeGenOptLevel::Aggressive));
  if (!tm) fail("LLVM could not create a target machine for " + triple + " " + cpu);
  return tm;
}

std::unique_ptr<llvm::TargetMachine> nvptx_machine(const std::string &sm) {
  return make_target_machine(normalise_triple(kNvptxTriple), sm, ptx_version_feature(sm));
}

std::unique_ptr<llvm::TargetMachine> amdgpu_machine(const std::string &gfx) {
  return make_target_machine(normalise_triple(kAmdgpuTriple), gfx, "");
}

void retarget(llvm::Module &m, const llvm::TargetMachine &tm) {
  m.setTargetTriple(tm.getTargetTriple().str());
  m.setDataLayout(tm.createDataLayout());
}

void verify(const llvm::Module &m, const std::string &what) {
  std::string msg;
  llvm::raw_string_ostream os(msg);
  if (llvm::verifyModule(m, &os)) fail("invalid LLVM module given to " + what + ":\n" + os.str());
}

// The new pass manager's O3, built with the target machine so target passes (NVVMReflect,
// AMDGPU's attributor and atomic optimisations, TTI cost models) take part.
void optimise(llvm::Module &m, llvm::TargetMachine &tm) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder pb(&tm);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
  mpm.run(m, mam);
}

// Codegen passes rewrite the IR they run on (atomic expansion, kernel argument lowering), so
// they run on a clone: the caller's module stays valid for another emit call.
llvm::SmallVector<char, 0> codegen(const llvm::Module &m, llvm::TargetMachine &tm,
                                   llvm::CodeGenFileType type) {
  std::unique_ptr<llvm::Module> copy = llvm::CloneModule(m);
  llvm::SmallVector<char, 0> out;
  llvm::raw_svector_ostream os(out);
  llvm::legacy::PassManager pm;
  if (tm.addPassesToEmitFile(pm, os, nullptr, type))
    fail("LLVM cannot emit this file type for " + tm.getTargetTriple().str());
  pm.run(*copy);
  return out;
}

// ------------------------------------------------------------------ external tools

bool is_executable(const std::string &path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

std::string search_path(const std::string &name) {
  const char *path = std::getenv("PATH");
  if (!path) return "";
  std::stringstream dirs(path);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) continue;
    std::string candidate = dir + "/" + name;
    if (is_executable(candidate)) return candidate;
  }
  return "";
}

// A private temporary directory, removed with everything in it when it goes out of scope.
class TempDir {
 public:
  TempDir() {
    std::error_code ec;
    std::string base = std::filesystem::temp_directory_path(ec).string();
    if (ec || base.empty()) base = "/tmp";
    std::string templ = base + "/qd_gpu_XXXXXX";
    std::vector<char> buf(templ.begin(), templ.end());
    buf.push_back('\0');
    if (!mkdtemp(buf.data())) fail("cannot create a temporary directory: " + std::string(strerror(errno)));
    path_ = buf.data();
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;
  std::string file(const std::string &name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

void write_file(const std::string &path, const void *data, size_t size) {
  std::ofstream f(path, std::ios::binary);
  f.write(static_cast<const char *>(data), static_cast<std::streamsize>(size));
  if (!f) fail("cannot write " + path);
}

std::vector<uint8_t> read_file(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("cannot read " + path);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

struct ToolResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// Runs argv[0] (a full path) without a shell, so paths need no quoting; output goes to a file in
// `dir` rather than a pipe, which cannot fill up and block the tool.
ToolResult run_tool(const std::vector<std::string> &argv, const TempDir &dir) {
  std::string log = dir.file("tool.log");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::vector<char *> args;
  for (const std::string &a : argv) args.push_back(const_cast<char *>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) fail("cannot run " + argv[0] + ": " + strerror(rc));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  ToolResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::vector<uint8_t> out = read_file(log);
  r.output.assign(out.begin(), out.end());
  return r;
}

// ------------------------------------------------------------------ intrinsic helpers

llvm::Value *call_sreg(llvm::IRBuilderBase &b, Dim d, llvm::Intrinsic::ID x, llvm::Intrinsic::ID y,
                       llvm::Intrinsic::ID z) {
  llvm::Intrinsic::ID id = d == Dim::X ? x : d == Dim::Y ? y : z;
  return b.CreateIntrinsic(id, {}, {});
}

unsigned dim_index(Dim d) { return d == Dim::X ? 0 : d == Dim::Y ? 1 : 2; }

// An invariant load of an integer field of the HSA kernel dispatch packet, zero-extended to i32.
llvm::Value *load_dispatch_field(llvm::IRBuilderBase &b, unsigned offset, llvm::Type *ty) {
  llvm::Value *packet = b.CreateIntrinsic(llvm::Intrinsic::amdgcn_dispatch_ptr, {}, {});
  llvm::Value *addr = b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), packet, offset);
  llvm::LoadInst *ld = b.CreateAlignedLoad(ty, addr, llvm::Align(ty->getPrimitiveSizeInBits() / 8));
  ld->setMetadata(llvm::LLVMContext::MD_invariant_load, llvm::MDNode::get(b.getContext(), {}));
  return b.CreateZExtOrTrunc(ld, b.getInt32Ty());
}

bool has_elf_magic(const std::vector<uint8_t> &bytes) {
  return bytes.size() >= 4 && bytes[0] == 0x7f && bytes[1] == 'E' && bytes[2] == 'L' &&
         bytes[3] == 'F';
}

}  // namespace

// ==================================================================== initialisation

void init_gpu_targets() {
  static std::once_flag once;
  std::call_once(once, [] {
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
    LLVMInitializeAMDGPUTargetInfo();
    LLVMInitializeAMDGPUTarget();
    LLVMInitializeAMDGPUTargetMC();
    LLVMInitializeAMDGPUAsmPrinter();
    LLVMInitializeX86TargetInfo();
    LLVMInitializeX86Target();
    LLVMInitializeX86TargetMC();
    LLVMInitializeX86AsmPrinter();
    LLVMInitializeX86AsmParser();  // the CPU JIT's inline assembly
  });
}

// ==================================================================== NVPTX

std::string ptx_version_feature(const std::string &sm) {
  // LLVM 19 defaults to the oldest PTX an sm allows (6.3 for sm_75); 7.8 is the first that
  // knows sm_89/sm_90 and every ptxas from CUDA 11.8 on (CUDA 13 included) accepts it.
  // Arch-specific sm_90a needs PTX 8.0.
  if (!sm.empty() && sm.back() == 'a') return "+ptx80";
  return "+ptx78";
}

void set_nvptx_target(llvm::Module &module, const std::string &sm) {
  retarget(module, *nvptx_machine(sm));
}

std::string emit_ptx(llvm::Module &module, const std::string &sm) {
  verify(module, "emit_ptx");
  std::unique_ptr<llvm::TargetMachine> tm = nvptx_machine(sm);
  retarget(module, *tm);
  optimise(module, *tm);
  llvm::SmallVector<char, 0> ptx = codegen(module, *tm, llvm::CodeGenFileType::AssemblyFile);
  return std::string(ptx.begin(), ptx.end());
}

void mark_nvptx_kernel(llvm::Function &fn) {
  llvm::LLVMContext &ctx = fn.getContext();
  llvm::Metadata *ops[] = {llvm::ValueAsMetadata::get(&fn), llvm::MDString::get(ctx, "kernel"),
                           llvm::ConstantAsMetadata::get(llvm::ConstantInt::get(
                               llvm::Type::getInt32Ty(ctx), 1))};
  fn.getParent()->getOrInsertNamedMetadata("nvvm.annotations")->addOperand(
      llvm::MDNode::get(ctx, ops));
  fn.setCallingConv(llvm::CallingConv::PTX_Kernel);
}

llvm::Value *nvptx_thread_idx(llvm::IRBuilderBase &b, Dim d) {
  using namespace llvm::Intrinsic;
  return call_sreg(b, d, nvvm_read_ptx_sreg_tid_x, nvvm_read_ptx_sreg_tid_y,
                   nvvm_read_ptx_sreg_tid_z);
}

llvm::Value *nvptx_block_idx(llvm::IRBuilderBase &b, Dim d) {
  using namespace llvm::Intrinsic;
  return call_sreg(b, d, nvvm_read_ptx_sreg_ctaid_x, nvvm_read_ptx_sreg_ctaid_y,
                   nvvm_read_ptx_sreg_ctaid_z);
}

llvm::Value *nvptx_block_dim(llvm::IRBuilderBase &b, Dim d) {
  using namespace llvm::Intrinsic;
  return call_sreg(b, d, nvvm_read_ptx_sreg_ntid_x, nvvm_read_ptx_sreg_ntid_y,
                   nvvm_read_ptx_sreg_ntid_z);
}

llvm::Value *nvptx_grid_dim(llvm::IRBuilderBase &b, Dim d) {
  using namespace llvm::Intrinsic;
  return call_sreg(b, d, nvvm_read_ptx_sreg_nctaid_x, nvvm_read_ptx_sreg_nctaid_y,
                   nvvm_read_ptx_sreg_nctaid_z);
}

std::string find_ptxas() {
  if (is_executable("/usr/local/cuda/bin/ptxas")) return "/usr/local/cuda/bin/ptxas";
  if (const char *home = std::getenv("CUDA_HOME")) {
    std::string p = std::string(home) + "/bin/ptxas";
    if (is_executable(p)) return p;
  }
  return search_path("ptxas");
}

bool ptxas_available() { return !find_ptxas().empty(); }

std::string run_ptxas(const std::string &ptx, const std::string &sm) {
  std::string ptxas = find_ptxas();
  if (ptxas.empty()) return "ptxas not found (looked in /usr/local/cuda/bin, $CUDA_HOME/bin, PATH)";
  TempDir dir;
  std::string in = dir.file("kernel.ptx");
  write_file(in, ptx.data(), ptx.size());
  ToolResult r = run_tool({ptxas, "-arch=" + sm, "-o", dir.file("kernel.cubin"), in}, dir);
  if (r.exit_code == 0) return "";
  return r.output.empty() ? "ptxas exited with status " + std::to_string(r.exit_code) : r.output;
}

// ==================================================================== AMDGPU

bool amdgpu_uses_unsafe_fp_atomics(const std::string &gfx) {
  TargetFeatures f{.amdgpu_gfx = gfx};
  return atomic_lowering(Backend::Amdgpu, AtomicOp::Max, DataType::f64, MemorySpace::Global, f).kind == Lowering::Native;
}

void apply_amdgpu_fp_atomic_policy(llvm::Module &module, const std::string &gfx) {
  if (!amdgpu_uses_unsafe_fp_atomics(gfx)) return;
  for (llvm::Function &fn : module) {
    if (fn.isDeclaration() || fn.hasFnAttribute("amdgpu-unsafe-fp-atomics")) continue;
    fn.addFnAttr("amdgpu-unsafe-fp-atomics", "true");
  }
}

void set_amdgpu_target(llvm::Module &module, const std::string &gfx) {
  retarget(module, *amdgpu_machine(gfx));
}

namespace {
// Everything the three AMDGPU emitters share: returns the machine for codegen.
std::unique_ptr<llvm::TargetMachine> prepare_amdgpu(llvm::Module &module, const std::string &gfx,
                                                    const std::string &what) {
  verify(module, what);
  std::unique_ptr<llvm::TargetMachine> tm = amdgpu_machine(gfx);
  retarget(module, *tm);
  apply_amdgpu_fp_atomic_policy(module, gfx);
  optimise(module, *tm);
  return tm;
}
}  // namespace

std::string amdgpu_assembly(llvm::Module &module, const std::string &gfx) {
  auto tm = prepare_amdgpu(module, gfx, "amdgpu_assembly");
  llvm::SmallVector<char, 0> s = codegen(module, *tm, llvm::CodeGenFileType::AssemblyFile);
  return std::string(s.begin(), s.end());
}

std::vector<uint8_t> emit_amdgpu_object(llvm::Module &module, const std::string &gfx) {
  auto tm = prepare_amdgpu(module, gfx, "emit_amdgpu_object");
  llvm::SmallVector<char, 0> o = codegen(module, *tm, llvm::CodeGenFileType::ObjectFile);
  return std::vector<uint8_t>(o.begin(), o.end());
}

std::vector<uint8_t> link_amdgpu_code_object(const std::vector<uint8_t> &object) {
  if (!has_elf_magic(object)) fail("link_amdgpu_code_object: the input is not an ELF object");
  std::string lld = find_ld_lld();
  if (lld.empty())
    fail("ld.lld not found (looked for ld.lld-19 and ld.lld on PATH and in /usr/lib/llvm-19/bin); "
         "it links AMDGPU code objects: install lld-19");
  TempDir dir;
  std::string in = dir.file("kernel.o"), out = dir.file("kernel.hsaco");
  write_file(in, object.data(), object.size());
  // --no-undefined: a call to a function the module lacks must fail here, not at load time.
  ToolResult r = run_tool({lld, "-shared", "--no-undefined", "-o", out, in}, dir);
  if (r.exit_code != 0) fail("ld.lld failed to link the AMDGPU code object:\n" + r.output);
  return read_file(out);
}

std::vector<uint8_t> emit_amdgpu_code_object(llvm::Module &module, const std::string &gfx) {
  return link_amdgpu_code_object(emit_amdgpu_object(module, gfx));
}

void mark_amdgpu_kernel(llvm::Function &fn, unsigned max_block_size) {
  fn.setCallingConv(llvm::CallingConv::AMDGPU_KERNEL);
  fn.addFnAttr("amdgpu-flat-work-group-size", "1," + std::to_string(max_block_size));
}

llvm::SyncScope::ID amdgpu_agent_scope(llvm::LLVMContext &ctx) {
  return ctx.getOrInsertSyncScopeID("agent");
}

llvm::Value *amdgpu_workitem_id(llvm::IRBuilderBase &b, Dim d) {
  using namespace llvm::Intrinsic;
  return call_sreg(b, d, amdgcn_workitem_id_x, amdgcn_workitem_id_y, amdgcn_workitem_id_z);
}

llvm::Value *amdgpu_workgroup_id(llvm::IRBuilderBase &b, Dim d) {
  using namespace llvm::Intrinsic;
  return call_sreg(b, d, amdgcn_workgroup_id_x, amdgcn_workgroup_id_y, amdgcn_workgroup_id_z);
}

// hsa_kernel_dispatch_packet_t: u16 workgroup_size_{x,y,z} at byte 4, u32 grid_size_{x,y,z}
// (in work-items) at byte 12. Read from the packet because it works with every code object
// version, unlike the implicit kernel arguments whose layout changed in v5.
llvm::Value *amdgpu_workgroup_size(llvm::IRBuilderBase &b, Dim d) {
  return load_dispatch_field(b, 4 + 2 * dim_index(d), b.getInt16Ty());
}

llvm::Value *amdgpu_num_workgroups(llvm::IRBuilderBase &b, Dim d) {
  llvm::Value *grid = load_dispatch_field(b, 12 + 4 * dim_index(d), b.getInt32Ty());
  llvm::Value *size = amdgpu_workgroup_size(b, d);
  llvm::Value *rounded = b.CreateAdd(grid, b.CreateSub(size, b.getInt32(1)));
  return b.CreateUDiv(rounded, size);
}

std::string find_ld_lld() {
  for (const char *name : {"ld.lld-19", "ld.lld"}) {
    std::string p = search_path(name);
    if (!p.empty()) return p;
  }
  if (is_executable("/usr/lib/llvm-19/bin/ld.lld")) return "/usr/lib/llvm-19/bin/ld.lld";
  return "";
}

}  // namespace qd::llvm_gpu
