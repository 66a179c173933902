// The text format: round trips, golden error messages, limits, and no crash on
// mutated input.
#include <random>

#include "ir/dot.h"
#include "tests/unit/test_util.h"

using namespace kiln;
using kiln::testing::parse_error;
using kiln::testing::parse_ok;

namespace {

const char* kMlp = R"(# a comment
graph @mlp(%x: f32[64,784], param %w1: f32[784,128], param %b1: f32[128], state %step: i64[]) {
  %0: f32[64,128] = matmul(%x, %w1)
  %1: f32[64,128] = broadcast(%b1) {shape=[64,128], dims=[1]}
  %2: f32[64,128] = add(%0, %1)
  %h: f32[64,128] = relu(%2)
  %s: f32[] = reduce_sum(%h) {axes=[0,1], keepdims=false}
  %c: bf16[2,2] = constant {value=[[1.5, -2.0], [inf, nan]]}
  %t: f16[2,2] = cast(%c) {to=f16}
  %g: f32[64,128] = gelu(%h) {approximate="tanh"}
  %n: f32[64,128] = layer_norm(%g, %b1, %b1) {axis=-1, eps=1e-05}
  return %h, %s, %t, %n
}
)";

}  // namespace

TEST_CASE("printing a parsed graph reproduces the canonical text", "[text]") {
  ir::Graph g = parse_ok(kMlp);
  std::string printed = ir::print(g);
  CHECK(printed.find("# a comment") == std::string::npos);
  CHECK(printed.find("state %step: i64[]") != std::string::npos);
  CHECK(printed.find("%c: bf16[2,2] = constant {value=[[1.5, -2.0], [inf, nan]]}") != std::string::npos);
  CHECK(printed.find("{approximate=\"tanh\"}") != std::string::npos);
  CHECK(printed.find("{axis=-1, eps=1e-05}") != std::string::npos);
  ir::Graph again = parse_ok(printed);
  CHECK(ir::print(again) == printed);
}

TEST_CASE("the parser accepts loose spacing, optional parentheses and integer floats", "[text]") {
  ir::Graph g = parse_ok("graph @g(%x:f32[2]){%c:f32[]=constant(){value=2}\n%y:f32[2]=mul(%x,%c) return %y}");
  CHECK(ir::print(g) ==
        "graph @g(%x: f32[2]) {\n  %c: f32[] = constant {value=2.0}\n  %y: f32[2] = mul(%x, %c)\n  return %y\n}\n");
}

TEST_CASE("floats print in their shortest exact form", "[text]") {
  CHECK(ir::format_float(1.0) == "1.0");
  CHECK(ir::format_float(0.1) == "0.1");
  CHECK(ir::format_float(1e-5) == "1e-05");
  CHECK(ir::format_float(-2.5e20) == "-2.5e+20");
  CHECK(ir::format_float(-INFINITY) == "-inf");
  for (double v : {0.1, 1.0 / 3, 6.02214076e23, 5e-324, -0.0}) {
    ir::Graph g =
        parse_ok("graph @g() {\n  %c: f64[] = constant {value=" + ir::format_float(v) + "}\n  return %c\n}\n");
    CHECK(g.nodes[0].attrs.get_literal("value").floats[0] == v);
  }
}

TEST_CASE("golden error messages name file, line, column and what was expected", "[text][errors]") {
  struct Case {
    const char* text;
    const char* message;
  };
  const Case cases[] = {
      // unknown op
      {"graph @g(%x: f32[2]) {\n  %y: f32[2] = frobnicate(%x)\n  return %y\n}",
       "bad.kir:2:16: error: unknown op 'frobnicate'"},
      // wrong arity
      {"graph @g(%x: f32[2]) {\n  %y: f32[2] = add(%x)\n  return %y\n}",
       "bad.kir:2:3: error: add: expected 2 operands, got 1"},
      // shape mismatch
      {"graph @g(%a: f32[2,3], %b: f32[4,5]) {\n  %y: f32[2,5] = matmul(%a, %b)\n  return %y\n}",
       "bad.kir:2:3: error: matmul: contracting dims differ: f32[2,3] x f32[4,5]"},
      {"graph @g(%a: f32[2,3], %b: f32[3]) {\n  %y: f32[2,3] = add(%a, %b)\n  return %y\n}",
       "bad.kir:2:3: error: add: operand shapes differ: f32[2,3], f32[3] (broadcast explicitly with 'broadcast')"},
      // undefined value
      {"graph @g(%x: f32[2]) {\n  %y: f32[2] = neg(%z)\n  return %y\n}", "bad.kir:2:20: error: undefined value %z"},
      // redefinition
      {"graph @g(%x: f32[2]) {\n  %x: f32[2] = neg(%x)\n  return %x\n}",
       "bad.kir:2:3: error: redefinition of %x (first defined at 1:10)"},
      // bad type
      {"graph @g(%x: f33[2]) {\n  return %x\n}",
       "bad.kir:1:14: error: expected an element type (f32, f64, f16, bf16, i32, i64, bool), got 'f33'"},
      {"graph @g(%x: f32[-2]) {\n  return %x\n}",
       "bad.kir:1:18: error: expected a dimension (an integer >= 0), got '-2'"},
      // wrong declared result type
      {"graph @g(%x: f32[2]) {\n  %y: f32[3] = neg(%x)\n  return %y\n}",
       "bad.kir:2:3: error: declared type f32[3] of %y does not match f32[2] inferred for neg"},
      {"graph @g(%x: f32[2]) {\n  %y: bool[2] = neg(%x)\n  return %y\n}",
       "bad.kir:2:3: error: declared type bool[2] of %y does not match f32[2] inferred for neg"},
      // unknown or mistyped attribute
      {"graph @g(%x: f32[2]) {\n  %y: f32[] = reduce_sum(%x) {axis=[0]}\n  return %y\n}",
       "bad.kir:2:31: error: reduce_sum: unknown attribute 'axis' (expected axes, keepdims)"},
      {"graph @g(%x: f32[2]) {\n  %y: f32[] = reduce_sum(%x) {axes=0}\n  return %y\n}",
       "bad.kir:2:36: error: reduce_sum: attribute 'axes' must be a list of integers like [0,1], got an integer"},
      {"graph @g(%x: f32[2]) {\n  %y: f32[] = reduce_sum(%x) {keepdims=true}\n  return %y\n}",
       "bad.kir:2:3: error: reduce_sum: missing attribute 'axes' (ints)"},
      {"graph @g(%x: f32[2]) {\n  %y: f32[2] = cast(%x) {to=f99}\n  return %y\n}",
       "bad.kir:2:29: error: cast: attribute 'to' must be an element type (f32, f64, f16, bf16, i32, i64, bool), got a "
       "name"},
      // truncated file
      {"graph @g(%x: f32[2]) {\n  %y: f32[2] = neg(%x)\n",
       "bad.kir:3:1: error: expected a value definition like '%x: f32[2] = ...' or 'return', got end of file"},
      {"graph @g(%x: f32[2", "bad.kir:1:19: error: expected ']', got end of file"},
      {"", "bad.kir:1:1: error: expected 'graph' or 'func', got end of file"},
      // functions and calls
      {"graph @g(%x: f32[2]) {\n  %y: f32[2] = call(%x) {callee=\"nope\"}\n  return %y\n}",
       "bad.kir:2:3: error: call: no function @nope is defined before this call"},
      {"func @f(%a: f32[3]) {\n  return %a\n}\ngraph @g(%x: f32[2]) {\n  %y: f32[3] = call(%x) {callee=\"f\"}\n  "
       "return %y\n}",
       "bad.kir:5:3: error: call: @f takes (f32[3]), got (f32[2])"},
      {"func @f(%a: f32[2]) {\n  return %a\n}\nfunc @fb(%a: f32[2]) {\n  return %a\n}\n"
       "graph @g(%x: f32[2]) {\n  %y: f32[2] = call(%x) {callee=\"f\", backward=\"fb\"}\n  return %y\n}",
       "bad.kir:8:3: error: call: backward @fb must take (f32[2], f32[2]) and return (f32[2]): the arguments of @f, "
       "the gradient "
       "of its result, and one gradient per floating-point argument; it takes (f32[2]) and returns (f32[2])"},
      {"func @f(%a: f32[2]) {\n  return %a\n}\nfunc @f(%a: f32[2]) {\n  return %a\n}\ngraph @g(%x: f32[2]) {\n  return "
       "%x\n}",
       "bad.kir:4:6: error: function @f is defined twice"},
      {"func @f(%a: f32[2]) {\n  %b: f32[2] = neg(%c)\n  return %b\n}\ngraph @g(%x: f32[2]) {\n  return %x\n}",
       "bad.kir:2:20: error: undefined value %c"},
      // binary garbage
      {"\x7f"
       "ELF\x02\x01",
       "bad.kir:1:1: error: unexpected byte 0x7f; a .kir file is ASCII text"},
      {"graph @g(%x: f32[2]) {\n  %y: f32[2] = neg(%x) $\n}", "bad.kir:2:24: error: unexpected character '$'"},
      // semantic errors from shape inference
      {"graph @g(%x: f32[2,3]) {\n  %y: f32[3,2] = transpose(%x) {perm=[0,0]}\n  return %y\n}",
       "bad.kir:2:3: error: transpose: perm [0,0] is not a permutation of 0..1"},
      {"graph @g(%x: f32[2,3]) {\n  %y: f32[7] = reshape(%x) {shape=[7]}\n  return %y\n}",
       "bad.kir:2:3: error: reshape: cannot reshape f32[2,3] (6 elements) to [7] (7 elements)"},
      {"graph @g(%x: i32[2]) {\n  %y: i32[2] = exp(%x)\n  return %y\n}",
       "bad.kir:2:3: error: exp: expected a floating-point operand, got i32[2]"},
      {"graph @g(%x: f32[2]) {\n  %y: f32[2] = neg(%x)\n  return %y\n}\ngraph",
       "bad.kir:5:1: error: expected end of file after the graph, got 'graph'"},
      {"graph @g(%x: f32[2]) {\n  %c: i32[2] = constant {value=[1, 2.5]}\n  return %c\n}",
       "bad.kir:2:3: error: constant: value has non-integer elements for element type i32"},
      {"graph @g() {\n  %c: f32[2,2] = constant {value=[[1.0], [2.0, 3.0]]}\n  return %c\n}",
       "bad.kir:2:42: error: literal is ragged: expected a list of 1 elements at depth 1"},
      {"graph @g() {\n  %c: i64[] = constant {value=99999999999999999999}\n  return %c\n}",
       "bad.kir:2:31: error: integer 99999999999999999999 does not fit in 64 bits"},
  };
  for (const Case& c : cases) {
    INFO(c.text);
    CHECK(parse_error(c.text) == c.message);
  }
}

TEST_CASE("the parser enforces its limits", "[text][errors]") {
  ir::ParseLimits limits;
  limits.max_bytes = 16;
  auto big = ir::parse("graph @g(%x: f32[2]) { return %x }", "big.kir", limits);
  REQUIRE(!big.ok());
  CHECK(big.error().message == "big.kir: error: input is 34 bytes, more than the limit of 16 bytes");
  std::string deep = "graph @g() {\n  %c: f32[] = constant {value=" + std::string(40, '[') + "}\n  return %c\n}";
  CHECK(parse_error(deep) == "bad.kir:2:63: error: lists nest deeper than the limit of 32");
  ir::ParseLimits small;
  small.max_attr_elements = 5;
  auto many = ir::parse("graph @g() {\n  %c: f32[2,3] = constant {value=[[1, 2, 3], [4, 5, 6]]}\n  return %c\n}",
                        "many.kir", small);
  REQUIRE(!many.ok());
  CHECK(many.error().message ==
        "many.kir:2:53: error: attributes hold more than 5 values in all; pass large tensors as params");
  CHECK(parse_error("graph @g(%x: f32[1099511627776,2]) {\n  return %x\n}") ==
        "bad.kir:1:14: error: type f32[1099511627776,2] has more than 2^40 elements");
}

TEST_CASE("mutated inputs never crash or hang the parser", "[text][robustness]") {
  std::mt19937 rng(1234);
  const std::string base = kMlp;
  const char alphabet[] = "%@[](){}=,:#\"-.0123456789abcdefxyz \n\x00\xff";
  for (int i = 0; i < 3000; ++i) {
    std::string text = base;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      size_t pos = rng() % text.size();
      switch (rng() % 3) {
        case 0: text[pos] = alphabet[rng() % (sizeof(alphabet) - 1)]; break;
        case 1: text.erase(pos, 1 + rng() % 8); break;
        default: text.insert(pos, 1, alphabet[rng() % (sizeof(alphabet) - 1)]); break;
      }
      if (text.empty()) text = "g";
    }
    auto g = ir::parse(text, "fuzz.kir");
    if (g.ok()) {
      // Whatever parses must print and parse back to the same text.
      std::string printed = ir::print(*g);
      auto again = ir::parse(printed, "fuzz.kir");
      REQUIRE(again.ok());
      CHECK(ir::print(*again) == printed);
    } else {
      CHECK(g.error().message.rfind("fuzz.kir:", 0) == 0);
    }
  }
}

TEST_CASE("DOT export shows arguments, ops, edges and results", "[text][dot]") {
  ir::Graph g = parse_ok("graph @g(%x: f32[2], param %w: f32[2]) {\n  %y: f32[2] = mul(%x, %w)\n  return %y\n}\n");
  std::string dot = ir::to_dot(g);
  CHECK(dot.rfind("digraph \"g\" {", 0) == 0);
  CHECK(dot.find("v1 [shape=ellipse, label=\"param %w\\nf32[2]\"];") != std::string::npos);
  CHECK(dot.find("v2 [shape=box, label=\"%y = mul\\nf32[2]\"];") != std::string::npos);
  CHECK(dot.find("v0 -> v2;") != std::string::npos);
  CHECK(dot.find("v2 -> result0;") != std::string::npos);
}

TEST_CASE("values without names print with fresh numbers", "[text]") {
  ir::Graph g = parse_ok("graph @g(%0: f32[2]) {\n  %1: f32[2] = neg(%0)\n  return %1\n}\n");
  ir::ValueId v = g.add_value(g.type(1));
  g.nodes.push_back(ir::Node{ir::Op::Abs, {1}, {}, v, {}});
  g.results = {v};
  CHECK(ir::print(g) == "graph @g(%0: f32[2]) {\n  %1: f32[2] = neg(%0)\n  %2: f32[2] = abs(%1)\n  return %2\n}\n");
}
