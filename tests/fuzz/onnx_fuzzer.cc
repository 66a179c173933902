// libFuzzer target for ONNX import (frontends/onnx): any bytes are imported into a graph
// that verifies, or refused with an error that starts "onnx: "; never a crash, hang,
// unbounded allocation or ASan/UBSan report.
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "frontends/onnx/importer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto imported = kiln::onnx_import::import_model(std::span<const uint8_t>(data, size));
  if (!imported.ok() && imported.error().message.rfind("onnx: ", 0) != 0) {
    std::fprintf(stderr, "refusal without the importer's prefix: %s\n", imported.error().message.c_str());
    std::abort();
  }
  return 0;
}
