// libFuzzer target for the text IR parser: any input must parse or fail with a located
// error, never crash, hang or trip ASan/UBSan; whatever parses must print and parse back
// to the same text, and verify.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "ir/parser.h"
#include "ir/printer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto graph = kiln::ir::parse(text, "fuzz.kir");
  if (!graph.ok()) {
    if (graph.error().message.rfind("fuzz.kir", 0) != 0) {
      std::fprintf(stderr, "error without a location: %s\n", graph.error().message.c_str());
      std::abort();
    }
    return 0;
  }
  std::string printed = kiln::ir::print(*graph);
  auto again = kiln::ir::parse(printed, "printed.kir");
  if (!again.ok() || kiln::ir::print(*again) != printed) {
    std::fprintf(stderr, "round trip failed:\n%s\n", printed.c_str());
    std::abort();
  }
  return 0;
}
