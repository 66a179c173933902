#include "codegen/cpu/identical_kernels.h"

#include <fmt/format.h>
#include <llvm/IR/GlobalAlias.h>
#include <llvm/Linker/Linker.h>
#include <llvm/Support/raw_ostream.h>

#include <memory>

namespace kiln::codegen::cpu {

Status IdenticalKernels::add(const std::string& symbol, const std::function<Status(llvm::Module&)>& emit) {
  // The kernel module carries the main module's flags, which steer the emitter (bf16
  // instructions), and the same name, so only the kernel's own code tells texts apart.
  auto kernel = std::make_unique<llvm::Module>("kernel", module_.getContext());
  llvm::SmallVector<llvm::Module::ModuleFlagEntry, 4> flags;
  module_.getModuleFlagsMetadata(flags);
  for (const llvm::Module::ModuleFlagEntry& flag : flags)
    kernel->addModuleFlag(flag.Behavior, flag.Key->getString(), flag.Val);
  KILN_RETURN_IF_ERROR(emit(*kernel));
  llvm::Function* fn = kernel->getFunction(symbol);
  int defined = 0;
  for (const llvm::Function& f : *kernel) defined += f.isDeclaration() ? 0 : 1;
  if (!fn || fn->isDeclaration() || defined != 1)
    return make_error(fmt::format("cpu codegen: internal error: emitting {} defined {} functions, not that one alone",
                                  symbol, defined));

  fn->setName("kernel");
  std::string text;
  llvm::raw_string_ostream stream(text);
  kernel->print(stream, nullptr);
  stream.flush();
  fn->setName(symbol);

  if (module_.getNamedValue(symbol))
    return make_error(fmt::format("cpu codegen: internal error: two kernels are named {}", symbol));
  auto [known, is_new] = symbol_of_text_.try_emplace(std::move(text), symbol);
  if (!is_new) {
    llvm::Function* original = module_.getFunction(known->second);
    llvm::GlobalAlias::create(original->getFunctionType(), 0, llvm::GlobalValue::ExternalLinkage, symbol, original,
                              &module_);
    return Status::Ok();
  }
  if (llvm::Linker::linkModules(module_, std::move(kernel)))
    return make_error(fmt::format("cpu codegen: internal error: LLVM could not link kernel {}", symbol));
  return Status::Ok();
}

}  // namespace kiln::codegen::cpu
