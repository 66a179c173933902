// The targets this runtime runs. A new one is a row here and an Executor of its own.
#include "runtime/cpu/executor.h"
#include "runtime/cuda/executor.h"
#include "runtime/executor.h"
#include "runtime/format/target.h"

namespace kiln::runtime {

std::span<const TargetRuntime> target_runtimes() {
  static constexpr TargetRuntime kTargets[] = {
      {format::kCpuTarget, [](std::string_view t) { return t == format::kCpuTarget; }, cpu::load_executor},
      {"cuda-sm_XX", [](std::string_view t) { return t.starts_with(format::kCudaTargetPrefix); }, cuda::load_executor},
  };
  return kTargets;
}

}  // namespace kiln::runtime
