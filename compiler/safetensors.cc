#include "compiler/safetensors.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace kiln {
namespace {

std::optional<ir::DType> dtype_of(const std::string& s) {
  if (s == "F32") return ir::DType::F32;
  if (s == "F64") return ir::DType::F64;
  if (s == "F16") return ir::DType::F16;
  if (s == "BF16") return ir::DType::BF16;
  if (s == "I32") return ir::DType::I32;
  if (s == "I64") return ir::DType::I64;
  if (s == "BOOL") return ir::DType::Bool;
  return std::nullopt;
}

}  // namespace

Result<std::map<std::string, ir::Tensor>> parse_safetensors(std::string_view bytes, std::string_view source) {
  auto bad = [&](const std::string& why) { return make_error(fmt::format("{}: not a usable safetensors file: {}", source, why)); };
  if (bytes.size() < 8) return bad("it is shorter than its 8-byte header size");
  uint64_t header_size;
  std::memcpy(&header_size, bytes.data(), 8);
  if (header_size > 100'000'000) return bad(fmt::format("the header is {} bytes, more than the 100 MB limit", header_size));
  if (header_size > bytes.size() - 8) return bad("the header runs past the end of the file");
  nlohmann::json header = nlohmann::json::parse(bytes.substr(8, header_size), nullptr, /*allow_exceptions=*/false);
  if (!header.is_object()) return bad("the header is not a JSON object");
  std::string_view data = bytes.substr(8 + header_size);
  struct Entry {
    std::string name;
    ir::TensorType type;
    uint64_t begin, end;
  };
  std::vector<Entry> entries;
  for (auto& [name, spec] : header.items()) {
    if (name == "__metadata__") continue;
    if (!spec.is_object() || !spec.contains("dtype") || !spec.contains("shape") || !spec.contains("data_offsets") ||
        !spec["dtype"].is_string() || !spec["shape"].is_array() || !spec["data_offsets"].is_array() || spec["data_offsets"].size() != 2)
      return bad(fmt::format("tensor \"{}\" needs a dtype, a shape and two data_offsets", name));
    auto dtype = dtype_of(spec["dtype"].get<std::string>());
    if (!dtype) return bad(fmt::format("tensor \"{}\" has dtype {}, which kiln does not read", name, spec["dtype"].get<std::string>()));
    Entry e{name, {*dtype, {}}, 0, 0};
    uint64_t elements = 1;
    for (auto& d : spec["shape"]) {
      if (!d.is_number_unsigned()) return bad(fmt::format("tensor \"{}\" has a dimension that is not a non-negative integer", name));
      uint64_t extent = d.get<uint64_t>();
      if (extent > 0 && elements > (uint64_t{1} << 40) / extent) return bad(fmt::format("tensor \"{}\" has more than 2^40 elements", name));
      elements *= extent;
      e.type.shape.push_back(static_cast<int64_t>(extent));
    }
    if (!spec["data_offsets"][0].is_number_unsigned() || !spec["data_offsets"][1].is_number_unsigned())
      return bad(fmt::format("tensor \"{}\" has data_offsets that are not non-negative integers", name));
    e.begin = spec["data_offsets"][0].get<uint64_t>();
    e.end = spec["data_offsets"][1].get<uint64_t>();
    if (e.begin > e.end || e.end > data.size()) return bad(fmt::format("tensor \"{}\" has data_offsets [{}, {}) outside the {} data bytes", name, e.begin, e.end, data.size()));
    if (e.end - e.begin != elements * static_cast<uint64_t>(ir::dtype_size(*dtype)))
      return bad(fmt::format("tensor \"{}\" is {} with {} bytes of data, not {}", name, e.type.to_string(), e.end - e.begin,
                             elements * static_cast<uint64_t>(ir::dtype_size(*dtype))));
    entries.push_back(std::move(e));
  }
  // The data must be covered exactly, tensor after tensor, with no gaps or overlaps.
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.begin < b.begin; });
  uint64_t cursor = 0;
  for (const Entry& e : entries) {
    if (e.begin != cursor) return bad(fmt::format("tensor \"{}\" starts at {}, not at {} (offsets must be contiguous)", e.name, e.begin, cursor));
    cursor = e.end;
  }
  if (cursor != data.size()) return bad(fmt::format("{} data bytes follow the last tensor", data.size() - cursor));
  std::map<std::string, ir::Tensor> tensors;
  for (const Entry& e : entries)
    tensors[e.name] = ir::tensor_from_bytes(e.type, reinterpret_cast<const uint8_t*>(data.data() + e.begin));
  return tensors;
}

}  // namespace kiln
