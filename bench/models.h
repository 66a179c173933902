// The models suite of `kiln bench`: layers of real models, written with the model API,
// at their published sizes. bench/compare_torch.py rebuilds each row in PyTorch.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "bench/suite.h"
#include "compiler/train.h"

namespace kiln::bench {

/// The sizes of one transformer layer: x is f32[batch, seq, width], split into `heads`.
struct TransformerSizes {
  int64_t batch = 8, seq = 512, width = 768, heads = 12;
};

/// GPT-2 small's block: pre-norm, causal self-attention with a fused qkv projection,
/// tanh-GELU MLP of 4 x width. Forward, or (train) one AdamW step on the mean squared
/// error against an input %target.
Result<SuiteRow> gpt2_block(const TransformerSizes& sizes, bool train);

/// BERT-base's encoder layer, forward: post-norm, separate q/k/v projections, a padding
/// mask %attention_mask: i32[batch, seq] (0 marks a padded key), erf-GELU FFN.
Result<SuiteRow> bert_layer(const TransformerSizes& sizes);

/// A LLaMA-style block's own sizes beside TransformerSizes.
struct LlamaSizes {
  int64_t kv_heads = 4;   ///< key-value heads; `heads` a multiple of it (grouped-query attention)
  int64_t hidden = 2048;  ///< the SwiGLU MLP's hidden width
  double eps = 1e-6;      ///< RMSNorm's epsilon
  double rope_base = 10000;
};

/// A LLaMA-style decoder block as Hugging Face's LlamaDecoderLayer computes it: pre-RMSNorm,
/// causal self-attention with rotary embeddings and grouped-query heads, a SwiGLU MLP, no
/// biases, [out, in] weights. Forward, or (train) one AdamW step on the mean squared error
/// against an input %target.
Result<SuiteRow> llama_block(const TransformerSizes& sizes, const LlamaSizes& llama, bool train);

/// The MLP 784-512-512-10 with relu: forward, or (train) one Adam step on cross-entropy
/// against %labels: i32[batch], in f32 or `mixed` precision. Both suites have it, under
/// their own row names.
Result<SuiteRow> mlp_row(const std::string& name, int64_t batch, bool train,
                         const std::optional<MixedPrecision>& mixed = std::nullopt);

/// torchvision's ResNet-18 (BasicBlocks, inference batch norm, 1000 classes) on
/// x: f32[batch, 3, image, image] (bench/cnn_models.cc).
Result<SuiteRow> resnet18(int64_t batch, int64_t image);

/// One Adam step of examples/fashion_mnist.cc's CNN on x: f32[batch, 1, 28, 28].
Result<SuiteRow> cnn_train(int64_t batch);

/// The models suite: gpt2_block, gpt2_block_train, bert_layer, llama_block,
/// llama_block_train, mlp_train, resnet18, cnn_train. Quick: C=64, 4 heads, T=16, B=2, an MLP batch of 8, ResNet-18 on
/// one 32x32 image and the CNN on 4 images, small enough for a unit test.
Result<std::vector<SuiteRow>> model_rows(bool quick);

}  // namespace kiln::bench
