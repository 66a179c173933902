// Seeded random graphs for checking fusion, planning and code generation against the
// interpreter.
#pragma once

#include <random>

#include "ir/builder.h"
#include "ir/verifier.h"
#include "passes/pipeline.h"
#include "tests/unit/test_util.h"

namespace kiln::testing {

using ir::DType;
using ir::Op;
using ir::ValueId;

inline ir::Attrs attrs_of(std::initializer_list<std::pair<const char*, ir::AttrValue>> list) {
  ir::Attrs a;
  for (auto& [k, v] : list) a.set(k, v);
  return a;
}

// A random graph over f32 values of shapes [r,c], [c], [r] and scalars: elementwise ops,
// broadcasts, reductions, movement ops, matmuls, and the windowed ops over [r,c] as one
// image (conv, max_pool, avg_pool, pad, padded to keep its size); with state arguments
// updated through %NAME.next results.
struct RandomGraph {
  ir::Graph graph;
  std::map<std::string, ir::Tensor> inputs;
  bool elementwise_only = true;
};

inline RandomGraph random_graph(uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); };
  std::uniform_real_distribution<double> value(-1, 1);
  RandomGraph out;
  ir::Graph& g = out.graph;
  g.name = "random";
  ir::GraphBuilder b(g);
  int64_t r = 1 + pick(5), c = 1 + pick(5);
  std::vector<ValueId> pool;
  auto add_arg = [&](const std::string& name, ir::Shape shape, ir::ArgKind kind) {
    ValueId v = b.arg(name, {DType::F32, shape}, kind);
    std::vector<double> data;
    for (int64_t k = 0; k < ir::num_elements(shape); ++k) data.push_back(value(rng));
    out.inputs[name] = ir::Tensor::from_doubles({DType::F32, shape}, data);
    pool.push_back(v);
    return v;
  };
  add_arg("x", {r, c}, ir::ArgKind::Input);
  add_arg("y", {r, c}, ir::ArgKind::Input);
  add_arg("w", {c}, ir::ArgKind::Param);
  ValueId state = pick(2) ? add_arg("s", {r, c}, ir::ArgKind::State) : ir::kNoValue;
  auto of_shape = [&](const ir::Shape& shape) {
    std::vector<ValueId> vs;
    for (ValueId v : pool)
      if (g.type(v).shape == shape) vs.push_back(v);
    return vs;
  };
  int steps = 4 + pick(20);
  for (int i = 0; i < steps; ++i) {
    ValueId x = pool[pick(static_cast<int>(pool.size()))];
    const ir::Shape shape = g.type(x).shape;
    Result<ValueId> made = ir::kNoValue;
    switch (pick(10)) {
      case 0: {
        const Op unary[] = {Op::Neg, Op::Abs, Op::Tanh, Op::Sin, Op::Cos, Op::Sigmoid, Op::Relu, Op::Exp};
        made = b.add(unary[pick(8)], {x});
        break;
      }
      case 1:
      case 2: {
        const Op binary[] = {Op::Add, Op::Sub, Op::Mul, Op::Maximum, Op::Minimum};
        auto same = of_shape(shape);
        ValueId y = pick(4) == 0 ? b.scalar(value(rng), DType::F32) : same[pick(static_cast<int>(same.size()))];
        made = pick(2) ? b.add(binary[pick(5)], {x, y}) : b.add(binary[pick(5)], {y, x});
        break;
      }
      case 3:  // a vector or scalar spread over [r,c]
        if (shape == ir::Shape{c})
          made = b.add(Op::Broadcast, {x}, attrs_of({{"shape", ir::Shape{r, c}}, {"dims", std::vector<int64_t>{1}}}));
        else if (shape == ir::Shape{r})
          made = b.add(Op::Broadcast, {x}, attrs_of({{"shape", ir::Shape{r, c}}, {"dims", std::vector<int64_t>{0}}}));
        else if (shape.empty())
          made = b.add(Op::Broadcast, {x}, attrs_of({{"shape", ir::Shape{r, c}}, {"dims", std::vector<int64_t>{}}}));
        break;
      case 4:
        if (shape.size() == 2) {
          const Op reductions[] = {Op::ReduceSum, Op::ReduceMax, Op::ReduceMin};
          std::vector<int64_t> axes = pick(3) == 0 ? std::vector<int64_t>{0, 1} : std::vector<int64_t>{pick(2)};
          made = b.add(reductions[pick(3)], {x}, attrs_of({{"axes", axes}, {"keepdims", false}}));
          out.elementwise_only = false;
        }
        break;
      case 5:  // a softmax-like row: x - max(x) along rows, exp, / sum
        if (shape.size() == 2) {
          ValueId m = b.reduce(Op::ReduceMax, x, {1});
          ValueId e = b.unary(Op::Exp, b.binary(Op::Sub, x, b.broadcast(m, shape, {0})));
          made = b.binary(Op::Div, e, b.broadcast(b.reduce(Op::ReduceSum, e, {1}), shape, {0}));
          out.elementwise_only = false;
        }
        break;
      case 6:
        if (shape.size() == 2) {
          auto same = of_shape(shape);
          ValueId y = same[pick(static_cast<int>(same.size()))];
          ValueId yt = b.emit(Op::Transpose, {y}, attrs_of({{"perm", std::vector<int64_t>{1, 0}}}));
          ValueId sq = b.binary(Op::Matmul, x, yt);  // [r,r]
          // Back to [r,c] by a matmul with x: [r,r] x [r,c].
          made = b.add(Op::Matmul, {sq, x});
          out.elementwise_only = false;
        }
        break;
      case 7:
        if (shape.size() == 2) {
          made = b.add(Op::Transpose, {x}, attrs_of({{"perm", std::vector<int64_t>{1, 0}}}));
          if (made.ok()) made = b.add(Op::Reshape, {*made}, attrs_of({{"shape", shape}}));
        }
        break;
      case 8:
        if (shape.size() == 2) {
          ValueId cond = b.binary(Op::Gt, x, b.scalar(0, DType::F32));
          auto same = of_shape(shape);
          made = b.add(Op::Select, {cond, x, same[pick(static_cast<int>(same.size()))]});
        }
        break;
      case 9:  // [r,c] as a one-channel image through a windowed op that keeps its size
        if (shape.size() == 2) {
          const int64_t k = 1 + pick(3), lo = (k - 1) / 2, hi = k - 1 - lo;
          const std::vector<int64_t> same = {lo, lo, hi, hi};
          ValueId image = b.emit(Op::Reshape, {x}, attrs_of({{"shape", ir::Shape{1, 1, r, c}}}));
          switch (pick(4)) {
            case 0: {
              std::vector<double> taps;
              for (int64_t t = 0; t < k * k; ++t) taps.push_back(value(rng));
              ir::Attrs weights;
              weights.set("value", ir::Literal{{1, 1, k, k}, taps, std::vector<int64_t>(taps.size(), 0), false});
              ValueId w = *b.add(Op::Constant, {}, std::move(weights), DType::F32);
              made = b.add(Op::Conv, {image, w}, attrs_of({{"pads", same}}));
              break;
            }
            case 1:
            case 2:
              made = b.add(pick(2) ? Op::MaxPool : Op::AvgPool, {image},
                           attrs_of({{"window", std::vector<int64_t>{k, k}},
                                     {"strides", std::vector<int64_t>{1, 1}},
                                     {"pads", same}}));
              break;
            default:
              made = b.add(Op::Pad, {image}, attrs_of({{"pads", std::vector<int64_t>{0, 0, 1, 0, 0, 0, -1, 0}}}));
          }
          if (made.ok()) made = b.add(Op::Reshape, {*made}, attrs_of({{"shape", shape}}));
          out.elementwise_only = false;
        }
        break;
    }
    if (made.ok() && *made != ir::kNoValue) pool.push_back(*made);
  }
  // Results: the last value, a couple of random ones, and the state's next value.
  g.results.push_back(pool.back());
  for (int k = pick(3); k > 0; --k) g.results.push_back(pool[pick(static_cast<int>(pool.size()))]);
  if (state != ir::kNoValue) {
    auto same = of_shape({r, c});
    ValueId update = b.binary(Op::Add, state, same[pick(static_cast<int>(same.size()))]);
    g.values[update].name = "s.next";
    g.results.push_back(update);
  }
  REQUIRE(ir::verify(g).ok());
  return out;
}

// A graph through the default pipeline (fused, or one step per op), verified after
// every pass.
inline ir::Graph planned(ir::Graph g, bool fuse) {
  auto pipeline = passes::pipeline_from_text(fuse ? "decompose,canonicalize,cse,dce,fusion,memory-plan"
                                                  : "decompose,canonicalize,cse,dce,fusion{fuse=false},memory-plan");
  REQUIRE(pipeline.ok());
  auto r = pipeline->run(g);
  if (!r.ok()) FAIL(r.error().message << "\n" << ir::print(g));
  return g;
}

}  // namespace kiln::testing
