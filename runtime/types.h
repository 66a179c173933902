// The runtime's vocabulary: element types, tensor types and host tensors, and the load
// options. Standard library only.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::runtime {

/// Element types, as the artifact stores them.
enum class ElementType : uint8_t { F32, F64, F16, BF16, I32, I64, Bool };

/// "f32", "bool", ...
std::string_view element_type_name(ElementType type);
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

/// The most threads a model's pool may have.
inline constexpr int kMaxThreads = 1024;

/// Load options.
struct Options {
  /// Threads that split kernels: 1 to kMaxThreads, or 0 for one per hardware thread.
  /// Anything else, or threads the system cannot start, is a load error.
  int threads = 0;
  /// CUDA artifacts: the device ordinal to run on.
  int cuda_device = 0;
  /// CUDA artifacts: capture the steps into a CUDA Graph once per session and replay it
  /// (false launches every kernel on every run).
  bool cuda_graphs = true;
};

}  // namespace kiln::runtime
