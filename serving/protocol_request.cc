// Parsing KServe v2 inference requests, JSON and binary.
#include <cmath>
#include <cstring>
#include <limits>

#include <nlohmann/json.hpp>

#include "base/half_float.h"
#include "serving/protocol.h"

namespace kiln::serving {

namespace {

using json = nlohmann::json;
using runtime::ElementType;

constexpr std::pair<ElementType, std::string_view> kDatatypes[] = {
    {ElementType::F32, "FP32"},  {ElementType::F64, "FP64"},  {ElementType::F16, "FP16"},
    {ElementType::BF16, "BF16"}, {ElementType::I32, "INT32"}, {ElementType::I64, "INT64"},
    {ElementType::Bool, "BOOL"}, {ElementType::I8, "INT8"},   {ElementType::U8, "UINT8"},
};

Error bad(std::string message) { return http_error(kBadRequest, std::move(message)); }

// Text from the request, quoted for an error message (cut to a readable length).
std::string excerpt(std::string_view text) {
  constexpr size_t kMost = 64;
  return "'" + std::string(text.substr(0, kMost)) + (text.size() > kMost ? "...'" : "'");
}

// nlohmann parses any depth, building every level in memory; a body of many '[' would
// take far more memory than its bytes. Strings are skipped, escapes included.
Status check_nesting(std::string_view text) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth)
        return bad("the request's JSON nests deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return Status::Ok();
}

std::string kind_of(const json& j) { return j.type_name(); }

// The element at `index` of input `name` as a double, for the float types.
Result<double> float_element(const json& j, const std::string& where) {
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) {
    const std::string& s = j.get_ref<const std::string&>();
    if (s == "NaN") return std::numeric_limits<double>::quiet_NaN();
    if (s == "Infinity") return std::numeric_limits<double>::infinity();
    if (s == "-Infinity") return -std::numeric_limits<double>::infinity();
    return bad(where + " is the string " + excerpt(s) +
               "; a float is a number, \"NaN\", \"Infinity\" or \"-Infinity\"");
  }
  return bad(where + " is " + kind_of(j) + ", not a number");
}

// Appends one element of `type` converted from JSON.
Status append_element(const json& j, ElementType type, const std::string& where, std::vector<uint8_t>& out) {
  auto put = [&out](const auto& v) {
    const size_t at = out.size();
    out.resize(at + sizeof(v));
    std::memcpy(out.data() + at, &v, sizeof(v));
  };
  auto in_range = [&](double v, double most) -> Status {
    if (std::isfinite(v) && std::fabs(v) > most)
      return bad(where + " is " + json(v).dump() + ", outside " + std::string(datatype_name(type)) + "'s range");
    return Status::Ok();
  };
  switch (type) {
    case ElementType::F64: {
      KILN_ASSIGN_OR_RETURN(double v, float_element(j, where));
      put(v);
      return Status::Ok();
    }
    case ElementType::F32:
    case ElementType::F16:
    case ElementType::BF16: {
      KILN_ASSIGN_OR_RETURN(double v, float_element(j, where));
      // Each type's largest finite value (bf16's: 0x1.fep127, where f32's would round to
      // bf16's infinity).
      const double most = type == ElementType::F16    ? 65504.0
                          : type == ElementType::BF16 ? 0x1.fep127
                                                      : std::numeric_limits<float>::max();
      KILN_RETURN_IF_ERROR(in_range(v, most));
      const float f = static_cast<float>(v);
      if (type == ElementType::F32) put(f);
      else put(type == ElementType::F16 ? float_to_f16(f) : float_to_bf16(f));
      return Status::Ok();
    }
    case ElementType::I8:
    case ElementType::U8:
    case ElementType::I32:
    case ElementType::I64: {
      if (!j.is_number_integer()) return bad(where + " is " + kind_of(j) + ", not an integer");
      const int64_t lo = type == ElementType::I8    ? INT8_MIN
                         : type == ElementType::U8  ? 0
                         : type == ElementType::I32 ? INT32_MIN
                                                    : INT64_MIN;
      const uint64_t hi = type == ElementType::I8    ? INT8_MAX
                          : type == ElementType::U8  ? UINT8_MAX
                          : type == ElementType::I32 ? INT32_MAX
                                                     : INT64_MAX;
      const bool fits = j.is_number_unsigned() ? j.get<uint64_t>() <= hi : j.get<int64_t>() >= lo;
      if (!fits) return bad(where + " is " + j.dump() + ", outside " + std::string(datatype_name(type)) + "'s range");
      if (type == ElementType::I8) put(static_cast<int8_t>(j.get<int64_t>()));
      else if (type == ElementType::U8) put(static_cast<uint8_t>(j.get<int64_t>()));
      else if (type == ElementType::I32) put(static_cast<int32_t>(j.get<int64_t>()));
      else put(j.is_number_unsigned() ? static_cast<int64_t>(j.get<uint64_t>()) : j.get<int64_t>());
      return Status::Ok();
    }
    case ElementType::Bool:
      if (!j.is_boolean()) return bad(where + " is " + kind_of(j) + ", not true or false");
      put(static_cast<uint8_t>(j.get<bool>() ? 1 : 0));
      return Status::Ok();
  }
  return bad(where + " has an element type the server does not know");
}

// Appends `data`, flat or nested as arrays, element by element.
Status append_data(const json& data, ElementType type, const std::string& name, int64_t expected,
                   std::vector<uint8_t>& out, int64_t& count) {
  if (!data.is_array()) {
    if (count >= expected) return bad("input '" + name + "' has more data than its shape holds");
    KILN_RETURN_IF_ERROR(
        append_element(data, type, "element " + std::to_string(count) + " of input '" + name + "'", out));
    ++count;
    return Status::Ok();
  }
  for (const json& item : data) KILN_RETURN_IF_ERROR(append_data(item, type, name, expected, out, count));
  return Status::Ok();
}

Result<std::vector<int64_t>> shape_of(const json& input, const std::string& name) {
  auto it = input.find("shape");
  if (it == input.end() || !it->is_array()) return bad("input '" + name + "' has no \"shape\" array");
  std::vector<int64_t> shape;
  if (it->size() > 16) return bad("input '" + name + "' has rank " + std::to_string(it->size()) + ", more than 16");
  for (const json& d : *it) {
    if (!d.is_number_integer())
      return bad("input '" + name + "' has a shape dim that is " + kind_of(d) + ", not an integer");
    if (d.is_number_integer() && !d.is_number_unsigned() && d.get<int64_t>() < 0)
      return bad("input '" + name + "' has the negative dim " + d.dump() + " in its shape " + input["shape"].dump());
    if (d.is_number_unsigned() && d.get<uint64_t>() > (uint64_t{1} << 40))
      return bad("input '" + name + "' has the dim " + d.dump() + " in its shape, over 2^40");
    shape.push_back(d.get<int64_t>());
  }
  return shape;
}

// The elements of a shape whose dims are each at most 2^40, or an error past 2^40 in all.
Result<int64_t> elements_of(const std::vector<int64_t>& shape, const std::string& name) {
  int64_t elements = 1;
  for (int64_t d : shape) {
    if (d != 0 && elements > (int64_t{1} << 40) / d)
      return bad("input '" + name + "' has a shape of more than 2^40 elements");
    elements *= d;
  }
  return elements;
}

bool true_parameter(const json& object, const char* key) {
  auto params = object.find("parameters");
  if (params == object.end() || !params->is_object()) return false;
  auto it = params->find(key);
  return it != params->end() && it->is_boolean() && it->get<bool>();
}

// The input's binary_data_size parameter, or -1 where its data is JSON.
Result<int64_t> binary_size(const json& input, const std::string& name) {
  auto params = input.find("parameters");
  if (params == input.end()) return -1;
  if (!params->is_object())
    return bad("input '" + name + "' has \"parameters\" that are " + kind_of(*params) + ", not an object");
  auto it = params->find("binary_data_size");
  if (it == params->end()) return -1;
  if (!it->is_number_unsigned()) return bad("input '" + name + "' has a binary_data_size that is not a count of bytes");
  if (it->get<uint64_t>() > (uint64_t{1} << 40)) return bad("input '" + name + "' has a binary_data_size over 2^40");
  return static_cast<int64_t>(it->get<uint64_t>());
}

Result<RequestInput> parse_input(const json& input, size_t index, std::string_view& binary) {
  if (!input.is_object()) return bad("input " + std::to_string(index) + " is " + kind_of(input) + ", not an object");
  auto name_it = input.find("name");
  if (name_it == input.end() || !name_it->is_string())
    return bad("input " + std::to_string(index) + " has no \"name\" string");
  RequestInput in;
  in.name = name_it->get<std::string>();
  auto type_it = input.find("datatype");
  if (type_it == input.end() || !type_it->is_string()) return bad("input '" + in.name + "' has no \"datatype\" string");
  auto type = datatype_named(type_it->get_ref<const std::string&>());
  if (!type)
    return bad("input '" + in.name + "' has the datatype " + excerpt(type_it->get_ref<const std::string&>()) +
               "; the server takes FP32, FP64, FP16, BF16, INT32, INT64, INT8, UINT8 and BOOL");
  in.type = *type;
  KILN_ASSIGN_OR_RETURN(in.shape, shape_of(input, in.name));
  KILN_ASSIGN_OR_RETURN(int64_t elements, elements_of(in.shape, in.name));
  const int64_t bytes = elements * runtime::element_bytes(in.type);
  KILN_ASSIGN_OR_RETURN(int64_t binary_bytes, binary_size(input, in.name));
  if (binary_bytes >= 0) {
    if (input.contains("data")) return bad("input '" + in.name + "' has both \"data\" and a binary_data_size");
    if (binary_bytes != bytes)
      return bad("input '" + in.name + "' has a binary_data_size of " + std::to_string(binary_bytes) +
                 " bytes, but its shape " + json(in.shape).dump() + " of " + std::string(datatype_name(in.type)) +
                 " holds " + std::to_string(bytes));
    if (static_cast<uint64_t>(binary_bytes) > binary.size())
      return bad("input '" + in.name + "' has a binary_data_size of " + std::to_string(binary_bytes) +
                 " bytes, past the " + std::to_string(binary.size()) + " bytes of binary data left in the body");
    in.data.assign(binary.begin(), binary.begin() + binary_bytes);
    binary.remove_prefix(static_cast<size_t>(binary_bytes));
    return in;
  }
  auto data = input.find("data");
  if (data == input.end()) return bad("input '" + in.name + "' has no \"data\" (and no binary_data_size)");
  // Each element takes at least two bytes of JSON text, so a shape the body cannot hold
  // is refused before anything is allocated for it.
  if (!data->is_array() && !data->is_primitive()) return bad("input '" + in.name + "' has \"data\" that is an object");
  in.data.reserve(static_cast<size_t>(std::min<int64_t>(bytes, int64_t{1} << 20)));
  int64_t count = 0;
  KILN_RETURN_IF_ERROR(append_data(*data, in.type, in.name, elements, in.data, count));
  if (count != elements)
    return bad("input '" + in.name + "' has " + std::to_string(count) + " elements of data, but its shape " +
               json(in.shape).dump() + " holds " + std::to_string(elements));
  return in;
}

Result<InferRequest> parse_json_request(std::string_view text, std::string_view binary) {
  // The JSON parser ends its input at a NUL byte, which JSON text never holds: binary data
  // sent without its Inference-Header-Content-Length, or bytes after the document.
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos)
    return bad("the request's JSON has a NUL byte at offset " + std::to_string(nul) +
               " (binary tensor data needs an Inference-Header-Content-Length header)");
  KILN_RETURN_IF_ERROR(check_nesting(text));
  json body;
  try {
    body = json::parse(text);
  } catch (const json::exception& e) {
    // "[json.exception.parse_error.101] parse error at ...": the part after the tag.
    std::string_view what = e.what();
    if (const size_t tag = what.find("] "); tag != std::string_view::npos) what.remove_prefix(tag + 2);
    return bad("the request is not valid JSON: " + std::string(what));
  }
  if (!body.is_object()) return bad("the request is " + kind_of(body) + ", not a JSON object");
  InferRequest request;
  if (auto id = body.find("id"); id != body.end()) {
    if (!id->is_string()) return bad("the request's \"id\" is " + kind_of(*id) + ", not a string");
    request.id = id->get<std::string>();
  }
  request.binary_outputs = true_parameter(body, "binary_data_output");
  auto inputs = body.find("inputs");
  if (inputs == body.end() || !inputs->is_array()) return bad("the request has no \"inputs\" array");
  for (size_t i = 0; i < inputs->size(); ++i) {
    KILN_ASSIGN_OR_RETURN(RequestInput in, parse_input((*inputs)[i], i, binary));
    for (const RequestInput& other : request.inputs)
      if (other.name == in.name) return bad("input '" + in.name + "' is given twice");
    request.inputs.push_back(std::move(in));
  }
  if (!binary.empty())
    return bad(std::to_string(binary.size()) + " bytes of binary data follow the last binary input's");
  if (auto outputs = body.find("outputs"); outputs != body.end()) {
    if (!outputs->is_array()) return bad("the request's \"outputs\" is " + kind_of(*outputs) + ", not an array");
    for (size_t i = 0; i < outputs->size(); ++i) {
      const json& o = (*outputs)[i];
      if (!o.is_object() || !o.contains("name") || !o["name"].is_string())
        return bad("output " + std::to_string(i) + " of the request has no \"name\" string");
      RequestOutput out{o["name"].get<std::string>(), request.binary_outputs || true_parameter(o, "binary_data")};
      for (const RequestOutput& other : request.outputs)
        if (other.name == out.name) return bad("output '" + out.name + "' is asked for twice");
      request.outputs.push_back(std::move(out));
    }
  }
  return request;
}

}  // namespace

std::string_view datatype_name(ElementType type) {
  for (const auto& [t, name] : kDatatypes)
    if (t == type) return name;
  return "UNKNOWN";
}

std::optional<ElementType> datatype_named(std::string_view name) {
  for (const auto& [t, n] : kDatatypes)
    if (n == name) return t;
  return std::nullopt;
}

Result<uint64_t> parse_json_header_length(std::string_view value, uint64_t body_bytes) {
  uint64_t bytes = 0;
  if (value.empty() || value.size() > 19)
    return bad("the Inference-Header-Content-Length " + excerpt(value) + " is not a count of bytes");
  for (char c : value) {
    if (c < '0' || c > '9')
      return bad("the Inference-Header-Content-Length " + excerpt(value) + " is not a count of bytes");
    bytes = bytes * 10 + static_cast<uint64_t>(c - '0');
  }
  if (bytes > body_bytes)
    return bad("the Inference-Header-Content-Length of " + std::to_string(bytes) + " bytes points past the body's " +
               std::to_string(body_bytes));
  return bytes;
}

Result<InferRequest> parse_infer_request(std::string_view body, std::optional<uint64_t> json_bytes) {
  if (!json_bytes) return parse_json_request(body, {});
  return parse_json_request(body.substr(0, *json_bytes), body.substr(*json_bytes));
}

}  // namespace kiln::serving
