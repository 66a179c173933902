// Strict integer parsing for flags, attributes and names: the whole text must be the
// number, with no sign other than a leading '-', no spaces and no overflow.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace kiln {

/// The integer `text` spells in decimal, or none: "12" and "-3" parse; "", "+1", " 1",
/// "1.0", "1e3", "0x10", "12abc" and anything beyond int64 do not.
inline std::optional<int64_t> parse_integer(std::string_view text) {
  bool negative = !text.empty() && text[0] == '-';
  if (negative) text.remove_prefix(1);
  if (text.empty()) return std::nullopt;
  uint64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    const uint64_t digit = static_cast<uint64_t>(c - '0');
    if (value > (uint64_t{1} << 63) / 10 || value * 10 > (uint64_t{1} << 63) - digit) return std::nullopt;
    value = value * 10 + digit;
  }
  if (!negative && value > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
  return negative ? static_cast<int64_t>(0 - value) : static_cast<int64_t>(value);
}

}  // namespace kiln
