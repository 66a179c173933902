// kiln serve: loads artifacts and serves them with the KServe v2 protocol until SIGTERM
// or SIGINT, then finishes the requests in flight and exits 0.
#include "tools/kiln/serve.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <filesystem>
#include <thread>

#include <fmt/format.h>

#include "runtime/model.h"
#include "serving/server.h"
#include "tools/kiln/flags.h"

namespace kiln::cli {
namespace {

constexpr std::string_view kServeHelp = R"(usage: kiln serve MODEL.kiln [NAME=MODEL.kiln ...] [flags]

Serves compiled models over HTTP with the KServe v2 inference protocol (and Triton's
binary tensor extension) until SIGTERM or SIGINT; then stops accepting connections,
finishes the requests in flight and exits 0. A model's name is its file's stem unless
given as NAME=FILE.kiln. Models compiled with --batch pack the rows of concurrent
requests into one run. Endpoints: GET /v2/health/live, /v2/health/ready, /v2,
/v2/models/NAME, /v2/models/NAME/ready, /metrics; POST /v2/models/NAME/infer (each
model path also as /v2/models/NAME/versions/1/...). See docs/serving.md.

  --host=ADDRESS          the address to listen on (default: 127.0.0.1)
  --port=N                the port, or 0 for any free one (default: 8000); the line
                          'kiln serve: listening on http://HOST:PORT' says which
  --threads=N             HTTP worker threads, each serving one open connection at a
                          time (default: 64)
  --model-threads=N       threads each model's kernels split across (default: 0, one per
                          hardware thread)
  --max-batch-delay-us=N  how long the first request of a batch waits for more rows
                          (default: 0: a batch takes what queued while the last one ran)
  --max-body-bytes=N      larger request bodies are refused with 413, before they are
                          read; a body needs a Content-Length (default: 67108864)
  --idle-timeout-s=N      close connections idle or stalled this long (default: 5)
  -h, --help              this help
)";

struct ModelFile {
  std::string name, path;
};

// The server's errors start "serve: "; the command's own prefix takes its place.
std::string message_of(const Error& error) {
  std::string_view m = error.message;
  if (m.starts_with("serve: ")) m.remove_prefix(7);
  return std::string(m);
}

std::vector<ModelFile> model_files(const std::vector<std::string>& positional) {
  std::vector<ModelFile> files;
  for (const std::string& arg : positional) {
    const size_t eq = arg.find('=');
    if (eq != std::string::npos) files.push_back({arg.substr(0, eq), arg.substr(eq + 1)});
    else files.push_back({std::filesystem::path(arg).stem().string(), arg});
  }
  return files;
}

// SIGTERM and SIGINT write a byte to this pipe, whichever thread they land on (libraries
// such as OpenBLAS start threads before main, so blocking the signals cannot route them to
// one thread); a thread reading it stops the server.
int stop_pipe[2] = {-1, -1};

void on_stop_signal(int) {
  const char byte = 1;
  [[maybe_unused]] ssize_t written = write(stop_pipe[1], &byte, 1);
}

Status catch_stop_signals() {
  if (pipe(stop_pipe) != 0) return make_error(std::string("cannot make a pipe: ") + std::strerror(errno));
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  if (sigaction(SIGTERM, &action, nullptr) != 0 || sigaction(SIGINT, &action, nullptr) != 0)
    return make_error(std::string("cannot catch SIGTERM: ") + std::strerror(errno));
  return Status::Ok();
}

}  // namespace

int run_serve(std::span<char* const> argv) {
  constexpr std::string_view cmd = "kiln serve";
  constexpr FlagSpec specs[] = {{"host", true},
                                {"port", true},
                                {"threads", true},
                                {"model-threads", true},
                                {"max-batch-delay-us", true},
                                {"max-body-bytes", true},
                                {"idle-timeout-s", true}};
  auto args = parse_args(cmd, argv, specs);
  if (!args.ok()) return fail_located(args.error());
  if (args->help) {
    fmt::print("{}", kServeHelp);
    return 0;
  }
  if (args->positional.empty()) return fail(cmd, "no models to serve; see 'kiln serve --help'");
  serving::ServerOptions options;
  options.host = args->get("host", options.host);
  auto port = integer_flag(*args, "port", options.port, 0, 65535);
  auto threads = integer_flag(*args, "threads", options.threads, 1, 4096);
  auto model_threads = integer_flag(*args, "model-threads", 0, 0, runtime::kMaxThreads);
  auto delay = integer_flag(*args, "max-batch-delay-us", 0, 0, 10'000'000);
  auto body = integer_flag(*args, "max-body-bytes", static_cast<int64_t>(options.max_body_bytes), 1, int64_t{1} << 40);
  auto idle = integer_flag(*args, "idle-timeout-s", 5, 1, 3600);
  for (const auto* flag : {&port, &threads, &model_threads, &delay, &body, &idle})
    if (!flag->ok()) return fail(cmd, flag->error().message);
  options.port = static_cast<int>(*port);
  options.threads = static_cast<int>(*threads);
  options.max_batch_delay = std::chrono::microseconds(*delay);
  options.max_body_bytes = static_cast<uint64_t>(*body);
  options.idle_timeout = std::chrono::seconds(*idle);

  const std::vector<ModelFile> files = model_files(args->positional);
  std::vector<serving::ServedModel> models;
  runtime::Options load;
  load.threads = static_cast<int>(*model_threads);
  for (const ModelFile& f : files) {
    if (Status named = serving::check_model_name(f.name); !named.ok())
      return fail(cmd, fmt::format("{}: {} (give another as NAME={})", f.path, message_of(named.error()), f.path));
    auto model = runtime::Model::load_file(f.path, load);
    if (!model.ok()) return fail(cmd, fmt::format("model '{}': {}", f.name, model.error().message));
    models.push_back({f.name, std::move(*model)});
  }
  auto server = serving::Server::create(std::move(models), options);
  if (!server.ok()) return fail(cmd, message_of(server.error()));
  auto bound = (*server)->bind();
  if (!bound.ok()) return fail(cmd, message_of(bound.error()));
  for (const ModelFile& f : files) fmt::print("kiln serve: model '{}' from {}\n", f.name, f.path);
  fmt::print("kiln serve: listening on http://{}:{}\n", options.host, *bound);
  std::fflush(stdout);

  if (Status caught = catch_stop_signals(); !caught.ok()) return fail(cmd, caught.error().message);
  serving::Server* serving = server->get();
  std::thread waiter([serving] {
    char byte = 0;
    while (read(stop_pipe[0], &byte, 1) < 0 && errno == EINTR) {
    }
    serving->stop();
  });
  Status served = serving->serve();
  // serve() returns only after stop() unless the socket failed; wake the waiter then.
  if (!served.ok()) on_stop_signal(SIGTERM);
  waiter.join();
  if (!served.ok()) return fail(cmd, message_of(served.error()));
  fmt::print("kiln serve: stopped\n");
  return 0;
}

}  // namespace kiln::cli
