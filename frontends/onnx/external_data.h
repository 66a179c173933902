// ONNX external data: initializers whose bytes lie in files beside the model (how models
// over protobuf's 2 GiB are saved, and what `onnx.save(..., save_as_external_data=True)`
// writes), read relative to the model's directory.
#pragma once

#include <map>
#include <string>
#include <utility>

#include <onnx/onnx_pb.h>
#include "base/result.h"

namespace kiln::onnx_import {

class ExternalData {
 public:
  /// `model_dir`: the directory the model was read from; empty when it was given as
  /// bytes, and then a tensor with external data is an error.
  explicit ExternalData(std::string model_dir) : model_dir_(std::move(model_dir)) {}

  /// `proto` as it is when it keeps its data inline; else a copy with the bytes its
  /// `location`, `offset` and `length` name as raw data. The location must be a relative
  /// path inside the model's directory; each file is read once per import.
  Result<onnx::TensorProto> inline_data(const onnx::TensorProto& proto);

 private:
  std::string model_dir_;
  std::map<std::string, std::string> files_;  // by location
};

}  // namespace kiln::onnx_import
