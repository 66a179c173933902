// Tensors as text, numpy-style: nested brackets, one row per line, and tensors of more
// than 1,000 elements abbreviated to the first and last 3 of each dim around "...".
// Runtime only: kiln run and kiln-run print with it, and so does kiln eval.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::cli {

/// The text of a tensor of element type `dtype` ("f32", "bf16", "i64", "bool", ...),
/// `shape`, and little-endian C-order `bytes` (exactly its size). Lines after the first
/// are indented by `indent` spaces, to sit under a prefix of that width.
std::string format_tensor(std::string_view dtype, const std::vector<int64_t>& shape, std::span<const uint8_t> bytes,
                          size_t indent = 0);

}  // namespace kiln::cli
