#include "runtime/format/safetensors.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/allocation.h"
#include "base/file.h"
#include "base/shape_limit.h"

namespace kiln::format {
namespace {

constexpr uint64_t kMaxHeaderBytes = 100'000'000;

struct DtypeSize {
  std::string_view name;
  int bytes;
};

constexpr DtypeSize kDtypes[] = {{"F64", 8},     {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"F8_E4M3", 1},
                                 {"F8_E5M2", 1}, {"I64", 8}, {"I32", 4}, {"I16", 2},  {"I8", 1},
                                 {"U64", 8},     {"U32", 4}, {"U16", 2}, {"U8", 1},   {"BOOL", 1}};

Error bad(std::string_view source, const std::string& why) {
  return make_error(std::string(source) + ": not a usable safetensors file: " + why);
}

std::string in_quotes(const std::string& name) { return "\"" + name + "\""; }

// A tensor as the header describes it.
struct Entry {
  SafetensorsTensor tensor;  // without data
  uint64_t begin = 0, end = 0;
};

uint64_t header_size_of(std::string_view bytes) {
  uint64_t size = 0;
  std::memcpy(&size, bytes.data(), 8);
  return size;
}

// The tensors the header describes, sorted by offset and checked to cover the data
// exactly; `data_bytes` is set to the size of the data they cover.
Result<std::vector<Entry>> parse_header(std::string_view header_text, std::string_view source, uint64_t& data_bytes) {
  nlohmann::json header = nlohmann::json::parse(header_text, nullptr, /*allow_exceptions=*/false);
  if (!header.is_object()) return bad(source, "the header is not a JSON object");
  std::vector<Entry> entries;
  for (auto& [name, spec] : header.items()) {
    if (name == "__metadata__") continue;
    if (!spec.is_object() || !spec.contains("dtype") || !spec.contains("shape") || !spec.contains("data_offsets") ||
        !spec["dtype"].is_string() || !spec["shape"].is_array() || !spec["data_offsets"].is_array() ||
        spec["data_offsets"].size() != 2)
      return bad(source, "tensor " + in_quotes(name) + " needs a dtype, a shape and two data_offsets");
    Entry e;
    e.tensor.name = name;
    e.tensor.dtype = spec["dtype"].get<std::string>();
    const int size = safetensors_dtype_bytes(e.tensor.dtype);
    if (size == 0)
      return bad(source,
                 "tensor " + in_quotes(name) + " has dtype " + e.tensor.dtype + ", which is not a safetensors dtype");
    if (spec["shape"].size() > 16)
      return bad(source,
                 "tensor " + in_quotes(name) + " has rank " + std::to_string(spec["shape"].size()) + ", more than 16");
    for (auto& d : spec["shape"]) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > static_cast<uint64_t>(kMaxElements))
        return bad(source, "tensor " + in_quotes(name) + " has a dimension that is not an integer from 0 to 2^40");
      e.tensor.shape.push_back(static_cast<int64_t>(d.get<uint64_t>()));
    }
    if (!dims_within_limit(e.tensor.shape))
      return bad(source, "tensor " + in_quotes(name) + " " + dims_limit_error(e.tensor.shape));
    uint64_t elements = 1;
    for (int64_t d : e.tensor.shape) elements *= static_cast<uint64_t>(d);
    if (!spec["data_offsets"][0].is_number_unsigned() || !spec["data_offsets"][1].is_number_unsigned())
      return bad(source, "tensor " + in_quotes(name) + " has data_offsets that are not non-negative integers");
    e.begin = spec["data_offsets"][0].get<uint64_t>();
    e.end = spec["data_offsets"][1].get<uint64_t>();
    if (e.begin > e.end)
      return bad(source, "tensor " + in_quotes(name) + " has data_offsets [" + std::to_string(e.begin) + ", " +
                             std::to_string(e.end) + ")");
    if (e.end - e.begin != elements * static_cast<uint64_t>(size))
      return bad(source, "tensor " + in_quotes(name) + " is " + e.tensor.dtype + " with " + std::to_string(elements) +
                             " elements in " + std::to_string(e.end - e.begin) + " bytes of data, not " +
                             std::to_string(elements * static_cast<uint64_t>(size)));
    entries.push_back(std::move(e));
  }
  // The data must be covered exactly, tensor after tensor, with no gaps or overlaps.
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.begin < b.begin; });
  uint64_t cursor = 0;
  for (const Entry& e : entries) {
    if (e.begin != cursor)
      return bad(source, "tensor " + in_quotes(e.tensor.name) + " starts at " + std::to_string(e.begin) + ", not at " +
                             std::to_string(cursor) + " (offsets must be contiguous)");
    cursor = e.end;
  }
  data_bytes = cursor;
  return entries;
}

Result<std::vector<SafetensorsTensor>> with_data(std::vector<Entry> entries, std::string_view data,
                                                 std::string_view source) {
  std::vector<SafetensorsTensor> tensors;
  for (Entry& e : entries) {
    KILN_RETURN_IF_ERROR(resize_or_error(e.tensor.data, e.end - e.begin,
                                         "tensor " + in_quotes(e.tensor.name) + " of " + std::string(source)));
    if (e.end > e.begin) std::memcpy(e.tensor.data.data(), data.data() + e.begin, e.end - e.begin);
    tensors.push_back(std::move(e.tensor));
  }
  return tensors;
}

}  // namespace

int safetensors_dtype_bytes(std::string_view dtype) {
  for (const DtypeSize& d : kDtypes)
    if (d.name == dtype) return d.bytes;
  return 0;
}

Result<std::vector<SafetensorsTensor>> parse_safetensors(std::string_view bytes, std::string_view source) {
  if (bytes.size() < 8) return bad(source, "it is shorter than its 8-byte header size");
  const uint64_t header_size = header_size_of(bytes);
  if (header_size > kMaxHeaderBytes)
    return bad(source, "the header is " + std::to_string(header_size) + " bytes, more than the 100 MB limit");
  if (header_size > bytes.size() - 8) return bad(source, "the header runs past the end of the file");
  uint64_t data_bytes = 0;
  KILN_ASSIGN_OR_RETURN(std::vector<Entry> entries, parse_header(bytes.substr(8, header_size), source, data_bytes));
  std::string_view data = bytes.substr(8 + header_size);
  if (data_bytes > data.size())
    return bad(source, "it is truncated: its tensors need " + std::to_string(data_bytes) + " data bytes, it holds " +
                           std::to_string(data.size()));
  if (data_bytes < data.size())
    return bad(source, "it has trailing bytes: " + std::to_string(data.size() - data_bytes) +
                           " data bytes follow the last tensor");
  return with_data(std::move(entries), data, source);
}

Result<std::vector<SafetensorsTensor>> read_safetensors_file(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(InputFile file, InputFile::open(path));
  std::string bytes;
  KILN_RETURN_IF_ERROR(file.read(bytes, 8));
  if (bytes.size() < 8) return bad(path, "it is shorter than its 8-byte header size");
  const uint64_t header_size = header_size_of(bytes);
  if (header_size > kMaxHeaderBytes)
    return bad(path, "the header is " + std::to_string(header_size) + " bytes, more than the 100 MB limit");
  KILN_RETURN_IF_ERROR(file.read(bytes, header_size));
  if (bytes.size() < 8 + header_size) return bad(path, "the header runs past the end of the file");
  uint64_t data_bytes = 0;
  KILN_ASSIGN_OR_RETURN(std::vector<Entry> entries, parse_header(std::string_view(bytes).substr(8), path, data_bytes));
  KILN_RETURN_IF_ERROR(file.read(bytes, data_bytes));
  const uint64_t have = bytes.size() - 8 - header_size;
  if (have < data_bytes)
    return bad(path, "it is truncated: its tensors need " + std::to_string(data_bytes) + " data bytes, it holds " +
                         std::to_string(have));
  KILN_ASSIGN_OR_RETURN(bool end, file.at_end());
  if (!end) return bad(path, "it has trailing bytes: more data follows the last tensor");
  return with_data(std::move(entries), std::string_view(bytes).substr(8 + header_size), path);
}

std::string serialize_safetensors(const std::vector<SafetensorsTensor>& tensors) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  uint64_t offset = 0;
  for (const SafetensorsTensor& t : tensors) {
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.data.size()}}};
    offset += t.data.size();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-byte aligned, as safetensors writes it
  const uint64_t size = text.size();
  std::string out(8, '\0');
  std::memcpy(out.data(), &size, 8);
  out += text;
  for (const SafetensorsTensor& t : tensors) out.append(reinterpret_cast<const char*>(t.data.data()), t.data.size());
  return out;
}

Status write_safetensors_file(const std::string& path, const std::vector<SafetensorsTensor>& tensors) {
  return write_file(path, serialize_safetensors(tensors));
}

}  // namespace kiln::format
