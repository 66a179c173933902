// Which operand element a broadcast, transpose or slice reads, shared by both code
// generators: they compute the same index mapping over different index types (LLVM
// values on the CPU, C++ expressions in CUDA source).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ir/graph.h"

namespace kiln::ir {

/// The index into n's operand (of shape `operand`) of the element that n's result holds
/// at `out`, for a broadcast, transpose or slice; nullopt for any other op. `zero()` makes
/// the index 0, and `affine(i, start, step)` the index start + i * step.
template <class Index, class Zero, class Affine>
std::optional<std::vector<Index>> movement_source(const Node& n, const Shape& operand, const std::vector<Index>& out,
                                                  Zero zero, Affine affine) {
  std::vector<Index> source;
  switch (n.op) {
    case Op::Broadcast: {
      const auto& dims = n.attrs.get_ints("dims");
      for (size_t i = 0; i < dims.size(); ++i)
        source.push_back(operand[i] == 1 ? zero() : out[static_cast<size_t>(dims[i])]);
      return source;
    }
    case Op::Transpose: {
      const auto& perm = n.attrs.get_ints("perm");
      source.resize(perm.size());
      for (size_t d = 0; d < perm.size(); ++d) source[static_cast<size_t>(perm[d])] = out[d];
      return source;
    }
    case Op::Slice: {
      const auto& starts = n.attrs.get_ints("starts");
      std::vector<int64_t> steps =
          n.attrs.has("strides") ? n.attrs.get_ints("strides") : std::vector<int64_t>(operand.size(), 1);
      for (size_t d = 0; d < operand.size(); ++d) source.push_back(affine(out[d], starts[d], steps[d]));
      return source;
    }
    default: return std::nullopt;
  }
}

}  // namespace kiln::ir
