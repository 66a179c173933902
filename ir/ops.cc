#include "ir/ops.h"

#include <array>
#include <cassert>
#include <string>
#include <vector>

namespace kiln::ir {
namespace {

struct OpInfo {
  std::string_view name;
  int arity;
  OpKind kind;
  std::string_view schema;
  OperandTypes operands;
  CpuMath math;
  GradientKind gradient;
};

constexpr OpInfo kOps[] = {
#define KILN_OP(Enum, name, arity, kind, attrs, operands, math, gradient, api) \
  {name, arity, OpKind::kind, attrs, OperandTypes::operands, CpuMath::math, GradientKind::gradient},
#include "ir/ops.def"
#undef KILN_OP
};

constexpr Op kOpList[] = {
#define KILN_OP(Enum, name, arity, kind, attrs, operands, math, gradient, api) Op::Enum,
#include "ir/ops.def"
#undef KILN_OP
};

constexpr size_t kNumOps = std::size(kOps);

AttrKind parse_kind(std::string_view s) {
  constexpr std::pair<std::string_view, AttrKind> kinds[] = {
      {"int", AttrKind::Int},       {"ints", AttrKind::Ints},   {"float", AttrKind::Float},    {"bool", AttrKind::Bool},
      {"string", AttrKind::String}, {"dtype", AttrKind::DType}, {"literal", AttrKind::Literal}};
  for (auto [name, kind] : kinds)
    if (name == s) return kind;
  assert(false && "bad attribute kind in ir/ops.def");
  return AttrKind::Int;
}

// Schemas are parsed once from the table's strings into spans of AttrSpec.
const std::array<std::vector<AttrSpec>, kNumOps>& schemas() {
  static const auto* table = [] {
    auto* t = new std::array<std::vector<AttrSpec>, kNumOps>();
    for (size_t i = 0; i < kNumOps; ++i) {
      std::string_view s = kOps[i].schema;
      while (!s.empty()) {
        size_t end = s.find(' ');
        std::string_view item = s.substr(0, end);
        s = end == std::string_view::npos ? std::string_view() : s.substr(end + 1);
        bool optional = item.ends_with('?');
        if (optional) item.remove_suffix(1);
        size_t colon = item.find(':');
        (*t)[i].push_back({item.substr(0, colon), parse_kind(item.substr(colon + 1)), optional});
      }
    }
    return t;
  }();
  return *table;
}

}  // namespace

std::string_view op_name(Op op) { return kOps[static_cast<size_t>(op)].name; }

std::optional<Op> parse_op(std::string_view name) {
  for (size_t i = 0; i < kNumOps; ++i)
    if (kOps[i].name == name) return static_cast<Op>(i);
  return std::nullopt;
}

int op_arity(Op op) { return kOps[static_cast<size_t>(op)].arity; }
OpKind op_kind(Op op) { return kOps[static_cast<size_t>(op)].kind; }
OperandTypes op_operand_types(Op op) { return kOps[static_cast<size_t>(op)].operands; }
CpuMath op_cpu_math(Op op) { return kOps[static_cast<size_t>(op)].math; }
GradientKind op_gradient(Op op) { return kOps[static_cast<size_t>(op)].gradient; }
std::span<const AttrSpec> op_attrs(Op op) { return schemas()[static_cast<size_t>(op)]; }
std::span<const Op> all_ops() { return kOpList; }

std::string_view attr_kind_name(AttrKind kind) {
  switch (kind) {
    case AttrKind::Int: return "int";
    case AttrKind::Ints: return "ints";
    case AttrKind::Float: return "float";
    case AttrKind::Bool: return "bool";
    case AttrKind::String: return "string";
    case AttrKind::DType: return "dtype";
    case AttrKind::Literal: return "literal";
  }
  return "?";
}

std::string_view op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::Elementwise: return "elementwise";
    case OpKind::Reduction: return "reduction";
    case OpKind::Movement: return "movement";
    case OpKind::Library: return "library";
    case OpKind::Composite: return "composite";
    case OpKind::Source: return "source";
  }
  return "?";
}

std::string_view operand_types_text(OperandTypes types) {
  switch (types) {
    case OperandTypes::Float: return "a floating-point";
    case OperandTypes::Numeric: return "a numeric";
    case OperandTypes::Bool: return "a bool";
    case OperandTypes::Compared:
    case OperandTypes::Any: return "any";
  }
  return "?";
}

}  // namespace kiln::ir
