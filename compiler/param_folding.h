// Computations on params alone done once, at compile time: a value that only params
// (whose weights the compiler bakes into the artifact) and constants determine becomes a
// param of its own, so no run computes it again. BiT's weight standardization (each
// convolution's weights less their mean, over their deviation) otherwise ran on every
// inference, and its convolutions read weights oneDNN could not pack ahead.
#pragma once

#include <map>
#include <set>
#include <string>

#include "ir/graph.h"
#include "ir/tensor.h"

namespace kiln {

/// Each value computed from params with weights in `weights` and from constants alone (with
/// arithmetic: params only reshaped, transposed or sliced stay as they are), that a node
/// depending on anything else reads, and that holds no more bytes than the largest param it
/// is computed from (so a broadcast of a bias, or a quantized weight's dequantization, stays
/// in the kernels that read it): evaluated with the reference
/// interpreter, and made a param named after it with ".folded" (and a number where that is
/// taken), its weight added to `weights`. Params no node reads any more leave the graph and
/// `weights`. Returns how many values it folded.
int fold_param_computations(ir::Graph& g, std::map<std::string, ir::Tensor>& weights);
/// What the compile-time folds (this one and compiler/batch_norm_folding.h) share:
/// the names of g's values and args, which new params must avoid;
std::set<std::string> taken_names(const ir::Graph& g);
/// a new param's name, "BASE.folded" (or "BASE.folded2", ...), added to `taken`.
std::string folded_param_name(std::set<std::string>& taken, const std::string& base);

/// Whether fold_param_computations would fold any value (without changing anything).
bool computes_on_params(const ir::Graph& g, const std::map<std::string, ir::Tensor>& weights);

}  // namespace kiln
