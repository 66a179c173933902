// The two half precisions the CPU tests run each case in, with what they check against.
#pragma once

#include "ir/types.h"
#include "runtime/format/artifact.h"

namespace kiln::testing {

struct HalfPrecision {
  const char* name;      ///< as --precision takes it
  ir::DType dtype;       ///< in the IR
  format::DType stored;  ///< in an artifact
  int mantissa_bits;     ///< with the implicit one: a rounding is within 2^-bits relative
};
inline constexpr HalfPrecision kHalfPrecisions[] = {{"bf16", ir::DType::BF16, format::DType::BF16, 8},
                                                    {"f16", ir::DType::F16, format::DType::F16, 11}};

}  // namespace kiln::testing
