// libFuzzer target for artifact loading: any bytes must be refused with a typed error or
// verify; never a crash, hang or ASan/UBSan report.
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "runtime/format/artifact.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto view = kiln::format::read_artifact(std::span<const uint8_t>(data, size), "");
  if (!view.ok()) {
    auto kind = static_cast<kiln::format::ArtifactErrorKind>(view.error().code);
    if (kiln::format::artifact_error_name(kind) == "unknown") {
      std::fprintf(stderr, "untyped refusal: %s\n", view.error().message.c_str());
      std::abort();
    }
    return 0;
  }
  // A verified artifact's sections are readable end to end.
  const kiln::format::Artifact& a = view->metadata();
  uint64_t sum = 0;
  for (uint8_t b : view->section(*a.ir())) sum += b;
  if (a.code())
    for (const kiln::format::CodeObject* c : *a.code()) {
      if (c->kind()) sum += c->kind()->size();
      for (uint8_t b : view->section(*c->section())) sum += b;
    }
  if (a.weights())
    for (const kiln::format::Section* s : *a.weights())
      for (uint8_t b : view->section(*s)) sum += b;
  return sum == 0xFFFFFFFFFFFFFFFFull;  // keeps the reads; never true
}
