// RNN, GRU and LSTM, unrolled over the sequence (which is static), in ONNX's gate orders
// (GRU: z, r, h; LSTM: i, o, f, c) and default activations (sigmoid and tanh). Per
// direction the input's projection x Wᵀ is one matmul for every step, and each step one
// matmul h Rᵀ of all its gates (a GRU's h gate apart, where r multiplies h before Rh): a
// matmul per gate and step made a bidirectional 2-layer LSTM of 50 steps 1600 library
// calls, at 0.14x ONNX Runtime's speed.
#include <fmt/format.h>

#include "frontends/onnx/ops.h"

namespace kiln::onnx_import {

namespace {

using ir::Op;

enum class Cell { Rnn, Gru, Lstm };

struct Recurrence {
  Context& ctx;
  const onnx::NodeProto& node;
  ir::DType dtype;
  int64_t hidden = 0;

  Result<Value> slice(const Value& v, int64_t axis, int64_t begin, int64_t end) {
    return slice_axis(ctx, node, v, axis, begin, end);
  }
  // Gates [first, first + count) of a [dirs, gates * hidden, n] weight, direction d,
  // transposed to [n, count * hidden].
  Result<Value> gate_weights(const Value& w, int64_t d, int64_t first, int64_t count) {
    KILN_ASSIGN_OR_RETURN(Value wd, slice(w, 0, d, d + 1));
    KILN_ASSIGN_OR_RETURN(Value wg, slice(wd, 1, first * hidden, (first + count) * hidden));
    const int64_t n = ctx.type_of(wg).shape[2];
    KILN_ASSIGN_OR_RETURN(Value flat, reshaped(ctx, node, wg, {count * hidden, n}));
    return transposed(ctx, node, flat, {1, 0});
  }
  // Parts [first, first + count) of `hidden` each of a bias [dirs, 2 * gates * hidden]
  // (W's biases, then R's), or zeros.
  Result<Value> biases(const std::optional<Value>& b, int64_t d, int64_t first, int64_t count) {
    if (!b) return ctx.broadcast_to(node, scalar(0.0, dtype), {count * hidden});
    KILN_ASSIGN_OR_RETURN(Value bd, slice(*b, 0, d, d + 1));
    KILN_ASSIGN_OR_RETURN(Value bp, slice(bd, 1, first * hidden, (first + count) * hidden));
    return reshaped(ctx, node, bp, {count * hidden});
  }
  // Gate g's [batch, hidden] columns of a [batch, k * hidden] product.
  Result<Value> gate(const Value& product, int64_t g) { return slice(product, 1, g * hidden, (g + 1) * hidden); }
  // x @ w + bias, over the batch.
  Result<Value> affine(const Value& x, const Value& w, const Value& b) {
    KILN_ASSIGN_OR_RETURN(Value xw, ctx.apply(node, Op::Matmul, {x, w}));
    return binary(ctx, node, Op::Add, xw, b);
  }
  Result<Value> add(const Value& a, const Value& b) { return ctx.apply(node, Op::Add, {a, b}); }
  Result<Value> mul(const Value& a, const Value& b) { return ctx.apply(node, Op::Mul, {a, b}); }
  Result<Value> unary(Op op, const Value& x) { return ctx.apply(node, op, {x}); }
};

template <Cell cell>
Status convert_recurrent(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(
      check_attributes(node, {"activation_alpha", "activation_beta", "activations", "clip", "direction", "hidden_size",
                              "layout", "linear_before_reset", "input_forget"}));
  if (attribute(node, "activations") || attribute(node, "clip"))
    return node_error(node, "activations other than the defaults, and clip, are not supported");
  KILN_ASSIGN_OR_RETURN(int64_t input_forget, int_attribute(node, "input_forget", 0));
  if (input_forget) return node_error(node, "input_forget 1 is not supported");
  KILN_ASSIGN_OR_RETURN(Value x, ctx.input(node, 0));
  KILN_ASSIGN_OR_RETURN(Value w, ctx.input(node, 1));
  KILN_ASSIGN_OR_RETURN(Value r, ctx.input(node, 2));
  std::optional<Value> b, h0, c0, peepholes;
  if (Context::has_input(node, 3)) {
    KILN_ASSIGN_OR_RETURN(b, ctx.input(node, 3));
  }
  std::optional<std::vector<int64_t>> lengths;
  if (Context::has_input(node, 4)) {
    KILN_ASSIGN_OR_RETURN(lengths, constant_ints(ctx, node, 4, "sequence_lens"));
  }
  if (Context::has_input(node, 5)) {
    KILN_ASSIGN_OR_RETURN(h0, ctx.input(node, 5));
  }
  if (cell == Cell::Lstm && Context::has_input(node, 6)) {
    KILN_ASSIGN_OR_RETURN(c0, ctx.input(node, 6));
  }
  if (cell == Cell::Lstm && Context::has_input(node, 7)) {
    KILN_ASSIGN_OR_RETURN(peepholes, ctx.input(node, 7));
  }
  KILN_ASSIGN_OR_RETURN(int64_t layout, int_attribute(node, "layout", 0));
  KILN_ASSIGN_OR_RETURN(int64_t lbr, int_attribute(node, "linear_before_reset", 0));
  KILN_ASSIGN_OR_RETURN(std::string direction, string_attribute(node, "direction", "forward"));
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
    return node_error(node, fmt::format("direction '{}' is none of forward, reverse and bidirectional", direction));
  const ir::TensorType xt = ctx.type_of(x);
  if (xt.rank() != 3 || !ir::is_float(xt.dtype) || xt.shape[0] < 1 || xt.shape[1] < 1)
    return node_error(
        node, fmt::format("expected a float X [seq, batch, input] of at least one step, got {}", xt.to_string()));
  // Every operand's shape, checked before any is sliced.
  const int64_t dirs = direction == "bidirectional" ? 2 : 1, gates = cell == Cell::Rnn ? 1 : cell == Cell::Gru ? 3 : 4;
  const ir::Shape rs = ctx.type_of(r).shape;
  if (rs.size() != 3 || rs[0] != dirs || rs[2] < 1 || rs[1] != gates * rs[2])
    return node_error(
        node, fmt::format("expected R [{}, {} * hidden, hidden], got {}", dirs, gates, ctx.type_of(r).to_string()));
  const int64_t hidden_size = rs[2];
  KILN_ASSIGN_OR_RETURN(int64_t declared, int_attribute(node, "hidden_size", hidden_size));
  const int64_t input = xt.shape[2];
  auto expect = [&](const std::optional<Value>& v, ir::Shape shape, const char* what) -> Status {
    if (v && (ctx.type_of(*v).shape != shape || ctx.type_of(*v).dtype != xt.dtype))
      return node_error(node, fmt::format("expected {} {}{}, got {}", what, ir::dtype_name(xt.dtype),
                                          ir::shape_string(shape), ctx.type_of(*v).to_string()));
    return Status::Ok();
  };
  const int64_t batch_dim = layout ? xt.shape[0] : xt.shape[1];
  if (declared != hidden_size)
    return node_error(node, fmt::format("hidden_size {} differs from R's {}", declared, hidden_size));
  KILN_RETURN_IF_ERROR(expect(w, {dirs, gates * hidden_size, input}, "W"));
  KILN_RETURN_IF_ERROR(expect(r, {dirs, gates * hidden_size, hidden_size}, "R"));
  KILN_RETURN_IF_ERROR(expect(b, {dirs, 2 * gates * hidden_size}, "B"));
  // Before their shapes are checked: layout 1's are [batch, directions, hidden].
  if (layout && (h0 || c0)) return node_error(node, "initial states with layout 1 are not supported");
  KILN_RETURN_IF_ERROR(expect(h0, {dirs, batch_dim, hidden_size}, "initial_h"));
  KILN_RETURN_IF_ERROR(expect(c0, {dirs, batch_dim, hidden_size}, "initial_c"));
  KILN_RETURN_IF_ERROR(expect(peepholes, {dirs, 3 * hidden_size}, "P"));
  Recurrence rec{ctx, node, xt.dtype, hidden_size};
  const std::vector<int64_t> swap = {1, 0, 2};
  if (layout) {
    KILN_ASSIGN_OR_RETURN(x, transposed(ctx, node, x, swap));  // to [seq, batch, input]
  }
  const int64_t seq = ctx.type_of(x).shape[0], batch = ctx.type_of(x).shape[1], hidden = rec.hidden;
  if (lengths)
    for (int64_t n : *lengths)
      if (n != seq)
        return node_error(node, fmt::format("sequence_lens of {} in a sequence of {} is not supported", n, seq));
  const ir::Shape state = {batch, hidden};
  std::vector<std::vector<Value>> ys(static_cast<size_t>(dirs));
  std::vector<Value> last_h, last_c;
  for (int64_t d = 0; d < dirs; ++d) {
    const bool reverse = direction == "reverse" || d == 1;
    // x Wᵀ + Wb for every step: [seq, batch, gates * hidden].
    const int64_t inputs = ctx.type_of(x).shape[2];
    KILN_ASSIGN_OR_RETURN(Value w_all, rec.gate_weights(w, d, 0, gates));
    KILN_ASSIGN_OR_RETURN(Value wb_all, rec.biases(b, d, 0, gates));
    KILN_ASSIGN_OR_RETURN(Value x_rows, reshaped(ctx, node, x, {seq * batch, inputs}));
    KILN_ASSIGN_OR_RETURN(Value projected, rec.affine(x_rows, w_all, wb_all));
    KILN_ASSIGN_OR_RETURN(projected, reshaped(ctx, node, projected, {seq, batch, gates * hidden}));
    // h Rᵀ + Rb per step, of every gate but a GRU's h gate where r multiplies h first.
    const bool gru_reset_first = cell == Cell::Gru && !lbr;
    const int64_t recurrent_gates = gru_reset_first ? 2 : gates;
    KILN_ASSIGN_OR_RETURN(Value r_main, rec.gate_weights(r, d, 0, recurrent_gates));
    KILN_ASSIGN_OR_RETURN(Value rb_main, rec.biases(b, d, gates, recurrent_gates));
    std::optional<Value> r_h, rb_h;
    if (gru_reset_first) {
      KILN_ASSIGN_OR_RETURN(r_h, rec.gate_weights(r, d, 2, 1));
      KILN_ASSIGN_OR_RETURN(rb_h, rec.biases(b, d, gates + 2, 1));
    }
    auto initial = [&](const std::optional<Value>& given) -> Result<Value> {
      if (!given) return ctx.broadcast_to(node, scalar(0.0, xt.dtype), state);
      KILN_ASSIGN_OR_RETURN(Value s, rec.slice(*given, 0, d, d + 1));
      return reshaped(ctx, node, s, state);
    };
    KILN_ASSIGN_OR_RETURN(Value h, initial(h0));
    KILN_ASSIGN_OR_RETURN(Value c, initial(c0));
    std::vector<Value> p(3);
    for (int64_t k = 0; k < 3 && peepholes; ++k) {
      KILN_ASSIGN_OR_RETURN(p[static_cast<size_t>(k)], rec.biases(peepholes, d, k, 1));
    }
    ys[static_cast<size_t>(d)].resize(static_cast<size_t>(seq));
    for (int64_t step = 0; step < seq; ++step) {
      const int64_t t = reverse ? seq - 1 - step : step;
      KILN_ASSIGN_OR_RETURN(Value xw_step, rec.slice(projected, 0, t, t + 1));
      KILN_ASSIGN_OR_RETURN(Value xw, reshaped(ctx, node, xw_step, {batch, gates * hidden}));
      KILN_ASSIGN_OR_RETURN(Value hr, rec.affine(h, r_main, rb_main));
      // Gate g's pre-activation: (x W + Wb)_g + (h R + Rb)_g.
      auto gate = [&](int64_t g) -> Result<Value> {
        KILN_ASSIGN_OR_RETURN(Value a, rec.gate(xw, g));
        KILN_ASSIGN_OR_RETURN(Value b2, rec.gate(hr, g));
        return rec.add(a, b2);
      };
      if (cell == Cell::Rnn) {
        KILN_ASSIGN_OR_RETURN(Value pre, gate(0));
        KILN_ASSIGN_OR_RETURN(h, rec.unary(Op::Tanh, pre));
      } else if (cell == Cell::Gru) {
        KILN_ASSIGN_OR_RETURN(Value zp, gate(0));
        KILN_ASSIGN_OR_RETURN(Value z, rec.unary(Op::Sigmoid, zp));
        KILN_ASSIGN_OR_RETURN(Value rp, gate(1));
        KILN_ASSIGN_OR_RETURN(Value rs, rec.unary(Op::Sigmoid, rp));
        KILN_ASSIGN_OR_RETURN(Value xh, rec.gate(xw, 2));
        Value hh;
        if (lbr) {  // x Wh + Wbh + r * (h Rh + Rbh)
          KILN_ASSIGN_OR_RETURN(Value hrh, rec.gate(hr, 2));
          KILN_ASSIGN_OR_RETURN(hh, rec.mul(rs, hrh));
        } else {  // x Wh + Wbh + (r * h) Rh + Rbh
          KILN_ASSIGN_OR_RETURN(Value rh, rec.mul(rs, h));
          KILN_ASSIGN_OR_RETURN(hh, rec.affine(rh, *r_h, *rb_h));
        }
        KILN_ASSIGN_OR_RETURN(Value hp, rec.add(xh, hh));
        KILN_ASSIGN_OR_RETURN(Value ht, rec.unary(Op::Tanh, hp));
        // h = (1 - z) * ht + z * h = ht + z * (h - ht)
        KILN_ASSIGN_OR_RETURN(Value diff, ctx.apply(node, Op::Sub, {h, ht}));
        KILN_ASSIGN_OR_RETURN(Value zd, rec.mul(z, diff));
        KILN_ASSIGN_OR_RETURN(h, rec.add(ht, zd));
      } else {
        auto peep = [&](Value pre, int64_t k, const Value& cell_state) -> Result<Value> {
          if (!peepholes) return pre;
          KILN_ASSIGN_OR_RETURN(Value pc, binary(ctx, node, Op::Mul, cell_state, p[static_cast<size_t>(k)]));
          return rec.add(pre, pc);
        };
        KILN_ASSIGN_OR_RETURN(Value ip, gate(0));
        KILN_ASSIGN_OR_RETURN(ip, peep(ip, 0, c));
        KILN_ASSIGN_OR_RETURN(Value i, rec.unary(Op::Sigmoid, ip));
        KILN_ASSIGN_OR_RETURN(Value fp, gate(2));
        KILN_ASSIGN_OR_RETURN(fp, peep(fp, 2, c));
        KILN_ASSIGN_OR_RETURN(Value f, rec.unary(Op::Sigmoid, fp));
        KILN_ASSIGN_OR_RETURN(Value cp, gate(3));
        KILN_ASSIGN_OR_RETURN(Value ct, rec.unary(Op::Tanh, cp));
        KILN_ASSIGN_OR_RETURN(Value fc, rec.mul(f, c));
        KILN_ASSIGN_OR_RETURN(Value ic, rec.mul(i, ct));
        KILN_ASSIGN_OR_RETURN(c, rec.add(fc, ic));
        KILN_ASSIGN_OR_RETURN(Value op, gate(1));
        KILN_ASSIGN_OR_RETURN(op, peep(op, 1, c));
        KILN_ASSIGN_OR_RETURN(Value o, rec.unary(Op::Sigmoid, op));
        KILN_ASSIGN_OR_RETURN(Value tc, rec.unary(Op::Tanh, c));
        KILN_ASSIGN_OR_RETURN(h, rec.mul(o, tc));
      }
      KILN_ASSIGN_OR_RETURN(ys[static_cast<size_t>(d)][static_cast<size_t>(t)],
                            reshaped(ctx, node, h, {1, 1, batch, hidden}));
    }
    KILN_ASSIGN_OR_RETURN(Value hl, reshaped(ctx, node, h, {1, batch, hidden}));
    KILN_ASSIGN_OR_RETURN(Value cl, reshaped(ctx, node, c, {1, batch, hidden}));
    last_h.push_back(hl), last_c.push_back(cl);
  }
  auto concat = [&](const std::vector<Value>& parts, int64_t axis) -> Result<Value> {
    if (parts.size() == 1) return parts[0];
    ir::Attrs attrs;
    attrs.set("axis", axis);
    return ctx.apply(node, Op::Concat, parts, std::move(attrs));
  };
  std::vector<Value> per_step;
  for (int64_t t = 0; t < seq; ++t) {
    std::vector<Value> across;
    for (int64_t d = 0; d < dirs; ++d) across.push_back(ys[static_cast<size_t>(d)][static_cast<size_t>(t)]);
    KILN_ASSIGN_OR_RETURN(Value yt, concat(across, 1));
    per_step.push_back(yt);
  }
  KILN_ASSIGN_OR_RETURN(Value y, concat(per_step, 0));  // [seq, dirs, batch, hidden]
  KILN_ASSIGN_OR_RETURN(Value yh, concat(last_h, 0));   // [dirs, batch, hidden]
  KILN_ASSIGN_OR_RETURN(Value yc, concat(last_c, 0));
  if (layout) {
    KILN_ASSIGN_OR_RETURN(y, transposed(ctx, node, y, {2, 0, 1, 3}));
    KILN_ASSIGN_OR_RETURN(yh, transposed(ctx, node, yh, swap));
    KILN_ASSIGN_OR_RETURN(yc, transposed(ctx, node, yc, swap));
  }
  KILN_RETURN_IF_ERROR(define_output(ctx, node, 0, y));
  KILN_RETURN_IF_ERROR(define_output(ctx, node, 1, yh));
  return cell == Cell::Lstm ? define_output(ctx, node, 2, yc) : Status::Ok();
}

constexpr OpConverter kConverters[] = {
    {"GRU", convert_recurrent<Cell::Gru>},
    {"LSTM", convert_recurrent<Cell::Lstm>},
    {"RNN", convert_recurrent<Cell::Rnn>},
};

}  // namespace

std::span<const OpConverter> rnn_converters() { return kConverters; }

}  // namespace kiln::onnx_import
