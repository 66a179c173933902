#include "compiler/batch_norm_folding.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "compiler/param_folding.h"
#include "passes/dce.h"

namespace kiln {
namespace {

using ir::ArgKind;
using ir::DType;
using ir::Node;
using ir::Op;
using ir::ValueId;

// One batch norm to fold: its node, its convolution's node, the convolution's bias param
// (an add between them, as ONNX's Conv with a bias imports) or none, and the two new params.
struct Fold {
  size_t batch_norm = 0, conv = 0;
  ValueId conv_result = ir::kNoValue, conv_bias = ir::kNoValue;
  ValueId weight = ir::kNoValue, bias = ir::kNoValue;
};

class Folder {
 public:
  Folder(ir::Graph& g, std::map<std::string, ir::Tensor>& weights) : g_(g), weights_(weights), names_(taken_names(g)) {}

  int run() {
    const std::vector<int> uses = g_.use_counts();
    const std::vector<int> producers = g_.producers();
    std::vector<Fold> folds;
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      const Node& bn = g_.nodes[i];
      if (bn.op != Op::BatchNorm || uses[bn.operands[0]] != 1) continue;
      int conv = producers[static_cast<size_t>(bn.operands[0])];
      ValueId conv_bias = ir::kNoValue;
      // A per-channel bias added to the convolution's sum first.
      if (conv >= 0 && g_.nodes[static_cast<size_t>(conv)].op == Op::Add) {
        const Node& add = g_.nodes[static_cast<size_t>(conv)];
        conv = -1;
        for (int side = 0; side < 2 && conv < 0; ++side) {
          const ValueId sum = add.operands[static_cast<size_t>(side)];
          const int p = producers[static_cast<size_t>(sum)];
          const ValueId bias = channel_param(add.operands[static_cast<size_t>(1 - side)], producers);
          if (p >= 0 && g_.nodes[static_cast<size_t>(p)].op == Op::Conv && uses[sum] == 1 && bias != ir::kNoValue) {
            conv = p;
            conv_bias = bias;
          }
        }
      }
      if (conv < 0 || g_.nodes[static_cast<size_t>(conv)].op != Op::Conv) continue;
      const Node& c = g_.nodes[static_cast<size_t>(conv)];
      const ValueId w = c.operands[1];
      std::vector<ValueId> channel_params(bn.operands.begin() + 1, bn.operands.end());
      if (conv_bias != ir::kNoValue) channel_params.push_back(conv_bias);
      if (!f32_param(w) ||
          !std::all_of(channel_params.begin(), channel_params.end(), [&](ValueId v) { return f32_param(v); }))
        continue;
      const int64_t channels = g_.type(w).shape[0];
      if (!std::all_of(channel_params.begin(), channel_params.end(),
                       [&](ValueId v) { return g_.type(v).num_elements() == channels; }))
        continue;
      folds.push_back(fold(bn, static_cast<size_t>(conv), conv_bias, i));
    }
    if (folds.empty()) return 0;
    rewrite(folds);
    passes::drop_unread_params(g_, weights_);
    return static_cast<int>(folds.size());
  }

 private:
  bool f32_param(ValueId v) const {
    const ir::Arg* a = g_.find_arg(g_.value_name(v));
    return a && a->value == v && a->kind == ArgKind::Param && g_.type(v).dtype == DType::F32 &&
           weights_.count(g_.value_name(v)) && weights_.at(g_.value_name(v)).type == g_.type(v);
  }

  // The param whose elements `v` spreads along dim 1 (a broadcast of it, or of a reshape
  // of it that keeps one dim of more than one element), or none.
  ValueId channel_param(ValueId v, const std::vector<int>& producers) const {
    const int b = producers[static_cast<size_t>(v)];
    if (b < 0 || g_.nodes[static_cast<size_t>(b)].op != Op::Broadcast) return ir::kNoValue;
    const Node& broadcast = g_.nodes[static_cast<size_t>(b)];
    ValueId source = broadcast.operands[0];
    const std::vector<int64_t>& dims = broadcast.attrs.get_ints("dims");
    const ir::Shape& shape = g_.type(source).shape;
    int spread = 0;
    for (size_t d = 0; d < shape.size(); ++d)
      if (shape[d] != 1) spread += dims[d] == 1 ? 1 : 2;
    if (spread != 1) return ir::kNoValue;
    const int r = producers[static_cast<size_t>(source)];
    if (r >= 0 && g_.nodes[static_cast<size_t>(r)].op == Op::Reshape)
      source = g_.nodes[static_cast<size_t>(r)].operands[0];
    return f32_param(source) ? source : ir::kNoValue;
  }

  ValueId new_param(const std::string& name, ir::TensorType type, const std::vector<double>& values) {
    const ValueId v = g_.add_value(type, name);
    g_.args.push_back(ir::Arg{v, ArgKind::Param, {}});
    weights_[name] = ir::Tensor::from_doubles(std::move(type), values);
    return v;
  }

  // W' and b' of the batch norm at node `at` after the convolution at node `conv` (and
  // its bias param `conv_bias`, where one is added between them).
  Fold fold(const Node& bn, size_t conv, ValueId conv_bias, size_t at) {
    const ir::Tensor& w = weights_.at(g_.value_name(g_.nodes[conv].operands[1]));
    auto values = [&](size_t operand) { return weights_.at(g_.value_name(bn.operands[operand])).floats; };
    const std::vector<double> gamma = values(1), beta = values(2), mean = values(3), variance = values(4);
    const std::vector<double> conv_bias_values = conv_bias == ir::kNoValue
                                                     ? std::vector<double>(mean.size(), 0.0)
                                                     : weights_.at(g_.value_name(conv_bias)).floats;
    const double epsilon = bn.attrs.get_float("epsilon", 1e-5);
    const int64_t channels = w.type.shape[0], per_channel = w.size() / channels;
    std::vector<double> scaled(w.floats.size()), bias(static_cast<size_t>(channels));
    for (int64_t o = 0; o < channels; ++o) {
      const size_t c = static_cast<size_t>(o);
      const double s = gamma[c] / std::sqrt(variance[c] + epsilon);
      for (int64_t k = 0; k < per_channel; ++k) {
        const size_t e = static_cast<size_t>(o * per_channel + k);
        scaled[e] = w.floats[e] * s;
      }
      bias[c] = beta[c] + (conv_bias_values[c] - mean[c]) * s;
    }
    Fold f{at, conv, g_.nodes[conv].result, conv_bias, ir::kNoValue, ir::kNoValue};
    f.weight = new_param(folded_param_name(names_, g_.value_name(g_.nodes[conv].operands[1])), w.type, scaled);
    f.bias = new_param(folded_param_name(names_, g_.value_name(bn.operands[2])), ir::TensorType{DType::F32, {channels}},
                       bias);
    return f;
  }

  // Each convolution reads W'; each batch norm becomes the add of b' broadcast over the
  // other dims, the broadcast placed just before it.
  void rewrite(const std::vector<Fold>& folds) {
    std::map<size_t, const Fold*> at;
    for (const Fold& f : folds) {
      at[f.batch_norm] = &f;
      g_.nodes[f.conv].operands[1] = f.weight;
    }
    std::vector<Node> nodes;
    nodes.reserve(g_.nodes.size() + folds.size());
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      auto it = at.find(i);
      if (it == at.end()) {
        nodes.push_back(std::move(g_.nodes[i]));
        continue;
      }
      Node& bn = g_.nodes[i];
      const ir::TensorType type = g_.type(bn.result);
      Node broadcast{Op::Broadcast, {it->second->bias}, {}, g_.add_value(type), bn.loc};
      broadcast.attrs.set("shape", type.shape);
      broadcast.attrs.set("dims", std::vector<int64_t>{1});
      Node add{Op::Add, {it->second->conv_result, broadcast.result}, {}, bn.result, bn.loc};
      nodes.push_back(std::move(broadcast));
      nodes.push_back(std::move(add));
    }
    g_.nodes = std::move(nodes);
    g_.program.reset();
    g_.memory.reset();
    // The adds of convolutions' biases that the new biases replaced, and what only they read.
    (void)passes::DcePass().run(g_);
  }

  ir::Graph& g_;
  std::map<std::string, ir::Tensor>& weights_;
  std::set<std::string> names_;
};

}  // namespace

int fold_batch_norms(ir::Graph& g, std::map<std::string, ir::Tensor>& weights) { return Folder(g, weights).run(); }

}  // namespace kiln
