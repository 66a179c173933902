// Trains a small CNN on Fashion-MNIST with one compiled training step (forward, gradients
// and Adam as one artifact), evaluates it each epoch, and saves the trained weights
// (safetensors) and an inference artifact that examples/fashion_mnist_classify.cc runs
// with the runtime alone.
//
//   bazel run -c opt //examples:fashion_mnist -- --epochs=5 [--target=cpu|cuda] [--precision=bf16|f16]
//
// The model: conv 32 3x3 -> relu -> max_pool 2 -> conv 64 3x3 -> relu -> max_pool 2 ->
// linear 128 -> relu -> linear 10, cross entropy, Adam (lr 3e-3, cosine decay), batch 128, shuffled each
// epoch with a seed; bench/fashion_mnist_torch.py is the same in PyTorch.
#include <fmt/format.h>
#include <unistd.h>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <random>
#include <string>

#include "compiler/compile.h"
#include "compiler/nn.h"
#include "compiler/train.h"
#include "examples/fashion_mnist_data.h"
#include "examples/fashion_mnist_eval.h"
#include "ir/printer.h"
#include "runtime/format/safetensors.h"
#include "runtime/model.h"

namespace {

using kiln::Result;
using kiln::Status;
using kiln::examples::Dataset;

struct Flags {
  std::string target = "cpu", data = kiln::examples::default_fashion_mnist_dir(), out = "fashion_mnist_out", dump_ir;
  std::string precision = "f32";  // bf16 or f16: mixed precision (f32 master weights)
  int64_t epochs = 5, batch = 128, eval_batch = 100, limit = -1, test_limit = -1, threads = 0;
  uint64_t seed = 1;
  double learning_rate = 3e-3;
  bool cosine = true;  // the learning rate decays to 0 along a half cosine over the run
};

constexpr const char* kUsage =
    "usage: fashion_mnist [--epochs=5] [--target=cpu|cuda] [--batch=128] [--lr=0.003] [--schedule=cosine|constant]\n"
    "                     [--seed=1] [--limit=N] [--test-limit=N] [--threads=N] [--data=DIR] [--out=DIR]\n"
    "                     [--precision=f32|bf16|f16] [--dump-ir=FILE]\n\n"
    "Trains the CNN on Fashion-MNIST (DIR: $KILN_FASHION_MNIST or /usr/share/datasets/fashion-mnist;\n"
    "--limit and --test-limit keep the first N images) and writes DIR/fashion_mnist.safetensors and\n"
    "DIR/fashion_mnist.kiln (default DIR: fashion_mnist_out). --dump-ir writes the training step's\n"
    "IR to FILE (for kiln bench FILE --profile). Adam's learning rate decays to 0 along a half\n"
    "cosine over all the run's steps (--schedule=constant keeps it). --precision=bf16|f16 trains with\n"
    "mixed precision (f32 master weights; convolutions and matmuls in the precision; f16 with loss\n"
    "scaling) and compiles the saved model with autocast.\n";

Result<Flags> parse_flags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    const size_t eq = arg.find('=');
    const std::string key = arg.substr(0, eq), value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    auto number = [&](auto& to) -> Status {
      char* end = nullptr;
      const double v = std::strtod(value.c_str(), &end);
      if (value.empty() || *end != '\0')
        return kiln::make_error(fmt::format("{} needs a number, got '{}'", key, value));
      to = static_cast<std::remove_reference_t<decltype(to)>>(v);
      return Status::Ok();
    };
    if (key == "--target") f.target = value;
    else if (key == "--data") f.data = value;
    else if (key == "--out") f.out = value;
    else if (key == "--dump-ir") f.dump_ir = value;
    else if (key == "--epochs") KILN_RETURN_IF_ERROR(number(f.epochs));
    else if (key == "--batch") KILN_RETURN_IF_ERROR(number(f.batch));
    else if (key == "--limit") KILN_RETURN_IF_ERROR(number(f.limit));
    else if (key == "--test-limit") KILN_RETURN_IF_ERROR(number(f.test_limit));
    else if (key == "--threads") KILN_RETURN_IF_ERROR(number(f.threads));
    else if (key == "--seed") KILN_RETURN_IF_ERROR(number(f.seed));
    else if (key == "--lr") KILN_RETURN_IF_ERROR(number(f.learning_rate));
    else if (key == "--schedule" && (value == "cosine" || value == "constant")) f.cosine = value == "cosine";
    else if (key == "--schedule")
      return kiln::make_error(fmt::format("--schedule is cosine or constant, got '{}'", value));
    else if (key == "--precision" && (value == "f32" || value == "bf16" || value == "f16")) f.precision = value;
    else if (key == "--precision")
      return kiln::make_error(fmt::format("--precision is f32, bf16 or f16, got '{}'", value));
    else return kiln::make_error(fmt::format("unknown flag '{}'\n{}", arg, kUsage));
  }
  if (f.epochs < 1 || f.batch < 1) return kiln::make_error("--epochs and --batch must be at least 1");
  return f;
}

// The mean and standard deviation of the training images' pixels (scaled to [0, 1]), over
// all 60000 of them.
constexpr double kPixelMean = 0.2860, kPixelStd = 0.3530;

// The CNN's logits for x: [batch, 1, 28, 28], pixels in [0, 1], which the graph
// standardizes first (so the inference artifact takes the same pixels). Params are named
// as PyTorch's nn.Module would name them (conv1.weight, fc1.bias, ...).
kiln::Tensor cnn(kiln::Model& m, kiln::Tensor x) {
  x = (x - kPixelMean) / kPixelStd;
  kiln::nn::Conv2d conv1(m, "conv1", 1, 32, {3, 3}), conv2(m, "conv2", 32, 64, {3, 3});
  kiln::nn::MaxPool2d pool({2, 2});
  kiln::nn::Flatten flatten;
  kiln::nn::Linear fc1(m, "fc1", 64 * 5 * 5, 128), fc2(m, "fc2", 128, 10);
  kiln::Tensor h = pool(kiln::relu(conv2(pool(kiln::relu(conv1(x))))));
  return fc2(kiln::relu(fc1(flatten(h))));
}

// PyTorch's default initialisation of nn.Conv2d and nn.Linear (Kaiming-uniform with
// a = sqrt(5): weights and biases uniform in +-1/sqrt(fan_in)), so that training starts
// as bench/fashion_mnist_torch.py's does. kiln's layers start from He-uniform weights
// (bound sqrt(6/fan_in)) and zero biases, with which this schedule ended 1.2 points lower.
void init_as_pytorch(std::map<std::string, kiln::ir::Tensor>& state, uint64_t seed) {
  const std::pair<const char*, int64_t> fan_ins[] = {
      {"conv1", 1 * 3 * 3}, {"conv2", 32 * 3 * 3}, {"fc1", 64 * 5 * 5}, {"fc2", 128}};
  std::mt19937_64 rng(seed);
  for (const auto& [layer, fan_in] : fan_ins) {
    const double bound = 1 / std::sqrt(static_cast<double>(fan_in));
    std::uniform_real_distribution<double> uniform(-bound, bound);
    for (const char* part : {".weight", ".bias"}) {
      kiln::ir::Tensor& t = state.at(std::string(layer) + part);
      std::vector<double> values(static_cast<size_t>(t.size()));
      for (double& v : values) v = uniform(rng);
      t = kiln::ir::Tensor::from_doubles(t.type, values);
    }
  }
}

Result<std::shared_ptr<kiln::runtime::Model>> compile_and_load(const kiln::ir::Graph& g, kiln::CompileOptions options,
                                                               const Flags& flags,
                                                               std::vector<uint8_t>* bytes = nullptr) {
  options.target = flags.target;
  KILN_ASSIGN_OR_RETURN(std::vector<uint8_t> artifact, kiln::compile_to_artifact(g, options));
  if (bytes) *bytes = artifact;
  kiln::runtime::Options load;
  load.threads = static_cast<int>(flags.threads);
  return kiln::runtime::Model::load_bytes(std::move(artifact), load);
}

std::span<const uint8_t> bytes_of(const std::vector<float>& v) {
  return {reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(float)};
}

Status train(const Flags& flags) {
  const auto started = std::chrono::steady_clock::now();
  KILN_ASSIGN_OR_RETURN(Dataset train_set, kiln::examples::read_fashion_mnist(flags.data, true, flags.limit));
  KILN_ASSIGN_OR_RETURN(Dataset test_set, kiln::examples::read_fashion_mnist(flags.data, false, flags.test_limit));
  const int64_t batches = train_set.count / flags.batch, pixels = 28 * 28;
  if (batches == 0)
    return kiln::make_error(fmt::format("{} training images make no batch of {}", train_set.count, flags.batch));

  kiln::Model m("fashion_mnist_train", flags.seed);
  kiln::Tensor labels = m.input("labels", {flags.batch}, kiln::ir::DType::I32);
  m.output(kiln::cross_entropy(cnn(m, m.input("x", {flags.batch, 1, 28, 28})), labels), "loss");
  kiln::Adam adam{flags.learning_rate};
  if (flags.cosine) adam.cosine_decay_steps = batches * flags.epochs;
  KILN_ASSIGN_OR_RETURN(kiln::TrainStep step, flags.precision == "f32" ? kiln::build_train_step(m, adam)
                                              : flags.precision == "bf16"
                                                  ? kiln::build_train_step(m, adam, kiln::MixedPrecision::bf16())
                                                  : kiln::build_train_step(m, adam, kiln::MixedPrecision::f16()));
  init_as_pytorch(step.initial_state, flags.seed);
  if (!flags.dump_ir.empty()) std::ofstream(flags.dump_ir) << kiln::ir::print(step.graph);
  kiln::CompileOptions options;
  options.weights = step.initial_state;
  KILN_ASSIGN_OR_RETURN(auto trainer, compile_and_load(step.graph, options, flags));

  // Evaluation between epochs: the inference graph with its params made state, so the
  // trained weights are written in without compiling again.
  kiln::Model infer("fashion_mnist", flags.seed);
  infer.output(cnn(infer, infer.input("x", {flags.eval_batch, 1, 28, 28})), "logits");
  KILN_ASSIGN_OR_RETURN(kiln::ir::Graph inference, infer.build());
  kiln::ir::Graph evaluation = inference;
  for (kiln::ir::Arg& a : evaluation.args)
    if (a.kind == kiln::ir::ArgKind::Param) a.kind = kiln::ir::ArgKind::State;
  options.weights = infer.initial_values();
  options.precision = flags.precision;  // the evaluation's and the saved model's autocast
  KILN_ASSIGN_OR_RETURN(auto evaluator, compile_and_load(evaluation, options, flags));
  const double compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  fmt::print("fashion_mnist: {} training images ({} batches of {}), {} test images, target {}, {}, ready in {:.1f} s\n",
             train_set.count, batches, flags.batch, test_set.count, trainer->target(), flags.precision,
             compile_seconds);

  std::vector<float> x(static_cast<size_t>(flags.batch * pixels));
  std::vector<int32_t> y(static_cast<size_t>(flags.batch));
  std::map<std::string, std::vector<uint8_t>> outputs;
  std::map<std::string, std::span<uint8_t>> output_spans;
  // The new weights and optimizer moments stay in the trainer's state; only the other
  // outputs (the loss) are copied out.
  for (size_t i = 0; i < trainer->outputs().size(); ++i) {
    if (!trainer->output_states()[i].empty()) continue;
    const kiln::runtime::TensorInfo& o = trainer->outputs()[i];
    outputs[o.name].resize(static_cast<size_t>(o.bytes()));
    output_spans[o.name] = outputs[o.name];
  }
  const std::string loss_name = trainer->outputs()[0].name;
  std::vector<int64_t> order(static_cast<size_t>(train_set.count));
  const bool progress = isatty(fileno(stderr));
  double last_accuracy = 0;
  for (int64_t epoch = 1; epoch <= flags.epochs; ++epoch) {
    std::iota(order.begin(), order.end(), int64_t{0});
    kiln::examples::shuffle_order(order, flags.seed * 1000 + static_cast<uint64_t>(epoch));
    const auto epoch_start = std::chrono::steady_clock::now();
    double loss_sum = 0;
    for (int64_t b = 0; b < batches; ++b) {
      for (int64_t r = 0; r < flags.batch; ++r) {
        const int64_t i = order[static_cast<size_t>(b * flags.batch + r)];
        std::copy_n(train_set.images.begin() + i * pixels, pixels, x.begin() + r * pixels);
        y[static_cast<size_t>(r)] = train_set.labels[static_cast<size_t>(i)];
      }
      std::span<const uint8_t> label_bytes{reinterpret_cast<const uint8_t*>(y.data()), y.size() * sizeof(int32_t)};
      KILN_RETURN_IF_ERROR(trainer->run({{"x", bytes_of(x)}, {"labels", label_bytes}}, output_spans));
      float loss = 0;
      std::memcpy(&loss, outputs[loss_name].data(), sizeof(float));
      loss_sum += loss;
      if (progress && (b % 10 == 0 || b + 1 == batches))
        fmt::print(stderr, "\repoch {}/{}: batch {}/{}, loss {:.4f}   ", epoch, flags.epochs, b + 1, batches,
                   loss_sum / static_cast<double>(b + 1));
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_start).count();
    if (progress) fmt::print(stderr, "\r{:60}\r", "");
    for (const kiln::runtime::TensorInfo& s : evaluator->state()) {
      KILN_ASSIGN_OR_RETURN(kiln::runtime::HostTensor value, trainer->read_state(s.name));
      KILN_RETURN_IF_ERROR(evaluator->write_state(s.name, value));
    }
    KILN_ASSIGN_OR_RETURN(int64_t correct, kiln::examples::count_correct(*evaluator, test_set));
    last_accuracy = static_cast<double>(correct) / static_cast<double>(test_set.count);
    fmt::print("epoch {}: loss {:.4f}, test accuracy {:.4f}, {:.0f} images/s ({:.1f} s)\n", epoch,
               loss_sum / static_cast<double>(batches), last_accuracy,
               static_cast<double>(batches * flags.batch) / seconds, seconds);
    std::fflush(stdout);
  }

  // The trained weights, and the inference artifact with them baked in.
  std::filesystem::create_directories(flags.out);
  std::vector<kiln::format::SafetensorsTensor> tensors;
  options.weights.clear();
  for (const kiln::runtime::TensorInfo& s : evaluator->state()) {
    KILN_ASSIGN_OR_RETURN(kiln::runtime::HostTensor value, trainer->read_state(s.name));
    options.weights[s.name] = kiln::ir::tensor_from_bytes({kiln::ir::DType::F32, s.shape}, value.data.data());
    tensors.push_back({s.name, "F32", s.shape, std::move(value.data)});
  }
  const std::string weights_path = flags.out + "/fashion_mnist.safetensors",
                    model_path = flags.out + "/fashion_mnist.kiln";
  KILN_RETURN_IF_ERROR(kiln::format::write_safetensors_file(weights_path, tensors));
  std::vector<uint8_t> artifact;
  // The saved model's rows are independent images: `kiln serve` may batch requests.
  options.batch = true;
  KILN_ASSIGN_OR_RETURN(auto final_model, compile_and_load(inference, options, flags, &artifact));
  std::ofstream(model_path, std::ios::binary)
      .write(reinterpret_cast<const char*>(artifact.data()), static_cast<std::streamsize>(artifact.size()));
  fmt::print("wrote {} and {}\n", weights_path, model_path);
  fmt::print("test accuracy: {:.4f}\n", last_accuracy);
  return Status::Ok();
}

}  // namespace

int main(int argc, char** argv) {
  if (const char* dir = std::getenv("BUILD_WORKING_DIRECTORY")) {  // under `bazel run`: where it was typed
    std::error_code ec;
    std::filesystem::current_path(dir, ec);
  }
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--help") {
      fmt::print("{}", kUsage);
      return 0;
    }
  Result<Flags> flags = parse_flags(argc, argv);
  if (!flags.ok()) {
    fmt::print(stderr, "fashion_mnist: {}\n", flags.error().message);
    return 2;
  }
  Status done = train(*flags);
  if (!done.ok()) {
    fmt::print(stderr, "fashion_mnist: {}\n", done.error().message);
    return 1;
  }
  return 0;
}
