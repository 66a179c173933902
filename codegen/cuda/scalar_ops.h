// Element types and one-element arithmetic as CUDA C++ expressions, with the reference
// interpreter's semantics (the prelude's helpers do the integer and NaN cases).
#pragma once

#include <span>
#include <string>

#include "base/result.h"
#include "ir/attributes.h"
#include "ir/ops.h"
#include "ir/types.h"

namespace kiln::codegen::cuda {

/// The C++ type elements are computed in: float for f32, f16 and bf16; double; int;
/// long long; bool.
std::string_view compute_type(ir::DType dtype);
/// The C++ type elements are stored in (f16 and bf16 as their bits).
std::string_view storage_type(ir::DType dtype);
/// A stored element (an expression of the storage type) as a compute-type expression.
std::string from_storage(ir::DType dtype, const std::string& stored);
/// A compute-type expression as the value to store. A bf16 value is stored by its top
/// half: it must be rounded already, as every op with a bf16 result rounds its result.
std::string to_storage(ir::DType dtype, const std::string& value);
/// A compute-type constant, exact (floats as hexadecimal literals).
std::string constant(ir::DType dtype, double value, int64_t int_value);
/// One elementwise op on compute-type operand expressions. Errors name ops the CUDA
/// backend does not support.
Result<std::string> elementwise(ir::Op op, const ir::Attrs& attrs, std::span<const std::string> operands,
                                std::span<const ir::DType> operand_dtypes, ir::DType result_dtype);

}  // namespace kiln::codegen::cuda
