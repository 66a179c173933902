// Loads an artifact, runs it RUNS times on zero inputs, and prints its signature and the
// median time of a run: a health check a service can run at start-up.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <vector>

#include "runtime/model.h"

int main(int argc, char** argv) {
  if (argc != 3 || std::atoi(argv[2]) < 1) {
    std::fprintf(stderr, "usage: latency M.kiln RUNS\n");
    return 2;
  }
  auto model = kiln::runtime::Model::load_file(argv[1]);
  if (!model.ok()) {
    std::fprintf(stderr, "latency: %s\n", model.error().message.c_str());
    return 1;
  }
  std::map<std::string, kiln::runtime::HostTensor> inputs;
  for (const kiln::runtime::TensorInfo& info : (*model)->inputs()) {
    inputs[info.name] = {info, std::vector<uint8_t>(static_cast<size_t>(info.bytes()), 0)};
    std::printf("input %%%s: %s\n", info.name.c_str(), info.type_string().c_str());
  }
  for (const kiln::runtime::TensorInfo& info : (*model)->outputs())
    std::printf("output %%%s: %s\n", info.name.c_str(), info.type_string().c_str());
  std::vector<double> ms;
  for (int run = 0; run < std::atoi(argv[2]); ++run) {
    auto start = std::chrono::steady_clock::now();
    auto outputs = (*model)->run(inputs);
    if (!outputs.ok()) {
      std::fprintf(stderr, "latency: %s\n", outputs.error().message.c_str());
      return 1;
    }
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::nth_element(ms.begin(), ms.begin() + static_cast<std::ptrdiff_t>(ms.size() / 2), ms.end());
  std::printf("median of %zu runs: %.3f ms\n", ms.size(), ms[ms.size() / 2]);
  return 0;
}
