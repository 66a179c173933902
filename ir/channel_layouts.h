// Steps over activations in the layouts oneDNN's convolutions keep them in between each
// other: channels-last (nhwc) and blocks of channels (nChw16c). The runtime passes a pool,
// a concat, an elementwise step or a global average pool between two convolutions their
// activations as they are, rather than reordering them to the plain layout and back
// (docs/cpu.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace kiln::ir {

/// The layout of an activation [N, C, D1..Dk]: kChannelsLast lays it out [N, D1..Dk, C];
/// a block b of kOneDnnChannelBlocks lays it out [N, C/b, D1..Dk, b] (oneDNN's f32 layouts
/// with AVX2 and with AVX-512, nChw8c and nChw16c).
inline constexpr int64_t kChannelsLast = 0;
inline constexpr int64_t kOneDnnChannelBlocks[] = {8, 16};

/// The shape an activation of `shape` has in a layout (a block or kChannelsLast); in
/// blocks, a value of one channel (broadcast across them) is [N, 1, D1..Dk, 1].
Shape channel_layout_shape(const Shape& shape, int64_t block);

/// The name of a step's kernel in a layout: "<step>_c<block>", "<step>_channels_last";
/// the runtime finds it by format::channel_layout_kernel_symbol, which must agree (the
/// runtime cannot see the IR; the loader refuses an artifact whose kernels lack one).
std::string channel_layout_name(const std::string& step, int64_t block);

/// Step `step` of `g` over its activations in a layout (a block, or kChannelsLast): a
/// graph of its own whose arguments are the step's inputs and whose results are its
/// outputs, with one step of the same kind (channel_layout_name) that computes the same
/// elements. The step's activations are its values of the largest rank among its inputs
/// and outputs, [N, C, D1..Dk] (k = 1..3), in the layout; its other inputs (a per-channel
/// scale) stay as they are. A loop step's outputs are all activations; in blocks, every
/// activation input and output must be whole blocks of channels. A reduction step (a
/// global average pool) is rewritten channels-last only, where it reduces spatial dims
/// keeping them, runs unsplit over the same work items, and its spatial dims lead. None
/// where the step cannot be rewritten: it reshapes, transposes or gathers an activation,
/// takes a value of another rank from one, reads a constant that varies across channels or
/// an iota, reduces across channels, or (in blocks) concats, slices or broadcasts along
/// the channels other than in whole blocks.
std::optional<Graph> channel_layout_step(const Graph& g, const Step& step, int64_t block);

/// Per step of g's program, the layouts the code has its kernels in: for a loop or
/// reduction step next to a forward convolution (one writes an input of it, or reads an
/// output), kChannelsLast and (loop steps) the blocks of kOneDnnChannelBlocks that
/// channel_layout_step can rewrite it for, in that order; for other steps, none.
std::vector<std::vector<int64_t>> channel_layouts_of_steps(const Graph& g);

}  // namespace kiln::ir
