// The artifact reader's checks of library steps (artifact_reader.cc): a matmul's, a
// convolution's and an attention's parameters against the step's values, and the
// helpers both files use. Internal to runtime/format.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"
#include "runtime/format/artifact.h"

namespace kiln::format::detail {

inline std::string n(uint64_t v) { return std::to_string(v); }

// The size of a vector that may be absent.
template <class T>
uint32_t count(const flatbuffers::Vector<T>* v) {
  return v ? v->size() : 0;
}

// The elements of a vector that may be absent.
template <class T>
std::vector<T> items(const flatbuffers::Vector<T>* v) {
  return v ? std::vector<T>(v->begin(), v->end()) : std::vector<T>();
}

inline Error fail(ArtifactErrorKind kind, const std::string& why) {
  return Error{"artifact: " + std::string(artifact_error_name(kind)) + ": " + why, static_cast<int>(kind)};
}

/// Step `s` of `a`, if a library step: its call's parameters fit its values (whose sizes
/// are `value_bytes`) and the target's runtime runs it (`cuda`: CUDA's).
Status check_library_step(const Artifact& a, int s, const std::vector<uint64_t>& value_bytes, bool cuda);

}  // namespace kiln::format::detail
