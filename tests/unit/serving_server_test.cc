// The server end to end on loopback: endpoints, errors as the client reads them, binary
// tensors, batching under concurrent clients, metrics and a graceful stop.
#include <atomic>
#include <cstring>

#include <nlohmann/json.hpp>

#include "tests/unit/serving_util.h"

namespace kiln::testing {
namespace {

using nlohmann::json;
using serving::HttpResponse;

HttpResponse get(serving::HttpConnection& c, const std::string& path) {
  auto r = c.request("GET", path);
  if (!r.ok()) FAIL(r.error().message);
  return *r;
}

HttpResponse post(serving::HttpConnection& c, const std::string& path, const std::string& body,
                  const std::map<std::string, std::string>& headers = {}) {
  auto r = c.request("POST", path, body, headers);
  if (!r.ok()) FAIL(r.error().message);
  return *r;
}

std::string error_of(const HttpResponse& r) { return json::parse(r.body).at("error").get<std::string>(); }

// x rows as JSON data, row i of request `seed`.
std::vector<float> rows_of(int64_t rows, int seed) {
  std::vector<float> x(static_cast<size_t>(rows * 16));
  for (size_t k = 0; k < x.size(); ++k) x[k] = static_cast<float>(std::sin(0.11 * static_cast<double>(k) + seed));
  return x;
}

std::string infer_body(int64_t rows, const std::vector<float>& x) {
  return json{{"inputs", {{{"name", "x"}, {"shape", {rows, 16}}, {"datatype", "FP32"}, {"data", x}}}}}.dump();
}

// The model's own answer for these rows: one run of the whole batch, zero rows after.
std::vector<float> direct(const runtime::Model& model, int64_t rows, const std::vector<float>& x) {
  const int64_t batch = model.inputs()[0].shape[0];
  std::vector<float> in(static_cast<size_t>(batch * 16), 0.0f), out(static_cast<size_t>(batch * 4));
  std::copy(x.begin(), x.end(), in.begin());
  auto bytes = [](auto& v) { return std::span(reinterpret_cast<uint8_t*>(v.data()), v.size() * sizeof(v[0])); };
  Status ran = model.run(std::map<std::string, std::span<const uint8_t>>{{"x", bytes(in)}},
                         std::map<std::string, std::span<uint8_t>>{{"y", bytes(out)}});
  REQUIRE(ran.ok());
  out.resize(static_cast<size_t>(rows * 4));
  return out;
}

TEST_CASE("health, metadata and unknown routes", "[serving]") {
  RunningServer s({{"mlp", mlp_model(8, true)}, {"typed", typed_model()}});
  serving::HttpConnection c = s.connect();
  CHECK(get(c, "/v2/health/live").body == R"({"live":true})");
  CHECK(get(c, "/v2/health/ready").status == 200);
  CHECK(get(c, "/v2").body == R"({"extensions":["binary_tensor_data"],"name":"kiln","version":"0.1.0"})");
  CHECK(get(c, "/v2/models/mlp").body ==
        R"({"inputs":[{"datatype":"FP32","name":"x","shape":[-1,16]}],"max_batch_size":8,"name":"mlp",)"
        R"("outputs":[{"datatype":"FP32","name":"y","shape":[-1,4]}],"platform":"kiln_cpu-x86_64","versions":["1"]})");
  CHECK(json::parse(get(c, "/v2/models/typed").body)["outputs"][2] ==
        json{{"name", "p"}, {"datatype", "BOOL"}, {"shape", {2, 2}}});
  CHECK(get(c, "/v2/models/typed/ready").body == R"({"name":"typed","ready":true})");
  // Every model is version 1 (its metadata's "versions"): paths may name it.
  CHECK(get(c, "/v2/models/typed/versions/1/ready").body == R"({"name":"typed","ready":true})");
  CHECK(get(c, "/v2/models/mlp/versions/1").body == get(c, "/v2/models/mlp").body);
  HttpResponse version = get(c, "/v2/models/mlp/versions/2");
  CHECK(version.status == 404);
  CHECK(error_of(version) == "model 'mlp' has no version '2' (its versions: 1)");
  HttpResponse missing = get(c, "/v2/models/nope");
  CHECK(missing.status == 404);
  CHECK(error_of(missing) == "model 'nope' is not served here (models: mlp, typed)");
  HttpResponse route = get(c, "/v3/whatever");
  CHECK(route.status == 404);
  CHECK(error_of(route) == "no such endpoint: GET /v3/whatever");
  CHECK(route.headers["content-type"] == "application/json");
}

TEST_CASE("inference in JSON and in binary, every element type", "[serving]") {
  std::shared_ptr<runtime::Model> mlp = mlp_model(8, true);
  RunningServer s({{"mlp", mlp}, {"typed", typed_model()}});
  serving::HttpConnection c = s.connect();
  const std::vector<float> x = rows_of(3, 1);
  HttpResponse r = post(c, "/v2/models/mlp/infer", infer_body(3, x));
  REQUIRE(r.status == 200);
  CHECK(post(c, "/v2/models/mlp/versions/1/infer", infer_body(3, x)).body == r.body);
  json answer = json::parse(r.body);
  CHECK(answer["model_name"] == "mlp");
  CHECK(answer["outputs"][0]["shape"] == json{3, 4});
  CHECK(answer["outputs"][0]["data"].get<std::vector<float>>() == direct(*mlp, 3, x));

  r = post(
      c, "/v2/models/typed/infer",
      R"({"id":"t","inputs":[{"name":"x","shape":[2,2],"datatype":"FP32","data":[1,-2,0,3.5]},)"
      R"({"name":"k","shape":[3],"datatype":"INT32","data":[3,-4,46340]}],"outputs":[{"name":"p"},{"name":"kk"}]})");
  REQUIRE(r.status == 200);
  CHECK(r.body ==
        R"({"model_name":"typed","id":"t","outputs":[{"name":"p","datatype":"BOOL","shape":[2,2],)"
        R"("data":[true,false,false,true]},{"name":"kk","datatype":"INT32","shape":[3],"data":[9,16,2147395600]}]})");

  // Binary in, binary out (Triton's extension), with the same numbers.
  std::string header = json{{"inputs",
                             {{{"name", "x"},
                               {"shape", {3, 16}},
                               {"datatype", "FP32"},
                               {"parameters", {{"binary_data_size", 3 * 16 * 4}}}}}},
                            {"outputs", {{{"name", "y"}, {"parameters", {{"binary_data", true}}}}}}}
                           .dump();
  std::string body = header + std::string(reinterpret_cast<const char*>(x.data()), x.size() * 4);
  r = post(c, "/v2/models/mlp/infer", body, {{"Inference-Header-Content-Length", std::to_string(header.size())}});
  REQUIRE(r.status == 200);
  CHECK(r.headers["content-type"] == "application/octet-stream");
  const size_t json_bytes = std::stoul(r.headers.at("inference-header-content-length"));
  CHECK(json::parse(r.body.substr(0, json_bytes))["outputs"][0]["parameters"]["binary_data_size"] == 48);
  std::vector<float> y(12);
  REQUIRE(r.body.size() - json_bytes == 48);
  std::memcpy(y.data(), r.body.data() + json_bytes, 48);
  CHECK(y == direct(*mlp, 3, x));
}

TEST_CASE("a value returned twice is answered twice, whole and batched", "[serving]") {
  const char* text = R"(graph @dup(%x: f32[2,2]) {
  %y: f32[2,2] = neg(%x)
  return %y, %y
}
)";
  RunningServer s({{"dup", compile_text(text, {}, false)}, {"dupb", compile_text(text, {}, true)}});
  serving::HttpConnection c = s.connect();
  for (const char* model : {"dup", "dupb"}) {
    INFO(model);
    HttpResponse r = post(c, std::string("/v2/models/") + model + "/infer",
                          R"({"inputs":[{"name":"x","shape":[2,2],"datatype":"FP32","data":[1,2,3,4]}]})");
    REQUIRE(r.status == 200);
    json answer = json::parse(r.body);
    REQUIRE(answer["outputs"].size() == 2);
    for (int o : {0, 1})
      CHECK(answer["outputs"][o]["data"].get<std::vector<float>>() == std::vector<float>{-1, -2, -3, -4});
  }
}

TEST_CASE("bad requests get 4xx with what is wrong, and the server goes on", "[serving]") {
  serving::ServerOptions options;
  options.max_body_bytes = 4096;
  RunningServer s({{"mlp", mlp_model(8, true)}, {"typed", typed_model()}}, options);
  serving::HttpConnection c = s.connect();
  std::string row = "[";
  for (int k = 0; k < 15; ++k) row += "0,";
  row += "1]";
  const std::tuple<std::string, std::string, int, std::string> cases[] = {
      {"mlp", R"({"inputs":[{"name":"z","shape":[1,16],"datatype":"FP32","data":)" + row + "}]}", 400,
       "model 'mlp' has no input 'z' (its inputs: x)"},
      {"mlp", R"({"inputs":[]})", 400, "input 'x' is missing (model 'mlp' takes FP32 [N,16])"},
      {"mlp", R"({"inputs":[{"name":"x","shape":[1,16],"datatype":"FP64","data":)" + row + "}]}", 400,
       "input 'x' is FP64, but model 'mlp' takes FP32 [N,16], N from 1 to 8"},
      {"mlp", R"({"inputs":[{"name":"x","shape":[16,1],"datatype":"FP32","data":)" + row + "}]}", 400,
       "input 'x' has shape [16,1], but model 'mlp' takes FP32 [N,16], N from 1 to 8"},
      {"mlp", R"({"inputs":[{"name":"x","shape":[9,16],"datatype":"FP32","parameters":{"binary_data_size":576}}]})",
       400, "input 'x' has a binary_data_size of 576 bytes, past the 0 bytes of binary data left in the body"},
      {"mlp",
       R"({"inputs":[{"name":"x","shape":[1,16],"datatype":"FP32","data":)" + row + R"(}],"outputs":[{"name":"q"}]})",
       400, "model 'mlp' has no output 'q' (its outputs: y)"},
      {"typed",
       R"({"inputs":[{"name":"x","shape":[2,2],"datatype":"FP32","data":[1,2,3,4]},{"name":"k","shape":[1,3],"datatype":"INT32","data":[1,2,3]}]})",
       400, "input 'k' has shape [1,3], but model 'typed' takes INT32 [3]"},
      {"nope", "{}", 404, "model 'nope' is not served here (models: mlp, typed)"},
      {"mlp", std::string(5000, ' '), 413,
       "the body of 5000 bytes is over the server's limit of 4096 bytes (--max-body-bytes)"},
  };
  for (const auto& [model, body, status, message] : cases) {
    INFO(body);
    HttpResponse r = post(c, "/v2/models/" + model + "/infer", body);
    CHECK(r.status == status);
    CHECK(error_of(r) == message);
    if (!c.open()) c = s.connect();  // 413 closes the connection
  }
  HttpResponse length = post(c, "/v2/models/mlp/infer", "{}", {{"Inference-Header-Content-Length", "12"}});
  CHECK(length.status == 400);
  CHECK(error_of(length) == "the Inference-Header-Content-Length of 12 bytes points past the body's 2");
  // A request of 9 rows: the batch holds 8.
  HttpResponse rows = post(c, "/v2/models/mlp/infer", infer_body(9, rows_of(9, 0)));
  CHECK(error_of(rows) == "input 'x' has shape [9,16], but model 'mlp' takes FP32 [N,16], N from 1 to 8");
  CHECK(post(c, "/v2/models/mlp/infer", infer_body(2, rows_of(2, 0))).status == 200);

  const std::string metrics = get(c, "/metrics").body;
  CHECK_THAT(metrics, Catch::Contains("kiln_requests_total{model=\"mlp\"} 9\n"));
  CHECK_THAT(metrics, Catch::Contains("kiln_request_failures_total{model=\"mlp\",cause=\"bad_request\"} 8\n"));
  CHECK_THAT(metrics, Catch::Contains("kiln_request_failures_total{model=\"\",cause=\"not_found\"} 1\n"));
  CHECK_THAT(metrics, Catch::Contains("kiln_request_failures_total{model=\"\",cause=\"too_large\"} 1\n"));
  CHECK_THAT(metrics, Catch::Contains("kiln_batch_rows_count{model=\"mlp\"} 1\n"));
  CHECK_THAT(metrics, Catch::Contains("# TYPE kiln_request_duration_seconds histogram\n"));
}

TEST_CASE("bodies are framed by one Content-Length within the limit, or refused before they are read", "[serving]") {
  serving::ServerOptions options;
  options.max_body_bytes = 4096;
  RunningServer s({{"mlp", mlp_model(8, true)}}, options);
  const std::string head = "POST /v2/models/mlp/infer HTTP/1.1\r\nHost: kiln\r\n";
  const std::pair<std::string, std::string> cases[] = {
      {head + "Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
       "411 the body must come with a Content-Length; Transfer-Encoding 'chunked' is not accepted"},
      {head + "\r\n{}", "411 a POST request needs a Content-Length"},
      {head + "Content-Length: 2\r\nContent-Length: 0\r\n\r\n{}",
       "400 the request has Content-Lengths that disagree ('2' and '0')"},
      {head + "Content-Length: -1\r\n\r\n{}", "400 the Content-Length '-1' is not a count of bytes"},
      {head + "Content-Length: 0x10\r\n\r\n{}", "400 the Content-Length '0x10' is not a count of bytes"},
      {head + "Content-Length: 99999999999\r\n\r\n{}",
       "413 the body of 99999999999 bytes is over the server's limit of 4096 bytes (--max-body-bytes)"},
  };
  for (const auto& [request, answer] : cases) {
    INFO(request);
    serving::HttpConnection c = s.connect();
    REQUIRE(c.send_raw(request).ok());
    auto r = c.read_response();
    REQUIRE(r.ok());
    CHECK(std::to_string(r->status) + " " + error_of(*r) == answer);
    CHECK(r->headers["connection"] == "close");
    // The connection is closed: a request written after the answer is not answered (the
    // body the server did not read would have been read as one).
    (void)c.send_raw("GET /v2/health/live HTTP/1.1\r\nHost: kiln\r\n\r\n");
    CHECK(!c.read_response().ok());
  }
  serving::HttpConnection c = s.connect();
  CHECK(post(c, "/v2/models/mlp/infer", infer_body(1, rows_of(1, 0))).status == 200);
}

TEST_CASE("concurrent requests are packed into batches and each gets its own rows", "[serving]") {
  std::shared_ptr<runtime::Model> mlp = mlp_model(8, true);
  serving::ServerOptions options;
  options.max_batch_delay = std::chrono::milliseconds(2);
  RunningServer s({{"mlp", mlp}}, options);
  constexpr int kClients = 12, kRequests = 20;
  std::atomic<int> wrong{0}, failed{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < kClients; ++t)
    clients.emplace_back([&, t] {
      auto c = serving::HttpConnection::connect("127.0.0.1", s.port());
      if (!c.ok()) return void(failed += kRequests);
      for (int i = 0; i < kRequests; ++i) {
        const int64_t rows = 1 + (t + i) % 3;
        const std::vector<float> x = rows_of(rows, t * 100 + i);
        auto r = c->request("POST", "/v2/models/mlp/infer", infer_body(rows, x));
        if (!r.ok() || r->status != 200) {
          ++failed;
          continue;
        }
        const std::vector<float> y = json::parse(r->body)["outputs"][0]["data"].get<std::vector<float>>();
        if (y != direct(*mlp, rows, x)) ++wrong;
      }
    });
  for (std::thread& t : clients) t.join();
  CHECK(failed == 0);
  CHECK(wrong == 0);
  // Runs took more than one request's rows at a time.
  serving::HttpConnection c = s.connect();
  const std::string metrics = get(c, "/metrics").body;
  const size_t at = metrics.find("kiln_batch_rows_count{model=\"mlp\"} ");
  REQUIRE(at != std::string::npos);
  const int runs = std::stoi(metrics.substr(at + 35));
  INFO(metrics.substr(at, 60));
  CHECK(runs < kClients * kRequests);
}

TEST_CASE("stop finishes the requests in flight, then serve returns", "[serving]") {
  auto s = std::make_unique<RunningServer>(std::vector<serving::ServedModel>{{"mlp", mlp_model(8, true)}});
  std::atomic<int> ok{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t)
    clients.emplace_back([&] {
      auto c = serving::HttpConnection::connect("127.0.0.1", s->port());
      if (!c.ok()) return;
      auto r = c->request("POST", "/v2/models/mlp/infer", infer_body(1, rows_of(1, 0)));
      if (r.ok() && r->status == 200) ++ok;
    });
  for (std::thread& t : clients) t.join();
  s->stop();
  CHECK(ok == 4);
  CHECK(s->served().ok());
  // Nothing listens any more.
  CHECK(!serving::HttpConnection::connect("127.0.0.1", s->port()).ok());
}

TEST_CASE("server options and model names are checked", "[serving]") {
  auto model = mlp_model(2, false);
  auto error = [&](std::vector<serving::ServedModel> models, serving::ServerOptions options = {}) {
    auto s = serving::Server::create(std::move(models), options);
    return s.ok() ? std::string("(created)") : s.error().message;
  };
  CHECK(error({}) == "serve: no models to serve");
  CHECK(error({{"a b", model}}) ==
        "serve: the model name 'a b' has the character ' '; names take letters, digits, '_', '.' and '-'");
  CHECK(error({{"", model}}) == "serve: a model name has 1 to 128 characters; '' has 0");
  CHECK(error({{"m", model}, {"m", model}}) == "serve: two models are named 'm'; name one NAME=FILE.kiln");
  serving::ServerOptions threads;
  threads.threads = 0;
  CHECK(error({{"m", model}}, threads) == "serve: --threads must be from 1 to 4096, got 0");
}

}  // namespace
}  // namespace kiln::testing
