// Helpers for unit tests: parse, evaluate and compare tensors.
#pragma once

#include <fmt/format.h>
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>

#include "ir/interpreter.h"
#include "ir/parser.h"
#include "ir/printer.h"

namespace kiln::testing {

/// Parses a graph that must be valid.
inline ir::Graph parse_ok(std::string_view text) {
  auto g = ir::parse(text, "test.kir");
  if (!g.ok()) FAIL(g.error().message);
  return std::move(g).value();
}

/// The error message of a graph that must fail to parse or verify.
inline std::string parse_error(std::string_view text) {
  auto g = ir::parse(text, "bad.kir");
  if (g.ok()) FAIL("expected an error for:\n" << text);
  return g.error().message;
}

/// The seed of a text-test model's inputs, from its name: the same on every machine
/// and whatever other files tests/lit holds (seeds by place in a directory's order
/// changed with each new file, and across file systems).
inline uint64_t model_seed(std::string_view name) {
  uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a
  for (char c : name) hash = (hash ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return hash;
}

/// Every .kir file under tests/lit that parses (the malformed ones under errors/ do not)
/// and is not marked "# not a model to run:" (those need more memory than any machine),
/// with its path (and part), sorted by it; seed each one's inputs with model_seed(path).
inline std::vector<std::pair<std::string, ir::Graph>> text_test_models() {
  std::vector<std::pair<std::string, ir::Graph>> models;
  for (const auto& entry : std::filesystem::recursive_directory_iterator("tests/lit")) {
    if (entry.path().extension() != ".kir") continue;
    std::ifstream in(entry.path());
    std::string text((std::istreambuf_iterator<char>(in)), {});
    if (text.find("# not a model to run:") != std::string::npos) continue;
    std::vector<std::string> parts = ir::split_input_parts(text);
    for (size_t k = 0; k < parts.size(); ++k) {
      std::string name =
          parts.size() == 1 ? entry.path().string() : fmt::format("{} (part {})", entry.path().string(), k + 1);
      auto g = ir::parse(parts[k], entry.path().string());
      if (g.ok()) models.emplace_back(name, std::move(g).value());
    }
  }
  std::sort(models.begin(), models.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return models;
}

/// Evaluates a graph that must run.
inline std::vector<ir::Tensor> eval_ok(const ir::Graph& g, const std::map<std::string, ir::Tensor>& inputs = {}) {
  auto r = ir::evaluate(g, inputs);
  if (!r.ok()) FAIL(r.error().message);
  return std::move(r).value();
}

/// Evaluates `body` (definitions, no arguments) inside a graph returning `result`.
inline ir::Tensor eval_body(const std::string& body, const std::string& result) {
  ir::Graph g = parse_ok("graph @t() {\n" + body + "\n  return " + result + "\n}\n");
  return eval_ok(g)[0];
}

/// One unit in the last place of a bf16 or f16 value, relative (2^-7, 2^-10; 0 for other
/// types): a kernel's f32 value, computed in another order than the interpreter's, may
/// round to the neighbouring half.
inline double half_ulp(ir::DType dtype) {
  return dtype == ir::DType::BF16 ? 0x1p-7 : dtype == ir::DType::F16 ? 0x1p-10 : 0;
}

/// Checks a tensor's type and elements (|a-e| <= atol + rtol*|e|; NaN matches NaN).
inline void check_close(const ir::Tensor& t, const std::string& type, const std::vector<double>& expected,
                        double rtol = 1e-6, double atol = 1e-7) {
  CHECK(t.type.to_string() == type);
  REQUIRE(t.size() == static_cast<int64_t>(expected.size()));
  // Each element that is off fails its own check, with its index and values; the
  // message is built only then (formatting it for each of millions of elements that
  // agree was most of some GPU-tier cases' time).
  int reported = 0;
  for (size_t k = 0; k < expected.size() && reported < 20; ++k) {
    double a = t.get(static_cast<int64_t>(k)), e = expected[k];
    const bool ok = std::isnan(e)   ? std::isnan(a)
                    : std::isinf(e) ? a == e
                                    : std::fabs(a - e) <= atol + rtol * std::fabs(e);
    if (ok) continue;
    ++reported;
    INFO("element " << k << ": got " << a << ", expected " << e << " (rtol " << rtol << ", atol " << atol << ")");
    if (std::isnan(e)) CHECK(std::isnan(a));
    else if (std::isinf(e)) CHECK(a == e);
    else CHECK(std::fabs(a - e) <= atol + rtol * std::fabs(e));
  }
}

/// Checks outputs against the interpreter's: their types, and values at the matmul
/// tolerance (1e-4) unless given others. With `half_ulp`, a bf16 or f16 result is also
/// allowed one unit in its last place (2^-7 or 2^-10 relative): a kernel's f32 value,
/// computed in another order than the interpreter's, may round to the neighbouring half.
inline void check_same(const std::vector<ir::Tensor>& got, const std::vector<ir::Tensor>& want, double rtol = 1e-4,
                       double atol = 1e-4, bool half_ulp = false) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    std::vector<double> expected;
    for (int64_t k = 0; k < want[i].size(); ++k) expected.push_back(want[i].get(k));
    const ir::DType dtype = want[i].type.dtype;
    const double ulp = half_ulp ? kiln::testing::half_ulp(dtype) : 0;
    check_close(got[i], want[i].type.to_string(), expected, std::max(rtol, ulp), atol);
  }
}

/// A tensor from doubles.
inline ir::Tensor tensor(ir::DType dtype, ir::Shape shape, const std::vector<double>& values) {
  return ir::Tensor::from_doubles({dtype, std::move(shape)}, values);
}

/// Seeded values for every argument of `g`: floats in [-bound, bound], integers 0 or 1
/// (valid labels and indices).
inline std::map<std::string, ir::Tensor> seeded_arguments(const ir::Graph& g, uint64_t seed, double bound = 1) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> value(-bound, bound);
  std::map<std::string, ir::Tensor> args;
  for (const ir::Arg& a : g.args) {
    const ir::TensorType& t = g.type(a.value);
    std::vector<double> data;
    for (int64_t k = 0; k < t.num_elements(); ++k)
      data.push_back(ir::is_float(t.dtype) ? value(rng) : static_cast<double>(rng() % 2));
    args[g.value_name(a.value)] = ir::Tensor::from_doubles(t, data);
  }
  return args;
}

}  // namespace kiln::testing
