#include "compiler/weights.h"

#include <fmt/format.h>
#include <vector>

namespace kiln {

Result<std::map<std::string, ir::Tensor>> match_weights(const ir::Graph& g,
                                                        const std::map<std::string, ir::Tensor>& weights,
                                                        const WeightsOptions& options) {
  std::map<std::string, ir::Tensor> matched;
  std::vector<std::string> unused;
  for (const auto& [name, tensor] : weights) {
    const ir::Arg* arg = g.find_arg(name);
    if (!arg) {
      unused.push_back(name);
      continue;
    }
    const ir::TensorType& want = g.type(arg->value);
    if (arg->kind == ir::ArgKind::Input) {
      if (options.allow_unused) continue;
      return make_error(fmt::format(
          "the weights hold \"{}\", an input of @{} (weights give params and state; inputs are fed at run time)", name,
          g.name));
    }
    const char* kind = arg->kind == ir::ArgKind::Param ? "param" : "state";
    if (tensor.type == want) {
      matched[name] = tensor;
      continue;
    }
    const bool convertible =
        tensor.type.shape == want.shape && ir::is_float(tensor.type.dtype) && ir::is_float(want.dtype);
    if (convertible && options.convert_dtypes) {
      matched[name] = ir::Tensor::from_doubles(want, tensor.floats);
      continue;
    }
    return make_error(
        fmt::format("{} %{} is {}, but its weights are {}{}", kind, name, want.to_string(), tensor.type.to_string(),
                    convertible ? " (--weights-dtype=convert rounds floating weights to the argument's type)" : ""));
  }
  if (!unused.empty() && !options.allow_unused) {
    std::string names;
    for (const std::string& n : unused) names += fmt::format("{}\"{}\"", names.empty() ? "" : ", ", n);
    return make_error(fmt::format(
        "the weights hold {}, which no param or state of @{} is named (--allow-unused-weights ignores them)", names,
        g.name));
  }
  return matched;
}

}  // namespace kiln
