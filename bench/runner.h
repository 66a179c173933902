// `kiln bench`: compiles each row of a suite fused and unfused, runs both with the
// runtime, and compares them with each other and with a plain copy of the same bytes.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "bench/timing.h"
#include "compiler/compile.h"

namespace kiln::bench {

/// What to run.
struct BenchOptions {
  std::string target = "cpu";
  /// The CPU target: the --cpu list of `kiln compile` (CompileOptions::cpu).
  std::string cpu = std::string(kDefaultCpus);
  std::string suite = "fusion";
  /// An ECMAScript regex; only rows whose name it matches somewhere run.
  std::string filter;
  /// Timed runs per candidate, after one warm-up each.
  int repeat = 20;
  /// Small sizes (for tests and a first look).
  bool quick = false;
  /// Runtime threads (0: one per hardware thread); the copy uses as many.
  int threads = 0;
  /// CUDA: f32 matmuls may use TF32 (CompileOptions::allow_tf32).
  bool allow_tf32 = false;
  /// f32, bf16 or f16: every row compiled with CompileOptions::precision (the autocast pass).
  std::string precision = "f32";
};

/// An argument of a row's graph, for tools that rebuild the row (bench/compare_torch.py).
struct RowArgument {
  std::string name, kind, dtype;  ///< kind: input, param or state
  std::vector<int64_t> shape;
};

/// The figures of one row.
struct RowResult {
  std::string name, target, description;
  std::vector<RowArgument> arguments;
  Timing fused, unfused, copy;
  int kernels_fused = 0, kernels_unfused = 0;
  /// Minimal traffic: every argument read once, every result written once.
  int64_t bytes = 0;
  int64_t arena_bytes = 0, arena_bytes_unfused = 0;
  double fused_gbps = 0, unfused_gbps = 0, copy_gbps = 0;
  /// fused_gbps over copy_gbps (a copy of the row's own bytes, timed in alternation with
  /// it): the median over the rounds of copy time / fused time.
  double fraction_of_copy = 0;
  /// The median over alternating runs of unfused time / fused time.
  double speedup = 0;
};

/// A whole run.
struct SuiteResult {
  std::string cpu;   ///< the CPU's model name
  int cores = 0;     ///< hardware threads
  std::string blas;  ///< the BLAS library the runtime's matmuls call, with the kernels it chose
  std::optional<std::string> gpu;
  std::string target, suite, date;
  bool quick = false, allow_tf32 = false;
  std::string precision = "f32";
  int repeat = 0, threads = 0;
  /// Bandwidth of a plain copy (memcpy on the CPU, with the runtime's threads): the median
  /// over the rows of their copy_gbps.
  double copy_gbps = 0;
  std::vector<RowResult> rows;
};

/// Runs the suite; `progress` receives one line per stage of each row.
Result<SuiteResult> run_suite(const BenchOptions& options, const std::function<void(const std::string&)>& progress);

/// The result as JSON (see docs/benchmarks.md for the fields).
std::string to_json(const SuiteResult& result);
/// A readable table of the result.
std::string to_table(const SuiteResult& result);
/// An SVG chart: speedup of fused over unfused, and fraction of copy bandwidth, per row.
std::string to_svg(const SuiteResult& result);

}  // namespace kiln::bench
