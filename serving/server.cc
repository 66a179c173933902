#include "serving/server.h"

#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <thread>

#include <httplib.h>

#include "base/parse_number.h"
#include "serving/metrics.h"
#include "serving/model_runner.h"
#include "serving/protocol.h"

namespace kiln::serving {

namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kJson = "application/json";

FailureCause cause_of(int status) {
  switch (status) {
    case kNotFound: return FailureCause::NotFound;
    case kPayloadTooLarge: return FailureCause::TooLarge;
    case kUnavailable: return FailureCause::Unavailable;
    case kInternalError: return FailureCause::RunFailed;
    default: return FailureCause::BadRequest;
  }
}

}  // namespace

class ServerImpl {
 public:
  ServerImpl(std::vector<ServedModel> models, const ServerOptions& options);
  void answer_error(httplib::Response& res, const Error& error, ModelMetrics& metrics) const;
  void infer(const httplib::Request& req, httplib::Response& res);
  ModelRunner* runner(const std::string& name) const;
  Error unknown_model(const std::string& name) const;
  // The error for a path naming a version other than a model's one ("1"), if it does.
  std::optional<Error> unknown_version(const httplib::Request& req) const;

  ServerOptions options;
  std::vector<std::string> names;
  Metrics metrics;
  std::vector<std::unique_ptr<ModelRunner>> runners;
  httplib::Server http;
  std::atomic<bool> stop_requested{false}, serving{false}, finished{false};
  int listening_socket = -1;
};

Status check_model_name(const std::string& name) {
  if (name.empty() || name.size() > 128)
    return make_error("serve: a model name has 1 to 128 characters; '" + name.substr(0, 128) + "' has " +
                      std::to_string(name.size()));
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-')
      return make_error("serve: the model name '" + name + "' has the character '" + std::string(1, c) +
                        "'; names take letters, digits, '_', '.' and '-'");
  return Status::Ok();
}

namespace {

std::vector<std::string> names_of(const std::vector<ServedModel>& models) {
  std::vector<std::string> names;
  for (const ServedModel& m : models) names.push_back(m.name);
  return names;
}

}  // namespace

ServerImpl::ServerImpl(std::vector<ServedModel> models, const ServerOptions& options_)
    : options(options_), names(names_of(models)), metrics(names) {
  for (ServedModel& m : models)
    runners.push_back(
        std::make_unique<ModelRunner>(m.name, std::move(m.model), options.max_batch_delay, metrics.of(m.name)));
}

ModelRunner* ServerImpl::runner(const std::string& name) const {
  for (const auto& r : runners)
    if (r->name() == name) return r.get();
  return nullptr;
}

Error ServerImpl::unknown_model(const std::string& name) const {
  std::string list;
  for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
  return http_error(kNotFound, "model '" + name + "' is not served here (models: " + list + ")");
}

std::optional<Error> ServerImpl::unknown_version(const httplib::Request& req) const {
  if (req.matches.size() < 3 || req.matches[2].length() == 0 || req.matches[2] == "1") return std::nullopt;
  return http_error(kNotFound, "model '" + std::string(req.matches[1]) + "' has no version '" +
                                   std::string(req.matches[2]) + "' (its versions: 1)");
}

void ServerImpl::answer_error(httplib::Response& res, const Error& error, ModelMetrics& m) const {
  const int status = error.code >= 400 && error.code < 600 ? error.code : kInternalError;
  res.status = status;
  res.set_content(error_json(error.message), kJson);
  m.failures[static_cast<size_t>(cause_of(status))].fetch_add(1, std::memory_order_relaxed);
}

void ServerImpl::infer(const httplib::Request& req, httplib::Response& res) {
  const Clock::time_point start = Clock::now();
  const std::string name = req.matches[1];
  ModelRunner* r = runner(name);
  ModelMetrics& m = metrics.of(r ? name : "");
  m.requests.fetch_add(1, std::memory_order_relaxed);
  auto answer = [&]() -> Status {
    if (!r) return unknown_model(name);
    if (auto e = unknown_version(req)) return *e;
    std::optional<uint64_t> json_bytes;
    if (req.has_header("Inference-Header-Content-Length")) {
      KILN_ASSIGN_OR_RETURN(json_bytes, parse_json_header_length(
                                            req.get_header_value("Inference-Header-Content-Length"), req.body.size()));
    }
    KILN_ASSIGN_OR_RETURN(InferRequest request, parse_infer_request(req.body, json_bytes));
    const std::vector<runtime::TensorInfo>& outputs = r->model().outputs();
    std::vector<std::pair<size_t, bool>> chosen;  // output position, binary
    for (const RequestOutput& o : request.outputs) {
      auto it = std::find_if(outputs.begin(), outputs.end(), [&](const auto& info) { return info.name == o.name; });
      if (it == outputs.end()) {
        std::string list;
        for (const runtime::TensorInfo& info : outputs) list += (list.empty() ? "" : ", ") + info.name;
        return http_error(kBadRequest,
                          "model '" + name + "' has no output '" + o.name + "' (its outputs: " + list + ")");
      }
      chosen.emplace_back(static_cast<size_t>(it - outputs.begin()), o.binary);
    }
    if (request.outputs.empty())
      for (size_t o = 0; o < outputs.size(); ++o) chosen.emplace_back(o, request.binary_outputs);
    KILN_ASSIGN_OR_RETURN(InferResult result, r->infer(request));
    std::vector<ResponseOutput> response;
    for (auto [o, binary] : chosen) {
      std::vector<int64_t> shape = outputs[o].shape;
      if (r->batch() > 0) shape[0] = result.rows;
      response.push_back({outputs[o].name, outputs[o].type, std::move(shape), result.outputs[o], binary});
    }
    ResponseBody body = write_infer_response(name, request.id, response);
    if (body.json_bytes) {
      res.set_header("Inference-Header-Content-Length", std::to_string(*body.json_bytes));
      res.set_content(std::move(body.body), "application/octet-stream");
    } else {
      res.set_content(std::move(body.body), kJson);
    }
    return Status::Ok();
  };
  Status answered = answer();
  if (!answered.ok()) answer_error(res, answered.error(), m);
  m.request_seconds.observe(std::chrono::duration<double>(Clock::now() - start).count());
}

namespace {

Status check_options(const std::vector<ServedModel>& models, const ServerOptions& options) {
  if (models.empty()) return make_error("serve: no models to serve");
  for (size_t i = 0; i < models.size(); ++i) {
    KILN_RETURN_IF_ERROR(check_model_name(models[i].name));
    if (!models[i].model) return make_error("serve: model '" + models[i].name + "' is null");
    for (size_t j = 0; j < i; ++j)
      if (models[j].name == models[i].name)
        return make_error("serve: two models are named '" + models[i].name + "'; name one NAME=FILE.kiln");
  }
  if (options.threads < 1 || options.threads > 4096)
    return make_error("serve: --threads must be from 1 to 4096, got " + std::to_string(options.threads));
  if (options.port < 0 || options.port > 65535)
    return make_error("serve: --port must be from 0 to 65535, got " + std::to_string(options.port));
  if (options.max_batch_delay.count() < 0 || options.max_batch_delay > std::chrono::seconds(10))
    return make_error("serve: --max-batch-delay-us must be from 0 to 10000000, got " +
                      std::to_string(options.max_batch_delay.count()));
  if (options.max_body_bytes < 1) return make_error("serve: --max-body-bytes must be at least 1");
  if (options.idle_timeout.count() < 1) return make_error("serve: the idle timeout must be at least 1 ms");
  return Status::Ok();
}

// Threads, limits and timeouts of the HTTP server.
void configure(ServerImpl& s) {
  httplib::Server& http = s.http;
  const size_t threads = static_cast<size_t>(s.options.threads);
  http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http.set_payload_max_length(s.options.max_body_bytes);
  // Clients keep their connections (and the thread serving each) until idle_timeout.
  http.set_keep_alive_max_count(1'000'000);
  http.set_keep_alive_timeout(std::max<time_t>(1, static_cast<time_t>((s.options.idle_timeout.count() + 999) / 1000)));
  http.set_read_timeout(s.options.idle_timeout);
  http.set_write_timeout(s.options.idle_timeout);
  http.set_tcp_nodelay(true);
  // httplib listens with a backlog of 5: more clients than that connecting at once would
  // have their SYNs dropped and retried a second later. Its socket hook sees the listening
  // socket before it binds, so bind() can listen again on it with the system's backlog.
  // SO_REUSEADDR only, where httplib's default also sets SO_REUSEPORT: a second server on
  // a port in use would start and take half the connections.
  http.set_socket_options([&s](int socket) {
    int yes = 1;
    ::setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    s.listening_socket = socket;
  });
}

// A request whose body's framing the server refuses before reading it: httplib reads a
// chunked body whole whatever --max-body-bytes says, waits for the connection to close
// for a body of no stated length, reads '-1' or 'abc' as a length, and takes the first of
// two Content-Length headers that disagree (a proxy in front may take the other).
std::optional<Error> refused_framing(const httplib::Request& req, uint64_t max_body_bytes) {
  if (req.has_header("Transfer-Encoding"))
    return http_error(kLengthRequired, "the body must come with a Content-Length; Transfer-Encoding '" +
                                           req.get_header_value("Transfer-Encoding") + "' is not accepted");
  const size_t lengths = req.get_header_value_count("Content-Length");
  if (lengths == 0)
    return req.method == "POST" || req.method == "PUT"
               ? std::optional(http_error(kLengthRequired, "a " + req.method + " request needs a Content-Length"))
               : std::nullopt;
  const std::string length = req.get_header_value("Content-Length");
  for (size_t i = 1; i < lengths; ++i)
    if (req.get_header_value("Content-Length", i) != length)
      return http_error(kBadRequest, "the request has Content-Lengths that disagree ('" + length + "' and '" +
                                         req.get_header_value("Content-Length", i) + "')");
  const std::optional<int64_t> bytes = length.starts_with('-') ? std::nullopt : parse_integer(length);
  if (!bytes)
    return http_error(kBadRequest, "the Content-Length '" + length.substr(0, 40) + "' is not a count of bytes");
  if (static_cast<uint64_t>(*bytes) > max_body_bytes)
    return http_error(kPayloadTooLarge, "the body of " + length + " bytes is over the server's limit of " +
                                            std::to_string(max_body_bytes) + " bytes (--max-body-bytes)");
  return std::nullopt;
}

void json_answer(httplib::Response& res, int status, std::string body) {
  res.status = status;
  res.set_content(std::move(body), kJson);
}

void add_routes(ServerImpl& s) {
  httplib::Server& http = s.http;
  http.Get("/v2/health/live",
           [](const httplib::Request&, httplib::Response& res) { json_answer(res, kOk, "{\"live\":true}"); });
  http.Get("/v2/health/ready", [&s](const httplib::Request&, httplib::Response& res) {
    const bool ready = !s.stop_requested.load();
    json_answer(res, ready ? kOk : kUnavailable, ready ? "{\"ready\":true}" : "{\"ready\":false}");
  });
  http.Get("/v2",
           [](const httplib::Request&, httplib::Response& res) { json_answer(res, kOk, server_metadata_json()); });
  http.Get(R"(/v2/models/([^/]+)(?:/versions/([^/]+))?)", [&s](const httplib::Request& req, httplib::Response& res) {
    const std::string name = req.matches[1];
    ModelRunner* r = s.runner(name);
    if (!r) return s.answer_error(res, s.unknown_model(name), s.metrics.of(""));
    if (auto e = s.unknown_version(req)) return s.answer_error(res, *e, s.metrics.of(""));
    json_answer(res, kOk, model_metadata_json(name, r->model()));
  });
  // A served model's name is only letters, digits, '_', '.' and '-': no JSON escapes.
  http.Get(R"(/v2/models/([^/]+)(?:/versions/([^/]+))?/ready)",
           [&s](const httplib::Request& req, httplib::Response& res) {
             const std::string name = req.matches[1];
             if (!s.runner(name)) return s.answer_error(res, s.unknown_model(name), s.metrics.of(""));
             if (auto e = s.unknown_version(req)) return s.answer_error(res, *e, s.metrics.of(""));
             const bool ready = !s.stop_requested.load();
             json_answer(res, ready ? kOk : kUnavailable,
                         "{\"name\":\"" + name + "\",\"ready\":" + (ready ? "true" : "false") + "}");
           });
  http.Post(R"(/v2/models/([^/]+)(?:/versions/([^/]+))?/infer)",
            [&s](const httplib::Request& req, httplib::Response& res) { s.infer(req, res); });
  http.Get("/metrics", [&s](const httplib::Request&, httplib::Response& res) {
    res.set_content(s.metrics.text(), "text/plain; version=0.0.4");
  });
}

// Errors httplib answers itself (no route, a body over the limit, a request it cannot
// read) get a JSON body too; ones a handler answered keep theirs. An exception a handler
// throws (an allocation that fails) is a 500 with its message.
void add_error_handlers(ServerImpl& s) {
  // The connection closes after such an answer: the body it did not read is not a request.
  // The connection closes after such an answer: the body it did not read is no request.
  // httplib keeps a connection open whatever the response's Connection header says, and
  // closes it where writing a response fails: the answer's provider writes it all, then
  // reports a failure.
  s.http.set_pre_routing_handler([&s](const httplib::Request& req, httplib::Response& res) {
    std::optional<Error> refused = refused_framing(req, s.options.max_body_bytes);
    if (!refused) return httplib::Server::HandlerResponse::Unhandled;
    s.answer_error(res, *refused, s.metrics.of(""));
    res.set_header("Connection", "close");
    auto answer = std::make_shared<std::string>(std::move(res.body));
    res.body.clear();
    res.set_content_provider(answer->size(), kJson, [answer](size_t offset, size_t length, httplib::DataSink& sink) {
      sink.write(answer->data() + offset, length);
      return false;
    });
    return httplib::Server::HandlerResponse::Handled;
  });
  s.http.set_error_handler(
      httplib::Server::HandlerWithResponse([&s](const httplib::Request& req, httplib::Response& res) {
        // An answer of a handler's own: in its body, or (a refused body's framing) written
        // by a provider, with the connection to close.
        if (!res.body.empty() || res.has_header("Connection")) return httplib::Server::HandlerResponse::Unhandled;
        std::string message;
        if (res.status == kNotFound) message = "no such endpoint: " + req.method + " " + req.path;
        else if (res.status == kPayloadTooLarge)
          message = "the body is over the server's limit of " + std::to_string(s.options.max_body_bytes) +
                    " bytes (--max-body-bytes)";
        else if (res.status == 414)
          message = "the request's URL is over " + std::to_string(CPPHTTPLIB_REQUEST_URI_MAX_LENGTH) + " bytes";
        else if (res.status == kBadRequest)
          message =
              "the server could not read an HTTP request here: a malformed request line or header, or a body "
              "that stops short of its Content-Length";
        else message = "the request failed with HTTP status " + std::to_string(res.status);
        s.answer_error(res, http_error(res.status, message), s.metrics.of(""));
        return httplib::Server::HandlerResponse::Handled;
      }));
  s.http.set_exception_handler([&s](const httplib::Request&, httplib::Response& res, std::exception_ptr error) {
    std::string what = "unknown exception";
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    s.answer_error(res, http_error(kInternalError, "the server failed: " + what), s.metrics.of(""));
  });
}

}  // namespace

Result<std::unique_ptr<Server>> Server::create(std::vector<ServedModel> models, const ServerOptions& options) {
  KILN_RETURN_IF_ERROR(check_options(models, options));
  auto impl = std::make_unique<ServerImpl>(std::move(models), options);
  configure(*impl);
  add_routes(*impl);
  add_error_handlers(*impl);
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Server::Server(std::unique_ptr<ServerImpl> impl) : impl_(std::move(impl)) {}

Server::~Server() { stop(); }

Result<int> Server::bind() {
  const ServerOptions& o = impl_->options;
  int port = o.port;
  if (o.port == 0) {
    port = impl_->http.bind_to_any_port(o.host);
    if (port < 0) return make_error("serve: cannot listen on " + o.host + " (is it an address of this machine?)");
  } else if (!impl_->http.bind_to_port(o.host, o.port)) {
    return make_error("serve: cannot listen on " + o.host + ":" + std::to_string(o.port) +
                      " (is the port in use, or the host not an address of this machine?)");
  }
  if (impl_->listening_socket < 0 || ::listen(impl_->listening_socket, SOMAXCONN) != 0)
    return make_error("serve: cannot set the listening socket's backlog: " + std::string(std::strerror(errno)));
  return port;
}

Status Server::serve() {
  impl_->serving = true;
  bool listened = true;
  if (!impl_->stop_requested) listened = impl_->http.listen_after_bind();
  impl_->finished = true;
  if (!listened && !impl_->stop_requested) return make_error("serve: the listening socket failed; bind() it first");
  return Status::Ok();
}

void Server::stop() {
  impl_->stop_requested = true;
  if (!impl_->serving) return;
  // serve() may not have started listening yet; it stops at once when it does.
  while (!impl_->finished && !impl_->http.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  impl_->http.stop();
}

std::string Server::metrics_text() const { return impl_->metrics.text(); }

}  // namespace kiln::serving
