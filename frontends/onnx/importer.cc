// The model-level part of ONNX import: the protobuf parse, opsets, inputs with their
// shapes, initializers, nodes in order, outputs and names.
#include "frontends/onnx/importer.h"

#include <climits>
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/file.h"
#include "base/shape_limit.h"
#include "frontends/onnx/external_data.h"
#include "frontends/onnx/ops.h"
#include "ir/verifier.h"
#include "passes/dce.h"

namespace kiln::onnx_import {

namespace {

// Files larger than this are refused before they are read (protobuf parses at most 2 GiB).
constexpr uint64_t kMostFileBytes = uint64_t{2} << 30;

// The default domain's opset the model imports ("" and "ai.onnx" are the same domain),
// or 0 when it imports none (then a node of that domain is an error).
int64_t default_opset(const onnx::ModelProto& model) {
  for (const onnx::OperatorSetIdProto& set : model.opset_import())
    if (set.domain().empty() || set.domain() == "ai.onnx") return set.version();
  return model.opset_import_size() == 0 ? 1 : 0;  // IR version 1-2 models name none
}

// An input's type: its element type and dims, symbolic or unknown dims fixed by --shape.
Result<ir::TensorType> input_type(const onnx::ValueInfoProto& input, const ImportOptions& options) {
  const std::string& name = input.name();
  if (!input.type().has_tensor_type())
    return make_error(
        fmt::format("onnx: input '{}' is not a tensor (sequences, maps and optionals are not supported)", name));
  const onnx::TypeProto::Tensor& t = input.type().tensor_type();
  KILN_ASSIGN_OR_RETURN(ir::DType dtype, dtype_of(t.elem_type(), "input '" + name + "'"));
  for (int i = 0; t.has_shape() && i < t.shape().dim_size(); ++i)
    if (t.shape().dim(i).has_dim_value() && t.shape().dim(i).dim_value() < 0)
      return make_error(
          fmt::format("onnx: input '{}' has the negative dim {} at {}", name, t.shape().dim(i).dim_value(), i));
  auto within_limit = [&](ir::Shape shape) -> Result<ir::TensorType> {
    if (!dims_within_limit(shape))
      return make_error(
          fmt::format("onnx: input '{}' of shape [{}] {}", name, fmt::join(shape, ","), dims_limit_error(shape)));
    return ir::TensorType{dtype, std::move(shape)};
  };
  auto given = options.shapes.find(name);
  if (given != options.shapes.end()) {
    if (t.has_shape() && t.shape().dim_size() != static_cast<int>(given->second.size()))
      return make_error(fmt::format("onnx: --shape {} gives {} dims, but the input has {}", name, given->second.size(),
                                    t.shape().dim_size()));
    for (int i = 0; t.has_shape() && i < t.shape().dim_size(); ++i) {
      const onnx::TensorShapeProto::Dimension& d = t.shape().dim(i);
      if (d.has_dim_value() && d.dim_value() != given->second[static_cast<size_t>(i)])
        return make_error(fmt::format("onnx: --shape {} gives dim {} as {}, but the model fixes it at {}", name, i,
                                      given->second[static_cast<size_t>(i)], d.dim_value()));
    }
    return within_limit(given->second);
  }
  if (!t.has_shape())
    return make_error(fmt::format("onnx: input '{}' has no shape; give one with --shape {}=D0,D1,...", name, name));
  ir::Shape shape;
  for (int i = 0; i < t.shape().dim_size(); ++i) {
    const onnx::TensorShapeProto::Dimension& d = t.shape().dim(i);
    if (!d.has_dim_value())
      return make_error(fmt::format("onnx: input '{}' has the symbolic dim {} ('{}'); fix it with --shape {}=D0,D1,...",
                                    name, i, d.dim_param(), name));
    shape.push_back(d.dim_value());
  }
  return within_limit(std::move(shape));
}

// Attributes that later opsets made inputs: a node of such an opset that still has one
// (a hand-built graph, or a converter that raised the opset and left the node) is refused,
// since the converter reads the input and would drop the attribute.
struct MovedAttribute {
  std::string_view op_type, attribute;
  int64_t input_from;
};
constexpr MovedAttribute kMovedAttributes[] = {
    {"Clip", "min", 11},        {"Clip", "max", 11},          {"Dropout", "ratio", 12},
    {"Pad", "pads", 11},        {"Pad", "value", 11},         {"ReduceL1", "axes", 18},
    {"ReduceL2", "axes", 18},   {"ReduceLogSum", "axes", 18}, {"ReduceLogSumExp", "axes", 18},
    {"ReduceMax", "axes", 18},  {"ReduceMean", "axes", 18},   {"ReduceMin", "axes", 18},
    {"ReduceProd", "axes", 18}, {"ReduceSum", "axes", 13},    {"ReduceSumSquare", "axes", 18},
    {"Reshape", "shape", 5},    {"Slice", "axes", 10},        {"Slice", "ends", 10},
    {"Slice", "starts", 10},    {"Split", "split", 13},       {"Squeeze", "axes", 13},
    {"TopK", "k", 10},          {"Unsqueeze", "axes", 13},    {"Upsample", "scales", 9},
};

Status check_moved_attributes(const Context& ctx, const onnx::NodeProto& node) {
  for (const MovedAttribute& m : kMovedAttributes)
    if (node.op_type() == m.op_type && ctx.opset() >= m.input_from && attribute(node, m.attribute))
      return node_error(node, fmt::format("attribute '{}' is an input of {} from opset {} on (the model imports "
                                          "opset {})",
                                          m.attribute, m.op_type, m.input_from, ctx.opset()));
  return Status::Ok();
}

Status convert_node(Context& ctx, const onnx::NodeProto& node) {
  if (!node.domain().empty() && node.domain() != "ai.onnx")
    return node_error(
        node, fmt::format("the domain '{}' is not supported (kiln imports the default domain ai.onnx)", node.domain()));
  if (ctx.opset() == 0) return node_error(node, "the model imports no opset of the default domain (ai.onnx)");
  const OpConverter* converter = find_converter(node.op_type());
  if (!converter) return node_error(node, fmt::format("kiln does not support the op {}", node.op_type()));
  KILN_RETURN_IF_ERROR(check_moved_attributes(ctx, node));
  return converter->convert(ctx, node);
}

}  // namespace

std::string kiln_name(std::string_view onnx_name) {
  std::string name;
  for (char c : onnx_name) name += std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' ? c : '_';
  if (name.empty() || !(std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_')) name = "_" + name;
  return name;
}

Result<ImportedModel> import_model(std::span<const uint8_t> bytes, const ImportOptions& options) {
  if (bytes.size() > static_cast<size_t>(INT_MAX))
    return make_error("onnx: the model is over 2 GiB, which protobuf cannot parse");
  onnx::ModelProto model;
  if (!model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return make_error("onnx: the file is not an ONNX model (protobuf could not parse it: truncated or corrupt?)");
  if (!model.has_graph()) return make_error("onnx: the model has no graph");
  ImportedModel imported;
  imported.opset = default_opset(model);
  const onnx::GraphProto& graph = model.graph();
  imported.graph.name = kiln_name(graph.name().empty() ? "model" : graph.name());
  Context ctx(imported.graph, imported.weights, imported.opset);

  ExternalData external(options.model_dir);
  for (const onnx::TensorProto& init : graph.initializer()) {
    if (ctx.defined(init.name())) return make_error(fmt::format("onnx: initializer '{}' is given twice", init.name()));
    ir::Tensor t;
    if (init.data_location() == onnx::TensorProto::EXTERNAL) {
      KILN_ASSIGN_OR_RETURN(onnx::TensorProto inlined, external.inline_data(init));
      KILN_ASSIGN_OR_RETURN(t, tensor_of(inlined));
    } else {  // read where it is (inline_data would copy it)
      KILN_ASSIGN_OR_RETURN(t, tensor_of(init));
    }
    // A float initializer of one element is an exporter's constant (GELU's 0.5 and 3.0),
    // not a weight: as a constant it folds, and kernels compute with it as an immediate.
    const bool weight = !(ir::is_float(t.type.dtype) && t.size() == 1);
    ctx.define(init.name(), Value{std::nullopt, std::move(t), weight, ""});
  }
  auto is_input = [&](const std::string& name) {
    for (const onnx::ValueInfoProto& in : graph.input())
      if (in.name() == name) return true;
    return false;
  };
  for (const auto& [name, dims] : options.shapes)
    if (!is_input(name))
      return make_error(fmt::format("onnx: --shape names '{}', which is no input of the model", name));
  for (const auto& [name, value] : options.constants)
    if (!is_input(name)) return make_error(fmt::format("onnx: the constant '{}' is no input of the model", name));
  for (int i = 0; i < graph.input_size(); ++i) {
    const onnx::ValueInfoProto& input = graph.input(i);
    if (ctx.defined(input.name())) continue;  // an initializer listed as an input (IR version < 4)
    if (auto fixed = options.constants.find(input.name()); fixed != options.constants.end()) {
      ctx.define(input.name(), Value{std::nullopt, fixed->second, false, ""});
      continue;
    }
    KILN_ASSIGN_OR_RETURN(ir::TensorType type, input_type(input, options));
    const std::string name = ctx.unique_name(input.name());
    ctx.define(input.name(), Value{ctx.builder().arg(name, type), std::nullopt, false, ""});
    imported.inputs.push_back({input.name(), name, i});
  }
  for (const onnx::NodeProto& node : graph.node()) {
    KILN_RETURN_IF_ERROR(convert_node(ctx, node));
  }
  for (int i = 0; i < graph.output_size(); ++i) {
    const onnx::ValueInfoProto& output = graph.output(i);
    if (!ctx.defined(output.name()))
      return make_error(fmt::format("onnx: output '{}' is defined by no node, input or initializer", output.name()));
    KILN_ASSIGN_OR_RETURN(ir::ValueId v, ctx.operand(output.name()));
    // An output that is an input's value or another output's (Identity, a reshape to the
    // same shape) is a copy with its own name: results are named, and found, by name.
    const std::string& had = imported.graph.values[static_cast<size_t>(v)].name;
    if (!had.empty() && had != output.name()) {
      ir::Attrs same_shape;
      same_shape.set("shape", imported.graph.type(v).shape);
      v = ctx.builder().emit(ir::Op::Reshape, {v}, std::move(same_shape));
    }
    std::string& name = imported.graph.values[static_cast<size_t>(v)].name;
    if (name.empty()) name = ctx.unique_name(output.name());
    imported.graph.results.push_back(v);
    imported.outputs.push_back({output.name(), name, i});
  }
  if (imported.graph.results.empty()) return make_error("onnx: the model has no outputs");
  ctx.store_weights();
  // The nodes no output needs, and the params only they read, leave before their weights
  // fill the artifact: a chain of scatters at known positions leaves its earlier links
  // unread (ops_scatter.cc), each with a constant of its tensor's size.
  (void)passes::DcePass().run(imported.graph);
  passes::drop_unread_params(imported.graph, imported.weights);
  Status verified = ir::verify(imported.graph);
  if (!verified.ok()) return make_error("onnx: the imported graph does not verify: " + verified.error().message);
  return imported;
}

Result<ImportedModel> import_file(const std::string& path, const ImportOptions& options) {
  KILN_ASSIGN_OR_RETURN(std::string bytes, read_file(path, kMostFileBytes));
  ImportOptions with_dir = options;
  if (with_dir.model_dir.empty()) {
    with_dir.model_dir = std::filesystem::path(path).parent_path().string();
    if (with_dir.model_dir.empty()) with_dir.model_dir = ".";
  }
  auto imported = import_model(std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), with_dir);
  if (!imported.ok()) return make_error(path + ": " + imported.error().message);
  return imported;
}

Result<ir::Tensor> read_tensor_proto(std::span<const uint8_t> bytes) {
  onnx::TensorProto proto;
  if (bytes.size() > static_cast<size_t>(INT_MAX) ||
      !proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return make_error("onnx: not a TensorProto (protobuf could not parse it)");
  return tensor_of(proto);
}

const OpConverter* find_converter(std::string_view op_type) {
  for (auto table : {elementwise_converters(), nn_converters(), shape_converters(), reduce_converters(),
                     loss_converters(), movement_converters(), gather_converters(), math_converters(),
                     norm_converters(), resize_converters(), scatter_converters(), einsum_converters(),
                     rnn_converters(), quantize_converters(), signal_converters(), grid_sample_converters()})
    for (const OpConverter& c : table)
      if (c.op_type == op_type) return &c;
  return nullptr;
}

Value scalar(double value, ir::DType dtype) {
  ir::Tensor t = ir::is_float(dtype) ? ir::Tensor::from_doubles({dtype, {}}, {value})
                                     : ir::Tensor::from_ints({dtype, {}}, {static_cast<int64_t>(value)});
  return Value{std::nullopt, std::move(t), false, ""};
}

Status define_output(Context& ctx, const onnx::NodeProto& node, int index, Value value) {
  if (index >= node.output_size() || node.output(index).empty()) return Status::Ok();
  const std::string& name = node.output(index);
  if (ctx.defined(name)) return node_error(node, fmt::format("output '{}' is already defined", name));
  value.initializer = false;
  // A graph value keeps its id; the name identifies a value read through operand().
  ctx.define(name, std::move(value));
  return Status::Ok();
}

}  // namespace kiln::onnx_import
