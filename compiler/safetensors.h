// Weights for a graph's params (and initial state) from safetensors files.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "ir/tensor.h"
#include "runtime/format/safetensors.h"

namespace kiln {

/// The tensors of a safetensors file as interpreter tensors, by name. A dtype kiln has
/// no element type for (I8, U8, F8_E4M3, ...) is an error naming the tensor.
Result<std::map<std::string, ir::Tensor>> tensors_from_safetensors(
    const std::vector<format::SafetensorsTensor>& tensors, std::string_view source);

/// Parses safetensors bytes into tensors by name (format/safetensors.h validates them);
/// `source` names the file in errors.
Result<std::map<std::string, ir::Tensor>> parse_safetensors(std::string_view bytes, std::string_view source);

/// Reads a safetensors file into tensors by name.
Result<std::map<std::string, ir::Tensor>> read_safetensors(const std::string& path);

}  // namespace kiln
