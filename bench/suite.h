// The graphs of `kiln bench`'s suites.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/result.h"
#include "ir/graph.h"
#include "ir/tensor.h"

namespace kiln::bench {

/// One benchmark: a graph, and the values of its params and initial state.
struct SuiteRow {
  std::string name;
  /// What it computes, with its sizes: "cos(cos(x)), x: f32[67108864]".
  std::string description;
  ir::Graph graph;
  std::map<std::string, ir::Tensor> weights;
  std::map<std::string, ir::Tensor> state;
};

/// The names of the suites `suite_rows` knows.
std::vector<std::string> suite_names();

/// The rows of a suite, at full size or (quick) small enough for a test. The fusion
/// suite: coscos, chain2/4/8/16, bias_gelu, softmax_256/4096/32768, layernorm,
/// residual_layernorm, mlp_forward, mlp_train_step. The models suite (bench/models.h):
/// gpt2_block, gpt2_block_train, bert_layer, llama_block, llama_block_train, mlp_train,
/// resnet18, cnn_train.
Result<std::vector<SuiteRow>> suite_rows(const std::string& suite, bool quick);

}  // namespace kiln::bench
