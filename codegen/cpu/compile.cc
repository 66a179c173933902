#include "codegen/cpu/compile.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <llvm/Analysis/TargetLibraryInfo.h>
#include <llvm/IR/DiagnosticInfo.h>
#include <llvm/IR/DiagnosticPrinter.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Target/TargetOptions.h>
#include <llvm/TargetParser/Host.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "base/file.h"
#include "codegen/cpu/cpu_target.h"
#include "codegen/cpu/kernel_emitter.h"
#include "codegen/cpu/scalar_ops.h"

namespace kiln::codegen::cpu {
namespace {

Result<std::string> temp_dir() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = std::string(base && *base ? base : "/tmp") + "/kiln-link.XXXXXX";
  if (!mkdtemp(pattern.data())) return make_error("cpu codegen: cannot make a temporary directory for linking");
  return pattern;
}

Result<std::vector<uint8_t>> read_bytes(const std::string& path) {
  auto text = read_file(path, uint64_t{1} << 32);
  if (!text.ok()) return make_error("cpu codegen: " + text.error().message);
  return std::vector<uint8_t>(text->begin(), text->end());
}

// Runs the linker without a shell (no quoting of paths), capturing its messages.
Status link(const std::string& linker, const std::string& object, const std::string& output) {
  std::vector<std::string> argv = {linker,
                                   "-shared",
                                   "--hash-style=gnu",
                                   "-O2",
                                   "-o",
                                   output,
                                   object,
                                   "-L/usr/lib/x86_64-linux-gnu",
                                   "-L/lib/x86_64-linux-gnu",
                                   "--as-needed",
                                   "-lmvec",
                                   "-lm",
                                   "-lc"};
  std::string log = output + ".log";
  // The child only calls what is safe between fork and exec in a process with threads
  // (CPUs compile on threads of their own): no allocation, no stdio.
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  pid_t pid = fork();
  if (pid < 0) return make_error("cpu codegen: cannot start the linker");
  if (pid == 0) {
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) dup2(fd, STDERR_FILENO);
    execv(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return Status::Ok();
  std::ifstream in(log);
  std::stringstream messages;
  messages << in.rdbuf();
  return make_error(fmt::format("cpu codegen: linking with {} failed{}{}", linker,
                                WIFEXITED(status) && WEXITSTATUS(status) == 127 ? " (is lld-19 installed?)" : "",
                                messages.str().empty() ? "" : ":\n" + messages.str()));
}

// Checks that LLVM's subtarget has exactly the features asked for: turning a feature off
// also turns off those that imply it, which must never take away one the code may use.
Status check_subtarget(const llvm::MCSubtargetInfo& sti, const CpuTarget& cpu) {
  for (const std::string& f : cpu.required)
    if (!sti.checkFeatures("+" + f))
      return make_error(fmt::format("cpu codegen: internal error: LLVM turned off '{}' for {} (features: {})", f,
                                    cpu.name, cpu.llvm_features));
  return Status::Ok();
}

}  // namespace

Result<KernelLibrary> compile_kernels(const ir::Graph& g, const CompileOptions& options) {
  static const bool initialized = [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    return true;
  }();
  (void)initialized;
  llvm::LLVMContext ctx;
  // Optimizer remarks and warnings (a loop it did not vectorize) are not the user's
  // business; errors are collected and fail the compile.
  std::string llvm_errors;
  ctx.setDiagnosticHandlerCallBack(
      [](const llvm::DiagnosticInfo* info, void* errors) {
        if (info->getSeverity() != llvm::DS_Error) return;
        std::string text;
        llvm::raw_string_ostream stream(text);
        llvm::DiagnosticPrinterRawOStream printer(stream);
        info->print(printer);
        *static_cast<std::string*>(errors) += stream.str() + "\n";
      },
      &llvm_errors);
  auto module = std::make_unique<llvm::Module>("kiln", ctx);

  std::string triple = llvm::sys::getDefaultTargetTriple();
  std::string error;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target) return make_error("cpu codegen: " + error);
  KILN_ASSIGN_OR_RETURN(CpuTarget cpu, resolve_cpu(options.cpu));
  llvm::TargetOptions target_options;
  std::unique_ptr<llvm::TargetMachine> machine(
      target->createTargetMachine(triple, cpu.llvm_cpu, cpu.llvm_features, target_options, llvm::Reloc::PIC_,
                                  std::nullopt, llvm::CodeGenOptLevel::Aggressive));
  if (!machine) return make_error(fmt::format("cpu codegen: no target machine for {} ({})", triple, cpu.llvm_cpu));
  KILN_RETURN_IF_ERROR(check_subtarget(*machine->getMCSubtargetInfo(), cpu));
  // LLVM prefers 256-bit vectors even where AVX-512 exists, because older Xeons lower
  // their clock for 512-bit code. kiln asks for 512 bits there in compute-bound kernels
  // (wide_vectors_pay in kernel_emitter.cc), where they pay (docs/cpu.md has the
  // measurements).
  const int vector_bytes = machine->getMCSubtargetInfo()->checkFeatures("+avx512f") ? 64 : 32;
  if (machine->getMCSubtargetInfo()->checkFeatures("+avx512bf16,+avx512vl")) use_bf16_instructions(*module);
  KILN_RETURN_IF_ERROR(emit_kernels(g, *module, options.streaming_store_bytes, vector_bytes));
  std::string verify_messages;
  llvm::raw_string_ostream verify_stream(verify_messages);
  if (llvm::verifyModule(*module, &verify_stream))
    return make_error("cpu codegen: internal error: invalid LLVM IR:\n" + verify_messages);
  module->setTargetTriple(triple);
  module->setDataLayout(machine->createDataLayout());

  // O3, with libmvec as the vector math library so transcendental loops vectorize too.
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder builder(machine.get());
  llvm::TargetLibraryInfoImpl tlii{llvm::Triple(triple)};
  tlii.addVectorizableFunctionsFromVecLib(llvm::TargetLibraryInfoImpl::LIBMVEC_X86, llvm::Triple(triple));
  fam.registerPass([&] { return llvm::TargetLibraryAnalysis(tlii); });
  builder.registerModuleAnalyses(mam);
  builder.registerCGSCCAnalyses(cam);
  builder.registerFunctionAnalyses(fam);
  builder.registerLoopAnalyses(lam);
  builder.crossRegisterProxies(lam, fam, cam, mam);
  builder.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3).run(*module, mam);
  if (!machine->getMCSubtargetInfo()->checkFeatures("+avx512fp16")) widen_half_compares(*module);

  llvm::SmallVector<char, 0> object;
  llvm::raw_svector_ostream object_stream(object);
  llvm::legacy::PassManager emit;
  if (machine->addPassesToEmitFile(emit, object_stream, nullptr, llvm::CodeGenFileType::ObjectFile))
    return make_error("cpu codegen: the target cannot emit object files");
  emit.run(*module);
  if (!llvm_errors.empty()) return make_error("cpu codegen: LLVM failed:\n" + llvm_errors);

  KILN_ASSIGN_OR_RETURN(std::string dir, temp_dir());
  std::string object_path = dir + "/kernels.o", library_path = dir + "/kernels.so";
  std::ofstream(object_path, std::ios::binary).write(object.data(), static_cast<std::streamsize>(object.size()));
  Status linked = link(options.linker, object_path, library_path);
  auto bytes = linked.ok() ? read_bytes(library_path) : Result<std::vector<uint8_t>>(linked.error());
  for (const char* name : {"/kernels.o", "/kernels.so", "/kernels.so.log"}) std::remove((dir + name).c_str());
  rmdir(dir.c_str());
  if (!bytes.ok()) return bytes.error();
  return KernelLibrary{std::move(*bytes), std::move(cpu.required)};
}

}  // namespace kiln::codegen::cpu
