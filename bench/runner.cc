#include "bench/runner.h"

#include <fmt/format.h>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <memory>
#include <new>
#include <optional>
#include <regex>
#include <span>
#include <thread>

#include "bench/machine.h"
#include "bench/suite.h"
#include "compiler/compile.h"
#include "runtime/cpu/thread_pool.h"
#include "runtime/cuda/driver.h"
#include "runtime/format/artifact.h"
#include "runtime/model.h"

namespace kiln::bench {
namespace {

int64_t bytes_of(const ir::Graph& g, ir::ValueId v) { return g.type(v).bytes(); }

// Every argument read once and every result written once.
int64_t minimal_traffic(const ir::Graph& g) {
  int64_t bytes = 0;
  for (const ir::Arg& a : g.args) bytes += bytes_of(g, a.value);
  for (ir::ValueId v : g.results) bytes += bytes_of(g, v);
  return bytes;
}

runtime::HostTensor host(const ir::Tensor& t, const std::string& name) {
  return {{name, static_cast<runtime::ElementType>(t.type.dtype), t.type.shape}, ir::tensor_to_bytes(t)};
}

// A loaded artifact with its inputs and output buffers, ready to run. On CUDA both live
// in device memory, so a run is the steps alone (no host copies), synchronized.
struct Prepared {
  std::shared_ptr<runtime::Model> model;
  int kernels = 0;
  int64_t arena_bytes = 0;
  std::unique_ptr<ModelBuffers> buffers;  // after `model`, which they refer to
  Status last = Status::Ok();
  void run() { last = buffers->run(); }
};

Result<std::unique_ptr<Prepared>> prepare(const SuiteRow& row, bool fuse, int threads, const BenchOptions& bench) {
  CompileOptions options;
  options.target = bench.target;
  options.cpu = bench.cpu;
  options.fuse = fuse;
  options.allow_tf32 = bench.allow_tf32;
  options.precision = bench.precision;
  options.weights = row.weights;
  KILN_ASSIGN_OR_RETURN(std::vector<uint8_t> artifact, compile_to_artifact(row.graph, options));
  auto p = std::make_unique<Prepared>();
  KILN_ASSIGN_OR_RETURN(format::ArtifactView view, format::read_artifact(artifact));
  p->kernels = static_cast<int>(view.metadata().steps()->size());
  p->arena_bytes = static_cast<int64_t>(view.metadata().arena_bytes());
  KILN_ASSIGN_OR_RETURN(p->model, runtime::Model::load_bytes(std::move(artifact), {threads}));
  for (const auto& [name, value] : row.state) KILN_RETURN_IF_ERROR(p->model->write_state(name, host(value, name)));
  KILN_ASSIGN_OR_RETURN(p->buffers,
                        ModelBuffers::make(*p->model, [](const runtime::TensorInfo& info, size_t i, uint8_t* bytes) {
                          fill_random(info, i + 1, bytes);
                          return Status::Ok();
                        }));
  if (bench.target == "cuda") KILN_RETURN_IF_ERROR(p->buffers->to_device());
  p->run();
  if (!p->last.ok()) return p->last.error();
  return p;
}

}  // namespace

Result<SuiteResult> run_suite(const BenchOptions& options, const std::function<void(const std::string&)>& progress) {
  if (Status known = check_target(options.target); !known.ok()) return make_error("bench: " + known.error().message);
  if (Status known = check_precision(options.precision); !known.ok())
    return make_error("bench: " + known.error().message);
  const runtime::cuda::Driver* cu = nullptr;
  std::optional<std::string> gpu;
  if (options.target == "cuda") {
    auto driver = runtime::cuda::driver();
    if (!driver.ok()) return make_error("bench: --target=cuda needs a GPU, but " + driver.error().message);
    cu = *driver;
    if (auto name = gpu_name(cu); name.ok()) gpu = *name;
  }
  // std::regex compiles and matches by recursion: a deeply nested pattern would overflow
  // the stack. Row names are short; so is any filter that picks among them.
  constexpr size_t kMaxFilter = 256;
  if (options.filter.size() > kMaxFilter)
    return make_error(fmt::format("bench: --filter is {} characters, more than the {} a filter may have",
                                  options.filter.size(), kMaxFilter));
  std::regex filter;
  try {
    filter = std::regex(options.filter.empty() ? std::string(".") : options.filter);
  } catch (const std::regex_error& e) {
    return make_error(
        fmt::format("bench: --filter '{}' is not a valid regular expression: {}", options.filter, e.what()));
  }
  if (options.repeat < 1) return make_error(fmt::format("bench: --repeat must be at least 1, got {}", options.repeat));
  KILN_ASSIGN_OR_RETURN(std::vector<SuiteRow> rows, suite_rows(options.suite, options.quick));
  std::vector<SuiteRow> chosen;
  std::string names;
  for (SuiteRow& row : rows) {
    names += (names.empty() ? "" : ", ") + row.name;
    if (std::regex_search(row.name, filter)) chosen.push_back(std::move(row));
  }
  if (chosen.empty())
    return make_error(fmt::format("bench: no row of the {} suite matches --filter '{}' (rows: {})", options.suite,
                                  options.filter, names));

  SuiteResult result;
  result.cpu = cpu_model_name();
  result.blas = blas_description();
  result.cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  result.target = options.target;
  result.gpu = gpu;
  result.suite = options.suite;
  result.date = today_utc();
  result.quick = options.quick;
  result.allow_tf32 = options.allow_tf32;
  result.precision = options.precision;
  result.repeat = options.repeat;
  result.threads = options.threads > 0 ? options.threads : result.cores;
  runtime::ThreadPool pool(result.threads - 1);
  for (size_t i = 0; i < chosen.size(); ++i) {
    const SuiteRow& row = chosen[i];
    std::string at = fmt::format("[{}/{}] {}", i + 1, chosen.size(), row.name);
    progress(at + ": compiling fused and unfused");
    auto fused = prepare(row, true, result.threads, options);
    if (!fused.ok()) return make_error(fmt::format("bench: {} (fused): {}", row.name, fused.error().message));
    auto unfused = prepare(row, false, result.threads, options);
    if (!unfused.ok()) return make_error(fmt::format("bench: {} (unfused): {}", row.name, unfused.error().message));
    RowResult r;
    r.name = row.name;
    r.target = options.target;
    r.description = row.description;
    r.bytes = minimal_traffic(row.graph);
    for (const ir::Arg& a : row.graph.args) {
      const ir::TensorType& t = row.graph.type(a.value);
      const char* kind = a.kind == ir::ArgKind::Param ? "param" : a.kind == ir::ArgKind::State ? "state" : "input";
      r.arguments.push_back({row.graph.value_name(a.value), kind, std::string(ir::dtype_name(t.dtype)), t.shape});
    }
    const int64_t copied = std::max<int64_t>(r.bytes / 2, 64);
    std::unique_ptr<HostCopy> host_copy;
    std::unique_ptr<DeviceCopy> device_copy;
    if (cu) {
      auto made = DeviceCopy::make(cu, copied);
      if (!made.ok()) return make_error(fmt::format("bench: {}: {}", row.name, made.error().message));
      device_copy = std::move(*made);
    } else {
      host_copy = std::make_unique<HostCopy>(copied, pool, result.threads);
    }
    progress(at + fmt::format(": timing {} rounds of fused, unfused, copy", options.repeat));
    Interleaved t = time_interleaved(options.repeat, {[&] { (*fused)->run(); }, [&] { (*unfused)->run(); },
                                                      [&] { device_copy ? device_copy->run() : host_copy->run(); }});
    for (Prepared* p : {fused->get(), unfused->get()})
      if (!p->last.ok()) return make_error(fmt::format("bench: {}: {}", row.name, p->last.error().message));
    r.fused = t.timings[0];
    r.unfused = t.timings[1];
    r.copy = t.timings[2];
    r.speedup = t.median_ratio(1, 0);
    r.kernels_fused = (*fused)->kernels;
    r.kernels_unfused = (*unfused)->kernels;
    r.arena_bytes = (*fused)->arena_bytes;
    r.arena_bytes_unfused = (*unfused)->arena_bytes;
    r.fused_gbps = gbps(r.bytes, r.fused.median_ms);
    r.unfused_gbps = gbps(r.bytes, r.unfused.median_ms);
    r.copy_gbps = gbps(2 * copied, r.copy.median_ms);
    // The copy moves the row's bytes (half read, half written), so per round the fraction
    // is copy time over fused time; the median of those rides out the machine's noise.
    r.fraction_of_copy = t.median_ratio(2, 0);
    result.rows.push_back(std::move(r));
  }
  // A copy timed on its own, before the rows, read far below the same copy timed between
  // kernel runs on the development VM; the rows' copies are the steadier.
  std::vector<double> copies;
  for (const RowResult& r : result.rows) copies.push_back(r.copy_gbps);
  std::sort(copies.begin(), copies.end());
  result.copy_gbps = copies[copies.size() / 2];
  return result;
}

}  // namespace kiln::bench
