// ONNX ops that import as compositions of kiln ops, against references written here and
// compiled for this CPU against the interpreter: Col2Im (PyTorch's fold), whether its
// blocks tile the image (a transpose) or overlap (a grouped convolution's input
// gradient), TopK by rank, whose pairs make one reduction of And and Or, and pools whose
// window (with ceil_mode) is larger than the padded input.
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <string>
#include <vector>

#include "frontends/onnx/importer.h"
#include "tests/unit/onnx_builder.h"
#include "tests/unit/run_util.h"

namespace kiln::onnx_import {
namespace {

using kiln::testing::add_node;
using kiln::testing::add_value;
using kiln::testing::bytes_of;

struct Fold {
  std::vector<int64_t> input, image, block, strides, dilations, pads;
};

onnx::TensorProto* int_initializer(onnx::GraphProto* g, const std::string& name, const std::vector<int64_t>& v) {
  onnx::TensorProto* t = g->add_initializer();
  t->set_name(name), t->set_data_type(onnx::TensorProto::INT64), t->add_dims(static_cast<int64_t>(v.size()));
  for (int64_t i : v) t->add_int64_data(i);
  return t;
}

void add_ints_attribute(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
  if (v.empty()) return;
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name), a->set_type(onnx::AttributeProto::INTS);
  for (int64_t i : v) a->add_ints(i);
}

Result<ImportedModel> col2im_model(const Fold& f, std::vector<int64_t> out) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(18);
  onnx::GraphProto* g = m.mutable_graph();
  add_value(g->mutable_input(), "x", f.input);
  add_value(g->mutable_output(), "y", std::move(out));
  int_initializer(g, "image", f.image);
  int_initializer(g, "block", f.block);
  onnx::NodeProto* n = add_node(g, "Col2Im", {"x", "image", "block"}, {"y"}, "fold");
  add_ints_attribute(n, "strides", f.strides);
  add_ints_attribute(n, "dilations", f.dilations);
  add_ints_attribute(n, "pads", f.pads);
  return import_model(bytes_of(m));
}

// Col2Im by its definition, for 1 or 2 spatial dims: each column's value added at its
// block's position in the image, dropped where it falls in the padding.
std::vector<double> col2im_reference(const Fold& f, const std::vector<double>& x) {
  const size_t k = f.image.size();
  auto at = [&](const std::vector<int64_t>& v, size_t i, int64_t fallback) { return v.empty() ? fallback : v[i]; };
  std::vector<int64_t> blocks(2, 1), image(2, 1), block(2, 1), stride(2, 1), dil(2, 1), pad(2, 0);
  for (size_t i = 0; i < k; ++i) {
    image[i] = f.image[i], block[i] = f.block[i], stride[i] = at(f.strides, i, 1), dil[i] = at(f.dilations, i, 1);
    pad[i] = at(f.pads, i, 0);
    blocks[i] = (image[i] + pad[i] + at(f.pads, k + i, 0) - dil[i] * (block[i] - 1) - 1) / stride[i] + 1;
  }
  const int64_t n = f.input[0], positions = block[0] * block[1], c = f.input[1] / positions;
  std::vector<double> y(static_cast<size_t>(n * c * image[0] * image[1]), 0.0);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c * positions; ++ch)
      for (int64_t l = 0; l < blocks[0] * blocks[1]; ++l) {
        const int64_t p = ch % positions;
        const int64_t y0 = (l / blocks[1]) * stride[0] - pad[0] + (p / block[1]) * dil[0];
        const int64_t y1 = (l % blocks[1]) * stride[1] - pad[1] + (p % block[1]) * dil[1];
        if (y0 < 0 || y0 >= image[0] || y1 < 0 || y1 >= image[1]) continue;
        y[static_cast<size_t>(((b * c + ch / positions) * image[0] + y0) * image[1] + y1)] +=
            x[static_cast<size_t>((b * c * positions + ch) * blocks[0] * blocks[1] + l)];
      }
  return y;
}

TEST_CASE("Col2Im sums blocks into images: tiling, overlapping, strided, dilated, padded, 1-d", "[onnx]") {
  const std::vector<std::pair<std::string, Fold>> cases = {
      {"2x2 blocks tiling 6x8", {{2, 3 * 4, 12}, {6, 8}, {2, 2}, {2, 2}, {}, {}}},
      {"3x3 blocks at stride 1, padded 1 (the fold of an unfold)",
       {{1, 2 * 9, 20}, {4, 5}, {3, 3}, {}, {}, {1, 1, 1, 1}}},
      {"2x3 blocks at stride 2x1, dilated 2x1, padded unevenly",
       {{2, 3 * 6, 2 * 4}, {5, 5}, {2, 3}, {2, 1}, {2, 1}, {0, 1, 1, 0}}},
      {"1-d blocks of 4 at stride 3", {{1, 2 * 4, 5}, {16}, {4}, {3}, {}, {}}},
      {"1-d blocks of 4 tiling 16", {{2, 3 * 4, 4}, {16}, {4}, {4}, {}, {}}},
  };
  for (const auto& [name, f] : cases) {
    INFO(name);
    const int64_t positions = f.block.size() == 2 ? f.block[0] * f.block[1] : f.block[0];
    std::vector<int64_t> out = {f.input[0], f.input[1] / positions};
    out.insert(out.end(), f.image.begin(), f.image.end());
    auto model = col2im_model(f, out);
    if (!model.ok()) FAIL(model.error().message);
    const ir::Tensor x = kiln::testing::wave_input(f.input, 1);
    std::vector<double> xs(static_cast<size_t>(x.size()));
    for (size_t i = 0; i < xs.size(); ++i) xs[i] = x.get(static_cast<int64_t>(i));
    ir::TensorType out_type{ir::DType::F32, out};
    std::map<std::string, ir::Tensor> args = model->weights;
    args["x"] = x;
    const std::vector<ir::Tensor> got = kiln::testing::eval_ok(model->graph, args);
    kiln::testing::check_close(got[0], out_type.to_string(), col2im_reference(f, xs), 1e-6, 1e-6);
    kiln::testing::check_against_interpreter(name, model->graph, args);
  }
}

TEST_CASE("Col2Im's refusals name what is wrong", "[onnx]") {
  auto wrong_count = col2im_model({{1, 8, 5}, {4, 4}, {2, 2}, {2, 2}, {}, {}}, {1, 2, 4, 4});
  REQUIRE(!wrong_count.ok());
  CHECK(wrong_count.error().message ==
        "onnx: node 'fold' (Col2Im): expected [N, C·4, 4] for these blocks, got f32[1,8,5]");
  auto too_big = col2im_model({{1, 4, 1}, {2, 2}, {3, 3}, {}, {}, {}}, {1, 1, 2, 2});
  REQUIRE(!too_big.ok());
  CHECK(too_big.error().message == "onnx: node 'fold' (Col2Im): a block of 3 does not fit an image of 2");
  auto dims = col2im_model({{1, 4, 1}, {2, 2}, {2}, {}, {}, {}}, {1, 1, 2, 2});
  REQUIRE(!dims.ok());
  CHECK(dims.error().message ==
        "onnx: node 'fold' (Col2Im): image_shape and block_shape need the same count of dims, got 2 and 1");
  auto four = col2im_model({{1, 1, 1}, {2, 2, 2, 2}, {2, 2, 2, 2}, {}, {}, {}}, {1, 1, 2, 2, 2, 2});
  REQUIRE(!four.ok());
  CHECK(four.error().message == "onnx: node 'fold' (Col2Im): Col2Im of 4 spatial dims is not supported (1 to 3)");
  auto huge = col2im_model({{1, 1, 1}, {70000}, {1}, {}, {}, {}}, {1, 1, 70000});
  REQUIRE(!huge.ok());
  CHECK(huge.error().message ==
        "onnx: node 'fold' (Col2Im): image_shape, block_shape, strides and dilations must be positive, pads not "
        "negative (and each at most 65536)");
  // Overlapping 64x64 blocks over 8 channels: a one-hot weight of 8·4096² values.
  auto weight = col2im_model({{1, 8 * 4096, 2}, {65, 64}, {64, 64}, {}, {}, {}}, {1, 8, 65, 64});
  REQUIRE(!weight.ok());
  CHECK(weight.error().message ==
        "onnx: node 'fold' (Col2Im): Col2Im of overlapping blocks of 4096 positions over 8 channels is not supported "
        "(its one-hot weight would hold more than 2^26 values)");
}

TEST_CASE("TopK by rank compiles for the CPU: a full sort and the top 20 of 40, on both axes", "[onnx]") {
  for (auto [axis, k] : {std::pair<int64_t, int64_t>{1, 40}, {1, 20}, {0, 24}}) {
    INFO("axis " << axis << ", k " << k);
    const std::vector<int64_t> shape = axis == 1 ? std::vector<int64_t>{5, 40} : std::vector<int64_t>{40, 5};
    std::vector<int64_t> out = shape;
    out[static_cast<size_t>(axis)] = k;
    onnx::ModelProto m;
    m.set_ir_version(8);
    m.add_opset_import()->set_version(17);
    onnx::GraphProto* g = m.mutable_graph();
    add_value(g->mutable_input(), "x", shape);
    add_value(g->mutable_output(), "values", out);
    add_value(g->mutable_output(), "indices", out, {}, onnx::TensorProto::INT64);
    int_initializer(g, "k", {k});
    kiln::testing::add_int_attribute(add_node(g, "TopK", {"x", "k"}, {"values", "indices"}), "axis", axis);
    auto model = import_model(bytes_of(m));
    if (!model.ok()) FAIL(model.error().message);
    // Values with ties: sin rounded to tenths.
    ir::Tensor x = kiln::testing::wave_input(shape, 3);
    for (double& v : x.floats) v = std::round(v * 10) / 10;
    kiln::testing::check_against_interpreter("top_k", model->graph, {{"x", x}});
  }
}

TEST_CASE("a pool whose pads list the wrong count is refused with ceil_mode or without", "[onnx]") {
  for (int64_t ceil_mode : {0, 1}) {
    onnx::ModelProto m;
    m.set_ir_version(8);
    m.add_opset_import()->set_version(17);
    onnx::GraphProto* g = m.mutable_graph();
    add_value(g->mutable_input(), "x", {1, 3, 28, 28});
    add_value(g->mutable_output(), "y", {1, 3, 30, 30});
    onnx::NodeProto* n = add_node(g, "MaxPool", {"x"}, {"y"}, "pool");
    add_ints_attribute(n, "kernel_shape", {3, 3});
    add_ints_attribute(n, "pads", {2, 2, 2});
    kiln::testing::add_int_attribute(n, "ceil_mode", ceil_mode);
    auto model = import_model(bytes_of(m));
    REQUIRE(!model.ok());
    CHECK(model.error().message ==
          "onnx: node 'pool' (MaxPool): max_pool: pads must list 4 values (2 per spatial dim of x [1,3,28,28]), got "
          "[2,2,2]");
  }
}

TEST_CASE("a pool with ceil_mode and a window past the padded input pools all of it", "[onnx]") {
  for (const std::string op : {"AveragePool", "MaxPool"}) {
    INFO(op);
    onnx::ModelProto m;
    m.set_ir_version(8);
    m.add_opset_import()->set_version(17);
    onnx::GraphProto* g = m.mutable_graph();
    add_value(g->mutable_input(), "x", {1, 2, 3, 3});
    add_value(g->mutable_output(), "y", {1, 2, 1, 1});
    onnx::NodeProto* n = add_node(g, op, {"x"}, {"y"}, "pool");
    add_ints_attribute(n, "kernel_shape", {8, 8});
    add_ints_attribute(n, "strides", {8, 8});
    kiln::testing::add_int_attribute(n, "ceil_mode", 1);
    auto model = import_model(bytes_of(m));
    if (!model.ok()) FAIL(model.error().message);
    const ir::Tensor x = kiln::testing::wave_input({1, 2, 3, 3}, 4);
    std::vector<double> want;
    for (int64_t c = 0; c < 2; ++c) {
      double sum = 0, most = -1e300;
      for (int64_t i = 0; i < 9; ++i) sum += x.get(c * 9 + i), most = std::max(most, x.get(c * 9 + i));
      want.push_back(op == "MaxPool" ? most : sum / 9);
    }
    kiln::testing::check_close(kiln::testing::eval_ok(model->graph, {{"x", x}})[0], "f32[1,2,1,1]", want, 1e-6, 1e-7);
    kiln::testing::check_against_interpreter(op, model->graph, {{"x", x}});
  }
}

// Scatters along axis 1 of data [2, 5, 3]: `links` ScatterElements in a chain, link k
// writing updates u_k at indices idx_k ([2, 1 or 2, 3]); each link's result is an output,
// or only the last's. With `known`, the indices are initializers (known at import), else
// graph inputs.
Result<ImportedModel> scatter_chain_model(const std::vector<std::vector<int64_t>>& indices, bool known,
                                          bool every_link = true) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(18);
  onnx::GraphProto* g = m.mutable_graph();
  add_value(g->mutable_input(), "data", {2, 5, 3});
  std::string previous = "data";
  for (size_t k = 0; k < indices.size(); ++k) {
    const std::string i = "idx" + std::to_string(k), u = "u" + std::to_string(k), y = "y" + std::to_string(k);
    const int64_t rows = static_cast<int64_t>(indices[k].size()) / 6;
    if (known) {
      onnx::TensorProto* t = int_initializer(g, i, indices[k]);
      t->clear_dims(), t->add_dims(2), t->add_dims(rows), t->add_dims(3);
    } else {
      add_value(g->mutable_input(), i, {2, rows, 3}, {}, onnx::TensorProto::INT64);
    }
    add_value(g->mutable_input(), u, {2, rows, 3});
    if (every_link || k + 1 == indices.size()) add_value(g->mutable_output(), y, {2, 5, 3});
    kiln::testing::add_int_attribute(add_node(g, "ScatterElements", {previous, i, u}, {y}, "scatter" + i), "axis", 1);
    previous = y;
  }
  return import_model(bytes_of(m));
}

TEST_CASE("ScatterElements at positions known at import gathers once from a chain's updates", "[onnx]") {
  // A write per step (select_scatter), then indices that repeat (the last wins), are
  // negative, and cover fewer rows than data has.
  const std::vector<std::vector<int64_t>> indices = {
      {0, 0, 0, 0, 0, 0}, {1, 1, 1, 1, 1, 1}, {4, 2, 4, 3, 0, 3, -1, 2, 2, -5, 0, 0}, {2, 2, 2, 4, 4, 4}};
  auto known = scatter_chain_model(indices, true);
  if (!known.ok()) FAIL(known.error().message);
  auto computed = scatter_chain_model(indices, false);
  if (!computed.ok()) FAIL(computed.error().message);
  int gathers = 0, selects = 0;
  for (const ir::Node& n : known->graph.nodes) gathers += n.op == ir::Op::Gather, selects += n.op == ir::Op::Select;
  CHECK(gathers == 4);  // one per link's result, each from the updates so far
  CHECK(selects == 4);
  std::map<std::string, ir::Tensor> args = known->weights, computed_args = computed->weights;
  args["data"] = computed_args["data"] = kiln::testing::wave_input({2, 5, 3}, 0);
  for (size_t k = 0; k < indices.size(); ++k) {
    const ir::Shape shape = {2, static_cast<int64_t>(indices[k].size()) / 6, 3};
    args["u" + std::to_string(k)] = computed_args["u" + std::to_string(k)] =
        kiln::testing::wave_input(shape, static_cast<int>(k) + 1);
    computed_args["idx" + std::to_string(k)] = ir::Tensor::from_ints({ir::DType::I64, shape}, indices[k]);
  }
  const std::vector<ir::Tensor> want = kiln::testing::eval_ok(computed->graph, computed_args);
  const std::vector<ir::Tensor> got = kiln::testing::eval_ok(known->graph, args);
  REQUIRE(got.size() == want.size());
  for (size_t k = 0; k < got.size(); ++k) {
    INFO("link " << k);
    CHECK(got[k].floats == want[k].floats);
  }
  kiln::testing::check_against_interpreter("known scatters", known->graph, args);
  // Only the last link's result an output: the earlier links' nodes and constants are gone.
  auto last = scatter_chain_model(indices, true, false);
  if (!last.ok()) FAIL(last.error().message);
  int last_gathers = 0, index_params = 0;
  for (const ir::Node& n : last->graph.nodes) last_gathers += n.op == ir::Op::Gather;
  for (const auto& [name, w] : last->weights) index_params += w.type.dtype == ir::DType::I64;
  CHECK(last_gathers == 1);
  CHECK(index_params <= 1);
  std::map<std::string, ir::Tensor> last_args = last->weights;
  for (const auto& [name, t] : computed_args)
    if (name.rfind("idx", 0) != 0) last_args[name] = t;
  CHECK(kiln::testing::eval_ok(last->graph, last_args).back().floats == want.back().floats);
  auto bad = scatter_chain_model({{0, 0, 0, 7, 0, 0}}, true);
  REQUIRE(!bad.ok());
  CHECK(bad.error().message ==
        "onnx: node 'scatteridx0' (ScatterElements): index 7 is out of range for axis 1 of f32[2,5,3]");
}

}  // namespace
}  // namespace kiln::onnx_import
