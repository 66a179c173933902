// Shape and type inference: the result type of an op from its operand types and attributes.
#pragma once

#include <optional>
#include <span>

#include "base/result.h"
#include "ir/attributes.h"
#include "ir/graph.h"
#include "ir/ops.h"
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

/// The result type of a `call` among `functions`: operand types must equal the callee's
/// argument types; `result` (default 0) picks one of its results. When the call names a
/// `backward` function, that function must take the callee's arguments plus the
/// gradient of the result, and return one gradient per floating-point argument.
Result<TensorType> infer_call(std::span<const Graph> functions, std::span<const TensorType> operands,
                              const Attrs& attrs);

/// Normalizes a possibly negative axis against a rank; nullopt when out of range.
std::optional<int64_t> normalize_axis(int64_t axis, int64_t rank);

}  // namespace kiln::ir
