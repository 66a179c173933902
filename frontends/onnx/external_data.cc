#include "frontends/onnx/external_data.h"

#include <fmt/format.h>

#include <filesystem>
#include <optional>

#include "base/file.h"

namespace kiln::onnx_import {
namespace {

// External data files larger than this are refused before they are read.
constexpr uint64_t kMostExternalBytes = uint64_t{64} << 30;

// A decimal count of bytes, or none.
std::optional<uint64_t> count_of(const std::string& text) {
  if (text.empty() || text.size() > 19 || text.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  return std::stoull(text);
}

}  // namespace

Result<onnx::TensorProto> ExternalData::inline_data(const onnx::TensorProto& proto) {
  if (proto.data_location() != onnx::TensorProto::EXTERNAL) return proto;
  const std::string what = "onnx: tensor '" + proto.name() + "'";
  std::string location;
  std::optional<uint64_t> offset = 0, length;
  for (const onnx::StringStringEntryProto& entry : proto.external_data()) {
    if (entry.key() == "location") {
      location = entry.value();
    } else if (entry.key() == "offset") {
      offset = count_of(entry.value());
      if (!offset)
        return make_error(fmt::format("{} has external data at offset '{}', not a count", what, entry.value()));
    } else if (entry.key() == "length") {
      length = count_of(entry.value());
      if (!length)
        return make_error(fmt::format("{} has external data of length '{}', not a count", what, entry.value()));
    } else if (entry.key() != "checksum") {
      return make_error(fmt::format("{} has external data with key '{}', which kiln does not know", what, entry.key()));
    }
  }
  if (location.empty()) return make_error(what + " keeps its data in an external file but names none (no 'location')");
  const std::filesystem::path relative(location);
  for (const auto& part : relative)
    if (part == "..")
      return make_error(fmt::format("{} names external data at '{}', outside the model's directory", what, location));
  if (relative.is_absolute())
    return make_error(fmt::format("{} names external data at '{}', outside the model's directory", what, location));
  if (model_dir_.empty())
    return make_error(
        fmt::format("{} keeps its data in the external file '{}'; import the model from its file, "
                    "whose directory holds it",
                    what, location));
  auto file = files_.find(location);
  if (file == files_.end()) {
    auto bytes = read_file((std::filesystem::path(model_dir_) / relative).string(), kMostExternalBytes);
    if (!bytes.ok())
      return make_error(fmt::format("{} keeps its data in '{}': {}", what, location, bytes.error().message));
    file = files_.emplace(location, std::move(*bytes)).first;
  }
  const std::string& bytes = file->second;
  const uint64_t size = bytes.size();
  const uint64_t take = length.value_or(*offset <= size ? size - *offset : 0);
  if (*offset > size || take > size - *offset)
    return make_error(fmt::format("{} keeps its data at bytes [{}, {}) of '{}', which has {}", what, *offset,
                                  *offset + take, location, size));
  onnx::TensorProto copy = proto;
  copy.clear_external_data();
  copy.set_data_location(onnx::TensorProto::DEFAULT);
  copy.set_raw_data(bytes.substr(*offset, take));
  return copy;
}

}  // namespace kiln::onnx_import
