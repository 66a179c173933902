// Runs a verified CUDA artifact on a GPU: the module loaded once (cubin for the GPU's
// architecture, else PTX compiled by the driver), the weights uploaded once, and per
// session (one per concurrent run) a stream, a device arena sized by the plan, and the
// whole step list captured into a CUDA Graph that every later run replays.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "runtime/format/artifact.h"

namespace kiln::runtime::cuda {

/// What the executor needs to know of the model beyond the artifact's steps.
struct Signature {
  std::vector<int64_t> value_bytes;  ///< per value
  std::vector<uint32_t> input_values, output_values, state_values;
  std::vector<const uint8_t*> weights;  ///< per value: a param's bytes, else null
  std::vector<const uint8_t*> state_initial;  ///< per state position: its initial bytes, or null for zeros
};

/// How to run.
struct ExecutorOptions {
  /// The CUDA device ordinal.
  int device = 0;
  /// Capture the steps into a CUDA Graph once per session and replay it; false launches
  /// every step on every run.
  bool graphs = true;
};

class Executor {
 public:
  /// Loads the artifact's code onto the GPU and uploads its weights. Without a driver, a
  /// GPU, or code this GPU runs, the error says which.
  static Result<std::unique_ptr<Executor>> load(const format::ArtifactView& view, Signature signature, const ExecutorOptions& options);
  ~Executor();

  /// Runs once: host inputs (per input position, each exactly its size) are copied in,
  /// and the outputs (per output position) copied out.
  Status run_host(const std::vector<const uint8_t*>& inputs, const std::vector<uint8_t*>& outputs) const;
  /// Runs once on device memory the caller owns (CUdeviceptr values, each exactly its
  /// value's size): no host copies.
  Status run_device(const std::vector<uint64_t>& inputs, const std::vector<uint64_t>& outputs) const;
  /// Copies state tensor `index` (a position in the signature's state) to or from the host.
  Status read_state(size_t index, uint8_t* to) const;
  Status write_state(size_t index, const uint8_t* from);
  /// "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs)".
  const std::string& device_description() const;

  struct Impl;

 private:
  explicit Executor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::runtime::cuda
