// Models compiled for the serving tests, and a server on a free loopback port.
#pragma once

#include <cmath>
#include <thread>

#include <catch2/catch.hpp>

#include "compiler/compile.h"
#include "ir/parser.h"
#include "runtime/model.h"
#include "serving/http_client.h"
#include "serving/server.h"

namespace kiln::testing {

/// Compiles text IR for the CPU with the given weights, optionally marking its batch.
inline std::shared_ptr<runtime::Model> compile_text(std::string_view text, std::map<std::string, ir::Tensor> weights,
                                                    bool batch) {
  auto graph = ir::parse(text);
  REQUIRE(graph.ok());
  CompileOptions options;
  options.weights = std::move(weights);
  options.batch = batch;
  auto artifact = compile_to_artifact(*graph, options);
  if (!artifact.ok()) FAIL(artifact.error().message);
  auto model = runtime::Model::load_bytes(std::move(*artifact));
  if (!model.ok()) FAIL(model.error().message);
  return *model;
}

inline ir::Tensor wave(ir::Shape shape, double phase) {
  std::vector<double> v(static_cast<size_t>(ir::num_elements(shape)));
  for (size_t k = 0; k < v.size(); ++k) v[k] = std::sin(0.37 * static_cast<double>(k) + phase);
  return ir::Tensor::from_doubles({ir::DType::F32, std::move(shape)}, v);
}

/// relu(x @ w + b) on x: f32[rows,16], giving y: f32[rows,4].
inline std::shared_ptr<runtime::Model> mlp_model(int64_t rows, bool batch) {
  const std::string text = "graph @mlp(%x: f32[" + std::to_string(rows) +
                           ",16], param %w: f32[16,4], param %b: f32[4]) {\n"
                           "  %h: f32[" +
                           std::to_string(rows) +
                           ",4] = matmul(%x, %w)\n"
                           "  %bb: f32[" +
                           std::to_string(rows) + ",4] = broadcast(%b) {shape=[" + std::to_string(rows) +
                           ",4], dims=[1]}\n"
                           "  %s: f32[" +
                           std::to_string(rows) +
                           ",4] = add(%h, %bb)\n"
                           "  %y: f32[" +
                           std::to_string(rows) +
                           ",4] = relu(%s)\n"
                           "  return %y\n}\n";
  return compile_text(text, {{"w", wave({16, 4}, 0.5)}, {"b", wave({4}, 1.5)}}, batch);
}

/// Several element types in and out, no batch: neg(x) f32, k*k i32, x > 0 bool.
inline std::shared_ptr<runtime::Model> typed_model() {
  return compile_text(R"(graph @typed(%x: f32[2,2], %k: i32[3]) {
  %n: f32[2,2] = neg(%x)
  %kk: i32[3] = mul(%k, %k)
  %z: f32[2,2] = constant() {value=[[0.0, 0.0], [0.0, 0.0]]}
  %p: bool[2,2] = gt(%x, %z)
  return %n, %kk, %p
}
)",
                      {}, false);
}

/// A server of `models` on 127.0.0.1 at a free port, serving on a thread of its own.
class RunningServer {
 public:
  RunningServer(std::vector<serving::ServedModel> models, serving::ServerOptions options = {}) {
    options.port = 0;
    auto server = serving::Server::create(std::move(models), options);
    if (!server.ok()) FAIL(server.error().message);
    server_ = std::move(*server);
    auto port = server_->bind();
    if (!port.ok()) FAIL(port.error().message);
    port_ = *port;
    thread_ = std::thread([this] { served_ = server_->serve(); });
  }
  ~RunningServer() { stop(); }
  void stop() {
    server_->stop();
    if (thread_.joinable()) thread_.join();
  }
  int port() const { return port_; }
  serving::Server& server() { return *server_; }
  serving::HttpConnection connect() const {
    auto c = serving::HttpConnection::connect("127.0.0.1", port_, std::chrono::seconds(20));
    if (!c.ok()) FAIL(c.error().message);
    return std::move(*c);
  }
  const Status& served() const { return served_; }

 private:
  std::unique_ptr<serving::Server> server_;
  int port_ = 0;
  std::thread thread_;
  Status served_;
};

}  // namespace kiln::testing
