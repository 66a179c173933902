// DFT and STFT: a discrete Fourier transform along one axis is a matmul of the signal with
// a constant matrix of cosines and sines, built at import. That is n² work where an FFT
// does n log n, but the lengths models transform (FNet's hidden size and sequence, an
// audio frame) are a few hundred to a few thousand, where one GEMM beats a chain of
// butterfly kernels; the matrix is bounded so that it never dwarfs the weights.
#include <cmath>
#include <numbers>

#include <fmt/format.h>

#include "frontends/onnx/ops.h"

namespace kiln::onnx_import {

namespace {

using ir::Op;

// The most values a transform's matrix may hold (64 MiB of f32).
constexpr int64_t kMostMatrixValues = int64_t{1} << 24;

struct Transform {
  int64_t length = 0;  // L: the signal is cut or zero-padded to it
  bool inverse = false, onesided = false;
};

// x [..., n, ..., c] (c = 1 real, 2 complex) transformed along `axis`, which is neither the
// last dim nor holds the complex parts: [..., K, ..., 2], K = L, or L / 2 + 1 one-sided.
// A one-sided inverse (irfft) reads the first L / 2 + 1 bins of a Hermitian spectrum and
// gives the L real samples: [..., L, ..., 1].
Result<Value> dft_along(Context& ctx, const onnx::NodeProto& node, const Value& x, int64_t axis, const Transform& t) {
  const ir::TensorType xt = ctx.type_of(x);
  const int64_t rank = xt.rank(), parts = xt.shape.back(), length = t.length;
  const bool real_result = t.inverse && t.onesided;
  // Zero padding adds nothing: only the signal's first `used` entries have rows.
  const int64_t used = std::min(xt.shape[static_cast<size_t>(axis)], real_result ? length / 2 + 1 : length);
  const int64_t bins = t.onesided && !t.inverse ? length / 2 + 1 : length, result_parts = real_result ? 1 : 2;
  if (parts != 1 && parts != 2)
    return node_error(node, fmt::format("the last dim holds 1 (real) or 2 (complex) parts, got {}", xt.to_string()));
  if (length > kMostMatrixValues || parts * used > kMostMatrixValues / (result_parts * bins))
    return node_error(node, fmt::format("a transform of length {} is not supported: kiln computes it as a matmul "
                                        "with a matrix of {}x{} values, more than 2^24",
                                        length, parts * used, result_parts * bins));
  const ir::DType compute = wide_type(xt.dtype);
  KILN_ASSIGN_OR_RETURN(Value wide, widened(ctx, node, x));
  KILN_ASSIGN_OR_RETURN(Value cut, slice_axis(ctx, node, wide, axis, 0, used));
  // [others..., parts, used] flattened to rows of parts·used.
  std::vector<int64_t> perm;
  ir::Shape others;
  for (int64_t d = 0; d + 1 < rank; ++d)
    if (d != axis) perm.push_back(d), others.push_back(xt.shape[static_cast<size_t>(d)]);
  perm.push_back(rank - 1), perm.push_back(axis);
  int64_t rows = 1;
  for (int64_t o : others) rows *= o;
  KILN_ASSIGN_OR_RETURN(Value moved, transposed(ctx, node, cut, perm));
  KILN_ASSIGN_OR_RETURN(Value flat, reshaped(ctx, node, moved, {rows, parts * used}));
  // Row (part j, sample m), column (part r, bin k): e^{±2πi·km/L} applied to re + i·im.
  // k·m is reduced mod L in integers so that the angle keeps its precision at large k·m.
  // For a one-sided inverse, m is the bin and k the sample: each bin but 0 (and L / 2 of an
  // even L) stands for itself and its conjugate, so it counts twice, and only the real
  // part is kept.
  const double sign = t.inverse ? 1.0 : -1.0, scale = t.inverse ? 1.0 / static_cast<double>(length) : 1.0;
  std::vector<double> matrix(static_cast<size_t>(parts * used * result_parts * bins));
  for (int64_t m = 0; m < used; ++m) {
    const bool twice = real_result && m != 0 && 2 * m != length;
    for (int64_t k = 0; k < bins; ++k) {
      const double angle = 2.0 * std::numbers::pi * static_cast<double>((k * m) % length) / static_cast<double>(length);
      const double c = std::cos(angle) * scale * (twice ? 2 : 1), s = sign * std::sin(angle) * scale * (twice ? 2 : 1);
      auto at = [&](int64_t j, int64_t r) -> double& {
        return matrix[static_cast<size_t>((j * used + m) * result_parts * bins + r * bins + k)];
      };
      at(0, 0) = c;
      if (parts == 2) at(1, 0) = -s;
      if (!real_result) {
        at(0, 1) = s;
        if (parts == 2) at(1, 1) = c;
      }
    }
  }
  const Value weights{std::nullopt, ir::Tensor::from_doubles({compute, {parts * used, result_parts * bins}}, matrix),
                      false, ""};
  KILN_ASSIGN_OR_RETURN(Value product, ctx.apply(node, Op::Matmul, {flat, weights}));
  ir::Shape split = others;
  split.push_back(result_parts), split.push_back(bins);
  KILN_ASSIGN_OR_RETURN(Value parted, reshaped(ctx, node, product, split));
  // Back to [..., bins at axis, ..., 2].
  std::vector<int64_t> back;
  const int64_t k_at = rank - 1, part_at = rank - 2;  // in `split`'s dims
  for (int64_t d = 0, other = 0; d + 1 < rank; ++d) back.push_back(d == axis ? k_at : other++);
  back.push_back(part_at);
  KILN_ASSIGN_OR_RETURN(Value y, transposed(ctx, node, parted, back));
  return cast(ctx, node, y, xt.dtype);
}

Result<int64_t> one_int(Context& ctx, const onnx::NodeProto& node, int index, const char* what) {
  KILN_ASSIGN_OR_RETURN(auto values, constant_ints(ctx, node, index, what));
  if (values.size() != 1) return node_error(node, fmt::format("{} must be one integer", what));
  return values[0];
}

// DFT(input, dft_length?, axis?) {inverse, onesided}; before opset 20 the axis is an
// attribute (default 1), from 20 on input 2 (default -2).
Status convert_dft(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"axis", "inverse", "onesided"}));
  KILN_ASSIGN_OR_RETURN(Value x, ctx.input(node, 0));
  const ir::TensorType xt = ctx.type_of(x);
  if (!ir::is_float(xt.dtype) || xt.rank() < 2)
    return node_error(node, fmt::format("expected a float signal [..., 1 or 2], got {}", xt.to_string()));
  int64_t axis = 1;
  if (ctx.opset() >= 20) {
    if (attribute(node, "axis")) return node_error(node, "from opset 20 on the axis is input 2, not an attribute");
    axis = -2;
    if (Context::has_input(node, 2)) {
      KILN_ASSIGN_OR_RETURN(axis, one_int(ctx, node, 2, "axis"));
    }
  } else {
    KILN_ASSIGN_OR_RETURN(axis, int_attribute(node, "axis", 1));
  }
  KILN_ASSIGN_OR_RETURN(axis, normalize_axis(node, axis, xt.rank()));
  if (axis == xt.rank() - 1) return node_error(node, "the axis is the last dim, which holds the complex parts");
  Transform t;
  KILN_ASSIGN_OR_RETURN(int64_t inverse, int_attribute(node, "inverse", 0));
  KILN_ASSIGN_OR_RETURN(int64_t onesided, int_attribute(node, "onesided", 0));
  t.inverse = inverse != 0, t.onesided = onesided != 0;
  // A one-sided inverse's default length is that of the spectrum its bins are half of.
  t.length =
      t.inverse && t.onesided ? 2 * (xt.shape[static_cast<size_t>(axis)] - 1) : xt.shape[static_cast<size_t>(axis)];
  if (Context::has_input(node, 1)) {
    KILN_ASSIGN_OR_RETURN(t.length, one_int(ctx, node, 1, "dft_length"));
  }
  if (t.length < 1) return node_error(node, fmt::format("dft_length {} is not positive", t.length));
  KILN_ASSIGN_OR_RETURN(Value y, dft_along(ctx, node, x, axis, t));
  return define_output(ctx, node, 0, y);
}

// STFT(signal [B, n, 1 or 2], frame_step, window?, frame_length?) {onesided = 1}: frames
// of the signal, each times the window, transformed: [B, frames, bins, 2].
Status convert_stft(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"onesided"}));
  KILN_ASSIGN_OR_RETURN(Value signal, ctx.input(node, 0));
  const ir::TensorType st = ctx.type_of(signal);
  if (!ir::is_float(st.dtype) || st.rank() != 3)
    return node_error(node, fmt::format("expected a float signal [batch, length, 1 or 2], got {}", st.to_string()));
  KILN_ASSIGN_OR_RETURN(int64_t step, one_int(ctx, node, 1, "frame_step"));
  std::optional<Value> window;
  int64_t frame = 0;
  if (Context::has_input(node, 2)) {
    KILN_ASSIGN_OR_RETURN(window, ctx.input(node, 2));
    const ir::TensorType wt = ctx.type_of(*window);
    if (wt.rank() != 1 || wt.dtype != st.dtype)
      return node_error(
          node, fmt::format("the window must be a vector of {}, got {}", ir::dtype_name(st.dtype), wt.to_string()));
    frame = wt.shape[0];
  }
  if (Context::has_input(node, 3)) {
    KILN_ASSIGN_OR_RETURN(int64_t given, one_int(ctx, node, 3, "frame_length"));
    if (window && given != frame)
      return node_error(node, fmt::format("frame_length {} differs from the window's {}", given, frame));
    frame = given;
  }
  if (!window && !Context::has_input(node, 3)) return node_error(node, "neither a window nor frame_length is given");
  const int64_t n = st.shape[1];
  if (step < 1 || frame < 1 || frame > n)
    return node_error(node,
                      fmt::format("frame_step {} and frame_length {} do not frame a signal of {}", step, frame, n));
  const int64_t frames = (n - frame) / step + 1;
  if (frames > kMostMatrixValues / frame) return node_error(node, "the frames hold more than 2^24 indices");
  std::vector<int64_t> index(static_cast<size_t>(frames * frame));
  for (int64_t f = 0; f < frames; ++f)
    for (int64_t j = 0; j < frame; ++j) index[static_cast<size_t>(f * frame + j)] = f * step + j;
  ir::Attrs gather;
  gather.set("axis", int64_t{1});
  KILN_ASSIGN_OR_RETURN(
      Value framed,
      ctx.apply(
          node, Op::Gather,
          {signal, Value{std::nullopt, ir::Tensor::from_ints({ir::DType::I64, {frames, frame}}, index), false, ""}},
          std::move(gather)));  // [B, frames, frame, parts]
  if (window) {
    KILN_ASSIGN_OR_RETURN(Value column, reshaped(ctx, node, *window, {1, 1, frame, 1}));
    KILN_ASSIGN_OR_RETURN(framed, binary(ctx, node, Op::Mul, framed, column));
  }
  KILN_ASSIGN_OR_RETURN(int64_t onesided, int_attribute(node, "onesided", 1));
  KILN_ASSIGN_OR_RETURN(Value y, dft_along(ctx, node, framed, 2, Transform{frame, false, onesided != 0}));
  return define_output(ctx, node, 0, y);
}

constexpr OpConverter kConverters[] = {
    {"DFT", convert_dft},
    {"STFT", convert_stft},
};

}  // namespace

std::span<const OpConverter> signal_converters() { return kConverters; }

}  // namespace kiln::onnx_import
