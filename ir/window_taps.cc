#include "ir/window_taps.h"

#include <algorithm>
#include <numeric>

namespace kiln::ir {

ValueId reshape_to(GraphBuilder& b, ValueId x, Shape shape) {
  Attrs attrs;
  attrs.set("shape", std::move(shape));
  return b.emit(Op::Reshape, {x}, std::move(attrs));
}

ValueId padded(GraphBuilder& b, ValueId x, const std::vector<int64_t>& lo, const std::vector<int64_t>& hi,
               double fill) {
  const TensorType t = b.type(x);
  const size_t rank = t.shape.size();
  if (std::any_of(lo.begin(), lo.end(), [](int64_t p) { return p < 0; }) ||
      std::any_of(hi.begin(), hi.end(), [](int64_t p) { return p < 0; })) {
    std::vector<int64_t> starts(rank), ends(rank);
    for (size_t d = 0; d < rank; ++d) {
      starts[d] = std::max<int64_t>(0, -lo[d]);
      ends[d] = t.shape[d] - std::max<int64_t>(0, -hi[d]);
    }
    Attrs attrs;
    attrs.set("starts", std::move(starts));
    attrs.set("ends", std::move(ends));
    x = b.emit(Op::Slice, {x}, std::move(attrs));
  }
  for (size_t d = 0; d < rank; ++d) {
    std::vector<ValueId> parts;
    auto fill_of = [&](int64_t extent) {
      Shape shape = b.type(x).shape;
      shape[d] = extent;
      return b.broadcast(b.scalar(fill, t.dtype), shape, {});
    };
    if (lo[d] > 0) parts.push_back(fill_of(lo[d]));
    parts.push_back(x);
    if (hi[d] > 0) parts.push_back(fill_of(hi[d]));
    if (parts.size() == 1) continue;
    Attrs attrs;
    attrs.set("axis", static_cast<int64_t>(d));
    x = b.emit(Op::Concat, std::move(parts), std::move(attrs));
  }
  return x;
}

ValueId padded_for_windows(GraphBuilder& b, ValueId x, const Window& w, double fill) {
  const size_t rank = b.type(x).shape.size();
  std::vector<int64_t> lo(rank, 0), hi(rank, 0);
  for (int64_t d = 0; d < w.spatial_rank(); ++d) {
    lo[2 + d] = w.pad_lo[d];
    hi[2 + d] = w.padded_end(d) - w.input[d] - w.pad_lo[d];
  }
  return padded(b, x, lo, hi, fill);
}

std::vector<int64_t> tap_starts(const Window& w, int64_t tap, size_t rank) {
  std::vector<int64_t> starts(rank, 0);
  for (int64_t d = w.spatial_rank(); d-- > 0;) {
    starts[static_cast<size_t>(2 + d)] = tap % w.window[static_cast<size_t>(d)] * w.dilations[static_cast<size_t>(d)];
    tap /= w.window[static_cast<size_t>(d)];
  }
  return starts;
}

std::vector<int64_t> window_strides(const Window& w, size_t rank) {
  std::vector<int64_t> strides(rank, 1);
  std::copy(w.strides.begin(), w.strides.end(), strides.begin() + 2);
  return strides;
}

void for_each_tap(GraphBuilder& b, ValueId xp, const Window& w, const std::function<void(int64_t, ValueId)>& f) {
  const Shape shape = b.type(xp).shape;
  const int64_t taps = std::accumulate(w.window.begin(), w.window.end(), int64_t{1}, std::multiplies<>());
  for (int64_t t = 0; t < taps; ++t) {
    std::vector<int64_t> starts = tap_starts(w, t, shape.size()), ends = shape;
    for (int64_t d = 0; d < w.spatial_rank(); ++d)
      ends[static_cast<size_t>(2 + d)] = starts[static_cast<size_t>(2 + d)] +
                                         (w.output[static_cast<size_t>(d)] - 1) * w.strides[static_cast<size_t>(d)] + 1;
    Attrs attrs;
    attrs.set("starts", std::move(starts));
    attrs.set("ends", std::move(ends));
    attrs.set("strides", window_strides(w, shape.size()));
    f(t, b.emit(Op::Slice, {xp}, std::move(attrs)));
  }
}

Shape output_shape(int64_t n, int64_t c, const Window& w) {
  Shape shape{n, c};
  shape.insert(shape.end(), w.output.begin(), w.output.end());
  return shape;
}

// Depthwise conv (one input and one output channel per group): each tap's slice times its

Attrs perm_attrs(std::vector<int64_t> perm) {
  Attrs attrs;
  attrs.set("perm", std::move(perm));
  return attrs;
}

}  // namespace kiln::ir
