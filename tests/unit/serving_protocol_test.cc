// KServe v2 messages: every way a request body can be wrong, as the text the client reads;
// binary tensors; responses.
#include <cstring>

#include <catch2/catch.hpp>

#include "base/half_float.h"
#include "serving/protocol.h"

namespace kiln::serving {
namespace {

using runtime::ElementType;

std::string parse_error(std::string_view body, std::optional<uint64_t> json_bytes = std::nullopt) {
  auto parsed = parse_infer_request(body, json_bytes);
  if (parsed.ok()) return "(parsed)";
  CHECK(parsed.error().code == kBadRequest);
  return parsed.error().message;
}

std::vector<float> floats(const std::vector<uint8_t>& bytes) {
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), bytes.size());
  return v;
}

TEST_CASE("datatypes are KServe's names of the runtime's element types", "[serving]") {
  for (ElementType t : {ElementType::F32, ElementType::F64, ElementType::F16, ElementType::BF16, ElementType::I32,
                        ElementType::I64, ElementType::Bool, ElementType::I8, ElementType::U8})
    CHECK(datatype_named(datatype_name(t)) == t);
  CHECK(datatype_name(ElementType::U8) == "UINT8");
  CHECK(datatype_name(ElementType::BF16) == "BF16");
  CHECK(datatype_name(ElementType::Bool) == "BOOL");
  CHECK(!datatype_named("FP8"));
}

TEST_CASE("a JSON request parses into typed tensors", "[serving]") {
  auto r = parse_infer_request(
      R"({"id":"r1","inputs":[{"name":"x","shape":[2,2],"datatype":"FP32","data":[[1,2.5],[-3,"NaN"]]},)"
      R"({"name":"k","shape":[3],"datatype":"INT64","data":[1,-2,9007199254740993]},)"
      R"({"name":"m","shape":[2],"datatype":"BOOL","data":[true,false]},)"
      R"({"name":"h","shape":[1],"datatype":"BF16","data":[0.1]}],)"
      R"("outputs":[{"name":"y"},{"name":"z","parameters":{"binary_data":true}}]})",
      std::nullopt);
  REQUIRE(r.ok());
  CHECK(r->id == "r1");
  REQUIRE(r->inputs.size() == 4);
  const std::vector<float> x = floats(r->inputs[0].data);
  CHECK(x[0] == 1.0f);
  CHECK(x[1] == 2.5f);
  CHECK(x[2] == -3.0f);
  CHECK(std::isnan(x[3]));
  int64_t k[3];
  std::memcpy(k, r->inputs[1].data.data(), 24);
  CHECK(k[1] == -2);
  CHECK(k[2] == 9007199254740993);  // exact: integers are not read through a double
  CHECK(r->inputs[2].data == std::vector<uint8_t>{1, 0});
  uint16_t h;
  std::memcpy(&h, r->inputs[3].data.data(), 2);
  CHECK(h == float_to_bf16(0.1f));
  REQUIRE(r->outputs.size() == 2);
  CHECK(!r->outputs[0].binary);
  CHECK(r->outputs[1].binary);
}

TEST_CASE("binary inputs follow the JSON in order", "[serving]") {
  const float x[2] = {1.5f, -2.0f};
  const int32_t k[1] = {7};
  std::string json = R"({"inputs":[{"name":"x","shape":[2],"datatype":"FP32","parameters":{"binary_data_size":8}},)"
                     R"({"name":"k","shape":[1],"datatype":"INT32","parameters":{"binary_data_size":4}}],)"
                     R"("parameters":{"binary_data_output":true}})";
  std::string body =
      json + std::string(reinterpret_cast<const char*>(x), 8) + std::string(reinterpret_cast<const char*>(k), 4);
  auto length = parse_json_header_length(std::to_string(json.size()), body.size());
  REQUIRE(length.ok());
  auto r = parse_infer_request(body, *length);
  REQUIRE(r.ok());
  CHECK(floats(r->inputs[0].data) == std::vector<float>{1.5f, -2.0f});
  CHECK(r->inputs[1].data.size() == 4);
  CHECK(r->binary_outputs);

  CHECK(parse_error(body + "xyz", json.size()) == "3 bytes of binary data follow the last binary input's");
  CHECK(parse_error(body.substr(0, body.size() - 2), json.size()) ==
        "input 'k' has a binary_data_size of 4 bytes, past the 2 bytes of binary data left in the body");
  CHECK(parse_json_header_length("99999", body.size()).error().message ==
        "the Inference-Header-Content-Length of 99999 bytes points past the body's " + std::to_string(body.size()));
  CHECK(parse_json_header_length("-5", 10).error().message ==
        "the Inference-Header-Content-Length '-5' is not a count of bytes");
  CHECK(parse_json_header_length("", 10).error().message ==
        "the Inference-Header-Content-Length '' is not a count of bytes");
}

TEST_CASE("every malformed request is refused with what is wrong", "[serving]") {
  const std::pair<std::string, std::string> cases[] = {
      {"",
       "the request is not valid JSON: parse error at line 1, column 1: syntax error "
       "while parsing value - unexpected end of input; expected '[', '{', or a literal"},
      {"[1]", "the request is array, not a JSON object"},
      {R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[NaN]}]})",
       "the request is not valid JSON: parse error at line 1, column 62: syntax error while parsing value - invalid "
       "literal; last read: '\"data\":[N'"},
      {std::string(100, '[') + std::string(100, ']'), "the request's JSON nests deeper than 24 levels"},
      {R"({"inputs":{}})", "the request has no \"inputs\" array"},
      {R"({"id":5,"inputs":[]})", "the request's \"id\" is number, not a string"},
      {R"({"inputs":[3]})", "input 0 is number, not an object"},
      {R"({"inputs":[{"shape":[1]}]})", "input 0 has no \"name\" string"},
      {R"({"inputs":[{"name":"x","shape":[1],"data":[1]}]})", "input 'x' has no \"datatype\" string"},
      {R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP8","data":[1]}]})",
       "input 'x' has the datatype 'FP8'; the server takes FP32, FP64, FP16, BF16, INT32, INT64, INT8, UINT8 and BOOL"},
      {R"({"inputs":[{"name":"x","datatype":"FP32","data":[1]}]})", "input 'x' has no \"shape\" array"},
      {R"({"inputs":[{"name":"x","shape":[2,-3],"datatype":"FP32","data":[1]}]})",
       "input 'x' has the negative dim -3 in its shape [2,-3]"},
      {R"({"inputs":[{"name":"x","shape":[1.5],"datatype":"FP32","data":[1]}]})",
       "input 'x' has a shape dim that is number, not an integer"},
      {R"({"inputs":[{"name":"x","shape":[1099511627776,1099511627776],"datatype":"FP32","data":[1]}]})",
       "input 'x' has a shape of more than 2^40 elements"},
      {R"({"inputs":[{"name":"x","shape":[99999999999999999],"datatype":"FP32","data":[1]}]})",
       "input 'x' has the dim 99999999999999999 in its shape, over 2^40"},
      {R"({"inputs":[{"name":"x","shape":[2],"datatype":"FP32"}]})",
       "input 'x' has no \"data\" (and no binary_data_size)"},
      {R"({"inputs":[{"name":"x","shape":[3],"datatype":"FP32","data":[1,2]}]})",
       "input 'x' has 2 elements of data, but its shape [3] holds 3"},
      {R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1,2]}]})",
       "input 'x' has more data than its shape holds"},
      {R"({"inputs":[{"name":"x","shape":[2],"datatype":"FP32","data":[1,"a"]}]})",
       "element 1 of input 'x' is the string 'a'; a float is a number, \"NaN\", \"Infinity\" or \"-Infinity\""},
      {R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[null]}]})",
       "element 0 of input 'x' is null, not a number"},
      {R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1e39]}]})",
       "element 0 of input 'x' is 1e+39, outside FP32's range"},
      {R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP16","data":[70000]}]})",
       "element 0 of input 'x' is 70000.0, outside FP16's range"},
      {R"({"inputs":[{"name":"x","shape":[1],"datatype":"BF16","data":[3.4e38]}]})",
       "element 0 of input 'x' is 3.4e+38, outside BF16's range"},
      {std::string(R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]}]})") + std::string(1, '\0') +
           "{{",
       "the request's JSON has a NUL byte at offset 66 (binary tensor data needs an Inference-Header-Content-Length "
       "header)"},
      {R"({"inputs":[{"name":"k","shape":[1],"datatype":"INT32","data":[1.5]}]})",
       "element 0 of input 'k' is number, not an integer"},
      {R"({"inputs":[{"name":"k","shape":[1],"datatype":"INT32","data":[2147483648]}]})",
       "element 0 of input 'k' is 2147483648, outside INT32's range"},
      {R"({"inputs":[{"name":"k","shape":[1],"datatype":"INT32","data":[-2147483649]}]})",
       "element 0 of input 'k' is -2147483649, outside INT32's range"},
      {R"({"inputs":[{"name":"q","shape":[2],"datatype":"UINT8","data":[255,256]}]})",
       "element 1 of input 'q' is 256, outside UINT8's range"},
      {R"({"inputs":[{"name":"q","shape":[1],"datatype":"UINT8","data":[-1]}]})",
       "element 0 of input 'q' is -1, outside UINT8's range"},
      {R"({"inputs":[{"name":"q","shape":[2],"datatype":"INT8","data":[-128,-129]}]})",
       "element 1 of input 'q' is -129, outside INT8's range"},
      {R"({"inputs":[{"name":"m","shape":[1],"datatype":"BOOL","data":[1]}]})",
       "element 0 of input 'm' is number, not true or false"},
      {R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":{"a":1}}]})",
       "input 'x' has \"data\" that is an object"},
      {R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]},{"name":"x","shape":[1],"datatype":"FP32","data":[1]}]})",
       "input 'x' is given twice"},
      {R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1],"parameters":{"binary_data_size":4}}]})",
       "input 'x' has both \"data\" and a binary_data_size"},
      {R"({"inputs":[{"name":"x","shape":[2],"datatype":"FP32","parameters":{"binary_data_size":4}}]})",
       "input 'x' has a binary_data_size of 4 bytes, but its shape [2] of FP32 holds 8"},
      {R"({"inputs":[{"name":"x","shape":[2],"datatype":"FP32","parameters":{"binary_data_size":-8}}]})",
       "input 'x' has a binary_data_size that is not a count of bytes"},
      {R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","parameters":7}]})",
       "input 'x' has \"parameters\" that are number, not an object"},
      {R"({"inputs":[],"outputs":{}})", "the request's \"outputs\" is object, not an array"},
      {R"({"inputs":[],"outputs":[{"nam":"y"}]})", "output 0 of the request has no \"name\" string"},
      {R"({"inputs":[],"outputs":[{"name":"y"},{"name":"y"}]})", "output 'y' is asked for twice"},
  };
  for (const auto& [body, message] : cases) {
    INFO(body);
    CHECK(parse_error(body) == message);
  }
}

TEST_CASE("responses write every element type, NaN and infinities as strings", "[serving]") {
  const float x[4] = {0.1f, -2.0f, std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity()};
  const int64_t k[2] = {-3, 9007199254740993};
  const uint8_t m[2] = {1, 0};
  const uint16_t h[1] = {float_to_f16(0.5f)};
  const uint8_t q[2] = {255, 128};
  auto bytes = [](const auto& a) { return std::span(reinterpret_cast<const uint8_t*>(a), sizeof(a)); };
  ResponseBody r = write_infer_response("m", "id\"1",
                                        {{"x", ElementType::F32, {2, 2}, bytes(x), false},
                                         {"k", ElementType::I64, {2}, bytes(k), false},
                                         {"b", ElementType::Bool, {2}, bytes(m), false},
                                         {"h", ElementType::F16, {1}, bytes(h), false},
                                         {"q", ElementType::U8, {2}, bytes(q), false},
                                         {"p", ElementType::I8, {2}, bytes(q), false}});
  CHECK(!r.json_bytes);
  CHECK(
      r.body ==
      R"({"model_name":"m","id":"id\"1","outputs":[{"name":"x","datatype":"FP32","shape":[2,2],"data":[0.1,-2,"NaN","-Infinity"]},)"
      R"({"name":"k","datatype":"INT64","shape":[2],"data":[-3,9007199254740993]},)"
      R"({"name":"b","datatype":"BOOL","shape":[2],"data":[true,false]},)"
      R"({"name":"h","datatype":"FP16","shape":[1],"data":[0.5]},)"
      R"({"name":"q","datatype":"UINT8","shape":[2],"data":[255,128]},)"
      R"({"name":"p","datatype":"INT8","shape":[2],"data":[-1,-128]}]})");

  ResponseBody binary = write_infer_response("m", "", {{"k", ElementType::I64, {2}, bytes(k), true}});
  const std::string json =
      R"({"model_name":"m","outputs":[{"name":"k","datatype":"INT64","shape":[2],"parameters":{"binary_data_size":16}}]})";
  REQUIRE(binary.json_bytes == json.size());
  CHECK(binary.body.substr(0, json.size()) == json);
  CHECK(binary.body.substr(json.size()) == std::string(reinterpret_cast<const char*>(k), 16));
}

TEST_CASE("errors are JSON, whatever bytes their message holds", "[serving]") {
  CHECK(error_json("model 'a\"b' is not served") == R"({"error":"model 'a\"b' is not served"})");
  CHECK(error_json(std::string("bad \xff byte")) == "{\"error\":\"bad \xEF\xBF\xBD byte\"}");
  CHECK(server_metadata_json() == R"({"extensions":["binary_tensor_data"],"name":"kiln","version":"0.1.0"})");
}

}  // namespace
}  // namespace kiln::serving
