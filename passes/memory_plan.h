// memory-plan: places every value a program materializes, in one arena.
#pragma once

#include "passes/pass.h"

namespace kiln::passes {

/// Plans the memory of a fused program (see docs/memory.md):
///   - arguments stay where the caller (inputs), the weights (params) or the persistent
///     state buffers (state) hold them;
///   - every step output lives in the arena from the step that writes it to the last
///     step that reads it (to the end for results);
///   - a loop kernel writes its output over an input that dies at that step, when both
///     have one shape and the kernel reads that input only elementwise;
///   - a result named %S.next, for a state argument %S, is written straight into %S's
///     buffer when no later step reads %S (and its kernel reads %S only elementwise);
///     other state updates are copied after the last step;
///   - offsets: greedy by size, best fit among buffers live at the same time, 256-byte
///     alignment.
class MemoryPlanPass : public Pass {
 public:
  static constexpr int64_t kAlignment = 256;
  std::string_view name() const override { return "memory-plan"; }
  Result<bool> run(ir::Graph& graph) override;
  bool preserves_program() const override { return true; }
};

}  // namespace kiln::passes
