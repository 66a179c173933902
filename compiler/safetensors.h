// Reading weights from a safetensors file.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "base/result.h"
#include "ir/tensor.h"

namespace kiln {

/// Parses safetensors bytes (an 8-byte little-endian header size, a JSON header naming
/// each tensor's dtype, shape and [begin, end) data offsets, then the data), validated
/// as safetensors itself does: the header at most 100 MB, offsets in order, contiguous,
/// overflow-checked and inside the file, bytes = shape product x dtype size. `source`
/// names the file in errors.
Result<std::map<std::string, ir::Tensor>> parse_safetensors(std::string_view bytes, std::string_view source);

}  // namespace kiln
