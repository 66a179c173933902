// The graph as `kiln compile --precision=P` computes it (decomposed, then autocast): what
// the half-precision tests run the interpreter on, every cast rounded exactly.
#pragma once

#include <string>

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

}  // namespace kiln::testing
