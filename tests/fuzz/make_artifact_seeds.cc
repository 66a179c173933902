// Writes the artifact fuzzer's seed corpus: small compiled artifacts (portable x86-64
// code, and two CUDA artifacts: sm_80 cubin and PTX, with launch shapes, one of them an
// attention step's kernel). The corpus keeps
// the seeds of earlier formats too (seed-*-format-1.1), which readers must still accept.
// `bazel run //tests/fuzz:make_artifact_seeds -- $PWD/tests/fuzz/corpus/artifact`
#include <fmt/format.h>
#include <fstream>

#include "compiler/compile.h"
#include "compiler/nn.h"

namespace {

bool write_seed(const std::string& path, kiln::Model& m, const std::string& target = "cpu") {
  auto graph = m.build();
  if (!graph.ok()) return false;
  kiln::CompileOptions options;
  options.weights = m.initial_values();
  options.cpu = "x86-64,x86-64-v3";  // portable code, and one library that records CPU features
  options.target = target;
  options.cuda_archs = {"sm_80"};
  options.use_compile_cache = false;
  auto artifact = kiln::compile_to_artifact(*graph, options);
  if (!artifact.ok()) {
    fmt::print(stderr, "{}\n", artifact.error().message);
    return false;
  }
  const std::vector<uint8_t>& bytes = *artifact;
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    fmt::print(stderr, "usage: make_artifact_seeds DIR\n");
    return 1;
  }
  std::string dir = argv[1];
  kiln::Model a("elementwise");
  a.output(kiln::cos(kiln::cos(a.input("x", {8}))), "y");
  kiln::Model b("mlp", 1);
  auto net = kiln::nn::mlp(b, "fc", {4, 6, 2});
  b.output(kiln::softmax(net(b.input("x", {3, 4}))), "probs");
  kiln::Model c("state", 1);
  kiln::Tensor s = c.state("s", {4}, kiln::Init::ones());
  c.output(kiln::reduce_sum(s * c.param("w", {4}, kiln::Init::normal()), {0}), "loss");
  c.output(s * 0.5, "s.next");
  // A causal attention in f32: on CUDA one step with a kernel of its own (format 1.17).
  kiln::Model d("attention");
  kiln::Tensor q = d.input("q", {1, 2, 8, 4}), k = d.input("k", {1, 2, 8, 4}), v = d.input("v", {1, 2, 8, 4});
  d.output(kiln::attention(q, k, v, 0.5, true), "y");
  bool ok = write_seed(dir + "/seed-elementwise", a) && write_seed(dir + "/seed-mlp", b) &&
            write_seed(dir + "/seed-state", c) && write_seed(dir + "/seed-mlp-cuda", b, "cuda") &&
            write_seed(dir + "/seed-attention-cuda", d, "cuda");
  return ok ? 0 : 1;
}
