// From a fused, planned graph to the contents of a .kiln artifact.
#pragma once

#include <map>
#include <string>

#include "base/result.h"
#include "ir/graph.h"
#include "ir/tensor.h"
#include "runtime/format/artifact.h"

namespace kiln {

/// The compiler version artifacts record.
inline constexpr std::string_view kCompilerVersion = "kiln 0.1.0";

/// Describes a graph after the fusion and memory-plan passes as artifact contents: the
/// values that cross steps, the signature, the plan, the steps (kernel steps name the
/// entry point `kiln_STEP`, library steps their call), each param's bytes from
/// `weights` (by argument name; the type must match exactly), and `ir_text`. Code objects
/// are the code generator's to add. A param with no value is an error naming it.
Result<format::ArtifactContents> artifact_contents(const ir::Graph& planned, const std::map<std::string, ir::Tensor>& weights,
                                                   const std::string& target, const std::string& ir_text);

}  // namespace kiln
