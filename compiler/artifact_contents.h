// From a fused, planned graph to the contents of a .kiln artifact.
#pragma once

#include <map>
#include <string>

#include "base/result.h"
#include "base/version.h"
#include "ir/graph.h"
#include "ir/tensor.h"
#include "runtime/format/artifact.h"

namespace kiln {

/// The compiler version artifacts record ("kiln 0.1.0").
std::string compiler_version();

/// The error of a param %`name` of `type` that the weights give no value.
Error missing_param_weights(const std::string& name, const ir::TensorType& type);

/// Describes a graph after the fusion and memory-plan passes as artifact contents: the
/// values that cross steps, the signature, the plan, the steps (kernel steps name the
/// entry point `kiln_STEP`, library steps their call), each param's bytes and each
/// state's initial bytes from `weights` (by argument name; the type must match exactly:
/// compiler/weights.h matches them), and `ir_text`. Code objects are the code
/// generator's to add. A param with no value is an error naming it; state without one
/// starts at zero.
Result<format::ArtifactContents> artifact_contents(const ir::Graph& planned,
                                                   const std::map<std::string, ir::Tensor>& weights,
                                                   const std::string& target, const std::string& ir_text);

}  // namespace kiln
