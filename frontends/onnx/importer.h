// ONNX import: an ONNX model (ModelProto) becomes a kiln graph and its weights. Initializers
// become params, whose values are the weights; shape arithmetic on constants is folded at
// import; symbolic dims are fixed by the caller. Everything not honoured is an error
// naming the node, op and attribute (docs/onnx.md).
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "ir/graph.h"
#include "ir/tensor.h"

namespace kiln::onnx_import {

struct ImportOptions {
  /// Dims for graph inputs, by ONNX input name: every symbolic or unknown dim of an input
  /// needs one (`kiln import --shape NAME=D0,D1,...`).
  std::map<std::string, std::vector<int64_t>> shapes;
  /// Inputs fixed to a value, by ONNX input name: they become constants, which fold
  /// through shape arithmetic, and are no inputs of the graph (the conformance runner
  /// fixes the shape and axes inputs of ONNX's node tests this way).
  std::map<std::string, ir::Tensor> constants;
  /// The directory external data is read from (import_file sets the model's); empty:
  /// a tensor with external data is an error.
  std::string model_dir;
};

/// An ONNX name and the kiln name it became; `index` is the ONNX input's or output's
/// position in the model's list.
struct NameMapping {
  std::string onnx, kiln;
  int index = 0;
};

struct ImportedModel {
  ir::Graph graph;
  /// The params' values, by kiln name.
  std::map<std::string, ir::Tensor> weights;
  std::vector<NameMapping> inputs, outputs;
  /// The default domain's opset the model imports.
  int64_t opset = 0;
};

/// kiln's name for an ONNX value name: every character outside [A-Za-z0-9_.] becomes '_'
/// (and a name that starts with neither a letter nor '_' gets a leading '_').
std::string kiln_name(std::string_view onnx_name);

/// Imports a serialized ModelProto.
Result<ImportedModel> import_model(std::span<const uint8_t> bytes, const ImportOptions& options = {});
/// Reads and imports an .onnx file.
Result<ImportedModel> import_file(const std::string& path, const ImportOptions& options = {});

/// A serialized TensorProto (as the ONNX test data's .pb files hold) as a tensor.
Result<ir::Tensor> read_tensor_proto(std::span<const uint8_t> bytes);

}  // namespace kiln::onnx_import
