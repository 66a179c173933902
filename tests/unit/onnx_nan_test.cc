// ONNX ops and NaN or infinities, through the interpreter: TopK takes each index once,
// rows of infinities included, and orders NaN as onnxruntime and PyTorch do (larger than
// any number: first when largest, last when smallest); a linear Resize carries a NaN to
// the outputs whose taps read it, no further.
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "frontends/onnx/importer.h"
#include "ir/interpreter.h"
#include "tests/unit/onnx_builder.h"
#include "tests/unit/test_util.h"

namespace kiln::onnx_import {
namespace {

using kiln::testing::add_int_attribute;
using kiln::testing::add_node;
using kiln::testing::add_value;
using kiln::testing::bytes_of;

constexpr double kInf = std::numeric_limits<double>::infinity();

// TopK of x: f32[rows, cols] along `axis`, largest or smallest first (k: the whole axis).
std::vector<ir::Tensor> top_k(const std::vector<double>& x, int64_t rows, int64_t cols, bool largest,
                              std::optional<int64_t> k_given = std::nullopt, int64_t axis = 1) {
  const int64_t k_count = k_given.value_or(axis == 1 ? cols : rows);
  const std::vector<int64_t> out_shape = axis == 1 ? std::vector<int64_t>{rows, k_count} : std::vector{k_count, cols};
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  onnx::GraphProto* g = m.mutable_graph();
  add_value(g->mutable_input(), "x", {rows, cols});
  add_value(g->mutable_output(), "values", out_shape);
  add_value(g->mutable_output(), "indices", out_shape, {}, onnx::TensorProto::INT64);
  onnx::TensorProto* k = g->add_initializer();
  k->set_name("k"), k->set_data_type(onnx::TensorProto::INT64), k->add_dims(1), k->add_int64_data(k_count);
  onnx::NodeProto* n = add_node(g, "TopK", {"x", "k"}, {"values", "indices"});
  add_int_attribute(n, "largest", largest ? 1 : 0);
  add_int_attribute(n, "axis", axis);
  auto model = import_model(bytes_of(m));
  if (!model.ok()) FAIL(model.error().message);
  auto out = ir::evaluate(model->graph, {{"x", ir::Tensor::from_doubles({ir::DType::F32, {rows, cols}}, x)}});
  REQUIRE(out.ok());
  return *out;
}

void check_indices(const ir::Tensor& t, const std::vector<int64_t>& want) {
  REQUIRE(t.size() == static_cast<int64_t>(want.size()));
  for (size_t k = 0; k < want.size(); ++k) {
    INFO("element " << k);
    CHECK(t.get(static_cast<int64_t>(k)) == static_cast<double>(want[k]));
  }
}

TEST_CASE("TopK takes each index once, infinities and ties in index order, NaN as the largest", "[onnx]") {
  const double nan = std::nan("");
  // Row 0: NaN, both infinities and a tie; row 1: two -inf, which a largest-first TopK
  // takes last (their indices once each).
  const std::vector<double> x = {3, nan, kInf, -kInf, 3, 1, 5, -kInf, -kInf, 2, 0, 1};
  const std::vector<ir::Tensor> largest = top_k(x, 2, 6, true);
  kiln::testing::check_close(largest[0], "f32[2,6]", {nan, kInf, 3, 3, 1, -kInf, 5, 2, 1, 0, -kInf, -kInf});
  check_indices(largest[1], {1, 2, 0, 4, 5, 3, 0, 3, 5, 4, 1, 2});
  // Smallest first: NaN last; row 1's -inf first, in index order.
  const std::vector<ir::Tensor> smallest = top_k(x, 2, 6, false);
  kiln::testing::check_close(smallest[0], "f32[2,6]", {-kInf, 1, 3, 3, kInf, nan, -kInf, -kInf, 0, 1, 2, 5});
  check_indices(smallest[1], {3, 5, 0, 4, 2, 1, 1, 2, 4, 5, 3, 0});
  // +inf twice, smallest first: taken last, each once.
  const std::vector<ir::Tensor> infinities = top_k({1, kInf, kInf, 0}, 1, 4, false);
  kiln::testing::check_close(infinities[0], "f32[1,4]", {0, 1, kInf, kInf});
  check_indices(infinities[1], {3, 0, 1, 2});
}

// What TopK should give along `axis`: each line's indices stably sorted by class (NaN above
// the numbers when largest, below when smallest), then by value, the first k.
std::pair<std::vector<double>, std::vector<int64_t>> sorted_reference(const std::vector<double>& x, int64_t rows,
                                                                      int64_t cols, bool largest, int64_t k,
                                                                      int64_t axis) {
  const int64_t lines = axis == 1 ? rows : cols, n = axis == 1 ? cols : rows;
  auto at = [&](int64_t line, int64_t i) { return axis == 1 ? line * cols + i : i * cols + line; };
  auto out_at = [&](int64_t line, int64_t r) { return axis == 1 ? line * k + r : r * cols + line; };
  std::vector<double> values(static_cast<size_t>(lines * k));
  std::vector<int64_t> indices(values.size());
  for (int64_t line = 0; line < lines; ++line) {
    std::vector<int64_t> order(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      const double va = x[static_cast<size_t>(at(line, a))], vb = x[static_cast<size_t>(at(line, b))];
      const bool a_nan = std::isnan(va), b_nan = std::isnan(vb);
      if (a_nan || b_nan) return a_nan != b_nan && a_nan == largest;
      return largest ? va > vb : va < vb;
    });
    for (int64_t r = 0; r < k; ++r) {
      const auto o = static_cast<size_t>(out_at(line, r));
      indices[o] = order[static_cast<size_t>(r)];
      values[o] = x[static_cast<size_t>(at(line, order[static_cast<size_t>(r)]))];
    }
  }
  return {values, indices};
}

TEST_CASE("TopK by rank (k above 16) orders as the rounds do: ties, infinities, NaN, any axis", "[onnx]") {
  const double nan = std::nan("");
  const int64_t rows = 3, cols = 40;
  std::vector<double> x(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<double>((i * 7919) % 13) - 6;  // many ties
  for (size_t i : {3u, 17u, 45u, 46u, 100u}) x[i] = nan;
  for (size_t i : {5u, 60u, 61u}) x[i] = kInf;
  for (size_t i : {9u, 62u, 119u}) x[i] = -kInf;
  x[11] = -0.0;
  for (bool largest : {true, false}) {
    for (int64_t k : {40, 17, 16, 3}) {  // 16 and 3: in rounds, the same order
      INFO("largest " << largest << ", k " << k);
      const std::vector<ir::Tensor> got = top_k(x, rows, cols, largest, k);
      const auto [values, indices] = sorted_reference(x, rows, cols, largest, k, 1);
      kiln::testing::check_close(got[0], fmt::format("f32[{},{}]", rows, k), values);
      check_indices(got[1], indices);
    }
    // Along the first axis of its transpose: 40 rows of 3, k = 20 of the 40.
    INFO("axis 0, largest " << largest);
    const std::vector<ir::Tensor> got = top_k(x, cols, rows, largest, 20, 0);
    const auto [values, indices] = sorted_reference(x, cols, rows, largest, 20, 0);
    kiln::testing::check_close(got[0], fmt::format("f32[20,{}]", rows), values);
    check_indices(got[1], indices);
  }
}

TEST_CASE("a linear Resize carries a NaN pixel to its neighbours only", "[onnx]") {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  onnx::GraphProto* g = m.mutable_graph();
  add_value(g->mutable_input(), "x", {1, 1, 1, 6});
  add_value(g->mutable_output(), "y", {1, 1, 1, 12});
  onnx::TensorProto* scales = g->add_initializer();
  scales->set_name("scales"), scales->set_data_type(onnx::TensorProto::FLOAT), scales->add_dims(4);
  for (float f : {1.f, 1.f, 1.f, 2.f}) scales->add_float_data(f);
  onnx::AttributeProto* mode = add_node(g, "Resize", {"x", "", "scales"}, {"y"})->add_attribute();
  mode->set_name("mode"), mode->set_type(onnx::AttributeProto::STRING), mode->set_s("linear");
  auto model = import_model(bytes_of(m));
  if (!model.ok()) FAIL(model.error().message);
  const double nan = std::nan("");
  auto out = ir::evaluate(model->graph,
                          {{"x", ir::Tensor::from_doubles({ir::DType::F32, {1, 1, 1, 6}}, {0, 1, nan, 3, 4, 5})}});
  REQUIRE(out.ok());
  // Half-pixel: output o reads x at (o + 0.5) / 2 - 0.5, between its floor and the next
  // (clamped at the edges); outputs 3 to 6 read x[2].
  kiln::testing::check_close((*out)[0], "f32[1,1,1,12]",
                             {0, 0.25, 0.75, nan, nan, nan, nan, 3.25, 3.75, 4.25, 4.75, 5});
}

}  // namespace
}  // namespace kiln::onnx_import
