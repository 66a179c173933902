#include "bench/models.h"

#include <fmt/format.h>
#include <cmath>
#include <functional>

#include "compiler/model.h"
#include "compiler/nn.h"
#include "compiler/train.h"

namespace kiln::bench {
namespace {

// Stands in for -inf on masked scores: exp() of it is exactly 0 in f32, and unlike -inf
// it keeps a fully masked row finite (uniform) instead of NaN.
constexpr double kMasked = -1e9;

// Both models draw their weights as their papers do: N(0, 0.02), zero biases.
nn::LinearOptions dense() { return {true, Init::normal(0, 0.02), nn::WeightLayout::InOut}; }

std::string sizes_text(const TransformerSizes& s) { return fmt::format("{},{},{}", s.batch, s.seq, s.width); }

// [B,T,C] -> [B,H,T,D], or with `keys` [B,H,D,T], so that q @ k needs no further transpose.
Tensor split_heads(Tensor x, const TransformerSizes& s, bool keys) {
  Tensor h = reshape(x, {s.batch, s.seq, s.heads, s.width / s.heads});
  return keys ? transpose(h, {0, 2, 3, 1}) : transpose(h, {0, 2, 1, 3});
}

// softmax(mask(q kᵀ / sqrt(D))) v over the heads, merged back to [B,T,C].
Tensor attention(Tensor q, Tensor k, Tensor v, const TransformerSizes& s, const std::function<Tensor(Tensor)>& mask) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.width / s.heads));
  Tensor scores = mask(matmul(split_heads(q, s, false), split_heads(k, s, true)) * scale);
  Tensor y = matmul(softmax(scores, -1), split_heads(v, s, false));
  return reshape(transpose(y, {0, 2, 1, 3}), {s.batch, s.seq, s.width});
}

Status check_sizes(const TransformerSizes& s) {
  if (s.batch < 1 || s.seq < 1 || s.heads < 1 || s.width < 1 || s.width % s.heads != 0)
    return make_error(fmt::format("bench: transformer sizes B={} T={} C={} H={} need positive sizes and H dividing C",
                                  s.batch, s.seq, s.width, s.heads));
  return Status::Ok();
}

// A transformer block's row: its forward (result %y), or (train) one AdamW step on a
// regression loss against a target of the output's shape, so that every weight gets a
// gradient.
Result<SuiteRow> block_row(Model& m, const std::string& name, const std::string& what, const TransformerSizes& s,
                           Tensor y, bool train) {
  if (!train) {
    m.output(y, "y");
    KILN_ASSIGN_OR_RETURN(ir::Graph g, m.build());
    return SuiteRow{
        name, fmt::format("{}, forward, x: f32[{}]", what, sizes_text(s)), std::move(g), m.initial_values(), {}};
  }
  Tensor target = m.input("target", {s.batch, s.seq, s.width});
  m.output(mse_loss(y, target), "loss");
  KILN_ASSIGN_OR_RETURN(TrainStep step, build_train_step(m, Adam::adamw(1e-3, 0.01)));
  return SuiteRow{name,
                  fmt::format("{}, training step: mse_loss(block(x), target), every gradient, one AdamW step "
                              "(lr 1e-3, weight decay 0.01), x, target: f32[{}]",
                              what, sizes_text(s)),
                  std::move(step.graph),
                  {},
                  std::move(step.initial_state)};
}

}  // namespace

Result<SuiteRow> gpt2_block(const TransformerSizes& s, bool train) {
  KILN_RETURN_IF_ERROR(check_sizes(s));
  const std::string name = train ? "gpt2_block_train" : "gpt2_block";
  const int64_t c = s.width;
  Model m(name, 2);
  Tensor x = m.input("x", {s.batch, s.seq, c});
  // Parameter names follow Hugging Face's GPT2Block, whose Conv1D weights are [in, out] too.
  nn::LayerNorm ln_1(m, "ln_1", {c});
  nn::Linear c_attn(m, "attn.c_attn", c, 3 * c, dense());
  nn::Linear attn_proj(m, "attn.c_proj", c, c, dense());
  nn::LayerNorm ln_2(m, "ln_2", {c});
  nn::Linear c_fc(m, "mlp.c_fc", c, 4 * c, dense());
  nn::Linear mlp_proj(m, "mlp.c_proj", 4 * c, c, dense());

  Tensor qkv = c_attn(ln_1(x));
  auto part = [&](int64_t k) { return slice(qkv, {0, 0, k * c}, {s.batch, s.seq, (k + 1) * c}); };
  // Key j is visible from query i when j <= i; the [T,T] pattern broadcasts over B and H.
  Tensor visible = ge(m.iota({s.seq, s.seq}, 0), m.iota({s.seq, s.seq}, 1));
  auto causal = [&](Tensor scores) { return select(visible, scores, m.scalar(kMasked)); };
  Tensor h = x + attn_proj(attention(part(0), part(1), part(2), s, causal));
  Tensor y = h + mlp_proj(gelu(c_fc(ln_2(h)), /*tanh_approximation=*/true));

  const std::string what = fmt::format(
      "GPT-2 small block (pre-norm; causal self-attention, {} heads, fused qkv [{},{}]; tanh-GELU MLP {}-{}-{})",
      s.heads, c, 3 * c, c, 4 * c, c);
  return block_row(m, name, what, s, y, train);
}

Result<SuiteRow> bert_layer(const TransformerSizes& s) {
  KILN_RETURN_IF_ERROR(check_sizes(s));
  const int64_t c = s.width;
  constexpr double kEps = 1e-12;  // BERT's LayerNorm epsilon
  Model m("bert_layer", 3);
  Tensor x = m.input("x", {s.batch, s.seq, c});
  Tensor attention_mask = m.input("attention_mask", {s.batch, s.seq}, ir::DType::I32);
  // Parameter names follow Hugging Face's BertLayer.
  nn::Linear query(m, "attention.self.query", c, c, dense());
  nn::Linear key(m, "attention.self.key", c, c, dense());
  nn::Linear value(m, "attention.self.value", c, c, dense());
  nn::Linear attn_out(m, "attention.output.dense", c, c, dense());
  nn::LayerNorm attn_norm(m, "attention.output.LayerNorm", {c}, kEps);
  nn::Linear intermediate(m, "intermediate.dense", c, 4 * c, dense());
  nn::Linear out(m, "output.dense", 4 * c, c, dense());
  nn::LayerNorm out_norm(m, "output.LayerNorm", {c}, kEps);

  // Hugging Face's extended attention mask: an additive bias per (batch, key), 0 where
  // the key is a token and very negative where it is padding. An integer mask rather than
  // a float bias input, so that kiln bench's integer inputs (r % 10) make a realistic one:
  // about a tenth of the keys padded, drawn alike by bench/compare_torch.py.
  Tensor key_bias = select(ne(attention_mask, m.scalar(0, ir::DType::I32)), m.scalar(0.0), m.scalar(kMasked));
  const ir::Shape scores_shape{s.batch, s.heads, s.seq, s.seq};
  auto padding = [&](Tensor scores) { return scores + broadcast(key_bias, scores_shape, {0, 3}); };
  Tensor h = attn_norm(x + attn_out(attention(query(x), key(x), value(x), s, padding)));
  Tensor y = out_norm(h + out(gelu(intermediate(h))));
  m.output(y, "y");
  KILN_ASSIGN_OR_RETURN(ir::Graph g, m.build());
  return SuiteRow{"bert_layer",
                  fmt::format("BERT-base encoder layer, forward (post-norm: h = LN(x + attention(x)), LN(h + FFN(h)); "
                              "{} heads, separate q/k/v [{},{}]; erf-GELU FFN {}-{}-{}; LayerNorm eps 1e-12), "
                              "x: f32[{}], attention_mask: i32[{},{}] (0 marks a padded key, whose scores get -1e9)",
                              s.heads, c, c, c, 4 * c, c, sizes_text(s), s.batch, s.seq),
                  std::move(g),
                  m.initial_values(),
                  {}};
}

Result<SuiteRow> llama_block(const TransformerSizes& s, const LlamaSizes& l, bool train) {
  KILN_RETURN_IF_ERROR(check_sizes(s));
  const int64_t c = s.width, d = s.width / s.heads;
  if (l.kv_heads < 1 || s.heads % l.kv_heads != 0 || d % 2 != 0 || l.hidden < 1)
    return make_error(
        fmt::format("bench: LLaMA sizes H={} KV={} D={} hidden={} need KV dividing H, an even D and a "
                    "positive hidden size",
                    s.heads, l.kv_heads, d, l.hidden));
  const std::string name = train ? "llama_block_train" : "llama_block";
  const int64_t group = s.heads / l.kv_heads;
  Model m(name, 5);
  Tensor x = m.input("x", {s.batch, s.seq, c});
  // Hugging Face's LlamaDecoderLayer: its names, nn.Linear's [out, in] weights, no biases.
  const nn::LinearOptions proj{false, Init::normal(0, 0.02), nn::WeightLayout::OutIn};
  nn::RMSNorm input_norm(m, "input_layernorm", c, l.eps);
  nn::Linear q_proj(m, "self_attn.q_proj", c, c, proj);
  nn::Linear k_proj(m, "self_attn.k_proj", c, l.kv_heads * d, proj);
  nn::Linear v_proj(m, "self_attn.v_proj", c, l.kv_heads * d, proj);
  nn::Linear o_proj(m, "self_attn.o_proj", c, c, proj);
  nn::RMSNorm post_norm(m, "post_attention_layernorm", c, l.eps);
  nn::Linear gate_proj(m, "mlp.gate_proj", c, l.hidden, proj);
  nn::Linear up_proj(m, "mlp.up_proj", c, l.hidden, proj);
  nn::Linear down_proj(m, "mlp.down_proj", l.hidden, c, proj);

  // Rotary embeddings as Hugging Face tabulates them: angle(t, i) = t / base^(2i/D) for the
  // first half of D, repeated for the second; x·cos + rotate_half(x)·sin.
  std::vector<double> cos_table(s.seq * d), sin_table(s.seq * d);
  for (int64_t t = 0; t < s.seq; ++t)
    for (int64_t i = 0; i < d; ++i) {
      const double angle = static_cast<double>(t) / std::pow(l.rope_base, static_cast<double>(2 * (i % (d / 2))) / d);
      cos_table[t * d + i] = std::cos(angle);
      sin_table[t * d + i] = std::sin(angle);
    }
  Tensor cos_t = m.constant(cos_table, {s.seq, d}), sin_t = m.constant(sin_table, {s.seq, d});
  auto heads = [&](Tensor t, int64_t n) {  // [B,T,n·D] -> [B,n,T,D]
    return transpose(reshape(t, {s.batch, s.seq, n, d}), {0, 2, 1, 3});
  };
  auto rotary = [&](Tensor t) {
    const int64_t n = t.shape()[1];
    Tensor first = slice(t, {0, 0, 0, 0}, {s.batch, n, s.seq, d / 2});
    Tensor second = slice(t, {0, 0, 0, d / 2}, {s.batch, n, s.seq, d});
    return t * cos_t + concat({-second, first}, 3) * sin_t;
  };
  // Grouped-query attention: each key-value head serves `group` query heads (repeat_kv).
  auto repeat_kv = [&](Tensor t) {
    if (group == 1) return t;
    Tensor wide = broadcast(t, {s.batch, l.kv_heads, group, s.seq, d}, {0, 1, 3, 4});
    return reshape(wide, {s.batch, s.heads, s.seq, d});
  };

  Tensor h0 = input_norm(x);
  Tensor q = rotary(heads(q_proj(h0), s.heads));
  Tensor k = repeat_kv(rotary(heads(k_proj(h0), l.kv_heads)));
  Tensor v = repeat_kv(heads(v_proj(h0), l.kv_heads));
  Tensor visible = ge(m.iota({s.seq, s.seq}, 0), m.iota({s.seq, s.seq}, 1));
  Tensor scores = matmul(q, transpose(k, {0, 1, 3, 2})) * (1.0 / std::sqrt(static_cast<double>(d)));
  Tensor attended = matmul(softmax(select(visible, scores, m.scalar(kMasked)), -1), v);
  Tensor h = x + o_proj(reshape(transpose(attended, {0, 2, 1, 3}), {s.batch, s.seq, c}));
  Tensor h2 = post_norm(h);
  Tensor y = h + down_proj(silu(gate_proj(h2)) * up_proj(h2));

  const std::string what = fmt::format(
      "LLaMA-style block (pre-RMSNorm eps {}; causal self-attention with rotary embeddings (base {}), {} heads, {} "
      "key-value heads; SwiGLU MLP {}-{}-{}; no biases)",
      l.eps, l.rope_base, s.heads, l.kv_heads, c, l.hidden, c);
  return block_row(m, name, what, s, y, train);
}

Result<SuiteRow> mlp_row(const std::string& name, int64_t batch, bool train,
                         const std::optional<MixedPrecision>& mixed) {
  Model m(name, 7);
  Tensor x = m.input("x", {batch, 784});
  nn::Sequential net = nn::mlp(m, "fc", {784, 512, 512, 10}, nn::Activation::Relu);
  Tensor logits = net(x);
  if (!train) {
    m.output(logits, "logits");
    KILN_ASSIGN_OR_RETURN(ir::Graph g, m.build());
    return SuiteRow{name,
                    fmt::format("MLP 784-512-512-10 with relu, forward, x: f32[{},784]", batch),
                    std::move(g),
                    m.initial_values(),
                    {}};
  }
  Tensor labels = m.input("labels", {batch}, ir::DType::I32);
  m.output(cross_entropy(logits, labels), "loss");
  KILN_ASSIGN_OR_RETURN(TrainStep step, mixed ? build_train_step(m, Adam{}, *mixed) : build_train_step(m, Adam{}));
  return SuiteRow{
      name,
      fmt::format("MLP 784-512-512-10 with relu, cross-entropy, one Adam step, x: f32[{},784], labels: i32[{}]", batch,
                  batch),
      std::move(step.graph),
      {},
      std::move(step.initial_state)};
}

Result<std::vector<SuiteRow>> model_rows(bool quick) {
  // Full size: GPT-2 small at a 512-token context, BERT-base at 128 tokens (its
  // pre-training length for most steps), the MLP at a usual training batch.
  const TransformerSizes gpt2 = quick ? TransformerSizes{2, 16, 64, 4} : TransformerSizes{8, 512, 768, 12};
  const TransformerSizes bert = quick ? TransformerSizes{2, 16, 64, 4} : TransformerSizes{16, 128, 768, 12};
  std::vector<Result<SuiteRow>> rows;
  rows.push_back(gpt2_block(gpt2, false));
  rows.push_back(gpt2_block(gpt2, true));
  rows.push_back(bert_layer(bert));
  // A LLaMA-style block at GPT-2 small's width and context: 4 key-value heads for 12 query
  // heads, as LLaMA 3's grouped-query attention (8 for 32), and a SwiGLU hidden of 8/3·C.
  const LlamaSizes llama = quick ? LlamaSizes{2, 128, 1e-6, 10000} : LlamaSizes{4, 2048, 1e-6, 10000};
  rows.push_back(llama_block(gpt2, llama, false));
  rows.push_back(llama_block(gpt2, llama, true));
  rows.push_back(mlp_row("mlp_train", quick ? 8 : 128, true));
  rows.push_back(resnet18(quick ? 1 : 16, quick ? 32 : 224));
  rows.push_back(cnn_train(quick ? 4 : 128));
  std::vector<SuiteRow> out;
  for (auto& r : rows) {
    if (!r.ok()) return make_error("bench: cannot build the models suite: " + r.error().message);
    out.push_back(std::move(*r));
  }
  return out;
}

}  // namespace kiln::bench
