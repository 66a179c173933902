// Kernels whose code is identical compiled once: a model that repeats a layer (a
// transformer's blocks, a recurrent network's steps) fuses into many steps with the same
// kernel, and the optimizer's time grows with the functions it sees.
#pragma once

#include <llvm/IR/Module.h>

#include <functional>
#include <string>
#include <unordered_map>

#include "base/result.h"

namespace kiln::codegen::cpu {

/// Collects kernels into `module`. Each kernel is emitted into a module of its own, whose
/// text (the function under a placeholder name, metadata numbered within that module)
/// identifies it; the first kernel with a text is linked into `module`, and each later
/// one becomes an alias of it, so the shared object still exports every kernel's symbol
/// while LLVM optimizes and compiles the code once.
class IdenticalKernels {
 public:
  explicit IdenticalKernels(llvm::Module& module) : module_(module) {}

  /// Runs `emit`, which must define exactly the function `symbol` in the module it is
  /// given, and adds that function to the module (or an alias of an identical one).
  Status add(const std::string& symbol, const std::function<Status(llvm::Module&)>& emit);

 private:
  llvm::Module& module_;
  std::unordered_map<std::string, std::string> symbol_of_text_;
};

}  // namespace kiln::codegen::cpu
