// The arena memory-plan checker, shared by the compiler's tests and the artifact verifier:
// standard library only.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "base/result.h"

namespace kiln {

/// One arena buffer of a plan, with its live steps [first_step, last_step].
struct ArenaBuffer {
  std::string name;
  int64_t offset = 0;
  int64_t bytes = 0;
  int first_step = 0;
  int last_step = 0;
  /// Index (in the same list) of the buffer this one reuses in place, or -1: it may share
  /// bytes with that buffer exactly at the step where that buffer dies and this one is born.
  int in_place_of = -1;
};

/// Checks that every buffer lies within [0, arena_bytes) at an `alignment` multiple
/// (offsets and sizes overflow-checked), that no two buffers live at the same step share
/// a byte, and that in-place pairs meet only at the handover step with equal placement.
Status check_arena(std::span<const ArenaBuffer> buffers, int64_t arena_bytes, int64_t alignment);

}  // namespace kiln
