// The runtime's vocabulary: element types, tensor types and host tensors, and the load
// options. Standard library only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::runtime {

/// Element types, as the artifact stores them.
enum class ElementType : uint8_t { F32, F64, F16, BF16, I32, I64, Bool, I8, U8 };

/// "f32", "bool", ...
std::string_view element_type_name(ElementType type);
/// The element type "f32", "bool", ... names (as .npy files read by runtime/npy.h name
/// them), or nullopt.
std::optional<ElementType> element_type_named(std::string_view name);
/// Bytes per element.
int element_bytes(ElementType type);

/// A named tensor type of the model's signature.
struct TensorInfo {
  std::string name;
  ElementType type = ElementType::F32;
  std::vector<int64_t> shape;

  int64_t elements() const;
  int64_t bytes() const { return elements() * element_bytes(type); }
  /// "f32[2,3]".
  std::string type_string() const;
};

/// A tensor in host memory: its type and its bytes (C order, little-endian).
struct HostTensor {
  TensorInfo info;
  std::vector<uint8_t> data;
};

/// One step of a loaded model's program, as `kiln inspect` lists it, and one more at the
/// end, kind "copy", for the copies a run makes after its last kernel (outputs the
/// kernels could not write in place, state updates not made in place). Its traffic leaves
/// out the outputs that update a state, which a run copies out only when asked
/// (Model::output_states).
struct StepInfo {
  std::string name;
  std::string kind;                          ///< loop, reduction, library, scatter or copy
  std::vector<std::string> ops;              ///< "%value = op" per IR op the step computes (format 1.3)
  std::vector<std::string> inputs, outputs;  ///< the values it reads and writes
  int64_t bytes = 0;                         ///< minimal traffic: every input read once, every output written once
  /// Multiply-adds counted twice, as the IR's ops compute them (a convolution's direct
  /// products, also where it runs as Winograd's, which makes fewer).
  int64_t flops = 0;
  /// A library step's kernel where the runtime names it: on the CPU, a convolution's
  /// ("brgconv:avx512_core", oneDNN's name, or "winograd_4x4_3x3 + brg:avx512_core").
  std::string implementation;
};

/// One step's time in a profiled run, in milliseconds from the run's start.
struct StepTime {
  double start_ms = 0, ms = 0;
};

/// A profiled run: the time of each step of Model::steps(), and of the whole run.
struct RunProfile {
  /// The whole run on the host's steady clock, from the call to its return.
  double total_ms = 0;
  std::vector<StepTime> steps;
  /// How steps were timed: the host's steady clock around each step (CPU), or CUDA events
  /// between plain launches, no graph (CUDA).
  std::string clock;
};

/// The most threads a model's pool may have.
inline constexpr int kMaxThreads = 1024;

/// Load options.
struct Options {
  /// Threads that split kernels: 1 to kMaxThreads, or 0 for one per hardware thread.
  /// Anything else, or threads the system cannot start, is a load error.
  int threads = 0;
  /// CPU artifacts: run independent steps that each use one thread (small matmuls and
  /// kernels, such as a bidirectional RNN's two directions) on several threads at once.
  /// False runs every step in program order.
  bool side_by_side_steps = true;
  /// CUDA artifacts: the device ordinal to run on.
  int cuda_device = 0;
  /// CUDA artifacts: capture the steps into a CUDA Graph once per session and replay it
  /// (false launches every kernel on every run).
  bool cuda_graphs = true;
};

}  // namespace kiln::runtime
