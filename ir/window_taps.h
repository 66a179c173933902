// The building blocks of the windowed ops' decompositions and lowerings
// (ir/decompose_window.cc, ir/lower_conv.cc): padding, and a window's taps as strided slices.
#pragma once

#include <functional>
#include <vector>

#include "ir/builder.h"
#include "ir/window.h"

namespace kiln::ir {

ValueId reshape_to(GraphBuilder& b, ValueId x, Shape shape);
Attrs perm_attrs(std::vector<int64_t> perm);

/// x padded with `fill` by lo and hi along each dim (negative: cropped).
ValueId padded(GraphBuilder& b, ValueId x, const std::vector<int64_t>& lo, const std::vector<int64_t>& hi, double fill);

/// The input padded for the windows: lo before, and after exactly as far as the last
/// window reaches (past the end padding with ceil_mode, short of it where no window uses it).
ValueId padded_for_windows(GraphBuilder& b, ValueId x, const Window& w, double fill);

/// Where tap `tap` (in row-major order) starts in the padded input of rank `rank`: 0 in N and
/// C, its offset times the dilation in each spatial dim.
std::vector<int64_t> tap_starts(const Window& w, int64_t tap, size_t rank);
/// A tap's slice strides over a tensor of rank `rank`: 1 in N and C, the window's strides.
std::vector<int64_t> window_strides(const Window& w, size_t rank);

/// Calls f(tap index, slice of xp: [N, C, E1..Ek]) for each window tap in row-major order.
void for_each_tap(GraphBuilder& b, ValueId xp, const Window& w, const std::function<void(int64_t, ValueId)>& f);

/// [n, c, E1..Ek].
Shape output_shape(int64_t n, int64_t c, const Window& w);

}  // namespace kiln::ir
