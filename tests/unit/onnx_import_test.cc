// ONNX import: models built here with ONNX's protobuf classes, imported, and checked as
// IR and through the interpreter; every refusal as the text the user reads.
#include <onnx/onnx_pb.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <tuple>

#include "base/file.h"

#include "frontends/onnx/importer.h"
#include "ir/interpreter.h"
#include "ir/printer.h"
#include "tests/unit/onnx_builder.h"
#include "tests/unit/test_util.h"

namespace kiln::onnx_import {
namespace {

using kiln::testing::add_int_attribute;
using kiln::testing::add_node;
using kiln::testing::add_value;
using kiln::testing::bytes_of;

// y = relu(x @ w + b) with x: [2,3] named "input:0", w and b initializers.
onnx::ModelProto linear_model() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("linear");
  add_value(g->mutable_input(), "input:0", {2, 3});
  add_value(g->mutable_output(), "y", {2, 2});
  onnx::TensorProto* w = g->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(3), w->add_dims(2);
  for (float f : {1.f, 0.f, 0.f, 1.f, 1.f, 1.f}) w->add_float_data(f);
  onnx::TensorProto* b = g->add_initializer();
  b->set_name("b");
  b->set_data_type(onnx::TensorProto::FLOAT);
  b->add_dims(2);
  b->add_float_data(0.5f), b->add_float_data(-10.f);
  add_node(g, "MatMul", {"input:0", "w"}, {"xw"});
  add_node(g, "Add", {"xw", "b"}, {"s"});
  add_node(g, "Relu", {"s"}, {"y"});
  return m;
}

ImportOptions with_shape(const std::string& name, std::vector<int64_t> dims) {
  ImportOptions options;
  options.shapes[name] = std::move(dims);
  return options;
}

std::string import_error(const onnx::ModelProto& m, const ImportOptions& options = {}) {
  auto r = import_model(bytes_of(m), options);
  return r.ok() ? "(imported)" : r.error().message;
}

TEST_CASE("a model imports: initializers become params, names become kiln's", "[onnx]") {
  auto r = import_model(bytes_of(linear_model()));
  if (!r.ok()) FAIL(r.error().message);
  CHECK(r->opset == 17);
  CHECK(r->inputs[0].onnx == "input:0");
  CHECK(r->inputs[0].kiln == "input_0");
  CHECK(r->outputs[0].kiln == "y");
  REQUIRE(r->weights.count("w") == 1);
  CHECK(ir::print(r->graph) == R"(graph @linear(%input_0: f32[2,3], param %w: f32[3,2], param %b: f32[2]) {
  %0: f32[2,2] = matmul(%input_0, %w)
  %1: f32[2,2] = broadcast(%b) {shape=[2,2], dims=[1]}
  %2: f32[2,2] = add(%0, %1)
  %y: f32[2,2] = relu(%2)
  return %y
}
)");
  std::map<std::string, ir::Tensor> args = r->weights;
  args["input_0"] = ir::Tensor::from_doubles({ir::DType::F32, {2, 3}}, {1, 2, 3, 4, 5, 6});
  auto out = ir::evaluate(r->graph, args);
  REQUIRE(out.ok());
  CHECK((*out)[0].floats == std::vector<double>{4.5, 0, 10.5, 1});
}

TEST_CASE("an output that is an input or another output is a copy under its own name", "[onnx]") {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("aliases");
  add_value(g->mutable_input(), "x", {2});
  for (const char* out : {"y", "r", "r2"}) add_value(g->mutable_output(), out, {2});
  add_node(g, "Identity", {"x"}, {"y"}, "id_x");
  add_node(g, "Relu", {"x"}, {"r"});
  add_node(g, "Identity", {"r"}, {"r2"}, "id_r");
  auto r = import_model(bytes_of(m));
  if (!r.ok()) FAIL(r.error().message);
  CHECK(ir::print(r->graph) == R"(graph @aliases(%x: f32[2]) {
  %r: f32[2] = relu(%x)
  %y: f32[2] = reshape(%x) {shape=[2]}
  %r2: f32[2] = reshape(%r) {shape=[2]}
  return %y, %r, %r2
}
)");
  CHECK(r->outputs[0].kiln == "y");
  CHECK(r->outputs[2].kiln == "r2");
}

TEST_CASE("a float initializer of one element is a constant, not a weight", "[onnx]") {
  // Exporters put GELU's 0.5 and 3.0 in initializers: as params they were loaded at run
  // time, kept pow a libm call, and their broadcasts were shared by every layer.
  onnx::ModelProto m = linear_model();
  onnx::GraphProto* g = m.mutable_graph();
  onnx::TensorProto* three = g->add_initializer();
  three->set_name("three");
  three->set_data_type(onnx::TensorProto::FLOAT);
  three->add_float_data(3.f);
  g->mutable_node(2)->set_output(0, "r");
  add_node(g, "Pow", {"r", "three"}, {"y"});
  auto r = import_model(bytes_of(m));
  if (!r.ok()) FAIL(r.error().message);
  CHECK(r->weights.count("three") == 0);
  CHECK(r->weights.size() == 2);
  const std::string text = ir::print(r->graph);
  CHECK(text.find("param %three") == std::string::npos);
  INFO(text);
  // Spread over the shape as a broadcast of the scalar, never an array of repeats.
  CHECK(text.find("= constant {value=3.0}") != std::string::npos);
  CHECK(text.find("= broadcast(%") != std::string::npos);
  CHECK(text.find("[3.0, 3.0]") == std::string::npos);
}

TEST_CASE("a float constant added to a larger shape stays a broadcast of its own elements, stored once", "[onnx]") {
  // GPT-2's causal mask is folded at import to [1,1,T,T] and added to [1,H,T,T] scores:
  // folded again at the scores' shape it was a weight H times larger, per layer. Integer
  // constants still fold at any shape (indices an op needs at import). Equal constants
  // share one weight.
  onnx::ModelProto m;
  m.add_opset_import()->set_version(17);
  onnx::GraphProto* g = m.mutable_graph();
  add_value(g->mutable_input(), "x", {2, 3, 64, 64});
  add_value(g->mutable_output(), "y", {2, 3, 64, 64});
  // The mask twice, as two layers' Constant nodes: one weight holds both.
  for (const std::string name : {"mask", "mask_again"}) {
    onnx::AttributeProto* a = add_node(g, "Constant", {}, {name}, name)->add_attribute();
    a->set_name("value"), a->set_type(onnx::AttributeProto::TENSOR);
    a->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
    a->mutable_t()->add_dims(1), a->mutable_t()->add_dims(64), a->mutable_t()->add_dims(64);
    for (int i = 0; i < 64 * 64; ++i) a->mutable_t()->add_float_data(i % 64 > i / 64 ? -1e9f : 0.f);
  }
  add_node(g, "Add", {"x", "mask"}, {"masked"});
  add_node(g, "Add", {"masked", "mask_again"}, {"y"});
  auto r = import_model(bytes_of(m));
  if (!r.ok()) FAIL(r.error().message);
  const std::string text = ir::print(r->graph);
  INFO(text);
  REQUIRE(r->weights.size() == 1);
  CHECK(r->weights.begin()->second.size() == 64 * 64);
  CHECK(text.find("f32[64,64]") != std::string::npos);
  CHECK(text.find("= broadcast(%") != std::string::npos);
  ir::Tensor x = ir::Tensor::zeros(ir::TensorType{ir::DType::F32, {2, 3, 64, 64}});
  std::map<std::string, ir::Tensor> args = r->weights;
  args["x"] = x;
  auto y = ir::evaluate(r->graph, args);
  if (!y.ok()) FAIL(y.error().message);
  CHECK((*y)[0].get(5 * 64 * 64 + 3) == -2e9f);   // batch 1, head 2, row 0, column 3
  CHECK((*y)[0].get(5 * 64 * 64 + 3 * 64) == 0);  // row 3, column 0
}

TEST_CASE("PRelu's slope of one per channel applies along dim 1 before opset 7, numpy's way after", "[onnx]") {
  // x [1, 2, 3] with slope [2] (channels) before 7; slope [3] (the last dim) from 7 on.
  for (int64_t opset : {6, 9}) {
    INFO("opset " << opset);
    onnx::ModelProto m;
    m.add_opset_import()->set_version(opset);
    onnx::GraphProto* g = m.mutable_graph();
    add_value(g->mutable_input(), "x", {1, 2, 3});
    add_value(g->mutable_output(), "y", {1, 2, 3});
    onnx::TensorProto* slope = g->add_initializer();
    slope->set_name("slope");
    slope->set_data_type(onnx::TensorProto::FLOAT);
    const std::vector<float> slopes = opset < 7 ? std::vector<float>{0.5f, 2.f} : std::vector<float>{0.5f, 2.f, 3.f};
    slope->add_dims(static_cast<int64_t>(slopes.size()));
    for (float f : slopes) slope->add_float_data(f);
    onnx::NodeProto* prelu = add_node(g, "PRelu", {"x", "slope"}, {"y"});
    if (opset < 7) {
      onnx::AttributeProto* a = prelu->add_attribute();
      a->set_name("consumed_inputs"), a->set_type(onnx::AttributeProto::INTS);
    }
    auto r = import_model(bytes_of(m));
    if (!r.ok()) FAIL(r.error().message);
    std::map<std::string, ir::Tensor> args = r->weights;
    args["x"] = ir::Tensor::from_doubles({ir::DType::F32, {1, 2, 3}}, {-1, -1, -1, -1, -1, 4});
    auto y = ir::evaluate(r->graph, args);
    if (!y.ok()) FAIL(y.error().message);
    const std::vector<double> want =
        opset < 7 ? std::vector<double>{-0.5, -0.5, -0.5, -2, -2, 4} : std::vector<double>{-0.5, -2, -3, -0.5, -2, 4};
    for (int64_t i = 0; i < 6; ++i) CHECK((*y)[0].get(i) == want[static_cast<size_t>(i)]);
  }
}

TEST_CASE("shape arithmetic on constants folds at import", "[onnx]") {
  onnx::ModelProto m;
  m.add_opset_import()->set_version(13);
  onnx::GraphProto* g = m.mutable_graph();
  add_value(g->mutable_input(), "x", {2, 3, 4});
  add_value(g->mutable_output(), "y", {6, 4});
  add_node(g, "Shape", {"x"}, {"shape"});
  onnx::NodeProto* c = add_node(g, "Constant", {}, {"idx"});
  onnx::AttributeProto* a = c->add_attribute();
  a->set_name("value_ints"), a->set_type(onnx::AttributeProto::INTS), a->add_ints(2);
  add_node(g, "Gather", {"shape", "idx"}, {"last"});
  onnx::NodeProto* k = add_node(g, "Constant", {}, {"minus1"});
  a = k->add_attribute();
  a->set_name("value_ints"), a->set_type(onnx::AttributeProto::INTS), a->add_ints(-1);
  add_node(g, "Concat", {"minus1", "last"}, {"new_shape"})->add_attribute()->CopyFrom([] {
    onnx::AttributeProto axis;
    axis.set_name("axis"), axis.set_type(onnx::AttributeProto::INT), axis.set_i(0);
    return axis;
  }());
  add_node(g, "Reshape", {"x", "new_shape"}, {"y"});
  auto r = import_model(bytes_of(m));
  if (!r.ok()) FAIL(r.error().message);
  CHECK(ir::print(r->graph) ==
        "graph @model(%x: f32[2,3,4]) {\n  %y: f32[6,4] = reshape(%x) {shape=[6,4]}\n  return %y\n}\n");
}

TEST_CASE("index tensors built from constants fold too, past shape arithmetic's sizes", "[onnx]") {
  // ScatterND's indices must be known at import. Swin's attention-mask indices are built
  // like these (Range, Div, Unsqueeze, Concat), with more elements than shape arithmetic.
  constexpr int64_t kSide = 50, kCount = kSide * kSide;  // indices: [2500, 2]
  onnx::ModelProto m;
  m.add_opset_import()->set_version(17);
  onnx::GraphProto* g = m.mutable_graph();
  add_value(g->mutable_input(), "x", {kSide, kSide});
  add_value(g->mutable_input(), "u", {kCount});
  add_value(g->mutable_output(), "y", {kSide, kSide});
  auto scalar = [&](const std::string& name, int64_t v) {
    onnx::AttributeProto* a = add_node(g, "Constant", {}, {name}, name)->add_attribute();
    a->set_name("value"), a->set_type(onnx::AttributeProto::TENSOR);
    a->mutable_t()->set_data_type(onnx::TensorProto::INT64);
    a->mutable_t()->add_int64_data(v);
  };
  scalar("start", kCount - 1), scalar("limit", -1), scalar("delta", -1), scalar("side", kSide);
  onnx::AttributeProto* axes = add_node(g, "Constant", {}, {"axes"}, "axes")->add_attribute();
  axes->set_name("value_ints"), axes->set_type(onnx::AttributeProto::INTS), axes->add_ints(1);
  add_node(g, "Range", {"start", "limit", "delta"}, {"flat"});  // 2499, 2498, ..., 0
  add_node(g, "Div", {"flat", "side"}, {"row"});
  add_node(g, "Mul", {"row", "side"}, {"row_start"});
  add_node(g, "Sub", {"flat", "row_start"}, {"col"});
  add_node(g, "Unsqueeze", {"row", "axes"}, {"row1"}, "unsqueeze_row");
  add_node(g, "Unsqueeze", {"col", "axes"}, {"col1"}, "unsqueeze_col");
  onnx::AttributeProto* axis = add_node(g, "Concat", {"row1", "col1"}, {"indices"})->add_attribute();
  axis->set_name("axis"), axis->set_type(onnx::AttributeProto::INT), axis->set_i(1);
  add_node(g, "ScatterND", {"x", "indices", "u"}, {"y"});
  auto r = import_model(bytes_of(m));
  if (!r.ok()) FAIL(r.error().message);
  std::vector<double> x(kCount, -1.0), u(kCount);
  for (int64_t i = 0; i < kCount; ++i) u[static_cast<size_t>(i)] = static_cast<double>(i % 97);
  std::map<std::string, ir::Tensor> args = r->weights;  // ScatterND's placement, a constant too large for a literal
  args["x"] = ir::Tensor::from_doubles(ir::TensorType{ir::DType::F32, {kSide, kSide}}, x);
  args["u"] = ir::Tensor::from_doubles(ir::TensorType{ir::DType::F32, {kCount}}, u);
  auto y = ir::evaluate(r->graph, args);
  if (!y.ok()) FAIL(y.error().message);
  REQUIRE(y->size() == 1);
  for (int64_t i = 0; i < kCount; i += 97) CHECK((*y)[0].get(kCount - 1 - i) == u[static_cast<size_t>(i)]);
}

TEST_CASE("a ScatterElements of constants folds, so GatherND may read it; of graph values it stays a node", "[onnx]") {
  // BEiT's relative-position index: ScatterElements (one-hot, compared with an iota) of
  // constants, read by GatherND as its indices, which must be known at import.
  auto model = [](bool updates_known, bool gather) {
    onnx::ModelProto m;
    m.add_opset_import()->set_version(17);
    onnx::GraphProto* g = m.mutable_graph();
    add_value(g->mutable_input(), "x", {4});
    if (gather) {
      add_value(g->mutable_output(), "y", {4});
    } else {
      add_value(g->mutable_output(), "index", {4, 1}, {}, onnx::TensorProto::INT64);
    }
    auto ints = [&](const std::string& name, std::vector<int64_t> dims, std::vector<int64_t> values) {
      onnx::AttributeProto* a = add_node(g, "Constant", {}, {name}, name)->add_attribute();
      a->set_name("value"), a->set_type(onnx::AttributeProto::TENSOR);
      a->mutable_t()->set_data_type(onnx::TensorProto::INT64);
      for (int64_t d : dims) a->mutable_t()->add_dims(d);
      for (int64_t v : values) a->mutable_t()->add_int64_data(v);
    };
    ints("data", {4, 1}, {0, 0, 0, 0});
    ints("where", {2, 1}, {1, 3});
    if (updates_known) {
      ints("updates", {2, 1}, {3, 1});
    } else {
      add_value(g->mutable_input(), "updates", {2, 1}, {}, onnx::TensorProto::INT64);
    }
    add_int_attribute(add_node(g, "ScatterElements", {"data", "where", "updates"}, {"index"}), "axis", 0);
    if (gather) add_node(g, "GatherND", {"x", "index"}, {"y"});
    return m;
  };
  auto r = import_model(bytes_of(model(true, true)));
  if (!r.ok()) FAIL(r.error().message);
  const std::string printed = ir::print(r->graph);
  CHECK(printed.find("iota") == std::string::npos);
  std::map<std::string, ir::Tensor> args = r->weights;
  args["x"] = ir::Tensor::from_doubles(ir::TensorType{ir::DType::F32, {4}}, {10, 11, 12, 13});
  auto y = ir::evaluate(r->graph, args);
  if (!y.ok()) FAIL(y.error().message);
  REQUIRE(y->size() == 1);
  CHECK((*y)[0].floats == std::vector<double>{10, 13, 10, 11});
  // With updates known only at run time the index is too, and GatherND reads it then.
  auto at_run_time = import_model(bytes_of(model(false, true)));
  if (!at_run_time.ok()) FAIL(at_run_time.error().message);
  std::map<std::string, ir::Tensor> run_args = at_run_time->weights;
  run_args["x"] = args["x"];
  run_args["updates"] = ir::Tensor::from_ints({ir::DType::I64, {2, 1}}, {3, -3});  // -3 wraps to 1
  auto run = ir::evaluate(at_run_time->graph, run_args);
  if (!run.ok()) FAIL(run.error().message);
  CHECK((*run)[0].floats == std::vector<double>{10, 13, 10, 11});
  // Such a scatter, its positions known at import, gathers from the updates at run time:
  // a gather node and small constants, not a weight.
  auto runtime = import_model(bytes_of(model(false, false)));
  if (!runtime.ok()) FAIL(runtime.error().message);
  INFO(ir::print(runtime->graph));
  CHECK(ir::print(runtime->graph).find(" = gather(%0, ") != std::string::npos);
  CHECK(runtime->weights.empty());
}

TEST_CASE("ScatterND into more rows than its table may hold is refused, not allocated", "[onnx]") {
  onnx::ModelProto m;
  m.add_opset_import()->set_version(17);
  onnx::GraphProto* g = m.mutable_graph();
  add_value(g->mutable_input(), "x", {int64_t{1} << 27});
  add_value(g->mutable_input(), "u", {1});
  add_value(g->mutable_output(), "y", {int64_t{1} << 27});
  onnx::AttributeProto* a = add_node(g, "Constant", {}, {"indices"}, "indices")->add_attribute();
  a->set_name("value"), a->set_type(onnx::AttributeProto::TENSOR);
  a->mutable_t()->set_data_type(onnx::TensorProto::INT64);
  a->mutable_t()->add_dims(1), a->mutable_t()->add_dims(1);
  a->mutable_t()->add_int64_data(5);
  add_node(g, "ScatterND", {"x", "indices", "u"}, {"y"});
  CHECK(import_error(m) == "onnx: node 'ScatterND_0' (ScatterND): scattering into 134217728 rows is not supported");
}

TEST_CASE("a matmul-like einsum imports as one batched matmul", "[onnx]") {
  struct Case {
    std::string equation;
    std::vector<int64_t> a, b, out;
  };
  // Attention's scores, a transposed product, a row-wise dot (i a batch letter), an outer
  // product, and contracted letters that are not adjacent.
  const std::vector<Case> cases = {{"bhid,bhjd->bhij", {2, 3, 4, 5}, {2, 3, 6, 5}, {2, 3, 4, 6}},
                                   {"ik,kj->ji", {3, 4}, {4, 5}, {5, 3}},
                                   {"ij,ij->i", {3, 4}, {3, 4}, {3}},
                                   {"i,j->ij", {3}, {4}, {3, 4}},
                                   {"akbl,lkc->cba", {2, 3, 4, 5}, {5, 3, 6}, {6, 4, 2}}};
  for (const Case& c : cases) {
    INFO(c.equation);
    onnx::ModelProto m;
    m.add_opset_import()->set_version(17);
    onnx::GraphProto* g = m.mutable_graph();
    add_value(g->mutable_input(), "a", c.a);
    add_value(g->mutable_input(), "b", c.b);
    add_value(g->mutable_output(), "y", c.out);
    onnx::AttributeProto* eq = add_node(g, "Einsum", {"a", "b"}, {"y"})->add_attribute();
    eq->set_name("equation"), eq->set_type(onnx::AttributeProto::STRING), eq->set_s(c.equation);
    auto r = import_model(bytes_of(m));
    if (!r.ok()) FAIL(r.error().message);
    int matmuls = 0, reductions = 0;
    for (const ir::Node& n : r->graph.nodes) matmuls += n.op == ir::Op::Matmul, reductions += n.op == ir::Op::ReduceSum;
    CHECK(matmuls == 1);
    CHECK(reductions == 0);
    // Against the sum over every letter, computed here.
    ir::TensorType ta{ir::DType::F32, c.a}, tb{ir::DType::F32, c.b};
    std::vector<double> va(static_cast<size_t>(ta.num_elements())), vb(static_cast<size_t>(tb.num_elements()));
    for (size_t i = 0; i < va.size(); ++i) va[i] = static_cast<double>((i * 7) % 11) - 5;
    for (size_t i = 0; i < vb.size(); ++i) vb[i] = static_cast<double>((i * 5) % 13) - 6;
    auto y = ir::evaluate(r->graph, {{"a", ir::Tensor::from_doubles(ta, va)}, {"b", ir::Tensor::from_doubles(tb, vb)}});
    if (!y.ok()) FAIL(y.error().message);
    const std::string terms = c.equation.substr(0, c.equation.find("->")),
                      out = c.equation.substr(c.equation.find("->") + 2);
    const std::string ta_letters = terms.substr(0, terms.find(',')), tb_letters = terms.substr(terms.find(',') + 1);
    std::string letters;
    std::map<char, int64_t> extent;
    for (size_t d = 0; d < ta_letters.size(); ++d) extent[ta_letters[d]] = c.a[d];
    for (size_t d = 0; d < tb_letters.size(); ++d) extent[tb_letters[d]] = c.b[d];
    for (const auto& [letter, n] : extent) letters += letter;
    std::vector<double> want(static_cast<size_t>(ir::TensorType{ir::DType::F32, c.out}.num_elements()), 0.0);
    std::map<char, int64_t> at;
    auto flat = [&](const std::string& term, const std::vector<int64_t>& shape) {
      int64_t f = 0;
      for (size_t d = 0; d < term.size(); ++d) f = f * shape[d] + at[term[d]];
      return static_cast<size_t>(f);
    };
    auto walk = [&](auto& self, size_t k) -> void {
      if (k == letters.size()) {
        want[flat(out, c.out)] += va[flat(ta_letters, c.a)] * vb[flat(tb_letters, c.b)];
        return;
      }
      for (at[letters[k]] = 0; at[letters[k]] < extent[letters[k]]; ++at[letters[k]]) self(self, k + 1);
    };
    walk(walk, 0);
    REQUIRE((*y)[0].size() == static_cast<int64_t>(want.size()));
    for (size_t i = 0; i < want.size(); ++i) CHECK((*y)[0].get(static_cast<int64_t>(i)) == want[i]);
  }
}

// The einsum of a and b (float inputs of these shapes) with the equation's result, or
// the import's error.
Result<ir::Tensor> einsum_of(const std::string& equation, const ir::Tensor& a, const ir::Tensor& b) {
  onnx::ModelProto m;
  m.add_opset_import()->set_version(17);
  onnx::GraphProto* g = m.mutable_graph();
  add_value(g->mutable_input(), "a", a.type.shape);
  add_value(g->mutable_input(), "b", b.type.shape);
  add_value(g->mutable_output(), "y", {});
  onnx::AttributeProto* eq = add_node(g, "Einsum", {"a", "b"}, {"y"})->add_attribute();
  eq->set_name("equation"), eq->set_type(onnx::AttributeProto::STRING), eq->set_s(equation);
  KILN_ASSIGN_OR_RETURN(ImportedModel r, import_model(bytes_of(m)));
  KILN_ASSIGN_OR_RETURN(std::vector<ir::Tensor> y, ir::evaluate(r.graph, {{"a", a}, {"b", b}}));
  return y[0];
}

TEST_CASE("an einsum's '...' stands for the dims it covers, broadcast as numpy does", "[onnx]") {
  auto filled = [](ir::Shape shape, int seed) {
    std::vector<double> v(static_cast<size_t>(ir::num_elements(shape)));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>((i * 7 + static_cast<size_t>(seed)) % 11) - 5;
    return ir::Tensor::from_doubles({ir::DType::F32, shape}, v);
  };
  auto with_shape = [](ir::Tensor t, ir::Shape shape) {
    t.type.shape = std::move(shape);
    return t;
  };
  struct Case {
    std::string with_ellipsis, with_letters;
    ir::Shape a, b, a_letters, b_letters;  // the second pair: the same values, dims of 1 dropped
  };
  // LongT5's attention, a broadcast batch dim of 1, ranks that differ, numpy's implicit
  // output (the ellipsis first), and an ellipsis of no dims.
  const std::vector<Case> cases = {
      {"...qhd,...khd->...hqk",
       "xyqhd,xykhd->xyhqk",
       {2, 3, 4, 2, 5},
       {2, 3, 6, 2, 5},
       {2, 3, 4, 2, 5},
       {2, 3, 6, 2, 5}},
      {"...ij,...jk->...ik", "xij,yjk->xyik", {2, 1, 3, 4}, {5, 4, 6}, {2, 3, 4}, {5, 4, 6}},
      {"...ij,...jk", "xij,xjk->xik", {2, 3, 4}, {2, 4, 5}, {2, 3, 4}, {2, 4, 5}},
      {"ij...,jk->ik...", "ijx,jk->ikx", {3, 4, 2}, {4, 5}, {3, 4, 2}, {4, 5}},
      {"...ij,...jk->...ik", "ij,jk->ik", {3, 4}, {4, 5}, {3, 4}, {4, 5}},
  };
  for (const Case& c : cases) {
    INFO(c.with_ellipsis);
    const ir::Tensor a = filled(c.a, 1), b = filled(c.b, 2);
    auto got = einsum_of(c.with_ellipsis, a, b);
    if (!got.ok()) FAIL(got.error().message);
    auto want = einsum_of(c.with_letters, with_shape(a, c.a_letters), with_shape(b, c.b_letters));
    if (!want.ok()) FAIL(want.error().message);
    CHECK(got->type.to_string() == want->type.to_string());
    for (int64_t i = 0; i < want->size(); ++i) CHECK(got->get(i) == want->get(i));
  }
  const ir::Tensor a = filled({2, 3, 4}, 1), b = filled({2, 4, 5}, 2);
  CHECK(einsum_of("...i...j,...jk->...ik", a, b).error().message ==
        "onnx: node 'Einsum_0' (Einsum): '...i...j' has more than one '...'");
  CHECK(einsum_of("...abcd,...jk->...ik", a, b).error().message ==
        "onnx: node 'Einsum_0' (Einsum): operand 0 has rank 3, fewer than '...abcd' names");
}

TEST_CASE("NonZero of a constant is its indices, known at import; of an input it is refused", "[onnx]") {
  onnx::ModelProto m;
  m.add_opset_import()->set_version(17);
  onnx::GraphProto* g = m.mutable_graph();
  add_value(g->mutable_output(), "y", {}, {}, onnx::TensorProto::INT64);
  onnx::AttributeProto* a = add_node(g, "Constant", {}, {"c"}, "c")->add_attribute();
  a->set_name("value"), a->set_type(onnx::AttributeProto::TENSOR);
  a->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
  a->mutable_t()->add_dims(2), a->mutable_t()->add_dims(3);
  for (float v : {0.0f, 2.0f, 0.0f, -1.0f, 0.0f, 0.5f}) a->mutable_t()->add_float_data(v);
  add_node(g, "NonZero", {"c"}, {"y"}, "nz");
  auto r = import_model(bytes_of(m));
  if (!r.ok()) FAIL(r.error().message);
  auto y = ir::evaluate(r->graph, {});
  if (!y.ok()) FAIL(y.error().message);
  CHECK((*y)[0].type.to_string() == "i64[2,3]");
  CHECK((*y)[0].ints == std::vector<int64_t>{0, 1, 1, 1, 0, 2});
  onnx::ModelProto input = m;
  input.mutable_graph()->mutable_node(1)->set_input(0, "x");
  add_value(input.mutable_graph()->mutable_input(), "x", {2, 3});
  CHECK(import_error(input) ==
        "onnx: node 'nz' (NonZero): the input is computed at run time, and the count of its nonzero elements is the "
        "output's shape; kiln needs it known at import");
}

TEST_CASE("symbolic dims need --shape, which must fit", "[onnx]") {
  onnx::ModelProto m = linear_model();
  m.mutable_graph()->mutable_input()->Clear();
  add_value(m.mutable_graph()->mutable_input(), "input:0", {}, {"batch", "features"});
  CHECK(import_error(m) ==
        "onnx: input 'input:0' has the symbolic dim 0 ('batch'); fix it with --shape input:0=D0,D1,...");
  CHECK(import_error(m, with_shape("input:0", {2, 3})) == "(imported)");
  CHECK(import_error(m, with_shape("input:0", {2})) == "onnx: --shape input:0 gives 1 dims, but the input has 2");
  CHECK(import_error(m, with_shape("nope", {2})) == "onnx: --shape names 'nope', which is no input of the model");
  CHECK(import_error(m, with_shape("input:0", {2, 4})) ==
        "onnx: node 'MatMul_0' (MatMul): matmul: contracting dims differ: f32[2,4] x f32[3,2]");
  CHECK(import_error(m, with_shape("input:0", {int64_t{1} << 31, int64_t{1} << 31})) ==
        "onnx: input 'input:0' of shape [2147483648,2147483648] has more than 2^40 elements");
  m.mutable_graph()->mutable_input()->Clear();
  add_value(m.mutable_graph()->mutable_input(), "input:0", {2, -3});
  CHECK(import_error(m) == "onnx: input 'input:0' has the negative dim -3 at 1");
  CHECK(import_error(m, with_shape("input:0", {2, 3})) == "onnx: input 'input:0' has the negative dim -3 at 1");
  m.mutable_graph()->mutable_input()->Clear();
  add_value(m.mutable_graph()->mutable_input(), "input:0", {int64_t{1} << 31, int64_t{1} << 31});
  CHECK(import_error(m) == "onnx: input 'input:0' of shape [2147483648,2147483648] has more than 2^40 elements");
}

TEST_CASE("what kiln does not import is an error naming the node, op and attribute", "[onnx]") {
  onnx::ModelProto m = linear_model();
  m.mutable_graph()->mutable_node(2)->set_op_type("Mish");
  CHECK(import_error(m) == "onnx: node 'Relu_0' (Mish): kiln does not support the op Mish");
  m = linear_model();
  m.mutable_graph()->mutable_node(2)->set_domain("com.microsoft");
  CHECK(import_error(m) ==
        "onnx: node 'Relu_0' (Relu): the domain 'com.microsoft' is not supported (kiln imports the default domain "
        "ai.onnx)");
  m = linear_model();
  onnx::AttributeProto* a = m.mutable_graph()->mutable_node(2)->add_attribute();
  a->set_name("fast"), a->set_type(onnx::AttributeProto::INT), a->set_i(1);
  CHECK(import_error(m) == "onnx: node 'Relu_0' (Relu): attribute 'fast' is not supported");
  m = linear_model();
  m.mutable_graph()->mutable_node(2)->set_op_type("Cast");
  a = m.mutable_graph()->mutable_node(2)->add_attribute();
  a->set_name("to"), a->set_type(onnx::AttributeProto::INT), a->set_i(999);
  CHECK(import_error(m) ==
        "onnx: node 'Relu_0' (Cast): attribute 'to' has element type 999 (no TensorProto data type), which kiln "
        "does not have (it has FLOAT, DOUBLE, FLOAT16, BFLOAT16, INT32, INT64, INT8, UINT8 and BOOL)");
}

TEST_CASE("CumSum of integers, as RoBERTa's position ids are made; of bools refused", "[onnx]") {
  for (auto [type, dtype, name] : {std::tuple{onnx::TensorProto::INT64, ir::DType::I64, "i64"},
                                   {onnx::TensorProto::INT32, ir::DType::I32, "i32"},
                                   {onnx::TensorProto::BOOL, ir::DType::Bool, "bool"}}) {
    INFO(name);
    onnx::ModelProto m;
    m.add_opset_import()->set_version(14);
    onnx::GraphProto* g = m.mutable_graph();
    add_value(g->mutable_input(), "x", {2, 5}, {}, type);
    add_value(g->mutable_output(), "y", {2, 5}, {}, type);
    onnx::AttributeProto* a = add_node(g, "Constant", {}, {"axis"}, "axis")->add_attribute();
    a->set_name("value_ints"), a->set_type(onnx::AttributeProto::INTS), a->add_ints(1);
    add_node(g, "CumSum", {"x", "axis"}, {"y"}, "positions");
    auto r = import_model(bytes_of(m));
    if (type == onnx::TensorProto::BOOL) {
      REQUIRE_FALSE(r.ok());
      CHECK(r.error().message ==
            "onnx: node 'positions' (CumSum): CumSum of bool[2,5] is not supported (only numbers)");
      continue;
    }
    if (!r.ok()) FAIL(r.error().message);
    auto x = ir::Tensor::from_doubles({dtype, {2, 5}}, {1, 1, 1, 0, 0, 1, 1, 1, 1, 1});
    auto out = ir::evaluate(r->graph, {{"x", x}});
    REQUIRE(out.ok());
    kiln::testing::check_close((*out)[0], std::string(name) + "[2,5]", {1, 2, 3, 3, 3, 1, 2, 3, 4, 5});
  }
}

TEST_CASE("CumSum adds each element to the ones before it only: an inf or NaN stays where it is", "[onnx]") {
  for (int reverse : {0, 1})
    for (int exclusive : {0, 1}) {
      INFO("reverse " << reverse << ", exclusive " << exclusive);
      onnx::ModelProto m;
      m.add_opset_import()->set_version(14);
      onnx::GraphProto* g = m.mutable_graph();
      add_value(g->mutable_input(), "x", {2, 5});
      add_value(g->mutable_output(), "y", {2, 5});
      onnx::AttributeProto* a = add_node(g, "Constant", {}, {"axis"}, "axis")->add_attribute();
      a->set_name("value_ints"), a->set_type(onnx::AttributeProto::INTS), a->add_ints(1);
      onnx::NodeProto* n = add_node(g, "CumSum", {"x", "axis"}, {"y"});
      for (auto [name, value] : {std::pair{"reverse", reverse}, {"exclusive", exclusive}}) {
        onnx::AttributeProto* attr = n->add_attribute();
        attr->set_name(name), attr->set_type(onnx::AttributeProto::INT), attr->set_i(value);
      }
      auto r = import_model(bytes_of(m));
      if (!r.ok()) FAIL(r.error().message);
      const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
      const std::vector<double> x = {1, 2, inf, 4, 5, 1, nan, 2, 3, 4};
      auto out = ir::evaluate(r->graph, {{"x", ir::Tensor::from_doubles({ir::DType::F32, {2, 5}}, x)}});
      REQUIRE(out.ok());
      std::vector<double> want(10);
      for (int row = 0; row < 2; ++row)
        for (int i = 0; i < 5; ++i) {
          double sum = 0;
          for (int j = 0; j < 5; ++j) {
            const bool before = reverse ? j > i : j < i;
            if (before || (!exclusive && j == i)) sum += x[static_cast<size_t>(row * 5 + j)];
          }
          want[static_cast<size_t>(row * 5 + i)] = sum;
        }
      kiln::testing::check_close((*out)[0], "f32[2,5]", want);
    }
}

TEST_CASE("an attribute its opset made an input is refused; Upsample before opset 9 reads its scales", "[onnx]") {
  auto model = [](const std::string& op, int64_t opset, const char* attr, std::vector<float> values) {
    onnx::ModelProto m;
    m.add_opset_import()->set_version(opset);
    onnx::GraphProto* g = m.mutable_graph();
    add_value(g->mutable_input(), "x", {1, 1, 2, 2});
    add_value(g->mutable_output(), "y", {});
    onnx::AttributeProto* a = add_node(g, op, {"x"}, {"y"}, "n")->add_attribute();
    a->set_name(attr);
    if (values.size() == 1) a->set_type(onnx::AttributeProto::FLOAT), a->set_f(values[0]);
    else {
      a->set_type(onnx::AttributeProto::FLOATS);
      for (float v : values) a->add_floats(v);
    }
    return m;
  };
  CHECK(import_error(model("Clip", 11, "min", {0.f})) ==
        "onnx: node 'n' (Clip): attribute 'min' is an input of Clip from opset 11 on (the model imports opset 11)");
  CHECK(import_error(model("Clip", 6, "min", {0.f})) == "(imported)");
  CHECK(import_error(model("Upsample", 9, "scales", {1, 1, 2, 2})) ==
        "onnx: node 'n' (Upsample): attribute 'scales' is an input of Upsample from opset 9 on (the model imports "
        "opset 9)");
  auto r = import_model(bytes_of(model("Upsample", 7, "scales", {1, 1, 2, 1.5})));
  if (!r.ok()) FAIL(r.error().message);
  auto out = ir::evaluate(r->graph, {{"x", ir::Tensor::from_doubles({ir::DType::F32, {1, 1, 2, 2}}, {1, 2, 3, 4})}});
  REQUIRE(out.ok());
  kiln::testing::check_close((*out)[0], "f32[1,1,4,3]", {1, 1, 2, 1, 1, 2, 3, 3, 4, 3, 3, 4});
}

TEST_CASE("a TopK of 0 and a layout-1 recurrence's initial state are refused as such", "[onnx]") {
  auto initializer = [](onnx::GraphProto* g, const std::string& name, std::vector<int64_t> dims, bool ints) {
    onnx::TensorProto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(ints ? onnx::TensorProto::INT64 : onnx::TensorProto::FLOAT);
    int64_t n = 1;
    for (int64_t d : dims) t->add_dims(d), n *= d;
    for (int64_t i = 0; i < n; ++i) ints ? t->add_int64_data(0) : t->add_float_data(0.5f);
  };
  onnx::ModelProto top;
  top.add_opset_import()->set_version(11);
  onnx::GraphProto* g = top.mutable_graph();
  add_value(g->mutable_input(), "x", {2, 3});
  add_value(g->mutable_output(), "v", {});
  add_value(g->mutable_output(), "i", {});
  initializer(g, "k", {1}, true);
  add_node(g, "TopK", {"x", "k"}, {"v", "i"}, "top");
  CHECK(import_error(top) ==
        "onnx: node 'top' (TopK): K is 0: kiln takes the top 1 or more (empty outputs are not supported)");

  onnx::ModelProto gru;
  gru.add_opset_import()->set_version(14);
  g = gru.mutable_graph();
  add_value(g->mutable_input(), "x", {2, 4, 3});   // layout 1: [batch, seq, input]
  add_value(g->mutable_input(), "h0", {2, 1, 5});  // layout 1: [batch, directions, hidden]
  add_value(g->mutable_output(), "y", {});
  initializer(g, "w", {1, 15, 3}, false);
  initializer(g, "r", {1, 15, 5}, false);
  onnx::NodeProto* n = add_node(g, "GRU", {"x", "w", "r", "", "", "h0"}, {"y"}, "gru");
  for (auto [name, value] : {std::pair{"hidden_size", 5}, {"layout", 1}}) {
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name(name), a->set_type(onnx::AttributeProto::INT), a->set_i(value);
  }
  CHECK(import_error(gru) == "onnx: node 'gru' (GRU): initial states with layout 1 are not supported");
}

TEST_CASE("Resize of opset 18 and 19: axes, keep_aspect_ratio_policy, antialias 0 (PyTorch's dynamo export)",
          "[onnx]") {
  // x [1,1,4,6] = 0..23; sizes [2,2] for axes 2 and 3: stretch gives [2,2]; not_larger one
  // scale, min(2/4, 2/6) = 1/3, so [1,2]; not_smaller max = 1/2, so [2,3]: nearest (floor,
  // asymmetric) rows 0 and 2, columns 0, 2 and 4.
  auto model = [](const std::string& policy, int64_t antialias) {
    onnx::ModelProto m;
    m.add_opset_import()->set_version(19);
    onnx::GraphProto* g = m.mutable_graph();
    add_value(g->mutable_input(), "x", {1, 1, 4, 6});
    add_value(g->mutable_output(), "y", {});
    onnx::TensorProto* sizes = g->add_initializer();
    sizes->set_name("sizes"), sizes->set_data_type(onnx::TensorProto::INT64), sizes->add_dims(2);
    sizes->add_int64_data(2), sizes->add_int64_data(2);
    onnx::NodeProto* n = add_node(g, "Resize", {"x", "", "", "sizes"}, {"y"}, "r");
    auto text = [&](const char* name, const std::string& value) {
      onnx::AttributeProto* a = n->add_attribute();
      a->set_name(name), a->set_type(onnx::AttributeProto::STRING), a->set_s(value);
    };
    text("keep_aspect_ratio_policy", policy);
    text("coordinate_transformation_mode", "asymmetric");
    text("nearest_mode", "floor");
    onnx::AttributeProto* axes = n->add_attribute();
    axes->set_name("axes"), axes->set_type(onnx::AttributeProto::INTS), axes->add_ints(2), axes->add_ints(-1);
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name("antialias"), a->set_type(onnx::AttributeProto::INT), a->set_i(antialias);
    return m;
  };
  std::vector<double> x(24);
  for (int i = 0; i < 24; ++i) x[static_cast<size_t>(i)] = i;
  for (auto [policy, type, want] : {std::tuple{"stretch", "f32[1,1,2,2]", std::vector<double>{0, 3, 12, 15}},
                                    {"not_larger", "f32[1,1,1,2]", std::vector<double>{0, 3}},
                                    {"not_smaller", "f32[1,1,2,3]", std::vector<double>{0, 2, 4, 12, 14, 16}}}) {
    INFO(policy);
    auto r = import_model(bytes_of(model(policy, 0)));
    if (!r.ok()) FAIL(r.error().message);
    auto out = ir::evaluate(r->graph, {{"x", ir::Tensor::from_doubles({ir::DType::F32, {1, 1, 4, 6}}, x)}});
    REQUIRE(out.ok());
    kiln::testing::check_close((*out)[0], type, want);
  }
  CHECK(import_error(model("stretch", 1)) == "onnx: node 'r' (Resize): antialias 1 is not supported");
  CHECK(import_error(model("fit", 0)) ==
        "onnx: node 'r' (Resize): keep_aspect_ratio_policy 'fit' is none of stretch, not_larger and not_smaller");
}

TEST_CASE("a recurrent layer makes one input projection per direction and one recurrent matmul per step", "[onnx]") {
  // A matmul per gate and step made a bidirectional 2-layer LSTM of 50 steps 1600 library
  // calls (ops_rnn.cc); a GRU with r applied before Rh (linear_before_reset 0) needs its h
  // gate's product apart, after r.
  struct Case {
    const char* op;
    int64_t gates, linear_before_reset, matmuls;
  };
  const int64_t seq = 5, dirs = 2;
  for (const Case c : {Case{"LSTM", 4, 0, dirs * (1 + seq)}, Case{"GRU", 3, 1, dirs * (1 + seq)},
                       Case{"GRU", 3, 0, dirs * (1 + 2 * seq)}, Case{"RNN", 1, 0, dirs * (1 + seq)}}) {
    INFO(c.op << " linear_before_reset " << c.linear_before_reset);
    onnx::ModelProto m;
    m.add_opset_import()->set_version(14);
    onnx::GraphProto* g = m.mutable_graph();
    add_value(g->mutable_input(), "x", {seq, 2, 3});
    add_value(g->mutable_input(), "w", {dirs, c.gates * 4, 3});
    add_value(g->mutable_input(), "r", {dirs, c.gates * 4, 4});
    add_value(g->mutable_input(), "b", {dirs, 2 * c.gates * 4});
    add_value(g->mutable_output(), "y", {seq, dirs, 2, 4});
    onnx::NodeProto* n = add_node(g, c.op, {"x", "w", "r", "b"}, {"y"}, "recurrent");
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name("direction"), a->set_type(onnx::AttributeProto::STRING), a->set_s("bidirectional");
    if (c.linear_before_reset) {
      a = n->add_attribute();
      a->set_name("linear_before_reset"), a->set_type(onnx::AttributeProto::INT), a->set_i(1);
    }
    auto r = import_model(bytes_of(m));
    if (!r.ok()) FAIL(r.error().message);
    CHECK(std::count_if(r->graph.nodes.begin(), r->graph.nodes.end(),
                        [](const ir::Node& node) { return node.op == ir::Op::Matmul; }) == c.matmuls);
  }
}

TEST_CASE("a Slice step of 0 is an error naming its axis", "[onnx]") {
  onnx::ModelProto m;
  m.add_opset_import()->set_version(13);
  onnx::GraphProto* g = m.mutable_graph();
  add_value(g->mutable_input(), "x", {2, 3});
  add_value(g->mutable_output(), "y", {2, 3});
  for (auto [name, value] : {std::pair{"starts", 0}, {"ends", 3}, {"axes", -1}, {"steps", 0}}) {
    onnx::AttributeProto* a = add_node(g, "Constant", {}, {name}, name)->add_attribute();
    a->set_name("value_ints"), a->set_type(onnx::AttributeProto::INTS), a->add_ints(value);
  }
  add_node(g, "Slice", {"x", "starts", "ends", "axes", "steps"}, {"y"}, "cut");
  CHECK(import_error(m) == "onnx: node 'cut' (Slice): the step along axis 1 is 0; a step is never 0");
}

TEST_CASE("broken graphs and files are errors, never crashes", "[onnx]") {
  onnx::ModelProto m = linear_model();
  // A cycle: the first node reads the last one's output.
  m.mutable_graph()->mutable_node(0)->set_input(0, "y");
  CHECK(import_error(m) == "onnx: node 'MatMul_0' (MatMul): input 'y' is defined by no earlier node");
  m = linear_model();
  m.mutable_graph()->mutable_node(1)->set_output(0, "xw");
  CHECK(import_error(m) == "onnx: node 'Add_0' (Add): output 'xw' is already defined");
  m = linear_model();
  m.mutable_graph()->mutable_output(0)->set_name("z");
  CHECK(import_error(m) == "onnx: output 'z' is defined by no node, input or initializer");
  m = linear_model();
  m.mutable_graph()->mutable_initializer(0)->set_data_location(onnx::TensorProto::EXTERNAL);
  CHECK(import_error(m) == "onnx: tensor 'w' keeps its data in an external file but names none (no 'location')");
  m = linear_model();
  m.mutable_graph()->mutable_initializer(0)->set_data_type(onnx::TensorProto::UINT16);
  CHECK(import_error(m) ==
        "onnx: tensor 'w' has element type UINT16, which kiln does not have (it has FLOAT, DOUBLE, FLOAT16, BFLOAT16, "
        "INT32, INT64, INT8, UINT8 and BOOL)");
  m = linear_model();
  m.mutable_graph()->mutable_initializer(0)->add_float_data(1.f);
  CHECK(import_error(m) == "onnx: tensor 'w' has 7 elements of data, but its shape holds 6");
  // An axis of a scalar (the fuzzer's find: ArgMin indexed the shape of a rank-0 input).
  m = linear_model();
  add_value(m.mutable_graph()->mutable_input(), "scalar", {})->mutable_type()->mutable_tensor_type()->mutable_shape();
  add_node(m.mutable_graph(), "ArgMin", {"scalar"}, {"index"});
  CHECK(import_error(m) == "onnx: node 'ArgMin_0' (ArgMin): axis 0 is out of range for rank 0");
  std::vector<uint8_t> bytes = bytes_of(linear_model());
  for (size_t cut = 0; cut < bytes.size(); cut += 7) {
    auto r = import_model(std::span(bytes.data(), cut));
    if (r.ok()) continue;  // a prefix may still be a whole message
    CHECK(r.error().message.rfind("onnx: ", 0) == 0);
  }
  std::vector<uint8_t> garbage(64, 0xff);
  CHECK(import_model(garbage).error().message ==
        "onnx: the file is not an ONNX model (protobuf could not parse it: truncated or corrupt?)");
  CHECK(import_file("/nonexistent/model.onnx").error().message.find("cannot read '/nonexistent/model.onnx'") !=
        std::string::npos);
}

TEST_CASE("external data is read beside the model; what it names must be there", "[onnx]") {
  const std::string dir = std::string(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp") + "/external";
  std::filesystem::create_directories(dir);
  {  // the weights w (6 floats) after 8 bytes of something else, as onnx.save lays out several
    std::ofstream data(dir + "/weights.bin", std::ios::binary);
    const float w[] = {1.f, 0.f, 0.f, 1.f, 1.f, 1.f};
    data.write("8 bytes.", 8);
    data.write(reinterpret_cast<const char*>(w), sizeof(w));
  }
  auto with_external = [&](std::vector<std::pair<std::string, std::string>> entries) {
    onnx::ModelProto m = linear_model();
    onnx::TensorProto* w = m.mutable_graph()->mutable_initializer(0);
    w->clear_float_data();
    w->set_data_location(onnx::TensorProto::EXTERNAL);
    for (const auto& [key, value] : entries) {
      onnx::StringStringEntryProto* e = w->add_external_data();
      e->set_key(key);
      e->set_value(value);
    }
    std::ofstream(dir + "/model.onnx", std::ios::binary) << m.SerializeAsString();
    auto r = import_file(dir + "/model.onnx");
    return r.ok() ? std::string("(imported)") : r.error().message;
  };
  const std::string at = dir + "/model.onnx: onnx: tensor 'w' ";
  CHECK(with_external({{"location", "weights.bin"}, {"offset", "8"}, {"length", "24"}}) == "(imported)");
  CHECK(with_external({{"location", "weights.bin"}, {"offset", "8"}}) == "(imported)");
  auto r = import_file(dir + "/model.onnx");
  REQUIRE(r.ok());
  CHECK(r->weights.at("w").floats == std::vector<double>{1, 0, 0, 1, 1, 1});
  CHECK(with_external({{"location", "weights.bin"}}) == at + "has 32 bytes of raw data, but its shape holds 24");
  CHECK(with_external({{"location", "weights.bin"}, {"offset", "16"}, {"length", "24"}}) ==
        at + "keeps its data at bytes [16, 40) of 'weights.bin', which has 32");
  CHECK(with_external({{"location", "missing.bin"}}).starts_with(at + "keeps its data in 'missing.bin': cannot read"));
  CHECK(with_external({{"location", "../weights.bin"}}) ==
        at + "names external data at '../weights.bin', outside the model's directory");
  CHECK(with_external({{"location", "/etc/hostname"}}) ==
        at + "names external data at '/etc/hostname', outside the model's directory");
  CHECK(with_external({{"location", "weights.bin"}, {"offset", "-8"}}) ==
        at + "has external data at offset '-8', not a count");
  CHECK(with_external({{"location", "weights.bin"}, {"md5", "x"}}) ==
        at + "has external data with key 'md5', which kiln does not know");
  // Given as bytes, a model has no directory to read its external data from.
  REQUIRE(with_external({{"location", "weights.bin"}, {"offset", "8"}}) == "(imported)");
  onnx::ModelProto bytes_only;
  REQUIRE(bytes_only.ParseFromString(read_file(dir + "/model.onnx", 1 << 20).value()));
  CHECK(import_error(bytes_only) ==
        "onnx: tensor 'w' keeps its data in the external file 'weights.bin'; import the model from its file, whose "
        "directory holds it");
}

TEST_CASE("kiln names replace characters outside [A-Za-z0-9_.]", "[onnx]") {
  CHECK(kiln_name("input:0") == "input_0");
  CHECK(kiln_name("/encoder/layer.0/Add_output_0") == "_encoder_layer.0_Add_output_0");
  CHECK(kiln_name("0") == "_0");
  CHECK(kiln_name("") == "_");
}

}  // namespace
}  // namespace kiln::onnx_import
