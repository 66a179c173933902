// The outputs of `kiln bench`: JSON, a table and an SVG chart.
#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "bench/runner.h"

namespace kiln::bench {
namespace {

// Rounded for reading; JSON keeps 4 significant digits, enough for timings this noisy.
double round4(double x) {
  if (x == 0 || !std::isfinite(x)) return x;
  double scale = std::pow(10.0, 3 - std::floor(std::log10(std::fabs(x))));
  return std::round(x * scale) / scale;
}

std::string escape_xml(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}

}  // namespace

std::string to_json(const SuiteResult& result) {
  nlohmann::ordered_json j;
  j["machine"] = {{"cpu", result.cpu},
                  {"cores", result.cores},
                  {"blas", result.blas},
                  {"gpu", result.gpu ? nlohmann::ordered_json(*result.gpu) : nullptr}};
  j["target"] = result.target;
  j["suite"] = result.suite;
  j["date"] = result.date;
  j["quick"] = result.quick;
  j["repeat"] = result.repeat;
  j["threads"] = result.threads;
  j["allow_tf32"] = result.allow_tf32;
  j["precision"] = result.precision;
  j["copy_gbps"] = round4(result.copy_gbps);
  j["rows"] = nlohmann::ordered_json::array();
  for (const RowResult& r : result.rows) {
    nlohmann::ordered_json arguments = nlohmann::ordered_json::array();
    for (const RowArgument& a : r.arguments)
      arguments.push_back({{"name", a.name}, {"kind", a.kind}, {"dtype", a.dtype}, {"shape", a.shape}});
    j["rows"].push_back({{"name", r.name},
                         {"target", r.target},
                         {"description", r.description},
                         {"arguments", arguments},
                         {"fused_ms", round4(r.fused.median_ms)},
                         {"unfused_ms", round4(r.unfused.median_ms)},
                         {"fused_min_ms", round4(r.fused.min_ms)},
                         {"fused_max_ms", round4(r.fused.max_ms)},
                         {"unfused_min_ms", round4(r.unfused.min_ms)},
                         {"unfused_max_ms", round4(r.unfused.max_ms)},
                         {"speedup", round4(r.speedup)},
                         {"kernels_fused", r.kernels_fused},
                         {"kernels_unfused", r.kernels_unfused},
                         {"bytes", r.bytes},
                         {"fused_gbps", round4(r.fused_gbps)},
                         {"unfused_gbps", round4(r.unfused_gbps)},
                         {"fraction_of_copy", round4(r.fraction_of_copy)},
                         {"copy_ms", round4(r.copy.median_ms)},
                         {"copy_gbps", round4(r.copy_gbps)},
                         {"arena_bytes", r.arena_bytes},
                         {"arena_bytes_unfused", r.arena_bytes_unfused}});
  }
  return j.dump(2) + "\n";
}

std::string to_table(const SuiteResult& result) {
  std::string out =
      fmt::format("kiln bench --suite={} --target={}{}{}{}: {} ({} hardware threads, {} used), {} runs each\n",
                  result.suite, result.target, result.quick ? " --quick" : "", result.allow_tf32 ? " --allow-tf32" : "",
                  result.precision == "f32" ? "" : " --precision=" + result.precision, result.cpu, result.cores,
                  result.threads, result.repeat);
  out += fmt::format("plain copy: {:.1f} GB/s; matmuls: {}\n\n", result.copy_gbps, result.blas);
  out += fmt::format("{:<20} {:>10} {:>10} {:>8} {:>9} {:>9} {:>8} {:>10}\n", "row", "fused ms", "unfused ms",
                     "speedup", "kernels", "GB/s", "of copy", "arena MiB");
  for (const RowResult& r : result.rows)
    out += fmt::format("{:<20} {:>10.3f} {:>10.3f} {:>7.2f}x {:>4} {:>4} {:>9.1f} {:>8.2f} {:>10.1f}\n", r.name,
                       r.fused.median_ms, r.unfused.median_ms, r.speedup, r.kernels_fused, r.kernels_unfused,
                       r.fused_gbps, r.fraction_of_copy, static_cast<double>(r.arena_bytes) / (1 << 20));
  out +=
      "\nkernels: fused, unfused. GB/s: minimal traffic (arguments read once, results written once) over the fused "
      "median.\n"
      "of copy: that over the plain copy's GB/s. speedup: median over alternating runs of unfused time / fused time.\n";
  return out;
}

std::string to_svg(const SuiteResult& result) {
  // Two panels of horizontal bars side by side, one row per benchmark.
  const int label_w = 150, panel_w = 300, gap = 50, bar_h = 18, row_h = 26, top = 70;
  const int n = static_cast<int>(result.rows.size());
  const int width = label_w + 2 * panel_w + gap + 40, height = top + n * row_h + 50;
  double max_speedup = 1;
  for (const RowResult& r : result.rows) max_speedup = std::max(max_speedup, r.speedup);
  max_speedup = std::ceil(max_speedup);
  double max_fraction = 1;
  for (const RowResult& r : result.rows) max_fraction = std::max(max_fraction, r.fraction_of_copy);
  max_fraction = std::ceil(max_fraction * 4) / 4;
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"10\" y=\"20\" font-size=\"14\" font-weight=\"bold\">kiln bench --suite={2} --target={3}{4}</text>\n"
      "<text x=\"10\" y=\"38\">{5}, {6} threads, {7}</text>\n",
      width, height, escape_xml(result.suite), escape_xml(result.target), result.quick ? " --quick" : "",
      escape_xml(result.cpu), result.threads, result.date);
  auto panel = [&](int x0, const std::string& title, double max, double mark, const std::string& mark_label, auto value,
                   auto text, const char* color) {
    svg += fmt::format("<text x=\"{}\" y=\"{}\" font-weight=\"bold\">{}</text>\n", x0, top - 12, escape_xml(title));
    for (int i = 0; i < n; ++i) {
      double v = std::max(0.0, value(result.rows[static_cast<size_t>(i)]));
      int y = top + i * row_h;
      int w = static_cast<int>(std::round(v / max * panel_w));
      svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"/>\n", x0, y, w, bar_h, color);
      svg += fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n", x0 + w + 4, y + 13,
                         escape_xml(text(result.rows[static_cast<size_t>(i)])));
    }
    int mx = x0 + static_cast<int>(std::round(mark / max * panel_w));
    svg +=
        fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"black\" stroke-dasharray=\"4 3\"/>\n",
                    mx, top - 4, top + n * row_h);
    svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", mx, top + n * row_h + 14,
                       escape_xml(mark_label));
    svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#444\"/>\n", x0, top - 4,
                       top + n * row_h);
  };
  for (int i = 0; i < n; ++i)
    svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", label_w - 8, top + i * row_h + 13,
                       escape_xml(result.rows[static_cast<size_t>(i)].name));
  panel(
      label_w, "speedup of fused over unfused", max_speedup, 1.0, "1x", [](const RowResult& r) { return r.speedup; },
      [](const RowResult& r) { return fmt::format("{:.2f}x", r.speedup); }, "#4a7ebb");
  panel(
      label_w + panel_w + gap, "fused GB/s as a fraction of copy", max_fraction, 1.0, "copy",
      [](const RowResult& r) { return r.fraction_of_copy; },
      [](const RowResult& r) { return fmt::format("{:.2f}", r.fraction_of_copy); }, "#d9822b");
  svg += fmt::format("<text x=\"10\" y=\"{}\">plain copy: {:.1f} GB/s; bars: medians of {} runs</text>\n", height - 12,
                     result.copy_gbps, result.repeat);
  svg += "</svg>\n";
  return svg;
}

}  // namespace kiln::bench
