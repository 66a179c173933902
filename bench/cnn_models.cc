// The convolutional rows of the models suite: ResNet-18 inference and the Fashion-MNIST
// CNN's training step (examples/fashion_mnist.cc).
#include <fmt/format.h>

#include "bench/models.h"
#include "compiler/model.h"
#include "compiler/nn.h"
#include "compiler/train.h"

namespace kiln::bench {
namespace {

nn::Conv2dOptions conv_options(int64_t stride, int64_t padding) {
  nn::Conv2dOptions o;
  o.stride = {stride, stride};
  o.padding = {padding, padding};
  o.bias = false;  // every ResNet conv is followed by batch norm
  return o;
}

// torchvision's BasicBlock: two 3x3 convs with batch norm, and a 1x1 conv (with batch
// norm) on the shortcut where the block changes the stride or the width.
Tensor basic_block(Model& m, const std::string& name, Tensor x, int64_t in, int64_t out, int64_t stride) {
  nn::Conv2d conv1(m, name + ".conv1", in, out, {3, 3}, conv_options(stride, 1));
  nn::BatchNorm2d bn1(m, name + ".bn1", out);
  nn::Conv2d conv2(m, name + ".conv2", out, out, {3, 3}, conv_options(1, 1));
  nn::BatchNorm2d bn2(m, name + ".bn2", out);
  Tensor shortcut = x;
  if (stride != 1 || in != out) {
    nn::Conv2d down(m, name + ".downsample.0", in, out, {1, 1}, conv_options(stride, 0));
    nn::BatchNorm2d down_bn(m, name + ".downsample.1", out);
    shortcut = down_bn(down(x));
  }
  return relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut);
}

}  // namespace

Result<SuiteRow> resnet18(int64_t batch, int64_t image) {
  if (batch < 1 || image < 32)
    return make_error(fmt::format("bench: resnet18 needs a batch of 1 or more and images of 32 or more, got {} and {}",
                                  batch, image));
  Model m("resnet18", 18);
  Tensor x = m.input("x", {batch, 3, image, image});
  nn::Conv2d conv1(m, "conv1", 3, 64, {7, 7}, conv_options(2, 3));
  nn::BatchNorm2d bn1(m, "bn1", 64);
  nn::Pool2dOptions pool_options;
  pool_options.stride = {2, 2};
  pool_options.padding = {1, 1};
  Tensor h = nn::MaxPool2d({3, 3}, pool_options)(relu(bn1(conv1(x))));
  int64_t width = 64;
  for (int64_t layer = 1; layer <= 4; ++layer) {
    const int64_t out = 64 << (layer - 1);
    for (int64_t block = 0; block < 2; ++block) {
      h = basic_block(m, fmt::format("layer{}.{}", layer, block), h, width, out, layer > 1 && block == 0 ? 2 : 1);
      width = out;
    }
  }
  const int64_t side = h.shape()[2];
  Tensor pooled = nn::Flatten()(avg_pool(h, {side, side}));
  nn::Linear fc(m, "fc", 512, 1000, nn::LinearOptions{true, Init::kaiming_uniform(), nn::WeightLayout::OutIn});
  m.output(fc(pooled), "logits");
  KILN_ASSIGN_OR_RETURN(ir::Graph g, m.build());
  return SuiteRow{"resnet18",
                  fmt::format("ResNet-18 (torchvision's layout and parameter names), inference: batch norm from "
                              "running statistics, x: f32[{},3,{},{}]",
                              batch, image, image),
                  std::move(g),
                  m.initial_values(),
                  {}};
}

Result<SuiteRow> cnn_train(int64_t batch) {
  Model m("cnn_train", 1);
  Tensor x = m.input("x", {batch, 1, 28, 28});
  Tensor labels = m.input("labels", {batch}, ir::DType::I32);
  nn::Conv2d conv1(m, "conv1", 1, 32, {3, 3}), conv2(m, "conv2", 32, 64, {3, 3});
  nn::MaxPool2d pool({2, 2});
  nn::Linear fc1(m, "fc1", 64 * 5 * 5, 128), fc2(m, "fc2", 128, 10);
  Tensor h = pool(relu(conv2(pool(relu(conv1(x))))));
  m.output(cross_entropy(fc2(relu(fc1(nn::Flatten()(h)))), labels), "loss");
  KILN_ASSIGN_OR_RETURN(TrainStep step, build_train_step(m, Adam{}));
  return SuiteRow{
      "cnn_train",
      fmt::format("the Fashion-MNIST CNN (conv 32 3x3, relu, max_pool 2, conv 64 3x3, relu, max_pool 2, "
                  "linear 1600-128, relu, linear 128-10), cross-entropy, one Adam step, x: f32[{},1,28,28], "
                  "labels: i32[{}]",
                  batch, batch),
      std::move(step.graph),
      {},
      std::move(step.initial_state)};
}

}  // namespace kiln::bench
