#include "base/memory_check.h"

#include <algorithm>
#include <limits>
#include <vector>

namespace kiln {
namespace {

Error plan_error(const std::string& message) { return make_error("memory plan: " + message); }

}  // namespace

Status check_arena(std::span<const ArenaBuffer> buffers, int64_t arena_bytes, int64_t alignment) {
  if (arena_bytes < 0 || alignment <= 0) return plan_error("negative arena size or non-positive alignment");
  for (const ArenaBuffer& b : buffers) {
    if (b.offset < 0 || b.bytes < 0 || b.offset > std::numeric_limits<int64_t>::max() - b.bytes)
      return plan_error(b.name + " has a negative or overflowing offset or size");
    if (b.offset + b.bytes > arena_bytes)
      return plan_error(b.name + " ends at byte " + std::to_string(b.offset + b.bytes) + ", past the arena's " +
                        std::to_string(arena_bytes));
    if (b.offset % alignment != 0) return plan_error(b.name + " is not " + std::to_string(alignment) + "-byte aligned");
    if (b.first_step > b.last_step) return plan_error(b.name + " dies before it is born");
  }
  // Sweep in offset order; only buffers whose byte ranges meet are compared.
  std::vector<size_t> order(buffers.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return buffers[a].offset < buffers[b].offset; });
  for (size_t i = 0; i < order.size(); ++i) {
    const ArenaBuffer& a = buffers[order[i]];
    for (size_t j = i + 1; j < order.size(); ++j) {
      const ArenaBuffer& b = buffers[order[j]];
      if (b.offset >= a.offset + a.bytes) break;
      if (a.bytes == 0 || b.bytes == 0) continue;
      bool live_together = a.first_step <= b.last_step && b.first_step <= a.last_step;
      if (!live_together) continue;
      // An in-place pair may meet at the one step where one dies and the other is born.
      auto handover = [&](const ArenaBuffer& from, size_t from_index, const ArenaBuffer& to) {
        return to.in_place_of == static_cast<int>(from_index) && from.last_step == to.first_step &&
               from.offset == to.offset && from.bytes == to.bytes;
      };
      if (handover(a, order[i], b) || handover(b, order[j], a)) continue;
      return plan_error(a.name + " [" + std::to_string(a.offset) + ", " + std::to_string(a.offset + a.bytes) +
                        ") and " + b.name + " [" + std::to_string(b.offset) + ", " +
                        std::to_string(b.offset + b.bytes) + ") overlap while both are live (steps " +
                        std::to_string(std::max(a.first_step, b.first_step)) + ".." +
                        std::to_string(std::min(a.last_step, b.last_step)) + ")");
    }
  }
  return Status::Ok();
}

}  // namespace kiln
