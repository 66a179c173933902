// A library matmul step on the CPU: OpenBLAS's sgemm and dgemm per batch index, with the
// transposes folded into the call; integer matmuls in a plain loop.
#pragma once

#include <cstdint>

#include "base/result.h"
#include "runtime/format/artifact.h"
#include "runtime/types.h"

namespace kiln::runtime::cpu {

/// C = op(A) op(B) for every batch index of `call` (verified to stay inside its operands),
/// with A, B and C at args[0], args[1], args[2], in element type `type`.
Status run_matmul(const format::Matmul& call, ElementType type, uint8_t* const* args);

}  // namespace kiln::runtime::cpu
