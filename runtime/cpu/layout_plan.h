// Which values of a CPU artifact stay in oneDNN's own layouts from step to step, planned
// once per session: a chain of convolutions, with pools and elementwise steps between
// them, reorders its activations once on the way in and once on the way out, not at
// every step.
#pragma once

#include <vector>

#include "runtime/format/artifact.h"

namespace kiln::runtime::cpu {

/// How one step reads and writes values kept in oneDNN's layouts.
struct StepLayout {
  /// Forward convolution steps: x as its primitive reads it, the result as it writes it,
  /// and the added tensor of a residual in the result's layout, rather than the IR's plain
  /// layouts.
  bool x_native = false, y_native = false, added_native = false;
  /// Forward convolutions of few input channels (an image network's first) whose result is
  /// reordered to the plain layout: their primitive writes oneDNN's channel-blocked layout,
  /// which reorders in contiguous runs, rather than the channels-last one it prefers,
  /// which reorders as a transpose.
  bool y_blocked = false;
  /// Steps with kernels in oneDNN's layouts (format 1.10): the layout of the kernel
  /// to run, every activation input and output in it (0 channels-last, 8 or 16 nChw8c or
  /// nChw16c), or kPlain for the step's plain kernel.
  static constexpr int kPlain = -1;
  int channel_layout = kPlain;
};

/// Per step of an artifact, its StepLayout. A value stays in oneDNN's layout where a
/// forward convolution on oneDNN writes it in a layout of the plain one's size, or a loop
/// step's blocked kernel does, and every reader takes it so: a forward convolution as x
/// (in the layout its primitive reads) or as the tensor it adds (in its result's layout),
/// or a loop step's kernel for that layout (whose activation inputs and outputs then all
/// stay in it).
/// Values callers see (`pinned` per value: inputs, results, params and state) never do.
std::vector<StepLayout> plan_layouts(const format::Artifact& a, const std::vector<char>& pinned);

}  // namespace kiln::runtime::cpu
