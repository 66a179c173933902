// DFT, STFT and GridSample, imported and checked against references written here (a
// transform summed in double precision; a sampler that reads one position at a time, as
// PyTorch's grid_sample does), then compiled for this CPU against the interpreter; and
// their refusals as text.
#include <onnx/onnx_pb.h>

#include <array>
#include <cmath>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include "frontends/onnx/importer.h"
#include "tests/unit/onnx_builder.h"
#include "tests/unit/run_util.h"

namespace kiln::onnx_import {
namespace {

using kiln::testing::add_int_attribute;
using kiln::testing::add_node;
using kiln::testing::add_value;
using kiln::testing::bytes_of;

void add_scalar(onnx::GraphProto* g, const std::string& name, int64_t v) {
  onnx::TensorProto* t = g->add_initializer();
  t->set_name(name), t->set_data_type(onnx::TensorProto::INT64), t->add_int64_data(v);
}

void add_string_attribute(onnx::NodeProto* n, const std::string& name, const std::string& value) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name), a->set_type(onnx::AttributeProto::STRING), a->set_s(value);
}

std::vector<double> values_of(const ir::Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.size()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = t.get(static_cast<int64_t>(i));
  return v;
}

struct Dft {
  int64_t rows, n, parts;  // x is [rows, n, parts], transformed along axis 1
  int64_t length;          // dft_length, or 0 for none
  bool inverse, onesided;
  int opset;
};

Result<ImportedModel> dft_model(const Dft& d) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(d.opset);
  onnx::GraphProto* g = m.mutable_graph();
  add_value(g->mutable_input(), "x", {d.rows, d.n, d.parts});
  add_value(g->mutable_output(), "y", {});
  std::vector<std::string> in = {"x", d.length ? "length" : ""};
  if (d.length) add_scalar(g, "length", d.length);
  if (d.opset >= 20) in.push_back("axis"), add_scalar(g, "axis", -2);
  onnx::NodeProto* node = add_node(g, "DFT", in, {"y"}, "dft");
  if (d.opset < 20) add_int_attribute(node, "axis", 1);
  add_int_attribute(node, "inverse", d.inverse);
  add_int_attribute(node, "onesided", d.onesided);
  return import_model(bytes_of(m));
}

// The transform by its definition: sum over the signal of x[m] e^{∓2πi km/L} (over L
// for the inverse), the signal cut or zero-padded to L. A one-sided inverse (numpy's
// irfft) first completes the spectrum: bin L - k is the conjugate of bin k, and bins 0 and
// L / 2 are taken as real.
std::vector<double> dft_reference(const Dft& d, const std::vector<double>& x) {
  const bool irfft = d.inverse && d.onesided;
  const int64_t length = d.length ? d.length : irfft ? 2 * (d.n - 1) : d.n;
  const int64_t bins = d.onesided && !d.inverse ? length / 2 + 1 : length;
  std::vector<double> y;
  if (irfft) {
    for (int64_t r = 0; r < d.rows; ++r)
      for (int64_t m = 0; m < length; ++m) {
        double sum = 0;
        for (int64_t k = 0; k < length; ++k) {
          const int64_t half = k <= length / 2 ? k : length - k;  // the bin that holds k or its conjugate
          if (half >= d.n) continue;
          const double re = x[static_cast<size_t>((r * d.n + half) * d.parts)];
          double im = d.parts == 2 ? x[static_cast<size_t>((r * d.n + half) * 2 + 1)] : 0.0;
          if (k > length / 2) im = -im;
          if (k == 0 || 2 * k == length) im = 0;
          const double angle = 2 * std::numbers::pi * static_cast<double>(k * m) / static_cast<double>(length);
          sum += re * std::cos(angle) - im * std::sin(angle);
        }
        y.push_back(sum / static_cast<double>(length));
      }
    return y;
  }
  for (int64_t r = 0; r < d.rows; ++r)
    for (int64_t k = 0; k < bins; ++k) {
      double re = 0, im = 0;
      for (int64_t m = 0; m < std::min(d.n, length); ++m) {
        const double angle =
            (d.inverse ? 2 : -2) * std::numbers::pi * static_cast<double>(k * m) / static_cast<double>(length);
        const double xr = x[static_cast<size_t>((r * d.n + m) * d.parts)];
        const double xi = d.parts == 2 ? x[static_cast<size_t>((r * d.n + m) * 2 + 1)] : 0.0;
        re += xr * std::cos(angle) - xi * std::sin(angle);
        im += xr * std::sin(angle) + xi * std::cos(angle);
      }
      const double scale = d.inverse ? 1.0 / static_cast<double>(length) : 1.0;
      y.push_back(re * scale), y.push_back(im * scale);
    }
  return y;
}

TEST_CASE("DFT is a matmul with cosines and sines: real, complex, inverse, one-sided, cut and padded", "[onnx]") {
  const std::vector<std::pair<std::string, Dft>> cases = {
      {"real, opset 17", {3, 10, 1, 0, false, false, 17}},
      {"real, one-sided, opset 20", {2, 9, 1, 0, false, true, 20}},
      {"complex", {2, 8, 2, 0, false, false, 20}},
      {"complex inverse", {3, 6, 2, 0, true, false, 17}},
      {"real, zero-padded to 16", {2, 10, 1, 16, false, false, 20}},
      {"complex, cut to 5", {2, 8, 2, 5, false, false, 17}},
      {"complex inverse, padded to 12, a long row", {1, 300, 2, 310, true, false, 20}},
      {"one-sided inverse (irfft) of 6 bins: 10 samples", {2, 6, 2, 0, true, true, 20}},
      {"one-sided inverse of 6 bins to 9 samples", {2, 6, 2, 9, true, true, 17}},
      {"one-sided inverse of 6 bins to 16 samples, of a real spectrum", {3, 6, 1, 16, true, true, 20}},
  };
  for (const auto& [name, d] : cases) {
    INFO(name);
    auto model = dft_model(d);
    if (!model.ok()) FAIL(model.error().message);
    const ir::Tensor x = kiln::testing::wave_input({d.rows, d.n, d.parts}, 3);
    const bool irfft = d.inverse && d.onesided;
    const int64_t length = d.length ? d.length : irfft ? 2 * (d.n - 1) : d.n;
    const int64_t bins = d.onesided && !d.inverse ? length / 2 + 1 : length;
    std::map<std::string, ir::Tensor> args = model->weights;  // the matrix is a weight
    args["x"] = x;
    const auto got = kiln::testing::eval_ok(model->graph, args);
    kiln::testing::check_close(got[0], ir::TensorType{ir::DType::F32, {d.rows, bins, irfft ? 1 : 2}}.to_string(),
                               dft_reference(d, values_of(x)), 1e-5, 1e-4);
    kiln::testing::check_against_interpreter(name, model->graph, args);
  }
}

TEST_CASE("STFT frames the signal, windows each frame and transforms it", "[onnx]") {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  onnx::GraphProto* g = m.mutable_graph();
  add_value(g->mutable_input(), "s", {2, 40, 1});
  add_value(g->mutable_input(), "w", {8});
  add_value(g->mutable_output(), "y", {});
  add_scalar(g, "step", 5);
  add_node(g, "STFT", {"s", "step", "w"}, {"y"}, "stft");
  auto model = import_model(bytes_of(m));
  if (!model.ok()) FAIL(model.error().message);
  const ir::Tensor s = kiln::testing::wave_input({2, 40, 1}, 1), w = kiln::testing::wave_input({8}, 2);
  std::vector<double> want;
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t f = 0; f < 7; ++f)  // (40 - 8) / 5 + 1 frames of 8, 5 bins each
      for (int64_t k = 0; k < 5; ++k) {
        double re = 0, im = 0;
        for (int64_t j = 0; j < 8; ++j) {
          const double v = s.get(b * 40 + f * 5 + j) * w.get(j), angle = -2 * std::numbers::pi * k * j / 8.0;
          re += v * std::cos(angle), im += v * std::sin(angle);
        }
        want.push_back(re), want.push_back(im);
      }
  std::map<std::string, ir::Tensor> args = model->weights;
  args["s"] = s, args["w"] = w;
  kiln::testing::check_close(kiln::testing::eval_ok(model->graph, args)[0], "f32[2,7,5,2]", want, 1e-5, 1e-5);
  kiln::testing::check_against_interpreter("stft", model->graph, args);
}

struct Sample {
  std::string mode, padding;
  bool align;
};

Result<ImportedModel> grid_sample_model(const Sample& s, const ir::Shape& x, const ir::Shape& grid) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(20);
  onnx::GraphProto* g = m.mutable_graph();
  add_value(g->mutable_input(), "x", x);
  add_value(g->mutable_input(), "grid", grid);
  add_value(g->mutable_output(), "y", {});
  onnx::NodeProto* n = add_node(g, "GridSample", {"x", "grid"}, {"y"}, "sample");
  add_string_attribute(n, "mode", s.mode);
  add_string_attribute(n, "padding_mode", s.padding);
  add_int_attribute(n, "align_corners", s.align);
  return import_model(bytes_of(m));
}

// One 2-d sample of x [N, C, H, W] at grid (gx, gy), read position by position as
// PyTorch's grid_sampler_2d does: the coordinate unnormalized, moved inside by the padding
// mode (not for cubic), and every tap read through the padding mode.
double sample_reference(const Sample& s, const ir::Tensor& x, int64_t n, int64_t c, double gx, double gy) {
  const int64_t h = x.type.shape[2], w = x.type.shape[3];
  auto reflect = [&](double v, double lo, double hi) {
    if (hi <= lo) return lo;
    const double range = hi - lo;
    if (v >= lo && v <= hi) return v;
    const double past = v < lo ? lo - v : v - hi;
    const int64_t turns = static_cast<int64_t>(past / range);
    const double rest = past - static_cast<double>(turns) * range;
    return (v < lo) == (turns % 2 == 1) ? hi - rest : lo + rest;
  };
  auto coordinate = [&](double g, int64_t size) {
    const double d = static_cast<double>(size);
    double v = s.align ? (g + 1) / 2 * (d - 1) : ((g + 1) * d - 1) / 2;
    if (s.mode == "nearest") v = std::nearbyint(v);
    const double lo = s.align ? 0 : -0.5, hi = s.align ? d - 1 : d - 0.5;
    if (s.mode != "cubic" && (v < lo || v > hi))
      v = s.padding == "border" ? std::clamp(v, 0.0, d - 1) : s.padding == "reflection" ? reflect(v, lo, hi) : v;
    return v;
  };
  auto pixel = [&](int64_t iy, int64_t ix) {
    auto place = [&](int64_t i, int64_t size) -> int64_t {
      const double d = static_cast<double>(size);
      if (s.padding == "border") return std::clamp<int64_t>(i, 0, size - 1);
      if (s.padding == "reflection")
        return static_cast<int64_t>(reflect(static_cast<double>(i), s.align ? 0 : -0.5, s.align ? d - 1 : d - 0.5));
      return i;
    };
    iy = place(iy, h), ix = place(ix, w);
    if (iy < 0 || iy >= h || ix < 0 || ix >= w) return 0.0;
    return x.get(((n * x.type.shape[1] + c) * h + iy) * w + ix);
  };
  const double vx = coordinate(gx, w), vy = coordinate(gy, h);
  if (std::isnan(vx) || std::isnan(vy)) return 0.0;
  const double fx = std::floor(vx), fy = std::floor(vy), tx = vx - fx, ty = vy - fy;
  const auto ix = static_cast<int64_t>(fx), iy = static_cast<int64_t>(fy);
  if (s.mode == "nearest") return pixel(iy, ix);
  if (s.mode == "linear")
    return pixel(iy, ix) * (1 - tx) * (1 - ty) + pixel(iy, ix + 1) * tx * (1 - ty) + pixel(iy + 1, ix) * (1 - tx) * ty +
           pixel(iy + 1, ix + 1) * tx * ty;
  auto cubic = [](double t) {
    constexpr double a = -0.75;
    auto near = [](double d) { return ((a + 2) * d - (a + 3)) * d * d + 1; };
    auto far = [](double d) { return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a; };
    return std::array<double, 4>{far(t + 1), near(t), near(1 - t), far(2 - t)};
  };
  const auto wx = cubic(tx), wy = cubic(ty);
  double sum = 0;
  for (int64_t j = 0; j < 4; ++j)
    for (int64_t i = 0; i < 4; ++i)
      sum += wy[static_cast<size_t>(j)] * wx[static_cast<size_t>(i)] * pixel(iy - 1 + j, ix - 1 + i);
  return sum;
}

TEST_CASE("GridSample reads where the grid says, in every mode, padding and corner alignment", "[onnx]") {
  const ir::Shape x_shape = {2, 3, 5, 6}, grid_shape = {2, 4, 7, 2};
  const ir::Tensor x = kiln::testing::wave_input(x_shape, 1);
  // A grid past [-1, 1] by up to a half, a NaN among it (read as 0), and exact corners.
  std::vector<double> grid(static_cast<size_t>(ir::num_elements(grid_shape)));
  for (size_t i = 0; i < grid.size(); ++i) grid[i] = 1.5 * std::sin(1.7 * static_cast<double>(i) + 0.3);
  grid[5] = std::numeric_limits<double>::quiet_NaN();
  grid[8] = -1, grid[9] = 1, grid[10] = 1, grid[11] = -1;
  const ir::Tensor g = ir::Tensor::from_doubles({ir::DType::F32, grid_shape}, grid);
  for (const std::string mode : {"nearest", "linear", "cubic"})
    for (const std::string padding : {"zeros", "border", "reflection"})
      for (bool align : {false, true}) {
        const Sample s{mode, padding, align};
        INFO(mode << " " << padding << (align ? " align_corners" : ""));
        auto model = grid_sample_model(s, x_shape, grid_shape);
        if (!model.ok()) FAIL(model.error().message);
        std::vector<double> want;
        for (int64_t n = 0; n < 2; ++n)
          for (int64_t c = 0; c < 3; ++c)
            for (int64_t p = 0; p < 28; ++p)
              want.push_back(sample_reference(s, x, n, c, g.get((n * 28 + p) * 2), g.get((n * 28 + p) * 2 + 1)));
        const std::map<std::string, ir::Tensor> args = {{"x", x}, {"grid", g}};
        kiln::testing::check_close(kiln::testing::eval_ok(model->graph, args)[0], "f32[2,3,4,7]", want, 1e-5, 1e-6);
        kiln::testing::check_against_interpreter(mode + " " + padding, model->graph, args);
      }
}

TEST_CASE("GridSample of 3 spatial dims compiles for the CPU", "[onnx]") {
  auto model = grid_sample_model({"linear", "border", false}, {1, 2, 3, 4, 5}, {1, 2, 3, 4, 3});
  if (!model.ok()) FAIL(model.error().message);
  const std::map<std::string, ir::Tensor> args = {{"x", kiln::testing::wave_input({1, 2, 3, 4, 5}, 1)},
                                                  {"grid", kiln::testing::wave_input({1, 2, 3, 4, 3}, 2)}};
  kiln::testing::check_against_interpreter("3-d", model->graph, args);
}

TEST_CASE("DFT's, STFT's and GridSample's refusals name what is wrong", "[onnx]") {
  auto too_long = dft_model({1, 4096, 2, 0, false, false, 20});
  REQUIRE(!too_long.ok());
  CHECK(too_long.error().message ==
        "onnx: node 'dft' (DFT): a transform of length 4096 is not supported: kiln computes it as a matmul with a "
        "matrix of 8192x8192 values, more than 2^24");
  auto one_bin = dft_model({1, 1, 2, 0, true, true, 17});  // of one bin: a length of 0
  REQUIRE(!one_bin.ok());
  CHECK(one_bin.error().message == "onnx: node 'dft' (DFT): dft_length 0 is not positive");
  auto bad_parts = dft_model({1, 8, 3, 0, false, false, 17});
  REQUIRE(!bad_parts.ok());
  CHECK(bad_parts.error().message ==
        "onnx: node 'dft' (DFT): the last dim holds 1 (real) or 2 (complex) parts, got f32[1,8,3]");

  auto four = grid_sample_model({"linear", "zeros", false}, {1, 1, 2, 2, 2, 2}, {1, 2, 2, 2, 2, 4});
  REQUIRE(!four.ok());
  CHECK(four.error().message ==
        "onnx: node 'sample' (GridSample): GridSample of 4 spatial dims is not supported (1 to 3)");
  auto bad_grid = grid_sample_model({"linear", "zeros", false}, {1, 1, 4, 4}, {1, 3, 3, 3});
  REQUIRE(!bad_grid.ok());
  CHECK(bad_grid.error().message ==
        "onnx: node 'sample' (GridSample): the grid must be [1, out..., 2] for X f32[1,1,4,4], got f32[1,3,3,3]");
  auto empty = grid_sample_model({"linear", "border", true}, {1, 2, 3, 0}, {1, 2, 2, 2});
  REQUIRE(!empty.ok());
  CHECK(empty.error().message ==
        "onnx: node 'sample' (GridSample): X f32[1,2,3,0] has an empty spatial dim, which no grid can sample");
  auto bad_mode = grid_sample_model({"area", "zeros", false}, {1, 1, 4, 4}, {1, 3, 3, 2});
  REQUIRE(!bad_mode.ok());
  CHECK(bad_mode.error().message ==
        "onnx: node 'sample' (GridSample): mode 'area' is none of nearest, linear and cubic");
  auto bad_padding = grid_sample_model({"linear", "wrap", false}, {1, 1, 4, 4}, {1, 3, 3, 2});
  REQUIRE(!bad_padding.ok());
  CHECK(bad_padding.error().message ==
        "onnx: node 'sample' (GridSample): padding_mode 'wrap' is none of zeros, border and reflection");

  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  onnx::GraphProto* g = m.mutable_graph();
  add_value(g->mutable_input(), "s", {1, 10, 1});
  add_value(g->mutable_output(), "y", {});
  add_scalar(g, "step", 2);
  add_scalar(g, "frame", 12);
  add_node(g, "STFT", {"s", "step", "", "frame"}, {"y"}, "stft");
  auto long_frame = import_model(bytes_of(m));
  REQUIRE(!long_frame.ok());
  CHECK(long_frame.error().message ==
        "onnx: node 'stft' (STFT): frame_step 2 and frame_length 12 do not frame a signal of 10");
}

}  // namespace
}  // namespace kiln::onnx_import
