// An HTTP server of compiled models speaking the KServe v2 inference protocol, with
// Triton's binary tensor extension, health, metadata and Prometheus metrics
// (docs/serving.md). A library on the runtime alone: a C++ service embeds it as
// `kiln serve` does.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "runtime/model.h"

namespace kiln::serving {

struct ServerOptions {
  std::string host = "127.0.0.1";
  /// 0: any free port (bind() says which).
  int port = 8000;
  /// HTTP worker threads. Each serves one open connection at a time (its requests in
  /// turn, kept alive between them), so this is how many clients are served at once.
  int threads = 64;
  /// How long the first request of a batch waits for more rows (batched models only).
  std::chrono::microseconds max_batch_delay{0};
  /// Bodies over this are refused with 413 before they are read.
  uint64_t max_body_bytes = uint64_t{64} << 20;
  /// A request stalled this long (a body that stops short of its Content-Length) gets
  /// 400; a connection idle this long between requests (rounded up to whole seconds)
  /// closes.
  std::chrono::milliseconds idle_timeout{5000};
};

/// A model the server serves, under `name` (the URL's {name}).
struct ServedModel {
  std::string name;
  std::shared_ptr<const runtime::Model> model;
};

/// Checks a model name: 1 to 128 characters from [A-Za-z0-9_.-], so that it is one path
/// segment of a URL and a Prometheus label value as it is.
Status check_model_name(const std::string& name);

class ServerImpl;

class Server {
 public:
  /// Fails on an invalid or repeated model name or an option out of range.
  static Result<std::unique_ptr<Server>> create(std::vector<ServedModel> models, const ServerOptions& options);
  ~Server();

  /// Binds the listening socket; returns its port.
  Result<int> bind();
  /// Serves until stop(): then stops accepting, finishes the requests in flight (and the
  /// batches they wait for), and returns.
  Status serve();
  /// Thread-safe; may be called before serve() runs, or from a signal-handling thread.
  void stop();
  /// The Prometheus exposition GET /metrics answers.
  std::string metrics_text() const;

 private:
  explicit Server(std::unique_ptr<ServerImpl> impl);
  std::unique_ptr<ServerImpl> impl_;
};

}  // namespace kiln::serving
