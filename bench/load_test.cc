// A load generator for `kiln serve` on loopback: N requests from 1, 8 and 64 concurrent
// clients (each on its own kept-alive connection), reporting throughput, latency
// percentiles and failures; with --artifact, also the runtime's own median run time of the
// same model in this process, and so the server's added latency (docs/serving.md).
//
//   kiln serve mlp.kiln --port=8000 &
//   bazel run -c opt //bench:load_test -- --model=mlp --artifact=mlp.kiln
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/model.h"
#include "serving/http_client.h"

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct Flags {
  std::string host = "127.0.0.1", model, artifact;
  int port = 8000;
  std::vector<int> clients = {1, 8, 64};
  int64_t requests = 10000, rows = 1;
  double time_limit_s = 300;
  int model_threads = 0;
};

struct Round {
  int clients = 0;
  int64_t sent = 0, failed = 0;
  double seconds = 0;
  std::vector<double> latency_ms;
  std::string first_failure;
};

double percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  const size_t k = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

// One request body: `rows` rows of random data for every input (a fixed seed).
std::string request_body(const json& model, int64_t rows) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> uniform(-1, 1);
  json inputs = json::array();
  for (const json& in : model["inputs"]) {
    std::vector<int64_t> shape = in["shape"].get<std::vector<int64_t>>();
    int64_t elements = 1;
    for (int64_t& d : shape) elements *= (d = d < 0 ? rows : d);
    json data = json::array();
    const std::string type = in["datatype"];
    for (int64_t i = 0; i < elements; ++i) {
      if (type == "BOOL") data.push_back(rng() % 2 == 1);
      else if (type.starts_with("INT")) data.push_back(static_cast<int>(rng() % 10));
      else data.push_back(static_cast<float>(uniform(rng)));
    }
    inputs.push_back({{"name", in["name"]}, {"shape", shape}, {"datatype", type}, {"data", data}});
  }
  return json{{"inputs", inputs}}.dump();
}

Round run_round(const Flags& f, int clients, const std::string& body) {
  Round round;
  round.clients = clients;
  std::atomic<int64_t> next{0}, failed{0};
  std::vector<std::vector<double>> latencies(static_cast<size_t>(clients));
  std::vector<std::string> failures(static_cast<size_t>(clients));
  const std::string path = "/v2/models/" + f.model + "/infer";
  const Clock::time_point start = Clock::now(), deadline = start + std::chrono::duration_cast<Clock::duration>(
                                                                       std::chrono::duration<double>(f.time_limit_s));
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c)
    threads.emplace_back([&, c] {
      auto connection = kiln::serving::HttpConnection::connect(f.host, f.port);
      std::vector<double>& mine = latencies[static_cast<size_t>(c)];
      while (next.fetch_add(1) < f.requests && Clock::now() < deadline) {
        if (!connection.ok() || !connection->open())
          connection = kiln::serving::HttpConnection::connect(f.host, f.port);
        const Clock::time_point sent = Clock::now();
        auto r = connection.ok() ? connection->request("POST", path, body, {{"Content-Type", "application/json"}})
                                 : kiln::Result<kiln::serving::HttpResponse>(connection.error());
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - sent).count();
        if (!r.ok() || r->status != 200) {
          ++failed;
          if (failures[static_cast<size_t>(c)].empty())
            failures[static_cast<size_t>(c)] = r.ok() ? std::to_string(r->status) + " " + r->body : r.error().message;
          continue;
        }
        mine.push_back(ms);
      }
    });
  for (std::thread& t : threads) t.join();
  round.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  for (auto& l : latencies) round.latency_ms.insert(round.latency_ms.end(), l.begin(), l.end());
  round.failed = failed;
  round.sent = static_cast<int64_t>(round.latency_ms.size()) + round.failed;
  for (const std::string& s : failures)
    if (!s.empty() && round.first_failure.empty()) round.first_failure = s;
  return round;
}

// The runtime's median run time of the artifact in this process, on zero inputs.
kiln::Result<double> runtime_median_ms(const Flags& f) {
  kiln::runtime::Options options;
  options.threads = f.model_threads;
  KILN_ASSIGN_OR_RETURN(auto model, kiln::runtime::Model::load_file(f.artifact, options));
  std::vector<std::vector<uint8_t>> in, out;
  std::map<std::string, std::span<const uint8_t>> inputs;
  std::map<std::string, std::span<uint8_t>> outputs;
  for (const auto& i : model->inputs()) inputs.emplace(i.name, in.emplace_back(static_cast<size_t>(i.bytes())));
  for (const auto& o : model->outputs()) outputs.emplace(o.name, out.emplace_back(static_cast<size_t>(o.bytes())));
  std::vector<double> ms;
  for (int i = 0; i < 300; ++i) {
    const Clock::time_point start = Clock::now();
    KILN_RETURN_IF_ERROR(model->run(inputs, outputs));
    if (i >= 20) ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }
  return percentile(ms, 0.5);
}

int usage(const std::string& message) {
  std::fprintf(stderr,
               "load_test: %s\nusage: load_test --model=NAME [--host=127.0.0.1] [--port=8000] [--clients=1,8,64] "
               "[--requests=10000] [--rows=1] [--time-limit-s=300] [--artifact=M.kiln] [--model-threads=N]\n",
               message.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each line as it is done, also into a pipe
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    if (eq == std::string::npos) return usage("unknown flag '" + arg + "'");
    const std::string key = arg.substr(0, eq), value = arg.substr(eq + 1);
    try {
      if (key == "--host") f.host = value;
      else if (key == "--port") f.port = std::stoi(value);
      else if (key == "--model") f.model = value;
      else if (key == "--artifact") f.artifact = value;
      else if (key == "--requests") f.requests = std::stoll(value);
      else if (key == "--rows") f.rows = std::stoll(value);
      else if (key == "--time-limit-s") f.time_limit_s = std::stod(value);
      else if (key == "--model-threads") f.model_threads = std::stoi(value);
      else if (key == "--clients") {
        f.clients.clear();
        for (size_t at = 0; at <= value.size();) {
          const size_t comma = std::min(value.find(',', at), value.size());
          f.clients.push_back(std::stoi(value.substr(at, comma - at)));
          at = comma + 1;
        }
      } else {
        return usage("unknown flag '" + arg + "'");
      }
    } catch (const std::exception&) {
      return usage("'" + arg + "' needs a number");
    }
  }
  if (f.model.empty()) return usage("give --model=NAME");
  auto c = kiln::serving::HttpConnection::connect(f.host, f.port);
  if (!c.ok()) return std::fprintf(stderr, "load_test: %s\n", c.error().message.c_str()), 1;
  auto meta = c->request("GET", "/v2/models/" + f.model);
  if (!meta.ok() || meta->status != 200)
    return std::fprintf(stderr, "load_test: no model '%s': %s\n", f.model.c_str(),
                        meta.ok() ? meta->body.c_str() : meta.error().message.c_str()),
           1;
  const std::string body = request_body(json::parse(meta->body), f.rows);
  double run_ms = -1;
  if (!f.artifact.empty()) {
    auto median = runtime_median_ms(f);
    if (!median.ok()) return std::fprintf(stderr, "load_test: %s\n", median.error().message.c_str()), 1;
    run_ms = *median;
  }
  // A short warm-up, so that first-run costs (thread start-up, page faults) stay out.
  Flags warm = f;
  warm.requests = 200;
  run_round(warm, 4, body);
  std::printf("model %s, %lld rows per request, %zu-byte bodies%s\n", f.model.c_str(), static_cast<long long>(f.rows),
              body.size(), run_ms >= 0 ? (", runtime run median " + std::to_string(run_ms) + " ms").c_str() : "");
  std::printf("%8s %9s %7s %10s %9s %9s %9s %9s %12s\n", "clients", "requests", "failed", "req/s", "p50 ms", "p90 ms",
              "p99 ms", "max ms", "p50-run ms");
  int failures = 0;
  for (int clients : f.clients) {
    Round r = run_round(f, clients, body);
    const double p50 = percentile(r.latency_ms, 0.5), p90 = percentile(r.latency_ms, 0.9),
                 p99 = percentile(r.latency_ms, 0.99), max = percentile(r.latency_ms, 1.0);
    std::printf("%8d %9lld %7lld %10.0f %9.3f %9.3f %9.3f %9.3f %12s\n", clients, static_cast<long long>(r.sent),
                static_cast<long long>(r.failed), static_cast<double>(r.sent - r.failed) / r.seconds, p50, p90, p99,
                max, run_ms >= 0 ? std::to_string(p50 - run_ms).c_str() : "-");
    std::printf("JSON %s\n", json{{"model", f.model},
                                  {"clients", clients},
                                  {"requests", r.sent},
                                  {"failed", r.failed},
                                  {"seconds", r.seconds},
                                  {"throughput", static_cast<double>(r.sent - r.failed) / r.seconds},
                                  {"p50_ms", p50},
                                  {"p90_ms", p90},
                                  {"p99_ms", p99},
                                  {"max_ms", max},
                                  {"runtime_run_ms", run_ms}}
                                 .dump()
                                 .c_str());
    if (r.failed) std::printf("first failure: %s\n", r.first_failure.c_str());
    failures += r.failed > 0;
  }
  return failures ? 1 : 0;
}
