// The ONNX node-test runner (docs/onnx.md): for each test of ONNX's backend test data
// (Debian's libonnx-testdata), imports model.onnx, compiles it for the CPU (or, with
// --target=cuda, for CUDA: on a GPU, or on tests/cuda_emulator's stand-in), runs every
// test_data_set_N on the runtime and compares each output with output_N.pb at the ONNX
// backend tests' tolerances (rtol 1e-3, atol 1e-7). Prints one line per test and the
// totals; --json writes every result, --markdown a table per op; --expected fails (exit 1) when a test
// listed there does not pass.
//
//   onnx_conformance --data=/usr/share/libonnx-testdata/data/node [--filter=SUBSTRING]
//       [--expected=tests/onnx/expected_pass.txt] [--json=out.json] [--markdown=out.md]
//       [--target=cpu|cuda] [--sample=N (every Nth test, in name order)]
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/file.h"
#include "compiler/compile.h"
#include "frontends/onnx/importer.h"
#include "ir/tensor.h"
#include "runtime/model.h"

#include <onnx/onnx_pb.h>

namespace {

namespace fs = std::filesystem;
using kiln::Result;
using kiln::Status;

constexpr double kRtol = 1e-3, kAtol = 1e-7;

enum class Outcome { Passed, Failed, Unsupported };

struct TestResult {
  std::string name;
  std::string op;  // the model's op type, or "(several ops)"
  Outcome outcome = Outcome::Failed;
  std::string reason;
};

std::string_view outcome_name(Outcome o) {
  return o == Outcome::Passed ? "passed" : o == Outcome::Failed ? "failed" : "unsupported";
}

Result<kiln::ir::Tensor> read_pb(const fs::path& path) {
  KILN_ASSIGN_OR_RETURN(std::string bytes, kiln::read_file(path.string(), uint64_t{1} << 30));
  return kiln::onnx_import::read_tensor_proto(std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
}

// Why `got` is not `want` at the tolerances, or "" when it is.
std::string mismatch(const kiln::ir::Tensor& got, const kiln::ir::Tensor& want) {
  if (got.type != want.type) return fmt::format("got {}, expected {}", got.type.to_string(), want.type.to_string());
  for (int64_t k = 0; k < want.size(); ++k) {
    const double g = got.get(k), w = want.get(k);
    if (std::isnan(w) && std::isnan(g)) continue;
    if (g == w) continue;
    if (!want.holds_floats() || !(std::fabs(g - w) <= kAtol + kRtol * std::fabs(w)))
      return fmt::format("element {} is {}, expected {}", k, g, w);
  }
  return "";
}

// An error that says kiln does not take something (an op, an attribute, an element type,
// a shape computed at run time), rather than that it got something wrong.
bool refusal(const std::string& m) {
  for (const char* words :
       {"not support", "which kiln does not have", "kiln needs it known at import", "sequences, maps and optionals"})
    if (m.find(words) != std::string::npos) return true;
  return false;
}

// Inputs of the first data set, by name, to fix at import: node tests give shapes, axes,
// indices, conditions, bounds and scales as inputs, which kiln needs at import. First the
// integer, bool and scalar ones; with `all_but_first`, every input but the data (input 0).
std::map<std::string, kiln::ir::Tensor> fixed_inputs(const fs::path& dir, bool all_but_first) {
  std::map<std::string, kiln::ir::Tensor> constants;
  auto model = kiln::read_file((dir / "model.onnx").string(), uint64_t{1} << 30);
  onnx::ModelProto proto;
  if (!model.ok() || !proto.ParseFromString(*model)) return constants;
  for (int i = 0; i < proto.graph().input_size(); ++i) {
    auto t = read_pb(dir / "test_data_set_0" / fmt::format("input_{}.pb", i));
    if (t.ok() && (kiln::ir::is_int(t->type.dtype) || t->type.dtype == kiln::ir::DType::Bool || t->type.rank() == 0 ||
                   (all_but_first && i > 0)))
      constants[proto.graph().input(i).name()] = std::move(*t);
  }
  return constants;
}

// The op type of a model with one node; models of several nodes (ONNX functions expanded)
// are "(several ops)".
std::string op_of(const fs::path& dir) {
  auto model = kiln::read_file((dir / "model.onnx").string(), uint64_t{1} << 30);
  onnx::ModelProto proto;
  if (!model.ok() || !proto.ParseFromString(*model)) return "(unreadable)";
  return proto.graph().node_size() == 1 ? proto.graph().node(0).op_type() : "(several ops)";
}

TestResult run_test(const fs::path& dir, const std::string& target) {
  TestResult r;
  r.name = dir.filename().string();
  r.op = op_of(dir);
  auto imported = kiln::onnx_import::import_file((dir / "model.onnx").string());
  // Retried with inputs of the first data set fixed, where kiln needs them known at
  // import; the other data sets, if any, are then run with those values.
  for (bool all_but_first : {false, true}) {
    if (imported.ok() || imported.error().message.find("kiln needs it known at import") == std::string::npos) break;
    kiln::onnx_import::ImportOptions options;
    options.constants = fixed_inputs(dir, all_but_first);
    imported = kiln::onnx_import::import_file((dir / "model.onnx").string(), options);
  }
  if (!imported.ok()) {
    const std::string& m = imported.error().message;
    const bool unsupported = refusal(m);
    r.outcome = unsupported ? Outcome::Unsupported : Outcome::Failed;
    r.reason = m.substr(m.find(": ") + 2);
    return r;
  }
  kiln::CompileOptions options;
  options.target = target;
  if (target == "cpu") options.cpu = "native";
  options.weights = imported->weights;
  auto artifact = kiln::compile_to_artifact(imported->graph, options);
  if (!artifact.ok()) {
    r.reason = "compile: " + artifact.error().message;
    return r;
  }
  auto model = kiln::runtime::Model::load_bytes(std::move(*artifact));
  if (!model.ok()) {
    r.reason = "load: " + model.error().message;
    return r;
  }
  int sets = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (!entry.is_directory() || !entry.path().filename().string().starts_with("test_data_set_")) continue;
    ++sets;
    std::map<std::string, kiln::runtime::HostTensor> inputs;
    for (const kiln::onnx_import::NameMapping& in : imported->inputs) {
      auto t = read_pb(entry.path() / fmt::format("input_{}.pb", in.index));
      if (!t.ok()) {
        r.reason = "input: " + t.error().message;
        if (refusal(r.reason)) r.outcome = Outcome::Unsupported;
        return r;
      }
      const std::string& name = in.kiln;
      inputs[name] = {{name, static_cast<kiln::runtime::ElementType>(t->type.dtype), t->type.shape},
                      kiln::ir::tensor_to_bytes(*t)};
    }
    auto outputs = (*model)->run(inputs);
    if (!outputs.ok()) {
      r.reason = "run: " + outputs.error().message;
      return r;
    }
    for (size_t o = 0; o < outputs->size(); ++o) {
      auto want = read_pb(entry.path() / fmt::format("output_{}.pb", o));
      if (!want.ok()) {
        r.reason = "output: " + want.error().message;
        if (refusal(r.reason)) r.outcome = Outcome::Unsupported;
        return r;
      }
      const kiln::runtime::HostTensor& h = (*outputs)[o];
      kiln::ir::Tensor got =
          kiln::ir::tensor_from_bytes({static_cast<kiln::ir::DType>(h.info.type), h.info.shape}, h.data.data());
      if (std::string why = mismatch(got, *want); !why.empty()) {
        r.reason = fmt::format("{}, output {}: {}", entry.path().filename().string(), o, why);
        return r;
      }
    }
  }
  r.outcome = sets > 0 ? Outcome::Passed : Outcome::Failed;
  if (!sets) r.reason = "no test_data_set_N";
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  std::string data = "/usr/share/libonnx-testdata/data/node", filter, expected_path, json_path, markdown_path,
              target = "cpu";
  int sample = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    const std::string key = arg.substr(0, eq), value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    if (key == "--data") data = value;
    else if (key == "--filter") filter = value;
    else if (key == "--expected") expected_path = value;
    else if (key == "--json") json_path = value;
    else if (key == "--markdown") markdown_path = value;
    else if (key == "--target" && (value == "cpu" || value == "cuda")) target = value;
    else if (key == "--sample" && !value.empty() && value.find_first_not_of("0123456789") == std::string::npos &&
             value.size() < 6 && std::stoi(value) > 0)
      sample = std::stoi(value);
    else return fmt::print(stderr, "onnx_conformance: unknown flag '{}'\n", arg), 2;
  }
  std::set<std::string> expected;
  if (!expected_path.empty()) {
    std::ifstream in(expected_path);
    if (!in) return fmt::print(stderr, "onnx_conformance: cannot read '{}'\n", expected_path), 2;
    for (std::string line; std::getline(in, line);)
      if (!line.empty() && line[0] != '#') expected.insert(line);
  }
  std::vector<fs::path> dirs;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(data, ec))
    if (entry.is_directory() && entry.path().filename().string().find(filter) != std::string::npos &&
        (expected.empty() || expected.count(entry.path().filename().string())))
      dirs.push_back(entry.path());
  if (ec || dirs.empty()) return fmt::print(stderr, "onnx_conformance: no tests under '{}'\n", data), 2;
  std::sort(dirs.begin(), dirs.end());
  // Every sample-th test, in name order: the same tests each run.
  if (sample > 1) {
    std::vector<fs::path> sampled;
    for (size_t i = 0; i < dirs.size(); i += static_cast<size_t>(sample)) sampled.push_back(dirs[i]);
    dirs = std::move(sampled);
  }
  std::vector<TestResult> results;
  int unexpected = 0;
  for (const fs::path& dir : dirs) {
    TestResult r = run_test(dir, target);
    fmt::print("{} {}{}\n", outcome_name(r.outcome), r.name, r.reason.empty() ? "" : ": " + r.reason);
    if (expected.count(r.name) && r.outcome != Outcome::Passed) ++unexpected;
    results.push_back(std::move(r));
  }
  int counts[3] = {0, 0, 0};
  for (const TestResult& r : results) ++counts[static_cast<int>(r.outcome)];
  fmt::print("{} tests: {} passed, {} failed, {} unsupported\n", results.size(), counts[0], counts[1], counts[2]);
  if (!json_path.empty()) {
    nlohmann::json j = nlohmann::json::array();
    for (const TestResult& r : results)
      j.push_back({{"test", r.name}, {"op", r.op}, {"outcome", outcome_name(r.outcome)}, {"reason", r.reason}});
    std::ofstream(json_path) << j.dump(1) << "\n";
  }
  if (!markdown_path.empty()) {
    // Per op: how many tests pass, fail or are unsupported, and why the first that does
    // not pass did not.
    struct OpRow {
      int counts[3] = {0, 0, 0};
      std::string why;
    };
    std::map<std::string, OpRow> ops;
    for (const TestResult& r : results) {
      OpRow& row = ops[r.op];
      ++row.counts[static_cast<int>(r.outcome)];
      if (r.outcome != Outcome::Passed && row.why.empty()) row.why = r.name + ": " + r.reason;
    }
    std::ofstream md(markdown_path);
    md << fmt::format("{} node tests: {} passed, {} failed, {} unsupported.\n\n", results.size(), counts[0], counts[1],
                      counts[2]);
    md << "| op | passed | failed | unsupported | the first that did not pass |\n|---|---|---|---|---|\n";
    for (const auto& [op, row] : ops) {
      std::string why = row.why.substr(0, 150);
      std::replace(why.begin(), why.end(), '|', '/');
      md << fmt::format("| {} | {} | {} | {} | {} |\n", op, row.counts[0], row.counts[1], row.counts[2], why);
    }
  }
  if (unexpected) fmt::print(stderr, "onnx_conformance: {} tests of the expected-pass list did not pass\n", unexpected);
  return unexpected ? 1 : 0;
}
