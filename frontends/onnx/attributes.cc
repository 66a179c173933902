// Attributes, element types and tensors of ONNX messages.
#include <fmt/format.h>

#include "base/half_float.h"
#include "base/shape_limit.h"
#include "frontends/onnx/context.h"

namespace kiln::onnx_import {

namespace {

std::string onnx_type_name(int32_t type) {
  return onnx::TensorProto_DataType_IsValid(type)
             ? onnx::TensorProto_DataType_Name(static_cast<onnx::TensorProto_DataType>(type))
             : fmt::format("{} (no TensorProto data type)", type);
}

}  // namespace

Status check_attributes(const onnx::NodeProto& node, std::initializer_list<std::string_view> known) {
  for (const onnx::AttributeProto& a : node.attribute())
    if (std::find(known.begin(), known.end(), a.name()) == known.end())
      return node_error(node, fmt::format("attribute '{}' is not supported", a.name()));
  return Status::Ok();
}

const onnx::AttributeProto* attribute(const onnx::NodeProto& node, std::string_view name) {
  for (const onnx::AttributeProto& a : node.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

Result<int64_t> int_attribute(const onnx::NodeProto& node, std::string_view name, std::optional<int64_t> fallback) {
  const onnx::AttributeProto* a = attribute(node, name);
  if (!a) {
    if (fallback) return *fallback;
    return node_error(node, fmt::format("attribute '{}' is missing", name));
  }
  if (a->type() != onnx::AttributeProto::INT)
    return node_error(node, fmt::format("attribute '{}' is not an int", name));
  return a->i();
}

Result<float> float_attribute(const onnx::NodeProto& node, std::string_view name, std::optional<float> fallback) {
  const onnx::AttributeProto* a = attribute(node, name);
  if (!a) {
    if (fallback) return *fallback;
    return node_error(node, fmt::format("attribute '{}' is missing", name));
  }
  if (a->type() != onnx::AttributeProto::FLOAT)
    return node_error(node, fmt::format("attribute '{}' is not a float", name));
  return a->f();
}

Result<std::vector<int64_t>> ints_attribute(const onnx::NodeProto& node, std::string_view name,
                                            std::optional<std::vector<int64_t>> fallback) {
  const onnx::AttributeProto* a = attribute(node, name);
  if (!a) {
    if (fallback) return *fallback;
    return node_error(node, fmt::format("attribute '{}' is missing", name));
  }
  if (a->type() != onnx::AttributeProto::INTS) return node_error(node, fmt::format("attribute '{}' is not ints", name));
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

Result<std::string> string_attribute(const onnx::NodeProto& node, std::string_view name,
                                     std::optional<std::string> fallback) {
  const onnx::AttributeProto* a = attribute(node, name);
  if (!a) {
    if (fallback) return *fallback;
    return node_error(node, fmt::format("attribute '{}' is missing", name));
  }
  if (a->type() != onnx::AttributeProto::STRING)
    return node_error(node, fmt::format("attribute '{}' is not a string", name));
  return a->s();
}

Result<ir::DType> dtype_of(int32_t onnx_type, const std::string& what) {
  switch (onnx_type) {
    case onnx::TensorProto::FLOAT: return ir::DType::F32;
    case onnx::TensorProto::DOUBLE: return ir::DType::F64;
    case onnx::TensorProto::FLOAT16: return ir::DType::F16;
    case onnx::TensorProto::BFLOAT16: return ir::DType::BF16;
    case onnx::TensorProto::INT32: return ir::DType::I32;
    case onnx::TensorProto::INT64: return ir::DType::I64;
    case onnx::TensorProto::BOOL: return ir::DType::Bool;
    case onnx::TensorProto::INT8: return ir::DType::I8;
    case onnx::TensorProto::UINT8: return ir::DType::U8;
    default:
      return make_error(
          fmt::format("onnx: {} has element type {}, which kiln does not have (it has FLOAT, DOUBLE, "
                      "FLOAT16, BFLOAT16, INT32, INT64, INT8, UINT8 and BOOL)",
                      what, onnx_type_name(onnx_type)));
  }
}

Result<ir::Tensor> tensor_of(const onnx::TensorProto& proto) {
  const std::string what = "tensor '" + proto.name() + "'";
  if (proto.data_location() == onnx::TensorProto::EXTERNAL)  // initializers' is inlined first (external_data.h)
    return make_error("onnx: " + what + " keeps its data in an external file, which kiln reads for initializers only");
  KILN_ASSIGN_OR_RETURN(ir::DType dtype, dtype_of(proto.data_type(), what));
  ir::TensorType type{dtype, ir::Shape(proto.dims().begin(), proto.dims().end())};
  for (int64_t d : type.shape)
    if (d < 0) return make_error("onnx: " + what + " has a negative dim");
  if (!dims_within_limit(type.shape)) return make_error("onnx: " + what + " has too many elements");
  const int64_t n = type.num_elements();
  std::vector<double> floats;
  std::vector<int64_t> ints;
  const bool is_float = ir::is_float(dtype);
  auto put = [&](double f, int64_t i) { is_float ? floats.push_back(f) : ints.push_back(i); };
  if (proto.has_raw_data()) {
    const std::string& raw = proto.raw_data();
    const size_t bytes = static_cast<size_t>(ir::dtype_size(dtype));
    if (raw.size() != static_cast<size_t>(n) * bytes)
      return make_error(fmt::format("onnx: {} has {} bytes of raw data, but its shape holds {}", what, raw.size(),
                                    static_cast<size_t>(n) * bytes));
    // Straight into the tensor: a temporary of every element was twice the weights' bytes.
    return ir::tensor_from_bytes(std::move(type), reinterpret_cast<const uint8_t*>(raw.data()));
  } else {
    int64_t count = 0;
    switch (dtype) {
      case ir::DType::F32:
        count = proto.float_data_size();
        for (float f : proto.float_data()) put(f, 0);
        break;
      case ir::DType::F64:
        count = proto.double_data_size();
        for (double f : proto.double_data()) put(f, 0);
        break;
      case ir::DType::F16:
      case ir::DType::BF16:  // the 16 bits of each element in an int32
        count = proto.int32_data_size();
        for (int32_t bits : proto.int32_data())
          put(dtype == ir::DType::F16 ? f16_to_float(static_cast<uint16_t>(bits))
                                      : bf16_to_float(static_cast<uint16_t>(bits)),
              0);
        break;
      case ir::DType::I32:
      case ir::DType::I8:  // int32_data holds the small integer types too
      case ir::DType::U8:
      case ir::DType::Bool:
        count = proto.int32_data_size();
        for (int32_t i : proto.int32_data()) put(0, dtype == ir::DType::Bool ? i != 0 : ir::wrap_to_dtype(dtype, i));
        break;
      case ir::DType::I64:
        count = proto.int64_data_size();
        for (int64_t i : proto.int64_data()) put(0, i);
        break;
    }
    if (count != n)
      return make_error(fmt::format("onnx: {} has {} elements of data, but its shape holds {}", what, count, n));
  }
  return is_float ? ir::Tensor::from_doubles(type, floats) : ir::Tensor::from_ints(type, ints);
}

std::vector<int64_t> ints_of(const ir::Tensor& t) {
  std::vector<int64_t> out;
  for (int64_t k = 0; k < t.size(); ++k)
    out.push_back(t.holds_floats() ? static_cast<int64_t>(t.floats[k]) : t.ints[k]);
  return out;
}

Result<int64_t> normalize_axis(const onnx::NodeProto& node, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return node_error(node, fmt::format("axis {} is out of range for rank {}", axis, rank));
  return axis < 0 ? axis + rank : axis;
}

}  // namespace kiln::onnx_import
