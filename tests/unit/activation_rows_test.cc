// The post-ops' vectorized activations (runtime/cpu/activation_rows.h) against double
// precision, in each instance this CPU runs (AVX-512, AVX2, plain x86-64), over runs whose
// lengths leave tails.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <vector>

#include "runtime/cpu/activation_rows.h"
#include "runtime/cpu/score_rows.h"

namespace kiln::runtime::cpu {
namespace {

double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

TEST_CASE("the post-ops' activations match double precision in every instance", "[runtime]") {
  const std::vector<std::pair<Activation, std::function<double(double)>>> activations = {
      {Activation::Sigmoid, sigmoid},
      {Activation::Tanh, [](double x) { return std::tanh(x); }},
      {Activation::Silu, [](double x) { return x * sigmoid(x); }},
      {Activation::GeluErf, [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }},
      {Activation::GeluTanh,
       [](double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }},
  };
  std::vector<float> x;
  for (float v = -30.0f; v <= 30.0f; v += 0.00731f) x.push_back(v);
  x.insert(x.end(), {0.0f, -0.0f, 0.79f, 0.81f, 0.99f, 1.01f, -1.0f, 1.0f, 1e-30f, -1e-30f, 80.0f, -80.0f});
  x.push_back(std::nanf(""));
  for (RowInstance instance : {RowInstance::Fastest, RowInstance::Avx2, RowInstance::Generic}) {
    use_row_instance(instance);
    for (const auto& [activation, reference] : activations) {
      for (size_t length : {x.size(), size_t{1}, size_t{7}, size_t{17}}) {
        std::vector<float> y(x.end() - static_cast<std::ptrdiff_t>(length), x.end());
        const std::vector<float> in = y;
        activation_in_place(y.data(), static_cast<int64_t>(y.size()), activation);
        for (size_t i = 0; i < y.size(); ++i) {
          INFO("instance " << static_cast<int>(instance) << ", activation " << static_cast<int>(activation) << ", x "
                           << in[i] << ", got " << y[i]);
          if (std::isnan(in[i])) {
            CHECK(std::isnan(y[i]));
            continue;
          }
          const double want = reference(in[i]);
          CHECK(std::fabs(y[i] - want) <= 1e-6 + 1e-6 * std::fabs(want));
        }
      }
    }
  }
  use_row_instance(RowInstance::Fastest);
}

TEST_CASE("per-channel post-ops apply each channel's value over rows and over spatial runs", "[runtime]") {
  for (int64_t inner : {1, 5}) {
    const int64_t outer = 3, channels = 19;
    std::vector<float> per_channel(channels);
    for (int64_t c = 0; c < channels; ++c) per_channel[static_cast<size_t>(c)] = 0.5f * static_cast<float>(c) - 3;
    for (ChannelOp op : {ChannelOp::Add, ChannelOp::Sub, ChannelOp::Mul}) {
      std::vector<float> y(static_cast<size_t>(outer * channels * inner));
      for (size_t i = 0; i < y.size(); ++i) y[i] = 0.25f * static_cast<float>(i % 23) - 2;
      const std::vector<float> in = y;
      channel_op_in_place(y.data(), per_channel.data(), outer, channels, inner, op);
      for (size_t i = 0; i < y.size(); ++i) {
        const float w = per_channel[i / static_cast<size_t>(inner) % channels];
        INFO("inner " << inner << ", op " << static_cast<int>(op) << ", element " << i);
        CHECK(y[i] == (op == ChannelOp::Add ? in[i] + w : op == ChannelOp::Sub ? in[i] - w : in[i] * w));
      }
    }
  }
}

}  // namespace
}  // namespace kiln::runtime::cpu
