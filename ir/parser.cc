#include "ir/parser.h"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "ir/lexer.h"
#include "ir/verifier.h"

namespace kiln::ir {
namespace {

using lex::Lexer;
using lex::ParseError;
using lex::Tok;
using lex::tok_name;
using lex::Token;

// An attribute value as written, before the op's schema gives it a kind.
struct RawAttr {
  Token token;                 // a scalar token, or the '[' of a list
  std::vector<RawAttr> items;  // list elements
  bool is_list = false;
};

class Parser {
 public:
  Parser(std::string_view text, const ParseLimits& limits) : lex_(text, limits), limits_(limits) { tok_ = lex_.next(); }

  // file := func* graph
  Graph parse_file() {
    std::vector<Graph> functions;
    while (tok_.kind == Tok::Ident && tok_.text == "func") {
      next();
      const Token name = tok_;
      for (const Graph& f : functions)
        if (name.kind == Tok::At && f.name == name.text) fail(fmt::format("function @{} is defined twice", f.name));
      functions.push_back(parse_body());
    }
    if (tok_.kind != Tok::Ident || tok_.text != "graph")
      fail(fmt::format("expected 'graph' or 'func', got {}", describe(tok_)));
    next();
    Graph g = parse_body();
    if (tok_.kind != Tok::End) fail(fmt::format("expected end of file after the graph, got {}", describe(tok_)));
    g.functions = std::move(functions);
    return g;
  }

 private:
  // '@' NAME '(' args ')' '{' defs 'return' refs '}', after the 'graph' or 'func' keyword.
  Graph parse_body() {
    g_ = Graph();
    defs_.clear();
    Token name = expect(Tok::At);
    g_.name = std::string(name.text);
    expect(Tok::LParen);
    if (tok_.kind != Tok::RParen) {
      do parse_arg();
      while (accept(Tok::Comma));
    }
    expect(Tok::RParen);
    expect(Tok::LBrace);
    while (!(tok_.kind == Tok::Ident && tok_.text == "return")) {
      if (tok_.kind == Tok::Ident && is_step_keyword(tok_.text)) {
        parse_step();
        continue;
      }
      if (tok_.kind != Tok::Percent)
        fail(fmt::format("expected a value definition like '%x: f32[2] = ...' or 'return', got {}", describe(tok_)));
      parse_node();
    }
    next();
    do g_.results.push_back(use(expect(Tok::Percent)));
    while (accept(Tok::Comma));
    expect(Tok::RBrace);
    return std::move(g_);
  }

  [[noreturn]] void fail(std::string message) { throw ParseError{tok_.loc, std::move(message)}; }

  std::string describe(const Token& t) {
    switch (t.kind) {
      case Tok::Percent: return fmt::format("'%{}'", t.text);
      case Tok::At: return fmt::format("'@{}'", t.text);
      case Tok::Ident:
      case Tok::Int:
      case Tok::Float: return fmt::format("'{}'", t.text);
      default: return std::string(tok_name(t.kind));
    }
  }

  void next() { tok_ = lex_.next(); }

  bool accept(Tok kind) {
    if (tok_.kind != kind) return false;
    next();
    return true;
  }

  Token expect(Tok kind) {
    if (tok_.kind != kind) fail(fmt::format("expected {}, got {}", tok_name(kind), describe(tok_)));
    Token t = tok_;
    next();
    return t;
  }

  void expect_keyword(std::string_view word) {
    if (tok_.kind != Tok::Ident || tok_.text != word) fail(fmt::format("expected '{}', got {}", word, describe(tok_)));
    next();
  }

  static bool is_step_keyword(std::string_view word) {
    return word == "loop" || word == "reduction" || word == "library" || word == "scatter";
  }

  // A step block of a program dump: `loop @name(%in, ...) -> (%out, ...) { defs }`. Its
  // definitions are read as plain nodes (the grouping is the fusion pass's to redo); its
  // inputs must be defined already and its outputs inside the block.
  void parse_step() {
    next();
    expect(Tok::At);
    expect(Tok::LParen);
    if (tok_.kind != Tok::RParen) {
      do use(expect(Tok::Percent));
      while (accept(Tok::Comma));
    }
    expect(Tok::RParen);
    expect(Tok::Arrow);
    expect(Tok::LParen);
    std::vector<Token> outputs;
    if (tok_.kind != Tok::RParen) {
      do outputs.push_back(expect(Tok::Percent));
      while (accept(Tok::Comma));
    }
    expect(Tok::RParen);
    expect(Tok::LBrace);
    while (tok_.kind == Tok::Percent) parse_node();
    expect(Tok::RBrace);
    for (const Token& out : outputs) use(out);
  }

  TensorType parse_type() {
    if (tok_.kind != Tok::Ident) fail(fmt::format("expected a type like f32[2,3], got {}", describe(tok_)));
    auto dtype = parse_dtype(tok_.text);
    if (!dtype)
      fail(fmt::format("expected an element type (f32, f64, f16, bf16, i32, i64, bool), got '{}'", tok_.text));
    const Location start = tok_.loc;
    next();
    TensorType t{*dtype, {}};
    expect(Tok::LBracket);
    if (tok_.kind != Tok::RBracket) {
      do {
        Token d = tok_;
        if (d.kind != Tok::Int || d.int_value < 0)
          fail(fmt::format("expected a dimension (an integer >= 0), got {}", describe(d)));
        if (t.shape.size() == 16) fail("a type has at most 16 dimensions");
        t.shape.push_back(d.int_value);
        next();
      } while (accept(Tok::Comma));
    }
    expect(Tok::RBracket);
    if (!dims_within_limit(t.shape))
      throw ParseError{start, fmt::format("type {} {}", t.to_string(), dims_limit_error(t.shape))};
    return t;
  }

  ValueId define(const Token& name, TensorType type) {
    auto [it, inserted] = defs_.emplace(std::string(name.text), Def{kNoValue, name.loc});
    if (!inserted)
      throw ParseError{name.loc, fmt::format("redefinition of %{} (first defined at {}:{})", name.text,
                                             it->second.loc.line, it->second.loc.col)};
    it->second.id = g_.add_value(std::move(type), std::string(name.text));
    return it->second.id;
  }

  ValueId use(const Token& name) {
    auto it = defs_.find(std::string(name.text));
    if (it == defs_.end()) throw ParseError{name.loc, fmt::format("undefined value %{}", name.text)};
    return it->second.id;
  }

  void parse_arg() {
    Location loc = tok_.loc;
    ArgKind kind = ArgKind::Input;
    if (tok_.kind == Tok::Ident && (tok_.text == "param" || tok_.text == "state")) {
      kind = tok_.text == "param" ? ArgKind::Param : ArgKind::State;
      next();
    }
    if (tok_.kind != Tok::Percent)
      fail(fmt::format("expected an argument like '%x: f32[2]' or 'param %w: f32[2]', got {}", describe(tok_)));
    Token name = expect(Tok::Percent);
    expect(Tok::Colon);
    TensorType type = parse_type();
    g_.args.push_back(Arg{define(name, std::move(type)), kind, loc});
  }

  void parse_node() {
    Token name = expect(Tok::Percent);
    expect(Tok::Colon);
    TensorType type = parse_type();
    expect(Tok::Equal);
    if (tok_.kind != Tok::Ident) fail(fmt::format("expected an op name, got {}", describe(tok_)));
    auto op = parse_op(tok_.text);
    if (!op) fail(fmt::format("unknown op '{}'", tok_.text));
    Node node{*op, {}, {}, kNoValue, name.loc};
    next();
    if (accept(Tok::LParen)) {
      if (tok_.kind != Tok::RParen) {
        do node.operands.push_back(use(expect(Tok::Percent)));
        while (accept(Tok::Comma));
      }
      expect(Tok::RParen);
    }
    if (accept(Tok::LBrace)) {
      if (tok_.kind != Tok::RBrace) {
        do parse_attr(node);
        while (accept(Tok::Comma));
      }
      expect(Tok::RBrace);
    }
    node.result = define(name, std::move(type));
    g_.nodes.push_back(std::move(node));
  }

  RawAttr parse_raw(int depth) {
    RawAttr raw;
    raw.token = tok_;
    if (tok_.kind == Tok::LBracket) {
      if (depth >= limits_.max_nesting)
        fail(fmt::format("lists nest deeper than the limit of {}", limits_.max_nesting));
      raw.is_list = true;
      next();
      if (tok_.kind != Tok::RBracket) {
        do raw.items.push_back(parse_raw(depth + 1));
        while (accept(Tok::Comma));
      }
      expect(Tok::RBracket);
      return raw;
    }
    if (tok_.kind != Tok::Int && tok_.kind != Tok::Float && tok_.kind != Tok::String && tok_.kind != Tok::Ident)
      fail(fmt::format("expected an attribute value, got {}", describe(tok_)));
    // One budget for the whole file bounds the memory raw attribute trees take.
    if (++attr_elements_ > limits_.max_attr_elements)
      fail(fmt::format("attributes hold more than {} values in all; pass large tensors as params",
                       limits_.max_attr_elements));
    next();
    return raw;
  }

  static std::string_view raw_kind(const RawAttr& r) {
    if (r.is_list) return "a list";
    switch (r.token.kind) {
      case Tok::Int: return "an integer";
      case Tok::Float: return "a float";
      case Tok::String: return "a string";
      default: return r.token.text == "true" || r.token.text == "false" ? "a bool" : "a name";
    }
  }

  void parse_attr(Node& node) {
    Token name = expect(Tok::Ident);
    expect(Tok::Equal);
    RawAttr raw = parse_raw(0);
    auto specs = op_attrs(node.op);
    auto spec = std::find_if(specs.begin(), specs.end(), [&](const AttrSpec& s) { return s.name == name.text; });
    if (spec == specs.end()) {
      std::string known;
      for (const AttrSpec& s : specs) known += (known.empty() ? "" : ", ") + std::string(s.name);
      throw ParseError{name.loc, fmt::format("{}: unknown attribute '{}' (expected {})", op_name(node.op), name.text,
                                             known.empty() ? "none" : known)};
    }
    if (node.attrs.has(name.text)) throw ParseError{name.loc, fmt::format("attribute '{}' is given twice", name.text)};
    auto mistyped = [&](std::string_view want) {
      return ParseError{raw.token.loc, fmt::format("{}: attribute '{}' must be {}, got {}", op_name(node.op), name.text,
                                                   want, raw_kind(raw))};
    };
    const Token& t = raw.token;
    AttrValue value;
    switch (spec->kind) {
      case AttrKind::Int:
        if (raw.is_list || t.kind != Tok::Int) throw mistyped("an integer");
        value = t.int_value;
        break;
      case AttrKind::Ints: {
        std::vector<int64_t> ints;
        if (!raw.is_list) throw mistyped("a list of integers like [0,1]");
        for (const RawAttr& item : raw.items) {
          if (item.is_list || item.token.kind != Tok::Int) throw mistyped("a list of integers like [0,1]");
          ints.push_back(item.token.int_value);
        }
        value = std::move(ints);
        break;
      }
      case AttrKind::Float:
        if (raw.is_list || (t.kind != Tok::Float && t.kind != Tok::Int)) throw mistyped("a number");
        value = t.kind == Tok::Int ? static_cast<double>(t.int_value) : t.float_value;
        break;
      case AttrKind::Bool:
        if (raw.is_list || t.kind != Tok::Ident || (t.text != "true" && t.text != "false"))
          throw mistyped("true or false");
        value = t.text == "true";
        break;
      case AttrKind::String:
        if (raw.is_list || t.kind != Tok::String) throw mistyped("a string");
        value = t.str;
        break;
      case AttrKind::DType: {
        auto d = raw.is_list || t.kind != Tok::Ident ? std::nullopt : parse_dtype(t.text);
        if (!d) throw mistyped("an element type (f32, f64, f16, bf16, i32, i64, bool)");
        value = *d;
        break;
      }
      case AttrKind::Literal: {
        Literal lit;
        if (raw.is_list) {
          for (const RawAttr* r = &raw; r->is_list; r = &r->items[0]) {
            lit.shape.push_back(static_cast<int64_t>(r->items.size()));
            if (r->items.empty()) break;
          }
        }
        // The shape comes from the first element at each depth; a ragged literal whose
        // claimed size overflows is caught here before flattening checks each list.
        int64_t count = 1;
        for (int64_t d : lit.shape)
          count = d == 0 ? 0 : (count > limits_.max_attr_elements / d ? limits_.max_attr_elements + 1 : count * d);
        if (count > limits_.max_attr_elements)
          throw ParseError{t.loc, fmt::format("literal has more than {} elements", limits_.max_attr_elements)};
        flatten_literal(raw, lit, 0);
        value = std::move(lit);
        break;
      }
    }
    node.attrs.set(std::string(name.text), std::move(value));
  }

  void flatten_literal(const RawAttr& raw, Literal& lit, size_t dim) {
    if (dim == lit.shape.size()) {
      const Token& t = raw.token;
      if (raw.is_list) throw ParseError{t.loc, "literal is ragged: a list where a number was expected"};
      if (t.kind == Tok::Int) {
        lit.ints.push_back(t.int_value);
        lit.floats.push_back(static_cast<double>(t.int_value));
      } else if (t.kind == Tok::Float) {
        lit.floats.push_back(t.float_value);
        bool integral = std::isfinite(t.float_value) && std::nearbyint(t.float_value) == t.float_value &&
                        std::fabs(t.float_value) < 9.2e18;
        lit.ints.push_back(integral ? static_cast<int64_t>(t.float_value) : 0);
        lit.integral = lit.integral && integral;
      } else if (t.kind == Tok::Ident && (t.text == "true" || t.text == "false")) {
        lit.ints.push_back(t.text == "true");
        lit.floats.push_back(t.text == "true");
      } else {
        throw ParseError{t.loc, fmt::format("expected a number or true/false in a literal, got {}", describe(t))};
      }
      return;
    }
    if (!raw.is_list || static_cast<int64_t>(raw.items.size()) != lit.shape[dim])
      throw ParseError{raw.token.loc, fmt::format("literal is ragged: expected a list of {} elements at depth {}",
                                                  lit.shape[dim], dim)};
    for (const RawAttr& item : raw.items) flatten_literal(item, lit, dim + 1);
  }

  struct Def {
    ValueId id;
    Location loc;
  };

  Lexer lex_;
  const ParseLimits& limits_;
  Token tok_;
  Graph g_;
  std::unordered_map<std::string, Def> defs_;
  int64_t attr_elements_ = 0;
};

}  // namespace

Result<Graph> parse(std::string_view text, std::string_view filename, const ParseLimits& limits) {
  if (text.size() > limits.max_bytes)
    return make_error(fmt::format("{}: error: input is {} bytes, more than the limit of {} bytes", filename,
                                  text.size(), limits.max_bytes));
  Graph g;
  try {
    Parser parser(text, limits);
    g = parser.parse_file();
  } catch (const ParseError& e) {
    return make_error(fmt::format("{}:{}:{}: error: {}", filename, e.loc.line, e.loc.col, e.message));
  }
  g.source_file = std::string(filename);
  for (Graph& f : g.functions) f.source_file = g.source_file;
  KILN_RETURN_IF_ERROR(verify(g));
  return g;
}

std::vector<std::string> split_input_parts(std::string_view text) {
  std::vector<std::string> parts(1);
  size_t line_start = 0, lines = 0;
  while (line_start < text.size()) {
    size_t end = text.find('\n', line_start);
    size_t next = end == std::string_view::npos ? text.size() : end + 1;
    std::string_view line = text.substr(line_start, next - line_start);
    std::string_view trimmed = line.substr(0, line.find_last_not_of(" \t\r\n") + 1);
    if (trimmed == kSplitMarker) parts.emplace_back(lines + 1, '\n');
    else parts.back() += line;
    ++lines;
    line_start = next;
  }
  return parts;
}

}  // namespace kiln::ir
