// kiln's version: the compiler's and the runtime's, which are released together.
#pragma once

#include <string_view>

namespace kiln {

inline constexpr std::string_view kVersion = "0.1.0";

}  // namespace kiln
