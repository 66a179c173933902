// A client of `kiln serve`: sends one Fashion-MNIST test image (or random inputs for any
// model) to POST /v2/models/NAME/infer and prints the answer. The HTTP is a plain
// keep-alive connection (serving/http_client.h); the messages are KServe v2 JSON.
//
//   kiln serve fashion_mnist_out/fashion_mnist.kiln &
//   bazel run //examples:serve_client -- --image=7
//   bazel run //examples:serve_client -- --model=mlp --random
#include <algorithm>
#include <cstdio>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "examples/fashion_mnist_data.h"
#include "serving/http_client.h"

namespace {

using nlohmann::json;

constexpr const char* kClasses[10] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                      "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

struct Flags {
  std::string host = "127.0.0.1", model = "fashion_mnist";
  int port = 8000;
  int64_t image = -1;
  bool random = false;
};

int usage_error(const std::string& message) {
  std::fprintf(stderr,
               "serve_client: %s\nusage: serve_client [--host=127.0.0.1] [--port=8000] [--model=fashion_mnist] "
               "(--image=N | --random)\n",
               message.c_str());
  return 2;
}

// Random data for one input of the model's metadata (a batch dim, -1, takes one row).
json random_input(const json& meta, std::mt19937& rng) {
  std::vector<int64_t> shape = meta["shape"].get<std::vector<int64_t>>();
  int64_t elements = 1;
  for (int64_t& d : shape) elements *= (d = d < 0 ? 1 : d);
  const std::string type = meta["datatype"];
  json data = json::array();
  std::uniform_real_distribution<double> uniform(-1, 1);
  for (int64_t i = 0; i < elements; ++i) {
    if (type == "BOOL") data.push_back(rng() % 2 == 1);
    else if (type.starts_with("INT")) data.push_back(static_cast<int>(rng() % 10));
    else data.push_back(uniform(rng));
  }
  return {{"name", meta["name"]}, {"shape", shape}, {"datatype", type}, {"data", data}};
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    const std::string key = arg.substr(0, eq), value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    try {
      if (key == "--host") f.host = value;
      else if (key == "--port") f.port = std::stoi(value);
      else if (key == "--model") f.model = value;
      else if (key == "--image") f.image = std::stoll(value);
      else if (arg == "--random") f.random = true;
      else return usage_error("unknown flag '" + arg + "'");
    } catch (const std::exception&) {
      return usage_error("'" + arg + "' needs a number");
    }
  }
  if ((f.image >= 0) == f.random) return usage_error("give --image=N or --random");
  auto connection = kiln::serving::HttpConnection::connect(f.host, f.port);
  if (!connection.ok()) return std::fprintf(stderr, "serve_client: %s\n", connection.error().message.c_str()), 1;
  auto meta = connection->request("GET", "/v2/models/" + f.model);
  if (!meta.ok()) return std::fprintf(stderr, "serve_client: %s\n", meta.error().message.c_str()), 1;
  if (meta->status != 200) return std::fprintf(stderr, "serve_client: %d %s\n", meta->status, meta->body.c_str()), 1;
  const json model = json::parse(meta->body);

  json request = {{"inputs", json::array()}};
  int32_t label = -1;
  if (f.random) {
    std::mt19937 rng(1);
    for (const json& input : model["inputs"]) request["inputs"].push_back(random_input(input, rng));
  } else {
    auto test = kiln::examples::read_fashion_mnist(kiln::examples::default_fashion_mnist_dir(), false, f.image + 1);
    if (!test.ok()) return std::fprintf(stderr, "serve_client: %s\n", test.error().message.c_str()), 1;
    if (f.image >= test->count) return usage_error("the test set has " + std::to_string(test->count) + " images");
    const size_t pixels = static_cast<size_t>(test->rows * test->cols);
    const auto first = test->images.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(f.image) * pixels);
    label = test->labels[static_cast<size_t>(f.image)];
    request["inputs"].push_back({{"name", model["inputs"][0]["name"]},
                                 {"shape", {1, 1, test->rows, test->cols}},
                                 {"datatype", "FP32"},
                                 {"data", std::vector<float>(first, first + static_cast<std::ptrdiff_t>(pixels))}});
  }
  auto answer = connection->request("POST", "/v2/models/" + f.model + "/infer", request.dump(),
                                    {{"Content-Type", "application/json"}});
  if (!answer.ok()) return std::fprintf(stderr, "serve_client: %s\n", answer.error().message.c_str()), 1;
  if (answer->status != 200)
    return std::fprintf(stderr, "serve_client: %d %s\n", answer->status, answer->body.c_str()), 1;
  const json result = json::parse(answer->body);
  for (const json& out : result["outputs"]) {
    std::printf("%s %s %s:", out["name"].get<std::string>().c_str(), out["datatype"].get<std::string>().c_str(),
                out["shape"].dump().c_str());
    const json& data = out["data"];
    for (size_t i = 0; i < data.size() && i < 10; ++i) std::printf(" %s", data[i].dump().c_str());
    std::printf("%s\n", data.size() > 10 ? " ..." : "");
  }
  if (label >= 0) {
    const std::vector<double> logits = result["outputs"][0]["data"].get<std::vector<double>>();
    const size_t best = static_cast<size_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    std::printf("image %lld: predicted %s, labelled %s\n", static_cast<long long>(f.image),
                best < 10 ? kClasses[best] : "?", kClasses[label]);
  }
  return 0;
}
