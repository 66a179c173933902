// Shape and type inference: the result type of an op from its operand types and attributes.
#pragma once

#include <optional>
#include <span>

#include "ir/attributes.h"
#include "ir/ops.h"
#include "base/result.h"
#include "ir/types.h"

namespace kiln::ir {

/// Checks attribute names and kinds against the op's schema (unknown, missing, mistyped).
Status check_attrs(Op op, const Attrs& attrs);

/// The result type of `op` applied to operands of these types. Source ops (constant,
/// iota) take their element type from `source_dtype`. Errors name the op and the shapes,
/// e.g. "matmul: contracting dims differ: f32[2,3] x f32[4,5]". Attributes must have
/// passed check_attrs.
Result<TensorType> infer_type(Op op, std::span<const TensorType> operands, const Attrs& attrs,
                              std::optional<DType> source_dtype = std::nullopt);

/// Normalizes a possibly negative axis against a rank; nullopt when out of range.
std::optional<int64_t> normalize_axis(int64_t axis, int64_t rank);

}  // namespace kiln::ir
