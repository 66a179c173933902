// A service that embeds kiln's HTTP server (the serving library): serves an artifact with
// the KServe v2 protocol on 127.0.0.1 until its standard input closes, then finishes the
// requests in flight and exits.
//
//   serve classifier.kiln [PORT]        (PORT 0, the default: any free one)
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "runtime/model.h"
#include "serving/server.h"

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: serve MODEL.kiln [PORT]\n");
    return 2;
  }
  auto model = kiln::runtime::Model::load_file(argv[1]);
  if (!model.ok()) {
    std::fprintf(stderr, "serve: %s\n", model.error().message.c_str());
    return 1;
  }
  kiln::serving::ServerOptions options;
  options.port = argc == 3 ? std::atoi(argv[2]) : 0;
  auto server = kiln::serving::Server::create({{"classifier", *model}}, options);
  if (!server.ok()) {
    std::fprintf(stderr, "%s\n", server.error().message.c_str());
    return 1;
  }
  auto port = (*server)->bind();
  if (!port.ok()) {
    std::fprintf(stderr, "%s\n", port.error().message.c_str());
    return 1;
  }
  std::printf("listening on http://127.0.0.1:%d\n", *port);
  std::fflush(stdout);
  kiln::Status served;
  std::thread serving([&] { served = (*server)->serve(); });
  while (std::cin.get() != EOF) {
  }
  (*server)->stop();
  serving.join();
  if (!served.ok()) {
    std::fprintf(stderr, "%s\n", served.error().message.c_str());
    return 1;
  }
  std::printf("stopped\n");
  return 0;
}
