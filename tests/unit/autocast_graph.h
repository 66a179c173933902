// The graph as `kiln compile --precision=P` computes it (decomposed, then autocast): what
// the half-precision tests run the interpreter on, every cast rounded exactly.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "passes/pipeline.h"
#include "tests/unit/test_util.h"

namespace kiln::testing {

inline ir::Graph autocast_graph(const ir::Graph& g, const std::string& precision) {
  ir::Graph cast = g;
  auto pipeline = passes::pipeline_from_text("decompose,autocast{precision=" + precision + "}");
  if (!pipeline.ok()) FAIL(pipeline.error().message);
  auto changed = pipeline->run(cast);
  if (!changed.ok()) FAIL(changed.error().message);
  return cast;
}

/// The interpreter's results of autocast_graph(g, precision), every cast rounded exactly;
/// params stored in the precision (only matmuls read them) take their rounded values.
inline std::vector<ir::Tensor> autocast_values(const ir::Graph& g, const std::map<std::string, ir::Tensor>& args,
                                               const std::string& precision) {
  const ir::Graph cast = autocast_graph(g, precision);
  auto cast_args = args;
  for (const ir::Arg& a : cast.args) {
    ir::Tensor& t = cast_args.at(cast.value_name(a.value));
    if (cast.type(a.value).dtype != t.type.dtype) t = ir::Tensor::from_doubles(cast.type(a.value), t.floats);
  }
  return eval_ok(cast, cast_args);
}

}  // namespace kiln::testing
