#include "codegen/cuda/scalar_ops.h"

#include <fmt/format.h>
#include <bit>
#include <cmath>

namespace kiln::codegen::cuda {

using ir::DType;
using ir::Op;

std::string_view compute_type(DType d) {
  switch (d) {
    case DType::F32:
    case DType::F16:
    case DType::BF16: return "float";
    case DType::F64: return "double";
    case DType::I8:  // bytes compute in int, wrapped back to 8 bits after each op
    case DType::U8:
    case DType::I32: return "int";
    case DType::I64: return "long long";
    case DType::Bool: return "bool";
  }
  return "";
}

std::string_view storage_type(DType d) {
  switch (d) {
    case DType::F32: return "float";
    case DType::F64: return "double";
    case DType::F16:
    case DType::BF16: return "unsigned short";
    case DType::I32: return "int";
    case DType::I64: return "long long";
    case DType::Bool:
    case DType::U8: return "unsigned char";
    case DType::I8: return "signed char";
  }
  return "";
}

std::string from_storage(DType d, const std::string& s) {
  switch (d) {
    case DType::F16: return "kiln_f16_to_f32(" + s + ")";
    case DType::BF16: return "kiln_bf16_to_f32(" + s + ")";
    case DType::Bool: return "(" + s + " != 0)";
    default: return s;
  }
}

std::string to_storage(DType d, const std::string& v) {
  switch (d) {
    case DType::F16: return "kiln_f32_to_f16(" + v + ")";
    case DType::BF16: return "kiln_bf16_bits(" + v + ")";
    case DType::Bool:
    case DType::U8: return "(unsigned char)(" + v + ")";
    case DType::I8: return "(signed char)(" + v + ")";
    default: return v;
  }
}

namespace {

std::string round_to(DType d, const std::string& v) {
  if (d == DType::F16) return "kiln_round_f16(" + v + ")";
  if (d == DType::BF16) return "kiln_round_bf16(" + v + ")";
  if (d == DType::I8) return "((int)(signed char)(" + v + "))";
  if (d == DType::U8) return "((int)(unsigned char)(" + v + "))";
  return v;
}

// A libdevice function by its double name: expf for float operands, exp for double.
std::string math(std::string_view name, DType d, const std::string& x) {
  return fmt::format("{}{}({})", name, d == DType::F64 ? "" : "f", x);
}

}  // namespace

namespace {

// Negative literals in parentheses, so that no operator before them can merge with the
// sign ("- -1" is fine, "--1" is a decrement).
std::string literal(DType d, double value, int64_t int_value) {
  if (d == DType::Bool) return int_value != 0 ? "true" : "false";
  if (d == DType::I32 || d == DType::I8 || d == DType::U8) return fmt::format("{}", static_cast<int32_t>(int_value));
  if (d == DType::I64) return int_value == INT64_MIN ? "(-9223372036854775807LL - 1)" : fmt::format("{}LL", int_value);
  double v = ir::round_to_dtype(d, value);
  if (d == DType::F64) {
    if (std::isfinite(v)) return fmt::format("{:a}", v);
    return fmt::format("__longlong_as_double({:#x}LL)", std::bit_cast<uint64_t>(v));
  }
  float f = static_cast<float>(v);
  if (std::isfinite(f)) return fmt::format("{:a}f", f);
  return fmt::format("__uint_as_float({:#x}u)", std::bit_cast<uint32_t>(f));
}

}  // namespace

std::string constant(DType d, double value, int64_t int_value) {
  std::string s = literal(d, value, int_value);
  return s.starts_with('-') ? "(" + s + ")" : s;
}

Result<std::string> elementwise(Op op, const ir::Attrs& attrs, std::span<const std::string> in,
                                std::span<const DType> in_types, DType rt) {
  DType dt = in_types.empty() ? rt : in_types[0];
  const bool fp = ir::is_float(dt);
  const std::string x = in.empty() ? "" : in[0];
  const std::string y = in.size() > 1 ? in[1] : "";
  auto fpr = [&](const std::string& v) { return round_to(rt, v); };  // f16/bf16 round, i8/u8 wrap
  const std::string zero = fp ? constant(dt, 0, 0) : "0";
  switch (op) {
    case Op::Neg: return fpr(fp ? "(-" + x + ")" : "kiln_neg(" + x + ")");
    case Op::Abs: return fpr(fp ? math("fabs", dt, x) : "kiln_abs(" + x + ")");
    // NaN stays NaN, as in the interpreter.
    case Op::Relu: return fmt::format("(!({0} <= {1}) ? {0} : {1})", x, zero);
    case Op::Exp: return fpr(math("exp", dt, x));
    case Op::Log: return fpr(math("log", dt, x));
    case Op::Sqrt: return fpr(math("sqrt", dt, x));
    case Op::Rsqrt: return fpr(fmt::format("({} / {})", constant(dt, 1, 1), math("sqrt", dt, x)));
    case Op::Sin: return fpr(math("sin", dt, x));
    case Op::Cos: return fpr(math("cos", dt, x));
    case Op::Tanh: return fpr(math("tanh", dt, x));
    case Op::Erf: return fpr(math("erf", dt, x));
    case Op::Floor: return fpr(math("floor", dt, x));
    case Op::Ceil: return fpr(math("ceil", dt, x));
    case Op::Sigmoid: return fpr(fmt::format("({0} / ({0} + {1}))", constant(dt, 1, 1), math("exp", dt, "-" + x)));
    case Op::Not: return "(!" + x + ")";
    case Op::Add: return fpr(fp ? "(" + x + " + " + y + ")" : "kiln_add(" + x + ", " + y + ")");
    case Op::Sub: return fpr(fp ? "(" + x + " - " + y + ")" : "kiln_sub(" + x + ", " + y + ")");
    case Op::Mul: return fpr(fp ? "(" + x + " * " + y + ")" : "kiln_mul(" + x + ", " + y + ")");
    case Op::Div:
      if (dt == DType::F64) return "(" + x + " / " + y + ")";
      return fpr(fp ? "kiln_fdiv(" + x + ", " + y + ")" : "kiln_div(" + x + ", " + y + ")");
    case Op::Pow:
      if (!fp) return make_error("cuda codegen: pow on integers is not supported yet");
      return fpr(fmt::format("pow{}({}, {})", dt == DType::F64 ? "" : "f", x, y));
    case Op::Maximum: return fp ? fpr("kiln_max(" + x + ", " + y + ")") : "kiln_max(" + x + ", " + y + ")";
    case Op::Minimum: return fp ? fpr("kiln_min(" + x + ", " + y + ")") : "kiln_min(" + x + ", " + y + ")";
    case Op::Eq: return "(" + x + " == " + y + ")";
    case Op::Ne: return "(" + x + " != " + y + ")";  // true for NaN, as an unordered compare
    case Op::Lt: return "(" + x + " < " + y + ")";
    case Op::Le: return "(" + x + " <= " + y + ")";
    case Op::Gt: return "(" + x + " > " + y + ")";
    case Op::Ge: return "(" + x + " >= " + y + ")";
    case Op::And: return "(" + x + " && " + y + ")";
    case Op::Or: return "(" + x + " || " + y + ")";
    case Op::Select: return "(" + in[0] + " ? " + in[1] + " : " + in[2] + ")";
    case Op::Cast: {
      DType to = attrs.get_dtype("to");
      std::string t(compute_type(to));
      if (to == DType::Bool) return "(" + x + " != " + zero + ")";
      if (dt == DType::Bool || (!fp && !ir::is_float(to))) return round_to(to, "((" + t + ")" + x + ")");
      if (ir::is_float(to)) return round_to(to, "((" + t + ")" + x + ")");
      // Saturating, NaN to 0 (cvt.rzi); to a byte, then clamped to its range.
      const std::string whole =
          fmt::format("__{}2{}_rz({})", dt == DType::F64 ? "double" : "float", to == DType::I64 ? "ll" : "int", x);
      if (to == DType::I8 || to == DType::U8)
        return fmt::format("min(max({}, {}), {})", whole, ir::int_min(to), ir::int_max(to));
      return whole;
    }
    default: break;
  }
  return make_error(
      fmt::format("cuda codegen: {} {} (codegen/cuda/scalar_ops.cc has no case for it)", ir::op_name(op),
                  ir::op_kind(op) == ir::OpKind::Elementwise ? "cannot be computed here" : "is not an elementwise op"));
}

}  // namespace kiln::codegen::cuda
