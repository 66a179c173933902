// safetensors files (https://github.com/huggingface/safetensors): the weights format the
// compiler reads params from and the runtime reads and writes state with. Bytes only:
// each side converts the tensors to its own types.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace kiln::format {

/// One tensor of a safetensors file: its name, its dtype as the file spells it ("F32",
/// "BF16", "I8", ...), its shape, and its bytes (C order, little-endian).
struct SafetensorsTensor {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
};

/// safetensors' names of the artifact's element types, in DType order (F32, F64, F16,
/// BF16, I32, I64, Bool, I8, U8).
inline constexpr std::string_view kSafetensorsDtypes[] = {"F32", "F64",  "F16", "BF16", "I32",
                                                          "I64", "BOOL", "I8",  "U8"};

/// Bytes per element of a safetensors dtype name, 0 for a name safetensors does not have.
int safetensors_dtype_bytes(std::string_view dtype);

/// Parses safetensors bytes (an 8-byte little-endian header size, a JSON header naming
/// each tensor's dtype, shape and [begin, end) data offsets, then the data), validated as
/// safetensors itself does: the header at most 100 MB, offsets in order, contiguous,
/// overflow-checked and inside the file, bytes = shape product x dtype size. Tensors come
/// back in file order. `source` names the file in errors ("w.safetensors: not a usable
/// safetensors file: ...").
Result<std::vector<SafetensorsTensor>> parse_safetensors(std::string_view bytes, std::string_view source);

/// Reads a safetensors file, only as far as its header says (a device that never ends,
/// or a file longer than its header, is refused without reading it all).
Result<std::vector<SafetensorsTensor>> read_safetensors_file(const std::string& path);

/// The bytes of a safetensors file holding the tensors, in the order given.
std::string serialize_safetensors(const std::vector<SafetensorsTensor>& tensors);

/// Writes a safetensors file.
Status write_safetensors_file(const std::string& path, const std::vector<SafetensorsTensor>& tensors);

}  // namespace kiln::format
