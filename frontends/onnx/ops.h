// The ONNX ops the importer converts: one table per file, each row an op type and the
// function that defines the node's outputs from its inputs. Internal to frontends/onnx.
#pragma once

#include <span>
#include <string_view>

#include "frontends/onnx/context.h"

namespace kiln::onnx_import {

using Converter = Status (*)(Context& ctx, const onnx::NodeProto& node);

struct OpConverter {
  std::string_view op_type;
  Converter convert;
};

std::span<const OpConverter> elementwise_converters();  // ops_elementwise.cc
std::span<const OpConverter> nn_converters();           // ops_nn.cc
std::span<const OpConverter> shape_converters();        // ops_shape.cc
std::span<const OpConverter> reduce_converters();       // ops_reduce.cc
std::span<const OpConverter> loss_converters();         // ops_loss.cc
std::span<const OpConverter> movement_converters();     // ops_movement.cc
std::span<const OpConverter> gather_converters();       // ops_gather.cc
std::span<const OpConverter> math_converters();         // ops_math.cc
std::span<const OpConverter> norm_converters();         // ops_norm.cc
std::span<const OpConverter> resize_converters();       // ops_resize.cc
std::span<const OpConverter> grid_sample_converters();  // ops_grid_sample.cc
std::span<const OpConverter> scatter_converters();      // ops_scatter.cc
std::span<const OpConverter> einsum_converters();       // ops_einsum.cc
std::span<const OpConverter> rnn_converters();          // ops_rnn.cc
std::span<const OpConverter> quantize_converters();     // ops_quantize.cc
std::span<const OpConverter> signal_converters();       // ops_signal.cc

/// The converter of an op type of the default domain, or null.
const OpConverter* find_converter(std::string_view op_type);

/// A constant scalar of `dtype`.
Value scalar(double value, ir::DType dtype);
/// Defines output `index` of the node.
Status define_output(Context& ctx, const onnx::NodeProto& node, int index, Value value);

/// Input `index` as integers known at import, or an error naming it (`what`: "shape").
Result<std::vector<int64_t>> constant_ints(Context& ctx, const onnx::NodeProto& node, int index, const char* what);
/// x reshaped (itself when it has the shape already).
Result<Value> reshaped(Context& ctx, const onnx::NodeProto& node, const Value& x, ir::Shape shape);
/// The axes of Squeeze, Unsqueeze and the Reduce family: the attribute before opset
/// `input_from_opset`, input 1 from it on; nullopt where none are given.
Result<std::optional<std::vector<int64_t>>> axes_of(Context& ctx, const onnx::NodeProto& node,
                                                    int64_t input_from_opset);
/// a op b with numpy broadcasting.
Result<Value> binary(Context& ctx, const onnx::NodeProto& node, ir::Op op, const Value& a, const Value& b);
/// x op s, for a scalar s of x's element type.
Result<Value> with_scalar(Context& ctx, const onnx::NodeProto& node, ir::Op op, const Value& x, double s);
/// x with its dims permuted.
Result<Value> transposed(Context& ctx, const onnx::NodeProto& node, const Value& x, std::vector<int64_t> perm);
/// x cast to `to` (itself when it has that type).
Result<Value> cast(Context& ctx, const onnx::NodeProto& node, const Value& x, ir::DType to);
/// f32 for f16 and bf16, else `dtype`: the type a half input's sums, statistics and
/// softmaxes are computed in before one rounding back, as onnxruntime, PyTorch and numpy
/// compute them (each step rounded to f16, a spread past 256 squares to inf).
ir::DType wide_type(ir::DType dtype);
/// x cast to wide_type of its type (x itself where that is its type).
Result<Value> widened(Context& ctx, const onnx::NodeProto& node, const Value& x);
/// x rounded to the nearest integer, halves to even (ONNX's Round, QuantizeLinear's rounding).
Result<Value> round_half_to_even(Context& ctx, const onnx::NodeProto& node, const Value& x);
/// The indices 0, 1, ... along `axis` of `shape`.
Result<Value> iota(Context& ctx, const onnx::NodeProto& node, const ir::Shape& shape, int64_t axis, ir::DType dtype);
/// x[begin:end] along one axis.
Result<Value> slice_axis(Context& ctx, const onnx::NodeProto& node, const Value& x, int64_t axis, int64_t begin,
                         int64_t end);
/// The permutation that moves `axis` of a rank-`rank` tensor last, and its inverse.
struct AxisLast {
  std::vector<int64_t> to_last, back;
};
AxisLast axis_last(int64_t rank, int64_t axis);
/// Indices made non-negative along an axis of `extent`: where(i < 0, i + extent, i).
Result<Value> wrap_negative(Context& ctx, const onnx::NodeProto& node, const Value& indices, int64_t extent);

}  // namespace kiln::onnx_import
