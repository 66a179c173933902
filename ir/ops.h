// The op enum and its static facts, generated from ir/ops.def.
#pragma once

#include <optional>
#include <span>
#include <string_view>

namespace kiln::ir {

/// Every op kiln knows, in the sorted order of ir/ops.def.
enum class Op : uint8_t {
#define KILN_OP(Enum, name, arity, kind, attrs, operands, math, gradient, api) Enum,
#include "ir/ops.def"
#undef KILN_OP
};

/// How an op computes, which decides how later passes treat it.
enum class OpKind : uint8_t { Elementwise, Reduction, Movement, Library, Composite, Source };

/// The element types an op's (first) operands take (ir/ops.def's Operands).
enum class OperandTypes : uint8_t { Float, Numeric, Bool, Compared, Any };

/// How the CPU code generator computes a float element (ir/ops.def's Math).
enum class CpuMath : uint8_t { Inline, Polynomial, Libm };

/// How autodiff differentiates an op (ir/ops.def's Gradient).
enum class GradientKind : uint8_t { Rule, Decomposed, None };

/// The kind of value an attribute holds.
enum class AttrKind : uint8_t { Int, Ints, Float, Bool, String, DType, Literal };

/// One attribute an op accepts.
struct AttrSpec {
  std::string_view name;
  AttrKind kind;
  bool optional;
};

/// The text name ("reduce_sum").
std::string_view op_name(Op op);
/// Looks an op up by text name.
std::optional<Op> parse_op(std::string_view name);
/// Operand count, or -1 for variadic ops (at least one operand).
int op_arity(Op op);
/// The op's kind.
OpKind op_kind(Op op);
/// The element types its operands take.
OperandTypes op_operand_types(Op op);
/// How codegen/cpu computes it on floats.
CpuMath op_cpu_math(Op op);
/// How autodiff differentiates it.
GradientKind op_gradient(Op op);
/// The attributes the op accepts, in canonical order.
std::span<const AttrSpec> op_attrs(Op op);
/// Every op, in table order.
std::span<const Op> all_ops();
/// "int", "ints", ... as written in schemas and error messages.
std::string_view attr_kind_name(AttrKind kind);
/// "elementwise", "reduction", ...
std::string_view op_kind_name(OpKind kind);
/// "a floating-point", "a numeric", "a bool": an operand of these types, in messages.
std::string_view operand_types_text(OperandTypes types);

}  // namespace kiln::ir
