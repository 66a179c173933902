// Writing KServe v2 responses: inference results (JSON or binary), metadata and errors.
#include <charconv>
#include <cmath>
#include <cstring>

#include <nlohmann/json.hpp>

#include "base/half_float.h"
#include "base/version.h"
#include "serving/protocol.h"

namespace kiln::serving {

namespace {

using json = nlohmann::json;
using runtime::ElementType;

// A JSON string, with invalid UTF-8 replaced rather than refused.
std::string json_string(std::string_view text) {
  return json(std::string(text)).dump(-1, ' ', false, json::error_handler_t::replace);
}

template <class T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

template <class F>
void append_float(std::string& out, F v) {
  if (std::isnan(v)) {
    out += "\"NaN\"";
  } else if (std::isinf(v)) {
    out += v > 0 ? "\"Infinity\"" : "\"-Infinity\"";
  } else {
    char text[32];
    auto [end, ec] = std::to_chars(text, text + sizeof(text), v);
    out.append(text, end);
  }
}

template <class I>
void append_integer(std::string& out, I v) {
  char text[24];
  auto [end, ec] = std::to_chars(text, text + sizeof(text), v);
  out.append(text, end);
}

// The elements of `data` as a flat JSON array.
void append_data(std::string& out, ElementType type, std::span<const uint8_t> data) {
  const size_t size = static_cast<size_t>(runtime::element_bytes(type));
  out += '[';
  for (size_t at = 0; at < data.size(); at += size) {
    if (at) out += ',';
    const uint8_t* p = data.data() + at;
    switch (type) {
      case ElementType::F32: append_float(out, load<float>(p)); break;
      case ElementType::F64: append_float(out, load<double>(p)); break;
      case ElementType::F16: append_float(out, f16_to_float(load<uint16_t>(p))); break;
      case ElementType::BF16: append_float(out, bf16_to_float(load<uint16_t>(p))); break;
      case ElementType::I32: append_integer(out, load<int32_t>(p)); break;
      case ElementType::I64: append_integer(out, load<int64_t>(p)); break;
      case ElementType::Bool: out += *p ? "true" : "false"; break;
      case ElementType::I8: append_integer(out, static_cast<int8_t>(*p)); break;
      case ElementType::U8: append_integer(out, *p); break;
    }
  }
  out += ']';
}

json tensor_metadata(const runtime::TensorInfo& info, bool batched) {
  std::vector<int64_t> shape = info.shape;
  if (batched) shape[0] = -1;
  return {{"name", info.name}, {"datatype", datatype_name(info.type)}, {"shape", shape}};
}

}  // namespace

ResponseBody write_infer_response(std::string_view model_name, std::string_view id,
                                  const std::vector<ResponseOutput>& outputs) {
  ResponseBody response;
  std::string& out = response.body;
  out += "{\"model_name\":" + json_string(model_name);
  if (!id.empty()) out += ",\"id\":" + json_string(id);
  out += ",\"outputs\":[";
  bool any_binary = false;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const ResponseOutput& o = outputs[i];
    if (i) out += ',';
    out +=
        "{\"name\":" + json_string(o.name) + ",\"datatype\":\"" + std::string(datatype_name(o.type)) + "\",\"shape\":[";
    for (size_t d = 0; d < o.shape.size(); ++d) {
      if (d) out += ',';
      append_integer(out, o.shape[d]);
    }
    out += ']';
    if (o.binary) {
      out += ",\"parameters\":{\"binary_data_size\":";
      append_integer(out, o.data.size());
      out += '}';
      any_binary = true;
    } else {
      out += ",\"data\":";
      append_data(out, o.type, o.data);
    }
    out += '}';
  }
  out += "]}";
  if (any_binary) {
    response.json_bytes = out.size();
    for (const ResponseOutput& o : outputs)
      if (o.binary) out.append(reinterpret_cast<const char*>(o.data.data()), o.data.size());
  }
  return response;
}

std::string model_metadata_json(std::string_view name, const runtime::Model& model) {
  const bool batched = model.batch() > 0;
  json inputs = json::array(), outputs = json::array();
  for (const runtime::TensorInfo& info : model.inputs()) inputs.push_back(tensor_metadata(info, batched));
  for (const runtime::TensorInfo& info : model.outputs()) outputs.push_back(tensor_metadata(info, batched));
  json j = {{"name", std::string(name)}, {"versions", {"1"}},  {"platform", "kiln_" + model.target()},
            {"inputs", inputs},          {"outputs", outputs}, {"max_batch_size", model.batch()}};
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string server_metadata_json() {
  json j = {{"name", "kiln"}, {"version", std::string(kVersion)}, {"extensions", {"binary_tensor_data"}}};
  return j.dump();
}

std::string error_json(std::string_view message) { return "{\"error\":" + json_string(message) + "}"; }

}  // namespace kiln::serving
