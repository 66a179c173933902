// The kiln runtime: load a .kiln artifact and run it, with no compiler, LLVM or NVRTC in
// the process. Everything returns errors as values; nothing aborts on bad input.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "runtime/types.h"

namespace kiln::runtime {

/// "0.1.0": this runtime's version.
std::string_view runtime_version();
/// The artifact format versions this runtime reads: "1.0 to 1.6".
std::string artifact_format_versions();
/// The libraries CPU matmuls run on, with the kernels they chose for this CPU (loudly
/// marked GENERIC where a library fell back to pre-AVX2 code on a CPU with AVX2):
/// "oneDNN 2.6.3 (avx512_core kernels) for f32; OpenBLAS 0.3.21 (Cooperlake kernels) for
/// f64", or OpenBLAS alone, saying why oneDNN is not used.
std::string cpu_matmul_library();
/// The NVIDIA driver's CUDA version ("13.0"), or why there is no usable driver.
Result<std::string> cuda_driver_version();

class ModelImpl;

/// A loaded model. Immutable apart from its state tensors: runs may happen from many
/// threads at once (each takes an arena from the model's pool, which keeps one per
/// concurrent run); runs of a model with state are serialized, since each one updates it.
class Model {
 public:
  /// Loads and verifies an artifact file.
  static Result<std::shared_ptr<Model>> load_file(const std::string& path, const Options& options = {});
  /// Loads and verifies artifact bytes.
  static Result<std::shared_ptr<Model>> load_bytes(std::vector<uint8_t> bytes, const Options& options = {});
  ~Model();

  /// The plain inputs a run needs, the outputs it returns, and the persistent state.
  const std::vector<TensorInfo>& inputs() const;
  const std::vector<TensorInfo>& outputs() const;
  const std::vector<TensorInfo>& state() const;
  /// Per output, the name of the state it is the new value of (a training step's
  /// `%w.next` updates `%w`), or empty. Runs on host buffers (run, profile) may leave those
  /// outputs out of their `outputs` map: the state holds them after the run (read_state),
  /// and nothing is copied for them; a training loop that wants its loss asks for that
  /// alone. Runs on device memory take every output.
  const std::vector<std::string>& output_states() const;

  /// Runs the model once on named inputs (each exactly its signature's type) and returns
  /// the outputs in order. State arguments are read from, and updated in, the model.
  Result<std::vector<HostTensor>> run(const std::map<std::string, HostTensor>& inputs) const;
  /// Runs once, writing each output straight into the caller's buffer (no copy):
  /// `outputs` maps every output's name (those of output_states() may be left out) to a
  /// buffer of exactly its size (an output the graph returns twice, under one name, fills
  /// one buffer).
  Status run(const std::map<std::string, HostTensor>& inputs,
             const std::map<std::string, std::span<uint8_t>>& outputs) const;
  /// Runs once on the caller's memory in both directions, with no copies: `inputs` maps
  /// every plain input's name to exactly its bytes (its signature's element type and
  /// shape, row-major), `outputs` as above. Kernels read and write rows fastest in
  /// 64-byte-aligned buffers.
  Status run(const std::map<std::string, std::span<const uint8_t>>& inputs,
             const std::map<std::string, std::span<uint8_t>>& outputs) const;
  /// CUDA artifacts: runs once on device memory the caller owns, with no host copies.
  /// Each map gives every input (or output) name a device pointer (a CUdeviceptr) to
  /// exactly its size.
  Status run_device(const std::map<std::string, uint64_t>& inputs,
                    const std::map<std::string, uint64_t>& outputs) const;
  /// The steps of the program, in program order, then the copies after them (StepInfo):
  /// what `kiln inspect` lists and what profile() times. A run takes them in this order,
  /// or, on the CPU, some side by side in an order they allow (schedule()).
  const std::vector<StepInfo>& steps() const;
  /// Runs once like run() on the caller's buffers, timing every step of steps(): on the
  /// CPU with the steady clock around each step, on CUDA with events between plain
  /// launches (no CUDA Graph, so a profiled run is slower than a replayed one by the
  /// launches' overhead, which the profile shows as it is).
  Result<RunProfile> profile(const std::map<std::string, std::span<const uint8_t>>& inputs,
                             const std::map<std::string, std::span<uint8_t>>& outputs) const;
  /// CUDA artifacts: profile() on device memory the caller owns, as run_device takes it.
  Result<RunProfile> profile_device(const std::map<std::string, uint64_t>& inputs,
                                    const std::map<std::string, uint64_t>& outputs) const;
  /// Rows of the batch that leads every input and output (`kiln compile --batch`), whose
  /// rows the model computes independently, so runs may pack rows of unrelated requests
  /// (serving/); 0 where the artifact marks none.
  int64_t batch() const;
  /// The artifact's target: "cpu-x86_64" or "cuda-sm_XX".
  std::string target() const;
  /// Which of its code objects runs: on the CPU, the kernels' --cpu ("x86-64-v4", or
  /// "x86-64-v4+avx512bf16" where the CPU has AVX512-BF16 and the artifact such kernels);
  /// "" where the program has none, and on CUDA.
  std::string code() const;
  /// Which steps a run takes side by side, on several threads at once (CPU: independent
  /// steps that each use one thread, Options::side_by_side_steps); "" where it runs every
  /// step in program order.
  std::string schedule() const;
  /// Reads a state tensor (for example trained weights).
  Result<HostTensor> read_state(const std::string& name) const;
  /// Sets a state tensor (its type must match).
  Status write_state(const std::string& name, const HostTensor& value);

 private:
  explicit Model(std::unique_ptr<ModelImpl> impl);
  // The caller's buffer per output position, each checked for its size.
  Result<std::vector<uint8_t*>> output_buffers(const std::map<std::string, std::span<uint8_t>>& outputs) const;
  // Runs with one buffer per input and per output position.
  Status run_into(const std::vector<const uint8_t*>& inputs, const std::vector<uint8_t*>& outputs) const;
  std::unique_ptr<ModelImpl> impl_;
};

}  // namespace kiln::runtime
