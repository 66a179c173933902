#include "runtime/npy.h"

#include <cstring>
#include <fstream>

#include "base/allocation.h"
#include "base/file.h"
#include "base/shape_limit.h"

namespace kiln::runtime {
namespace {

constexpr std::string_view kMagic = "\x93NUMPY";

struct Descr {
  std::string_view npy;
  std::string_view kiln;
  int size;
};

constexpr Descr kDescrs[] = {
    {"<f4", "f32", 4}, {"<f8", "f64", 8},  {"<f2", "f16", 2}, {"|V2", "bf16", 2}, {"<i4", "i32", 4},
    {"<i8", "i64", 8}, {"|b1", "bool", 1}, {"|i1", "i8", 1},  {"|u1", "u8", 1},
};

Error npy_error(std::string_view source, const std::string& why) {
  return make_error(std::string(source) + ": not a usable .npy file: " + why);
}

// A minimal reader for the header's Python dict literal, e.g.
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
class HeaderReader {
 public:
  explicit HeaderReader(std::string_view s) : s_(s) {}

  /// Why the shape was refused, when it was ("" for any other refusal).
  const std::string& shape_error() const { return shape_error_; }

  bool parse(std::string& descr, bool& fortran, std::vector<int64_t>& shape, bool& has_descr, bool& has_fortran,
             bool& has_shape) {
    skip();
    if (!eat('{')) return false;
    while (true) {
      skip();
      if (eat('}')) return true;
      std::string key;
      if (!string(key)) return false;
      skip();
      if (!eat(':')) return false;
      skip();
      if (key == "descr") {
        if (!string(descr)) return false;
        has_descr = true;
      } else if (key == "fortran_order") {
        if (s_.substr(pos_, 4) == "True") {
          fortran = true;
          pos_ += 4;
        } else if (s_.substr(pos_, 5) == "False") {
          fortran = false;
          pos_ += 5;
        } else return false;
        has_fortran = true;
      } else if (key == "shape") {
        shape.clear();  // a key named again replaces its value, as numpy's dict reads it
        if (!tuple(shape)) return false;
        has_shape = true;
      } else {
        return false;
      }
      skip();
      if (eat(',')) continue;
      skip();
      if (eat('}')) return true;
      return false;
    }
  }

 private:
  void skip() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n')) ++pos_;
  }
  bool eat(char c) {
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool string(std::string& out) {
    if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"')) return false;
    char q = s_[pos_++];
    size_t end = s_.find(q, pos_);
    if (end == std::string_view::npos) return false;
    out = std::string(s_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return true;
  }
  bool tuple(std::vector<int64_t>& out) {
    if (!eat('(')) return false;
    while (true) {
      skip();
      if (eat(')')) return true;
      int64_t v = 0;
      size_t start = pos_;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
        if (v > kMaxElements) {
          shape_error_ = "a dimension of the shape is more than 2^40";
          return false;
        }
        v = v * 10 + (s_[pos_++] - '0');
      }
      if (pos_ == start) {
        if (pos_ < s_.size() && s_[pos_] == '-') shape_error_ = "the shape has a negative dimension";
        return false;
      }
      if (out.size() >= 16) {
        shape_error_ = "the shape has more than 16 dimensions";
        return false;
      }
      out.push_back(v);
      skip();
      if (eat(',')) continue;
      skip();
      if (eat(')')) return true;
      return false;
    }
  }

  std::string_view s_;
  size_t pos_ = 0;
  std::string shape_error_;
};

}  // namespace

int npy_element_size(std::string_view dtype) {
  for (const Descr& d : kDescrs)
    if (d.kiln == dtype) return d.size;
  return 0;
}

namespace {

// What a .npy header says: the element type, the shape and where the data lies.
struct NpyHeader {
  NpyArray array;  // without data
  size_t data_start = 0;
  uint64_t data_bytes = 0;
};

// The bytes before the data (magic, version, header length, header), from the first 12
// bytes of the file; 0 when they are not a .npy prefix (parse_header says why).
size_t prefix_bytes(std::string_view bytes) {
  if (bytes.size() < 10 || bytes.substr(0, 6) != kMagic) return 0;
  int major = static_cast<unsigned char>(bytes[6]);
  if (major == 1)
    return 10 + (static_cast<unsigned char>(bytes[8]) | static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8);
  if ((major == 2 || major == 3) && bytes.size() >= 12) {
    size_t header_len = 0;
    for (int i = 0; i < 4; ++i) header_len |= static_cast<size_t>(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
    return 12 + header_len;
  }
  return 0;
}

// Parses the header from a prefix of the file that holds at least the header.
Result<NpyHeader> parse_header(std::string_view bytes, std::string_view source) {
  if (bytes.size() < 10 || bytes.substr(0, 6) != kMagic)
    return npy_error(source, "it does not start with the .npy magic \\x93NUMPY");
  int major = static_cast<unsigned char>(bytes[6]);
  size_t header_len, header_start;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) | static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8;
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return npy_error(source, "the header is truncated");
    header_len = 0;
    for (int i = 0; i < 4; ++i) header_len |= static_cast<size_t>(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
    header_start = 12;
  } else {
    return npy_error(source, "format version " + std::to_string(major) + " is not supported (1, 2 or 3)");
  }
  if (header_len > bytes.size() - header_start) return npy_error(source, "the header is truncated");
  std::string descr;
  bool fortran = false, has_descr = false, has_fortran = false, has_shape = false;
  NpyHeader header;
  HeaderReader reader(bytes.substr(header_start, header_len));
  if (!reader.parse(descr, fortran, header.array.shape, has_descr, has_fortran, has_shape) || !has_descr ||
      !has_fortran || !has_shape)
    return npy_error(source, reader.shape_error().empty()
                                 ? "the header is not a dict with 'descr', 'fortran_order' and 'shape'"
                                 : reader.shape_error());
  if (fortran) return npy_error(source, "it is in Fortran order; save it in C order (np.ascontiguousarray)");
  if (descr == "<V2") descr = "|V2";
  if (descr == "<b1") descr = "|b1";
  const Descr* found = nullptr;
  for (const Descr& d : kDescrs)
    if (d.npy == descr) found = &d;
  if (!found)
    return npy_error(source, "dtype '" + descr +
                                 "' is not supported (f32 '<f4', f64 '<f8', f16 '<f2', bf16 '|V2', i32 '<i4', i64 "
                                 "'<i8', bool '|b1', i8 '|i1', u8 '|u1')");
  header.array.dtype = std::string(found->kiln);
  if (!dims_within_limit(header.array.shape))
    return npy_error(source, "the shape " + dims_limit_error(header.array.shape));
  int64_t count = 1;
  for (int64_t d : header.array.shape) count *= d;
  header.data_start = header_start + header_len;
  header.data_bytes = static_cast<uint64_t>(count) * static_cast<uint64_t>(found->size);
  return header;
}

// The data must be exactly what the header says: shorter is truncated, longer has
// trailing bytes.
Status check_data_size(uint64_t have, uint64_t want, std::string_view source) {
  if (have < want)
    return npy_error(source, "it is truncated: it holds " + std::to_string(have) + " data bytes, the header says " +
                                 std::to_string(want));
  if (have > want)
    return npy_error(source, "it has trailing bytes: " + std::to_string(have) + " data bytes, where the header says " +
                                 std::to_string(want));
  return Status::Ok();
}

}  // namespace

Result<NpyArray> parse_npy(std::string_view bytes, std::string_view source) {
  KILN_ASSIGN_OR_RETURN(NpyHeader header, parse_header(bytes, source));
  KILN_RETURN_IF_ERROR(check_data_size(bytes.size() - header.data_start, header.data_bytes, source));
  NpyArray array = std::move(header.array);
  KILN_RETURN_IF_ERROR(resize_or_error(array.data, header.data_bytes, "the data of " + std::string(source)));
  std::memcpy(array.data.data(), bytes.data() + header.data_start, header.data_bytes);
  return array;
}

std::string serialize_npy(const NpyArray& array) {
  std::string descr = "<f4";
  for (const Descr& d : kDescrs)
    if (d.kiln == array.dtype) descr = std::string(d.npy);
  std::string shape;  // "()", "(2,)", "(2, 3)" as Python writes tuples
  for (size_t i = 0; i < array.shape.size(); ++i) shape += (i ? ", " : "") + std::to_string(array.shape[i]);
  if (array.shape.size() == 1) shape += ',';
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + shape + "), }";
  // Pad so the data starts on a 64-byte boundary; the header ends with '\n'.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out(kMagic);
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  out.append(reinterpret_cast<const char*>(array.data.data()), array.data.size());
  return out;
}

Result<NpyArray> read_npy_file(const std::string& path) {
  // Read only as far as the header says: a device that never ends (/dev/zero) or a file
  // far longer than its header is refused without reading it all.
  KILN_ASSIGN_OR_RETURN(InputFile file, InputFile::open(path));
  std::string prefix;
  KILN_RETURN_IF_ERROR(file.read(prefix, 12));
  const size_t header_bytes = prefix_bytes(prefix);
  if (header_bytes > prefix.size()) KILN_RETURN_IF_ERROR(file.read(prefix, header_bytes - prefix.size()));
  KILN_ASSIGN_OR_RETURN(NpyHeader header, parse_header(prefix, path));
  NpyArray array = std::move(header.array);
  array.data.assign(prefix.begin() + static_cast<std::ptrdiff_t>(header.data_start), prefix.end());
  if (array.data.size() < header.data_bytes)
    KILN_RETURN_IF_ERROR(file.read(array.data, header.data_bytes - array.data.size()));
  KILN_RETURN_IF_ERROR(check_data_size(array.data.size(), header.data_bytes, path));
  KILN_ASSIGN_OR_RETURN(bool end, file.at_end());
  if (!end) {
    uint64_t total = file.reported_size().value_or(0);
    return npy_error(path, "it has trailing bytes: more data than the " + std::to_string(header.data_bytes) +
                               " bytes its header says" +
                               (total ? " (the file is " + std::to_string(total) + " bytes)" : ""));
  }
  return array;
}

Status write_npy_file(const std::string& path, const NpyArray& array) { return write_file(path, serialize_npy(array)); }

}  // namespace kiln::runtime
