// kiln deploy: the smallest service around a compiled model. It links only the runtime,
// loads the artifact named on its command line, then reads lines of numbers on stdin
// (one input tensor's elements each, f32) and writes one line of outputs per line.
//
//   bazel run //examples:deploy -- $PWD/model.kiln < requests.txt
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>

#include "runtime/model.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: deploy M.kiln < lines-of-inputs\n");
    return 1;
  }
  auto model = kiln::runtime::Model::load_file(argv[1]);
  if (!model.ok()) {
    std::fprintf(stderr, "deploy: %s\n", model.error().message.c_str());
    return 1;
  }
  if ((*model)->inputs().size() != 1 || (*model)->inputs()[0].type != kiln::runtime::ElementType::F32) {
    std::fprintf(stderr, "deploy: this example serves models with one f32 input\n");
    return 1;
  }
  const kiln::runtime::TensorInfo& info = (*model)->inputs()[0];
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream numbers(line);
    std::vector<float> values;
    for (float v; numbers >> v;) values.push_back(v);
    if (static_cast<int64_t>(values.size()) != info.elements()) {
      std::printf("error: expected %lld numbers for %%%s: %s\n", static_cast<long long>(info.elements()),
                  info.name.c_str(), info.type_string().c_str());
      continue;
    }
    kiln::runtime::HostTensor input{info,
                                    std::vector<uint8_t>(reinterpret_cast<uint8_t*>(values.data()),
                                                         reinterpret_cast<uint8_t*>(values.data() + values.size()))};
    auto outputs = (*model)->run({{info.name, input}});
    if (!outputs.ok()) {
      std::printf("error: %s\n", outputs.error().message.c_str());
      continue;
    }
    std::string out;
    for (const auto& t : *outputs) {
      if (t.info.type != kiln::runtime::ElementType::F32) continue;
      const float* p = reinterpret_cast<const float*>(t.data.data());
      for (int64_t k = 0; k < t.info.elements(); ++k) out += (out.empty() ? "" : " ") + std::to_string(p[k]);
    }
    std::printf("%s\n", out.c_str());
    std::fflush(stdout);
  }
  return 0;
}
