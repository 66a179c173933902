// The reports of `kiln bench MODEL`: a table, JSON, and a Chrome trace.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/model_bench.h"

namespace kiln::bench {
namespace {

// "add, mul, tanh" from "%a = add", "%b = mul", ...: the table's short form.
std::string op_names(const std::vector<std::string>& ops, size_t width) {
  std::string out;
  for (const std::string& op : ops) {
    size_t eq = op.find(" = ");
    out += (out.empty() ? "" : ", ") + (eq == std::string::npos ? op : op.substr(eq + 3));
  }
  if (out.size() > width) out = out.substr(0, width - 3) + "...";
  return out;
}

std::string bytes_text(int64_t bytes) {
  if (bytes >= (int64_t{1} << 30)) return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / (1 << 30));
  if (bytes >= (int64_t{1} << 20)) return fmt::format("{:.2f} MiB", static_cast<double>(bytes) / (1 << 20));
  if (bytes >= (int64_t{1} << 10)) return fmt::format("{:.1f} KiB", static_cast<double>(bytes) / (1 << 10));
  return fmt::format("{} B", bytes);
}

}  // namespace

std::string model_table(const ModelBenchResult& r) {
  std::string out = fmt::format("model: {} (target {}{}, {})\n", r.model, r.target,
                                r.code.empty() ? "" : ", kernels for --cpu=" + r.code, r.device);
  if (r.compile_s) out += fmt::format("compile: {:.3f} s\n", *r.compile_s);
  out += fmt::format("arena: {}\n", bytes_text(r.arena_bytes));
  if (!r.side_by_side.empty()) out += fmt::format("schedule: {} (on {} threads)\n", r.side_by_side, r.threads);
  if (!r.huge_pages.empty())
    out += fmt::format("transparent huge pages: {} (the arena and packed weights ask for them)\n", r.huge_pages);
  for (const std::string& input : r.random_inputs) out += "random input " + input + "\n";
  const LatencyStats& l = r.latency_ms;
  out += fmt::format(
      "latency over {} runs ({} warm-up): median {:.4f} ms, p90 {:.4f}, p99 {:.4f}, min {:.4f}, max "
      "{:.4f}, mean {:.4f}\n",
      r.runs, r.warmup, l.median, l.p90, l.p99, l.min, l.max, l.mean);
  out += fmt::format("throughput: {:.1f} runs/s\n", r.throughput_per_s);
  if (!r.summary) return out;
  const ProfileSummary& s = *r.summary;
  out += fmt::format("\nprofile: median over {} runs; {}\n", s.runs, s.clock);
  out += fmt::format("{:>4}  {:<22} {:<9} {:>10} {:>6} {:>10} {:>8} {:>9}  {}\n", "step", "name", "kind", "ms", "%",
                     "GB/s", "of copy", "GFLOP/s", "ops");
  for (size_t i = 0; i < r.steps.size(); ++i) {
    const StepResult& st = r.steps[i];
    out += fmt::format(
        "{:>4}  {:<22} {:<9} {:>10.4f} {:>5.1f}% {:>10.1f} {:>8.2f} {:>9.1f}  {}\n", i, st.info.name, st.info.kind,
        st.ms, s.steps_ms > 0 ? 100 * st.ms / s.steps_ms : 0, st.gbps, st.fraction_of_copy, st.tflops * 1000,
        op_names(st.info.ops, 60) + (st.info.implementation.empty() ? "" : " [" + st.info.implementation + "]"));
  }
  auto share = [&](double ms) { return s.steps_ms > 0 ? 100 * ms / s.steps_ms : 0; };
  out += fmt::format(
      "steps: {:.4f} ms: memory-bound {:.4f} ms ({:.1f}%), library {:.4f} ms ({:.1f}%), other {:.4f} ms "
      "({:.1f}%)\n",
      s.steps_ms, s.memory_bound_ms, share(s.memory_bound_ms), s.library_ms, share(s.library_ms), s.other_ms,
      share(s.other_ms));
  out += fmt::format("overhead: {:.4f} ms (the latency's median minus the steps{})\n", s.overhead_ms,
                     r.side_by_side.empty() ? "" : "; steps side by side overlap, so the steps can add up to more");
  out += fmt::format(
      "a profiled run: {:.4f} ms, {:.4f} ms of it outside the steps in the closest run ({}; allowed: 10% plus {} ms "
      "per "
      "step)\n",
      s.profiled_run_ms, s.unaccounted_ms, s.adds_up ? "adds up" : "DOES NOT ADD UP", s.per_step_overhead_ms);
  out += fmt::format("plain copy: {:.1f} GB/s ({} copied)\n", s.copy_gbps, bytes_text(s.copy_bytes));
  return out;
}

std::string model_json(const ModelBenchResult& r) {
  using nlohmann::json;
  json j;
  j["model"] = r.model;
  j["target"] = r.target;
  j["device"] = r.device;
  j["code"] = r.code.empty() ? json(nullptr) : json(r.code);
  j["side_by_side"] = r.side_by_side.empty() ? json(nullptr) : json(r.side_by_side);
  j["date"] = r.date;
  j["compile_s"] = r.compile_s ? json(*r.compile_s) : json(nullptr);
  j["arena_bytes"] = r.arena_bytes;
  j["huge_pages"] = r.huge_pages.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.huge_pages);
  j["runs"] = r.runs;
  j["warmup"] = r.warmup;
  j["threads"] = r.threads;
  j["latency_clock"] = r.latency_clock;
  const LatencyStats& l = r.latency_ms;
  j["latency_ms"] = {{"median", l.median}, {"p90", l.p90}, {"p99", l.p99},
                     {"min", l.min},       {"max", l.max}, {"mean", l.mean}};
  j["throughput_per_s"] = r.throughput_per_s;
  j["random_inputs"] = r.random_inputs;
  j["steps"] = json::array();
  for (const StepResult& s : r.steps)
    j["steps"].push_back({{"name", s.info.name},
                          {"kind", s.info.kind},
                          {"ops", s.info.ops},
                          {"inputs", s.info.inputs},
                          {"outputs", s.info.outputs},
                          {"ms", s.ms},
                          {"bytes", s.info.bytes},
                          {"gbps", s.gbps},
                          {"fraction_of_copy", s.fraction_of_copy},
                          {"flops", s.info.flops},
                          {"tflops", s.tflops},
                          {"implementation", s.info.implementation}});
  if (r.summary) {
    const ProfileSummary& s = *r.summary;
    j["profile"] = {{"runs", s.runs},
                    {"clock", s.clock},
                    {"steps_ms", s.steps_ms},
                    {"memory_bound_ms", s.memory_bound_ms},
                    {"library_ms", s.library_ms},
                    {"other_ms", s.other_ms},
                    {"overhead_ms", s.overhead_ms},
                    {"profiled_run_ms", s.profiled_run_ms},
                    {"unaccounted_ms", s.unaccounted_ms},
                    {"per_step_overhead_ms", s.per_step_overhead_ms},
                    {"adds_up", s.adds_up},
                    {"copy_gbps", s.copy_gbps},
                    {"copy_bytes", s.copy_bytes}};
  } else {
    j["profile"] = nullptr;
  }
  return j.dump(2) + "\n";
}

std::string model_trace(const ModelBenchResult& r) {
  using nlohmann::json;
  json events = json::array();
  events.push_back({{"name", "process_name"},
                    {"ph", "M"},
                    {"pid", 1},
                    {"args", {{"name", fmt::format("kiln bench {} ({}, {})", r.model, r.target, r.device)}}}});
  events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 1}, {"tid", 1}, {"args", {{"name", "steps"}}}});
  const std::vector<StepResult>& steps = r.steps;
  for (size_t run = 0; run < r.traced.size(); ++run) {
    const TracedRun& t = r.traced[run];
    for (size_t i = 0; i < t.profile.steps.size() && i < steps.size(); ++i) {
      const runtime::StepTime& st = t.profile.steps[i];
      events.push_back({{"name", steps[i].info.name},
                        {"cat", steps[i].info.kind},
                        {"ph", "X"},
                        {"pid", 1},
                        {"tid", 1},
                        {"ts", (t.start_ms + st.start_ms) * 1000},
                        {"dur", st.ms * 1000},
                        {"args",
                         {{"run", run},
                          {"step", i},
                          {"ops", steps[i].info.ops},
                          {"bytes", steps[i].info.bytes},
                          {"flops", steps[i].info.flops}}}});
    }
  }
  return json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump() + "\n";
}

}  // namespace kiln::bench
