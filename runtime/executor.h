// The seam between runtime::Model and a target: one Executor per loaded model, behind
// which runtime/cpu and runtime/cuda run a verified artifact. Model checks every argument
// a caller gives and hands the executor buffers in signature order; an executor checks
// what only it can (the code it loads against the artifact, the device it runs on).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "runtime/format/artifact.h"
#include "runtime/types.h"

namespace kiln::runtime {

/// What an executor needs to know of the model beyond the artifact's steps: per value its
/// type and bytes, the values of the inputs, outputs and state in signature order, each
/// param's bytes (per value, null for others), each state's initial bytes (per state
/// position, null for zeros). Pointers are into the artifact's bytes, which Model keeps.
struct Signature {
  std::vector<TensorInfo> values;
  std::vector<int64_t> value_bytes;
  std::vector<uint32_t> input_values, output_values, state_values;
  std::vector<const uint8_t*> weights;
  std::vector<const uint8_t*> state_initial;
};

/// Runs one loaded artifact on one target, many times, from many threads at once.
class Executor {
 public:
  virtual ~Executor() = default;
  /// Runs once on host memory: one buffer per input, then per output position, each
  /// exactly its value's size, or null for an output that updates a state (the caller
  /// left it out: the state holds it). With `profile`, times every step of the artifact and then
  /// the copies after them (one StepTime each), in the same run.
  virtual Status run_host(const std::vector<const uint8_t*>& inputs, const std::vector<uint8_t*>& outputs,
                          RunProfile* profile) const = 0;
  /// Runs once on device memory (CUdeviceptr values), or refuses where the target has none.
  virtual Status run_device(const std::vector<uint64_t>& inputs, const std::vector<uint64_t>& outputs,
                            RunProfile* profile) const = 0;
  /// Copies state tensor `index` (a position in the signature's state) out or in.
  virtual Status read_state(size_t index, uint8_t* to) const = 0;
  virtual Status write_state(size_t index, const uint8_t* from) = 0;
  /// The kernel a library step runs on, where the target names it (StepInfo's
  /// implementation), or "".
  virtual std::string step_implementation(size_t /*step*/) const { return {}; }
  /// Which of the artifact's code objects runs, where the target has a choice: the CPU's
  /// kernels by the --cpu they were compiled for; "" otherwise.
  virtual std::string code() const { return {}; }
  /// Which steps the target runs side by side rather than one after another ("649 of 666
  /// steps side by side, in 3 phases, 5263360 bytes of arena more for their values"); ""
  /// where it runs them all in program order.
  virtual std::string schedule() const { return {}; }
};

/// A target the runtime runs: the artifact targets it takes ("cpu-x86_64", "cuda-sm_90")
/// and how it loads them. runtime/targets.cc holds the table; adding a target is a row
/// there and an Executor of its own (docs/architecture.md).
struct TargetRuntime {
  std::string_view name;  ///< "cpu-x86_64", "cuda-sm_XX": as errors name it
  bool (*runs)(std::string_view artifact_target);
  Result<std::unique_ptr<Executor>> (*load)(const format::ArtifactView& view, Signature signature,
                                            const Options& options);
};

/// Every target of this runtime, in the order errors list them.
std::span<const TargetRuntime> target_runtimes();

}  // namespace kiln::runtime
