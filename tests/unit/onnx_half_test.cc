// ONNX's normalizations on f16: LayerNormalization's statistics in its stash_type (FLOAT
// by default), so that a row spread wider than f16's squares hold keeps a finite variance,
// with Mean and InvStdDev in that type, and a stash_type that is not a float refused as
// text; InstanceNormalization's and MeanVarianceNormalization's in f32; ReduceMean and
// GlobalAveragePool summing in f32, so a mean in f16's range never overflows on the way;
// Softmax and LogSoftmax in f32, rounded once.
#include <onnx/onnx_pb.h>

#include <cmath>
#include <map>
#include <string>

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

constexpr int64_t kRows = 2, kCols = 8;

// y (and, with `statistics`, mean and inv_std) = LayerNormalization(x, scale, bias) over
// the last axis, all f16; stash_type set where `stash_type` is not 0.
onnx::ModelProto layer_norm_model(int64_t stash_type, bool statistics) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  onnx::GraphProto* g = m.mutable_graph();
  const int32_t f16 = onnx::TensorProto::FLOAT16;
  add_value(g->mutable_input(), "x", {kRows, kCols}, {}, f16);
  add_value(g->mutable_input(), "scale", {kCols}, {}, f16);
  add_value(g->mutable_input(), "bias", {kCols}, {}, f16);
  add_value(g->mutable_output(), "y", {kRows, kCols}, {}, f16);
  std::vector<std::string> outputs = {"y"};
  if (statistics) {
    const int32_t stash = stash_type ? static_cast<int32_t>(stash_type) : onnx::TensorProto::FLOAT;
    add_value(g->mutable_output(), "mean", {kRows, 1}, {}, stash);
    add_value(g->mutable_output(), "inv_std", {kRows, 1}, {}, stash);
    outputs.insert(outputs.end(), {"mean", "inv_std"});
  }
  onnx::NodeProto* n = add_node(g, "LayerNormalization", {"x", "scale", "bias"}, outputs);
  if (stash_type) add_int_attribute(n, "stash_type", stash_type);
  return m;
}

// Row 0 spans 610, so its centered squares pass f16's largest finite 65504.
const std::vector<double> kX = {-300, -200, -100, 0, 50, 150, 250, 310, 0.5, -0.25, 1, 2, -1.5, 0.75, 0.125, -2};
const std::vector<double> kScale = {1, 0.5, 2, -1, 1.5, 0.25, 1, 3};
const std::vector<double> kBias = {0, 0.125, -0.5, 1, 0, 2, -1, 0.25};

std::vector<ir::Tensor> run(const ir::Graph& g) {
  auto out = ir::evaluate(g, {{"x", ir::Tensor::from_doubles({ir::DType::F16, {kRows, kCols}}, kX)},
                              {"scale", ir::Tensor::from_doubles({ir::DType::F16, {kCols}}, kScale)},
                              {"bias", ir::Tensor::from_doubles({ir::DType::F16, {kCols}}, kBias)}});
  REQUIRE(out.ok());
  return *out;
}

struct Reference {
  std::vector<double> y, mean, inv_std;
};

// In double, from the f16 inputs (each exact in f16): with `affine`, kScale and kBias
// applied along the columns.
Reference reference(double epsilon = 1e-5, bool affine = true) {
  Reference r;
  for (int64_t row = 0; row < kRows; ++row) {
    double mean = 0, var = 0;
    for (int64_t c = 0; c < kCols; ++c) mean += kX[static_cast<size_t>(row * kCols + c)] / kCols;
    for (int64_t c = 0; c < kCols; ++c) var += std::pow(kX[static_cast<size_t>(row * kCols + c)] - mean, 2) / kCols;
    const double inv_std = 1 / std::sqrt(var + epsilon);
    for (int64_t c = 0; c < kCols; ++c) {
      const double y = (kX[static_cast<size_t>(row * kCols + c)] - mean) * inv_std;
      r.y.push_back(affine ? y * kScale[static_cast<size_t>(c)] + kBias[static_cast<size_t>(c)] : y);
    }
    r.mean.push_back(mean);
    r.inv_std.push_back(inv_std);
  }
  return r;
}

TEST_CASE("an f16 LayerNormalization computes in f32 by default, rounding once", "[onnx]") {
  const Reference want = reference();
  for (int64_t stash_type : {int64_t{0}, static_cast<int64_t>(onnx::TensorProto::FLOAT)}) {
    INFO("stash_type " << stash_type);
    auto plain = import_model(bytes_of(layer_norm_model(stash_type, false)));
    if (!plain.ok()) FAIL(plain.error().message);
    // f16's unit in the last place is 2^-10 of a value: within one rounding.
    kiln::testing::check_close(run(plain->graph)[0], "f16[2,8]", want.y, 1e-3, 1e-3);
    auto written_out = import_model(bytes_of(layer_norm_model(stash_type, true)));
    if (!written_out.ok()) FAIL(written_out.error().message);
    const std::vector<ir::Tensor> out = run(written_out->graph);
    kiln::testing::check_close(out[0], "f16[2,8]", want.y, 1e-3, 1e-3);
    kiln::testing::check_close(out[1], "f32[2,1]", want.mean, 1e-6, 1e-7);
    kiln::testing::check_close(out[2], "f32[2,1]", want.inv_std, 1e-5, 1e-7);
  }
}

TEST_CASE("an f16 LayerNormalization with stash_type FLOAT16 computes in f16", "[onnx]") {
  // Row 0's variance is past f16's range: 1/sqrt(inf) is 0, so y is the bias there.
  auto model = import_model(bytes_of(layer_norm_model(onnx::TensorProto::FLOAT16, true)));
  if (!model.ok()) FAIL(model.error().message);
  const std::vector<ir::Tensor> out = run(model->graph);
  CHECK(out[2].type.to_string() == "f16[2,1]");
  CHECK(out[2].get(0) == 0);
  for (int64_t c = 0; c < kCols; ++c) CHECK(out[0].get(c) == kBias[static_cast<size_t>(c)]);
  const Reference want = reference();
  for (int64_t c = kCols; c < 2 * kCols; ++c) CHECK(std::fabs(out[0].get(c) - want.y[static_cast<size_t>(c)]) < 2e-2);
}

// OP over x: f16[1, 2, 8] (kX's rows as channels), with f16 scale and bias of one per
// channel for InstanceNormalization, over axis 2 for MeanVarianceNormalization.
onnx::ModelProto channel_norm_model(const std::string& op) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  onnx::GraphProto* g = m.mutable_graph();
  const int32_t f16 = onnx::TensorProto::FLOAT16;
  add_value(g->mutable_input(), "x", {1, kRows, kCols}, {}, f16);
  add_value(g->mutable_output(), "y", {1, kRows, kCols}, {}, f16);
  if (op == "InstanceNormalization") {
    add_value(g->mutable_input(), "scale", {kRows}, {}, f16);
    add_value(g->mutable_input(), "bias", {kRows}, {}, f16);
    add_node(g, op, {"x", "scale", "bias"}, {"y"});
  } else {
    onnx::AttributeProto* axes = add_node(g, op, {"x"}, {"y"})->add_attribute();
    axes->set_name("axes"), axes->set_type(onnx::AttributeProto::INTS), axes->add_ints(2);
  }
  return m;
}

TEST_CASE("f16 InstanceNormalization and MeanVarianceNormalization compute in f32, rounding once", "[onnx]") {
  const std::vector<double> scale = {0.5, -2}, bias = {1, 0.25};
  for (const std::string op : {"InstanceNormalization", "MeanVarianceNormalization"}) {
    INFO(op);
    auto model = import_model(bytes_of(channel_norm_model(op)));
    if (!model.ok()) FAIL(model.error().message);
    std::map<std::string, ir::Tensor> inputs = {
        {"x", ir::Tensor::from_doubles({ir::DType::F16, {1, kRows, kCols}}, kX)}};
    const bool instance = op == "InstanceNormalization";
    if (instance) {
      inputs["scale"] = ir::Tensor::from_doubles({ir::DType::F16, {kRows}}, scale);
      inputs["bias"] = ir::Tensor::from_doubles({ir::DType::F16, {kRows}}, bias);
    }
    auto out = ir::evaluate(model->graph, inputs);
    REQUIRE(out.ok());
    const Reference normalized = reference(instance ? 1e-5 : 1e-9, false);
    std::vector<double> want;
    for (int64_t k = 0; k < kRows * kCols; ++k) {
      const size_t channel = static_cast<size_t>(k / kCols);
      const double y = normalized.y[static_cast<size_t>(k)];
      want.push_back(instance ? y * scale[channel] + bias[channel] : y);
    }
    kiln::testing::check_close((*out)[0], "f16[1,2,8]", want, 1e-3, 1e-3);
  }
}

TEST_CASE("f16 ReduceMean and GlobalAveragePool sum in f32: 8 elements of 10^4 average 10^4", "[onnx]") {
  for (const std::string op : {"ReduceMean", "GlobalAveragePool"}) {
    INFO(op);
    onnx::ModelProto m;
    m.set_ir_version(8);
    m.add_opset_import()->set_version(17);
    onnx::GraphProto* g = m.mutable_graph();
    add_value(g->mutable_input(), "x", {1, 2, 8}, {}, onnx::TensorProto::FLOAT16);
    add_value(g->mutable_output(), "y", {1, 2, 1}, {}, onnx::TensorProto::FLOAT16);
    onnx::NodeProto* n = add_node(g, op, {"x"}, {"y"});
    if (op == "ReduceMean") {
      onnx::AttributeProto* axes = n->add_attribute();
      axes->set_name("axes"), axes->set_type(onnx::AttributeProto::INTS), axes->add_ints(2);
    }
    auto model = import_model(bytes_of(m));
    if (!model.ok()) FAIL(model.error().message);
    std::vector<double> x(16, 10000);
    for (size_t k = 8; k < 16; ++k) x[k] = -0.5 * static_cast<double>(k);
    auto out = ir::evaluate(model->graph, {{"x", ir::Tensor::from_doubles({ir::DType::F16, {1, 2, 8}}, x)}});
    REQUIRE(out.ok());
    kiln::testing::check_close((*out)[0], "f16[1,2,1]", {10000, -5.75}, 1e-3);
  }
}

// f16's unit in the last place at v (2^-24 below the normal range).
double f16_ulp(double v) {
  const double magnitude = std::fabs(v);
  return magnitude < std::ldexp(1.0, -14) ? std::ldexp(1.0, -24) : std::ldexp(1.0, std::ilogb(magnitude) - 10);
}

TEST_CASE("f16 Softmax and LogSoftmax compute in f32 and round once", "[onnx]") {
  constexpr int64_t kWidth = 64;
  std::vector<double> x;
  for (int64_t i = 0; i < kWidth; ++i) x.push_back(static_cast<double>((i * 37) % kWidth - 32) / 7.3);
  const ir::Tensor input = ir::Tensor::from_doubles({ir::DType::F16, {1, kWidth}}, x);
  double max = -INFINITY, sum = 0;
  for (int64_t i = 0; i < kWidth; ++i) max = std::max(max, input.get(i));
  for (int64_t i = 0; i < kWidth; ++i) sum += std::exp(input.get(i) - max);
  for (const std::string op : {"Softmax", "LogSoftmax"}) {
    INFO(op);
    onnx::ModelProto m;
    m.set_ir_version(8);
    m.add_opset_import()->set_version(13);
    onnx::GraphProto* g = m.mutable_graph();
    add_value(g->mutable_input(), "x", {1, kWidth}, {}, onnx::TensorProto::FLOAT16);
    add_value(g->mutable_output(), "y", {1, kWidth}, {}, onnx::TensorProto::FLOAT16);
    add_node(g, op, {"x"}, {"y"});
    auto model = import_model(bytes_of(m));
    if (!model.ok()) FAIL(model.error().message);
    auto out = ir::evaluate(model->graph, {{"x", input}});
    REQUIRE(out.ok());
    CHECK((*out)[0].type.to_string() == "f16[1,64]");
    for (int64_t i = 0; i < kWidth; ++i) {
      const double z = input.get(i) - max, want = op == "Softmax" ? std::exp(z) / sum : z - std::log(sum);
      INFO("element " << i << ": got " << (*out)[0].get(i) << ", expected " << want);
      // Rounded once from f32: within half a unit, and f32's own error.
      CHECK(std::fabs((*out)[0].get(i) - want) <= 0.5 * f16_ulp(want) + 1e-6 * std::fabs(want));
    }
  }
}

TEST_CASE("a LayerNormalization stash_type that is not a float type is refused as text", "[onnx]") {
  auto integer = import_model(bytes_of(layer_norm_model(onnx::TensorProto::INT32, false)));
  REQUIRE(!integer.ok());
  CHECK(integer.error().message ==
        "onnx: node 'LayerNormalization_0' (LayerNormalization): stash_type is i32, not a floating-point type");
  auto unknown = import_model(bytes_of(layer_norm_model(99, false)));
  REQUIRE(!unknown.ok());
  CHECK(unknown.error().message ==
        "onnx: node 'LayerNormalization_0' (LayerNormalization): attribute 'stash_type' has element type 99 (no "
        "TensorProto data type), which kiln does not have (it has FLOAT, DOUBLE, FLOAT16, BFLOAT16, INT32, INT64, "
        "INT8, UINT8 and BOOL)");
}

}  // namespace
}  // namespace kiln::onnx_import
