// libFuzzer target for the server's request parser (serving/protocol_request.cc): any body,
// JSON or binary, is parsed or refused with a 400 and a message; never a crash, hang,
// unbounded allocation or ASan/UBSan report. The first byte picks the mode: odd bytes make
// the next two a little-endian Inference-Header-Content-Length for the rest.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "serving/protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const bool binary = data[0] % 2 == 1;
  const std::string header_length = std::to_string(data[1] | (data[2] << 8));
  std::string_view body(reinterpret_cast<const char*>(data + 3), size - 3);
  std::optional<uint64_t> json_bytes;
  if (binary) {
    auto length = kiln::serving::parse_json_header_length(header_length, body.size());
    if (!length.ok()) return 0;
    json_bytes = *length;
  }
  auto request = kiln::serving::parse_infer_request(body, json_bytes);
  if (!request.ok()) {
    if (request.error().code != kiln::serving::kBadRequest || request.error().message.empty()) {
      std::fprintf(stderr, "refused without a 400 and a message: %s\n", request.error().message.c_str());
      std::abort();
    }
    return 0;
  }
  // A parsed input holds exactly the bytes its shape and datatype give.
  for (const kiln::serving::RequestInput& in : request->inputs) {
    int64_t elements = 1;
    for (int64_t d : in.shape) elements *= d;
    if (static_cast<int64_t>(in.data.size()) != elements * kiln::runtime::element_bytes(in.type)) std::abort();
  }
  return 0;
}
