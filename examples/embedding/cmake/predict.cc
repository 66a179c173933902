// Runs an artifact with one input on a .npy file and writes each output as OUT_DIR/NAME.npy.
// Links kiln::runtime only: no compiler, LLVM or NVRTC in the process.
#include <cstdio>
#include <string>

#include "runtime/model.h"
#include "runtime/npy.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: predict M.kiln INPUT.npy OUT_DIR\n");
    return 2;
  }
  auto model = kiln::runtime::Model::load_file(argv[1]);
  if (!model.ok()) {
    std::fprintf(stderr, "predict: %s\n", model.error().message.c_str());
    return 1;
  }
  if ((*model)->inputs().size() != 1) {
    std::fprintf(stderr, "predict: this program runs models with one input\n");
    return 1;
  }
  auto array = kiln::runtime::read_npy_file(argv[2]);
  if (!array.ok()) {
    std::fprintf(stderr, "predict: %s\n", array.error().message.c_str());
    return 1;
  }
  kiln::runtime::TensorInfo info = (*model)->inputs()[0];
  info.shape = array->shape;
  auto outputs = (*model)->run({{info.name, {info, std::move(array->data)}}});
  if (!outputs.ok()) {
    std::fprintf(stderr, "predict: %s\n", outputs.error().message.c_str());
    return 1;
  }
  for (const kiln::runtime::HostTensor& t : *outputs) {
    std::string path = std::string(argv[3]) + "/" + t.info.name + ".npy";
    auto written = kiln::runtime::write_npy_file(
        path, {std::string(kiln::runtime::element_type_name(t.info.type)), t.info.shape, t.data});
    if (!written.ok()) {
      std::fprintf(stderr, "predict: %s\n", written.error().message.c_str());
      return 1;
    }
    std::printf("wrote %s: %s\n", path.c_str(), t.info.type_string().c_str());
  }
  return 0;
}
