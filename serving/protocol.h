// The KServe v2 inference protocol's messages (https://kserve.github.io/website/latest/
// modelserving/data_plane/v2_protocol/) and Triton's binary tensor extension, as text:
// parsing requests, writing responses. No HTTP and no model runs here (serving/server.h).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "runtime/model.h"

namespace kiln::serving {

/// The HTTP status an error is answered with: a serving Error carries it as its code.
enum HttpStatus : int {
  kOk = 200,
  kBadRequest = 400,
  kNotFound = 404,
  kLengthRequired = 411,
  kPayloadTooLarge = 413,
  kInternalError = 500,
  kUnavailable = 503,
};

/// An Error answered with `status`.
inline Error http_error(int status, std::string message) { return Error{std::move(message), status}; }

/// KServe's datatype of an element type: "FP32", "FP64", "FP16", "BF16", "INT32", "INT64",
/// "BOOL".
std::string_view datatype_name(runtime::ElementType type);
/// The element type a KServe datatype names, or nullopt.
std::optional<runtime::ElementType> datatype_named(std::string_view name);

/// Request bodies nest objects and arrays at most this deep (a tensor of rank 16 as nested
/// arrays inside the request's own three levels fits).
inline constexpr int kMaxJsonDepth = 24;

/// One input tensor of a request, its data converted to the element type's bytes
/// (row-major, little-endian; BOOL one byte per element).
struct RequestInput {
  std::string name;
  runtime::ElementType type = runtime::ElementType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
};

/// An output a request asks for; `binary` sends its data after the JSON (the binary
/// extension's `"parameters": {"binary_data": true}`).
struct RequestOutput {
  std::string name;
  bool binary = false;
};

/// An inference request: `{"id"?, "parameters"?, "inputs": [...], "outputs"?: [...]}`.
struct InferRequest {
  std::string id;
  std::vector<RequestInput> inputs;
  /// Empty: every output of the model, as JSON unless binary_outputs.
  std::vector<RequestOutput> outputs;
  /// `"parameters": {"binary_data_output": true}`: every output in binary.
  bool binary_outputs = false;
};

/// The value of an `Inference-Header-Content-Length` header: the bytes of JSON that
/// start a body of `body_bytes`, the rest being binary tensor data.
Result<uint64_t> parse_json_header_length(std::string_view value, uint64_t body_bytes);

/// Parses an inference request body: all JSON, or its first `json_bytes` JSON and then
/// the binary data of the inputs whose parameters give a `binary_data_size`, in order.
/// Errors (code kBadRequest) name the input and what is wrong with it.
Result<InferRequest> parse_infer_request(std::string_view body, std::optional<uint64_t> json_bytes);

/// An output tensor of a response.
struct ResponseOutput {
  std::string name;
  runtime::ElementType type = runtime::ElementType::F32;
  std::vector<int64_t> shape;
  std::span<const uint8_t> data;
  bool binary = false;
};

/// A response body, and where binary data follows the JSON, the JSON's bytes (the
/// `Inference-Header-Content-Length` to send).
struct ResponseBody {
  std::string body;
  std::optional<uint64_t> json_bytes;
};

/// `{"model_name", "id"?, "outputs": [{"name", "datatype", "shape", "data"}]}`: floats
/// written as the shortest text that reads back to the same value; NaN and infinities,
/// which JSON lacks, as the strings "NaN", "Infinity" and "-Infinity" (which requests may
/// use too).
ResponseBody write_infer_response(std::string_view model_name, std::string_view id,
                                  const std::vector<ResponseOutput>& outputs);

/// `{"name", "versions", "platform", "inputs": [...], "outputs": [...]}`: a batched
/// model's first dim is -1 (any number of rows up to "max_batch_size").
std::string model_metadata_json(std::string_view name, const runtime::Model& model);
/// `{"name": "kiln", "version", "extensions"}`.
std::string server_metadata_json();
/// `{"error": message}` (invalid UTF-8 in the message replaced, never refused).
std::string error_json(std::string_view message);

}  // namespace kiln::serving
