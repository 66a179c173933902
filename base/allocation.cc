#include "base/allocation.h"

#include <sys/sysinfo.h>
#include <cstdio>

namespace kiln {

uint64_t memory_limit_bytes() {
  static const uint64_t limit = [] {
    struct sysinfo info {};
    if (sysinfo(&info) != 0) return UINT64_MAX;
    const uint64_t unit = info.mem_unit ? info.mem_unit : 1;
    return (static_cast<uint64_t>(info.totalram) + static_cast<uint64_t>(info.totalswap)) * unit;
  }();
  return limit;
}

std::string format_bytes(uint64_t bytes) {
  constexpr const char* units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return std::to_string(bytes) + " bytes";
  double value = static_cast<double>(bytes) / 1024;
  int unit = 0;
  while (value >= 1024 && unit < 5) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, "%.1f %s", value, units[unit]);
  return text;
}

Error allocation_error(uint64_t bytes, std::string_view what, std::string_view why) {
  return make_error("cannot allocate " + std::to_string(bytes) + " bytes (" + format_bytes(bytes) + ") for " +
                    std::string(what) + ": " + std::string(why));
}

Status check_allocation(uint64_t bytes, std::string_view what) {
  const uint64_t limit = memory_limit_bytes();
  if (bytes <= limit) return Status::Ok();
  return make_error("cannot allocate " + std::to_string(bytes) + " bytes (" + format_bytes(bytes) + ") for " +
                    std::string(what) + ": this machine has " + format_bytes(limit) + " of memory and swap");
}

}  // namespace kiln
