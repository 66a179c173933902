// i8 and u8: the text format, the interpreter's semantics (wrapping after each op,
// comparing as their own type, casts from floats saturating), and compiled CPU kernels
// that give the same bytes, fused and unfused.
#include <catch2/catch.hpp>

#include "passes/pipeline.h"
#include "tests/unit/run_util.h"

using namespace kiln;

namespace {

// Every result of the graph below, by the interpreter, for these inputs.
constexpr const char* kGraph = R"(graph @bytes(%a: u8[6], %b: u8[6], %c: i8[6], %f: f32[6]) {
  %sum: u8[6] = add(%a, %b)
  %two: u8[] = constant {value=2}
  %twos: u8[6] = broadcast(%two) {shape=[6], dims=[]}
  %mean: u8[6] = div(%sum, %twos)
  %diff: u8[6] = sub(%a, %b)
  %prod: u8[6] = mul(%a, %b)
  %big: u8[6] = maximum(%a, %b)
  %less: bool[6] = lt(%a, %b)
  %neg: i8[6] = neg(%c)
  %ci: i8[6] = cast(%a) {to=i8}
  %fu: u8[6] = cast(%f) {to=u8}
  %fi: i8[6] = cast(%f) {to=i8}
  %cf: f32[6] = cast(%c) {to=f32}
  %total: u8[] = reduce_sum(%a) {axes=[0]}
  %top: i8[] = reduce_max(%c) {axes=[0]}
  return %mean, %diff, %prod, %big, %less, %neg, %ci, %fu, %fi, %cf, %total, %top
}
)";

std::map<std::string, ir::Tensor> inputs() {
  return {{"a", ir::Tensor::from_ints({ir::DType::U8, {6}}, {200, 0, 255, 17, 128, 1})},
          {"b", ir::Tensor::from_ints({ir::DType::U8, {6}}, {100, 1, 255, 34, 128, 3})},
          {"c", ir::Tensor::from_ints({ir::DType::I8, {6}}, {-128, -1, 0, 1, 127, -5})},
          {"f", ir::Tensor::from_doubles({ir::DType::F32, {6}}, {-3.7, 0.5, 254.9, 300, -200, 99.99})}};
}

std::vector<int64_t> ints(const ir::Tensor& t) { return t.ints; }

}  // namespace

TEST_CASE("i8 and u8 wrap after each op, compare as their type, and saturate casts from floats", "[bytes]") {
  ir::Graph g = kiln::testing::parse_ok(kGraph);
  std::vector<ir::Tensor> r = kiln::testing::eval_ok(g, inputs());
  CHECK(ints(r[0]) == std::vector<int64_t>{22, 0, 127, 25, 0, 2});  // (a + b) wraps before the division
  CHECK(ints(r[1]) == std::vector<int64_t>{100, 255, 0, 239, 0, 254});
  CHECK(ints(r[2]) == std::vector<int64_t>{32, 0, 1, 66, 0, 3});
  CHECK(ints(r[3]) == std::vector<int64_t>{200, 1, 255, 34, 128, 3});
  CHECK(ints(r[4]) == std::vector<int64_t>{0, 1, 0, 1, 0, 1});  // 200 < 100 is false: unsigned
  CHECK(ints(r[5]) == std::vector<int64_t>{-128, 1, 0, -1, -127, 5});
  CHECK(ints(r[6]) == std::vector<int64_t>{-56, 0, -1, 17, -128, 1});
  CHECK(ints(r[7]) == std::vector<int64_t>{0, 0, 254, 255, 0, 99});
  CHECK(ints(r[8]) == std::vector<int64_t>{-3, 0, 127, 127, -128, 99});
  CHECK(r[9].floats == std::vector<double>{-128, -1, 0, 1, 127, -5});
  CHECK(ints(r[10]) == std::vector<int64_t>{89});  // 601 mod 256
  CHECK(ints(r[11]) == std::vector<int64_t>{127});
  CHECK(kiln::testing::parse_ok(kGraph).type(g.results[0]).to_string() == "u8[6]");
}

TEST_CASE("compiled CPU kernels give the interpreter's bytes, fused and unfused", "[bytes][cpu]") {
  ir::Graph g = kiln::testing::parse_ok(kGraph);
  std::vector<ir::Tensor> expected = kiln::testing::eval_ok(g, inputs());
  for (bool fuse : {true, false}) {
    INFO("fusion " << fuse);
    CompileOptions options;
    options.fuse = fuse;
    auto got = kiln::testing::compile_and_run(g, inputs(), options);
    REQUIRE(got.ok());
    REQUIRE(got->size() == expected.size());
    for (size_t k = 0; k < expected.size(); ++k) {
      INFO("result " << k);
      CHECK(ir::tensor_to_bytes((*got)[k]) == ir::tensor_to_bytes(expected[k]));
    }
  }
}
