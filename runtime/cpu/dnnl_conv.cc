#include "runtime/cpu/dnnl_conv.h"

#include <bit>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/cpu/conv_gemm.h"
#include "runtime/cpu/dnnl.h"
#include "runtime/cpu/post_ops.h"
#include "runtime/cpu/score_rows.h"
#include "runtime/cpu/widened.h"
#include "runtime/cpu/winograd.h"

namespace kiln::runtime::cpu {
namespace {

std::vector<dnnl_dim_t> dims_of(const flatbuffers::Vector<int64_t>* v) { return {v->begin(), v->end()}; }

std::string shape_text(const flatbuffers::Vector<int64_t>* v) {
  std::string s = "[";
  for (uint32_t i = 0; i < v->size(); ++i) s += (i ? "," : "") + std::to_string(v->Get(i));
  return s + "]";
}

// The row-major ("plain") format of a rank: abc, abcd, ...
dnnl_format_tag_t plain(size_t rank) {
  switch (rank) {
    case 3: return dnnl_abc;
    case 4: return dnnl_abcd;
    case 5: return dnnl_abcde;
    default: return dnnl_abcdef;
  }
}

// Input channels up to which an ungrouped convolution's result is asked for channel-blocked.
constexpr int64_t kFewChannels = 4;

dnnl_data_type_t dnnl_type(format::DType t) {
  return t == format::DType::BF16 ? dnnl_bf16 : t == format::DType::F16 ? dnnl_f16 : dnnl_f32;
}

constexpr ConvTypes kF32;

bool half(ConvTypes types) { return types.in != format::DType::F32; }

// The channels-last layout (nhwc and its 1-D and 3-D forms) of dims, or false.
bool channels_last_md(const DnnlApi& api, const std::vector<dnnl_dim_t>& dims, dnnl_data_type_t type,
                      dnnl_memory_desc_t& last) {
  const dnnl_format_tag_t tag = dims.size() == 3 ? dnnl_acb : dims.size() == 4 ? dnnl_acdb : dnnl_acdeb;
  return dims.size() >= 3 && dims.size() <= 5 &&
         api.memory_desc_init_by_tag(&last, static_cast<int>(dims.size()), dims.data(), type, tag) == dnnl_success;
}

// Whether md is the channels-last layout of dims.
bool channels_last(const DnnlApi& api, const dnnl_memory_desc_t& md, const std::vector<dnnl_dim_t>& dims) {
  dnnl_memory_desc_t last;
  return channels_last_md(api, dims, md.data_type, last) && api.memory_desc_equal(&md, &last);
}

// Channels in blocks of one vector of floats: 16 with AVX-512, else 8.
dnnl_format_tag_t channel_blocked(size_t rank) {
  const bool wide = __builtin_cpu_supports("avx512f");
  if (rank == 3) return wide ? dnnl_aBc16b : dnnl_aBc8b;
  if (rank == 4) return wide ? dnnl_aBcd16b : dnnl_aBcd8b;
  return wide ? dnnl_aBcde16b : dnnl_aBcde8b;
}

// One operand of a convolution: its plain (IR) layout, the layout oneDNN's primitive
// chose (a blocked one such as nChw16c, which its fastest kernels take), and the reorder
// between them where they differ.
struct Operand {
  dnnl_memory_desc_t plain{}, chosen{};
  DnnlPrimitive reorder;  // plain -> chosen for inputs, chosen -> plain for the output
  size_t chosen_bytes = 0;
  bool reordered() const { return reorder.primitive != nullptr; }
};

struct Prepared {
  DnnlPrimitive primitive;
  Operand x, w, y;
  bool bias = false;  // the first post-op, oneDNN's bias argument
  dnnl_memory_desc_t bias_md{};
  bool sum = false;                              // an added tensor, put in y's buffer first for oneDNN's sum post-op
  DnnlPrimitive y_in;                            // the reorder of that tensor into y's layout, where y has another
  dnnl_memory_desc_t channel_md{};               // [1, O, 1...]: binary post-ops' per-channel operands
  std::vector<std::pair<uint32_t, int>> binary;  // (post-op, oneDNN argument) per per-channel operand
  // The step's operands in order (two inputs, then the output) with their oneDNN roles.
  const Operand* in_order[3] = {};
  int roles[3] = {};
  std::string what, reorder_what;  // for errors
  std::string implementation;      // oneDNN's name for the kernel it picked
  // Where x and y are channels-last and the shape suits it: the same convolution as
  // Winograd's F(4x4, 3x3) or F(2x2, 3x3), run where its weights were packed for it.
  std::unique_ptr<WinogradConv> winograd;
};

std::string describe(const format::Conv& c) {
  static const char* kinds[] = {"convolution", "convolution's input gradient", "convolution's weight gradient"};
  return std::string(kinds[static_cast<int>(c.kind())]) + " of x " + shape_text(c.x()) + " with w " +
         shape_text(c.w()) + " to y " + shape_text(c.y());
}

// The primitive of each distinct convolution, made once. A bf16 or f16 one gets none where
// oneDNN has only its reference kernel for it (the caller then widens).
const Prepared& prepared(const DnnlApi& api, const format::Conv& c, ConvTypes types, bool few_channels_blocked) {
  static std::mutex mutex;
  static std::map<std::vector<int64_t>, Prepared> cache;
  // The request matters only to a forward, ungrouped convolution of few input channels
  // (below); others share one primitive either way, not a second one made at load.
  few_channels_blocked = few_channels_blocked && c.kind() == format::ConvKind::Forward && c.groups() <= 1 &&
                         c.x()->size() > 1 && c.x()->Get(1) <= kFewChannels;
  std::vector<int64_t> key = {static_cast<int64_t>(c.kind()), c.groups(), few_channels_blocked,
                              static_cast<int64_t>(types.in), static_cast<int64_t>(types.out)};
  for (const auto* v : {c.x(), c.w(), c.y(), c.strides(), c.dilations(), c.pads_lo(), c.pads_hi()}) {
    key.push_back(-1);
    key.insert(key.end(), v->begin(), v->end());
  }
  if (c.post_ops())
    for (const format::PostOp* p : *c.post_ops()) {
      key.push_back(-2 - static_cast<int64_t>(p->kind()));
      key.push_back(std::bit_cast<int32_t>(p->lo()));
      key.push_back(std::bit_cast<int32_t>(p->hi()));
    }
  std::lock_guard<std::mutex> lock(mutex);
  auto [it, inserted] = cache.try_emplace(key);
  if (!inserted) return it->second;
  Prepared& prep = it->second;
  prep.what = "the " + describe(c);
  prep.reorder_what = "a reorder for " + prep.what;
  switch (c.kind()) {
    case format::ConvKind::Forward:
      prep.in_order[0] = &prep.x, prep.in_order[1] = &prep.w, prep.in_order[2] = &prep.y;
      prep.roles[0] = DNNL_ARG_SRC, prep.roles[1] = DNNL_ARG_WEIGHTS, prep.roles[2] = DNNL_ARG_DST;
      break;
    case format::ConvKind::BackwardData:
      prep.in_order[0] = &prep.y, prep.in_order[1] = &prep.w, prep.in_order[2] = &prep.x;
      prep.roles[0] = DNNL_ARG_DIFF_DST, prep.roles[1] = DNNL_ARG_WEIGHTS, prep.roles[2] = DNNL_ARG_DIFF_SRC;
      break;
    case format::ConvKind::BackwardWeights:
      prep.in_order[0] = &prep.x, prep.in_order[1] = &prep.y, prep.in_order[2] = &prep.w;
      prep.roles[0] = DNNL_ARG_SRC, prep.roles[1] = DNNL_ARG_DIFF_DST, prep.roles[2] = DNNL_ARG_DIFF_WEIGHTS;
      break;
  }
  std::vector<dnnl_dim_t> x = dims_of(c.x()), y = dims_of(c.y()), w = dims_of(c.w());
  if (c.groups() > 1) {  // grouped weights: [G, O/G, C/G, K...]
    w[0] /= c.groups();
    w.insert(w.begin(), c.groups());
  }
  std::vector<dnnl_dim_t> strides = dims_of(c.strides()), dilations = dims_of(c.dilations()), lo = dims_of(c.pads_lo()),
                          hi = dims_of(c.pads_hi());
  for (dnnl_dim_t& d : dilations) d -= 1;  // oneDNN counts the gaps between taps
  // Plain layouts for the operands as they lie in memory; "any" lets the primitive pick.
  // The result (y forward, dx and dw backward) takes the out type, the inputs the in type.
  const dnnl_data_type_t in = dnnl_type(types.in), out = dnnl_type(types.out);
  const dnnl_data_type_t x_type = c.kind() == format::ConvKind::BackwardData ? out : in,
                         w_type = c.kind() == format::ConvKind::BackwardWeights ? out : in,
                         y_type = c.kind() == format::ConvKind::Forward ? out : in;
  dnnl_memory_desc_t any_x, any_w, any_y;
  auto init = [&](dnnl_memory_desc_t& plain_md, dnnl_memory_desc_t& any_md, const std::vector<dnnl_dim_t>& dims,
                  dnnl_data_type_t type) {
    const int n = static_cast<int>(dims.size());
    return api.memory_desc_init_by_tag(&plain_md, n, dims.data(), type, plain(dims.size())) == dnnl_success &&
           api.memory_desc_init_by_tag(&any_md, n, dims.data(), type, dnnl_format_tag_any) == dnnl_success;
  };
  if (!init(prep.x.plain, any_x, x, x_type) || !init(prep.w.plain, any_w, w, w_type) ||
      !init(prep.y.plain, any_y, y, y_type))
    return prep;
  const bool inference = c.kind() == format::ConvKind::Forward;
  // The post-ops: a bias first is the primitive's own; an added tensor is a sum.
  dnnl_post_ops_t post_ops = nullptr;
  if (c.post_ops() && c.post_ops()->size() > 0) {
    if (api.post_ops_create(&post_ops) != dnnl_success) return prep;
    std::vector<dnnl_dim_t> channel_dims(y.size(), 1);
    channel_dims[1] = y[1];
    bool made = api.memory_desc_init_by_tag(&prep.channel_md, static_cast<int>(y.size()), channel_dims.data(), dnnl_f32,
                                            plain(y.size())) == dnnl_success;
    int entries = 0;  // oneDNN's post-op chain (the bias is none of it)
    for (uint32_t k = 0; k < c.post_ops()->size(); ++k) {
      const format::PostOp* p = c.post_ops()->Get(k);
      dnnl_alg_kind_t binary = dnnl_alg_kind_undef;
      if (p->kind() == format::PostOpKind::ChannelAdd) binary = dnnl_binary_add;
      if (p->kind() == format::PostOpKind::ChannelSub) binary = dnnl_binary_sub;
      if (p->kind() == format::PostOpKind::ChannelMul) binary = dnnl_binary_mul;
      if (binary != dnnl_alg_kind_undef) {
        made = made && api.post_ops_append_binary(post_ops, binary, &prep.channel_md) == dnnl_success;
        prep.binary.emplace_back(k, DNNL_ARG_ATTR_MULTIPLE_POST_OP(entries) | DNNL_ARG_SRC_1);
      }
      entries += p->kind() != format::PostOpKind::Bias;
      switch (p->kind()) {
        case format::PostOpKind::Bias: {
          const dnnl_dim_t channels = y[1];
          prep.bias = api.memory_desc_init_by_tag(&prep.bias_md, 1, &channels, dnnl_f32, dnnl_a) == dnnl_success;
          made = made && prep.bias;
          break;
        }
        case format::PostOpKind::Relu:
        case format::PostOpKind::Clip:
        case format::PostOpKind::Sigmoid:
        case format::PostOpKind::Tanh:
        case format::PostOpKind::Silu:
        case format::PostOpKind::HardSwish:
        case format::PostOpKind::GeluErf:
        case format::PostOpKind::GeluTanh: made = made && append_dnnl_activation(api, post_ops, *p); break;
        case format::PostOpKind::Add:
          prep.sum = true;
          made = made && api.post_ops_append_sum(post_ops, 1.0f) == dnnl_success;
          break;
        case format::PostOpKind::ChannelAdd:
        case format::PostOpKind::ChannelSub:
        case format::PostOpKind::ChannelMul: break;  // binary, above
      }
    }
    if (!made) {
      api.post_ops_destroy(post_ops);
      return prep;
    }
  }
  // The forward primitive reading x in `src`'s layout and writing its result in `dst`'s, or
  // null.
  auto describe_forward = [&](const dnnl_memory_desc_t& src, const dnnl_memory_desc_t& dst) -> dnnl_primitive_desc_t {
    dnnl_convolution_desc_t forward;
    const dnnl_status_t described = api.conv_forward_desc_init(
        &forward, inference ? dnnl_forward_inference : dnnl_forward_training, dnnl_convolution_direct, &src, &any_w,
        prep.bias ? &prep.bias_md : nullptr, &dst, strides.data(), dilations.data(), lo.data(), hi.data());
    return described == dnnl_success ? dnnl_describe(api, &forward, nullptr, post_ops) : nullptr;
  };
  dnnl_primitive_desc_t forward_pd = describe_forward(any_x, any_y);
  // A convolution of few input channels (an image network's first) gets oneDNN's
  // channels-last result. Where a step after it needs that plain (plan_layouts says so),
  // the reorder is a transpose; a channel-blocked result reorders to plain in contiguous
  // runs, and its kernel was faster too: Fashion-MNIST's conv1 1.80 -> 0.79 ms, ResNet's
  // 28.3 -> 17.9 ms with the reorder (docs/cpu.md). Not for grouped ones: a depthwise
  // convolution (one input channel per group) asked for a blocked result got oneDNN's
  // reference kernel, 50x slower (MobileNetV2 7 -> 130 ms).
  if (few_channels_blocked && forward_pd &&
      channels_last(api, *api.primitive_desc_query_md(forward_pd, dnnl_query_dst_md, 0), y)) {
    dnnl_memory_desc_t blocked_y;
    if (api.memory_desc_init_by_tag(&blocked_y, static_cast<int>(y.size()), y.data(), y_type,
                                    channel_blocked(y.size())) == dnnl_success)
      if (dnnl_primitive_desc_t blocked_pd = describe_forward(any_x, blocked_y)) {
        api.primitive_desc_destroy(forward_pd);
        forward_pd = blocked_pd;
      }
  }
  // A grouped convolution of several channels per group gets blocks of 4 or 8 channels
  // (aBcd4b) from oneDNN, and two reorders per run between channels-last neighbours
  // (0.25-0.3 ms of ResNeXt-50's 0.5-0.6 ms steps at 56x56). Asked for channels-last, its
  // kernel ran as fast (0.26 against 0.25 ms at 56x56, 0.084 against 0.096 at 14x14);
  // it keeps that where oneDNN has an optimized kernel for it.
  if (c.kind() == format::ConvKind::Forward && c.groups() > 1 && forward_pd &&
      !channels_last(api, *api.primitive_desc_query_md(forward_pd, dnnl_query_dst_md, 0), y)) {
    dnnl_memory_desc_t last_x, last_y;
    if (channels_last_md(api, x, x_type, last_x) && channels_last_md(api, y, y_type, last_y))
      if (dnnl_primitive_desc_t last_pd = describe_forward(last_x, last_y)) {
        const std::string impl = dnnl_implementation(api, last_pd);
        if (!impl.empty() && !dnnl_reference(impl)) {
          api.primitive_desc_destroy(forward_pd);
          forward_pd = last_pd;
        } else {
          api.primitive_desc_destroy(last_pd);
        }
      }
  }
  dnnl_primitive_desc_t pd = nullptr;
  if (post_ops) api.post_ops_destroy(post_ops);
  if (!forward_pd) return prep;
  dnnl_query_t x_query = dnnl_query_src_md, w_query = dnnl_query_weights_md, y_query = dnnl_query_dst_md;
  if (inference) {
    pd = forward_pd;
  } else {
    dnnl_convolution_desc_t backward;
    const bool data = c.kind() == format::ConvKind::BackwardData;
    const dnnl_status_t made =
        data ? api.conv_backward_data_desc_init(&backward, dnnl_convolution_direct, &any_x, &any_w, &any_y,
                                                strides.data(), dilations.data(), lo.data(), hi.data())
             : api.conv_backward_weights_desc_init(&backward, dnnl_convolution_direct, &any_x, &any_w, nullptr, &any_y,
                                                   strides.data(), dilations.data(), lo.data(), hi.data());
    if (made == dnnl_success) pd = dnnl_describe(api, &backward, forward_pd);
    if (data) x_query = dnnl_query_diff_src_md;
    else w_query = dnnl_query_diff_weights_md;
    y_query = dnnl_query_diff_dst_md;
  }
  // A half-precision convolution oneDNN has only its reference kernel for widens instead.
  if (pd && half(types) && dnnl_reference(dnnl_implementation(api, pd))) {
    if (pd != forward_pd) api.primitive_desc_destroy(pd);
    pd = nullptr;
  }
  if (pd) {
    const bool x_in = c.kind() != format::ConvKind::BackwardData, w_in = c.kind() != format::ConvKind::BackwardWeights;
    bool ready = true;
    auto choose = [&](Operand& o, dnnl_query_t query, bool input) {
      const dnnl_memory_desc_t* md = api.primitive_desc_query_md(pd, query, 0);
      if (!md) return void(ready = false);
      o.chosen = *md;
      o.chosen_bytes = api.memory_desc_get_size(md);
      if (api.memory_desc_equal(&o.chosen, &o.plain)) return;
      o.reorder = input ? dnnl_reorder(api, o.plain, o.chosen) : dnnl_reorder(api, o.chosen, o.plain);
      ready = ready && o.reorder.primitive;
    };
    choose(prep.x, x_query, x_in);
    choose(prep.w, w_query, w_in);
    choose(prep.y, y_query, c.kind() != format::ConvKind::Forward);
    if (prep.sum && prep.y.reordered()) {
      prep.y_in = dnnl_reorder(api, prep.y.plain, prep.y.chosen);
      ready = ready && prep.y_in.primitive;
    }
    if (ready) prep.primitive = dnnl_create(api, pd);
    if (prep.primitive.primitive) prep.implementation = dnnl_implementation(api, pd);
    const Result<bool> winograd = winograd_allowed();
    if (prep.primitive.primitive && inference && !half(types) && winograd.ok() && *winograd &&
        channels_last(api, prep.x.chosen, x) && channels_last(api, prep.y.chosen, y))
      prep.winograd = WinogradConv::plan(api, c);
  }
  if (pd && pd != forward_pd) api.primitive_desc_destroy(pd);
  api.primitive_desc_destroy(forward_pd);
  return prep;
}

// The dims of a convolution step's operand i: its two inputs, then its result (2).
const flatbuffers::Vector<int64_t>* operand_dims(const format::Conv& c, int i) {
  const flatbuffers::Vector<int64_t>* dims[3][3] = {
      {c.x(), c.w(), c.y()}, {c.y(), c.w(), c.x()}, {c.x(), c.y(), c.w()}};
  return dims[static_cast<int>(c.kind())][i];
}

int64_t elements_of(const flatbuffers::Vector<int64_t>* dims) {
  int64_t n = 1;
  for (int64_t d : *dims) n *= d;
  return n;
}

// Whether a convolution runs as the f32 one on widened inputs: a half-precision one
// without oneDNN or without an optimized primitive of its types.
bool widens(const DnnlApi* api, const format::Conv& c, ConvTypes types, bool few_channels_blocked) {
  return half(types) && (!api || !prepared(*api, c, types, few_channels_blocked).primitive.primitive);
}

Half half_type(ConvTypes types) { return types.in == format::DType::BF16 ? Half::BF16 : Half::F16; }

}  // namespace

ConvTypes conv_types(const format::Step& step, const flatbuffers::Vector<flatbuffers::Offset<format::Value>>& values) {
  return {values.Get(step.inputs()->Get(0))->dtype(), values.Get(step.outputs()->Get(0))->dtype()};
}

size_t packed_conv_weights_bytes(const format::Conv& conv, ConvTypes types, bool few_channels_blocked) {
  const DnnlApi* api = dnnl_api();
  if (!api || conv.kind() != format::ConvKind::Forward) return 0;
  if (widens(api, conv, types, few_channels_blocked))
    return packed_conv_weights_bytes(conv, kF32, few_channels_blocked);
  const Prepared& prep = prepared(*api, conv, types, few_channels_blocked);
  if (prep.winograd) return prep.winograd->packed_bytes();
  return prep.primitive.primitive && prep.w.reordered() ? prep.w.chosen_bytes : 0;
}

Status pack_conv_weights(const format::Conv& conv, ConvTypes types, const uint8_t* w, uint8_t* to, int threads,
                         bool few_channels_blocked) {
  const DnnlApi* api = dnnl_api();
  if (!api || packed_conv_weights_bytes(conv, types, few_channels_blocked) == 0)
    return make_error("runtime: the " + describe(conv) + " has no packed weights");
  if (widens(api, conv, types, few_channels_blocked)) {
    std::vector<float> wide(static_cast<size_t>(elements_of(conv.w())));
    widen_half(reinterpret_cast<const uint16_t*>(w), wide.data(), static_cast<int64_t>(wide.size()), half_type(types));
    return pack_conv_weights(conv, kF32, reinterpret_cast<const uint8_t*>(wide.data()), to, threads,
                             few_channels_blocked);
  }
  const Prepared& prep = prepared(*api, conv, types, few_channels_blocked);
  if (prep.winograd) return prep.winograd->pack(w, to, threads);
  const DnnlArg reorder[] = {{DNNL_ARG_FROM, &prep.w.plain, const_cast<uint8_t*>(w)},
                             {DNNL_ARG_TO, &prep.w.chosen, to}};
  return dnnl_run(*api, prep.w.reorder, reorder, threads, prep.reorder_what);
}

namespace {

// The bytes of a forward convolution's result where it is f32 (a residual's, which the
// reader allows on an f32 result only).
size_t result_bytes(const format::Conv& c) { return static_cast<size_t>(elements_of(c.y())) * sizeof(float); }

// The step input a convolution's residual add reads, or -1.
int added_input(const format::Conv& c) {
  if (c.post_ops())
    for (const format::PostOp* p : *c.post_ops())
      if (p->kind() == format::PostOpKind::Add) return p->input();
  return -1;
}

// A half-precision convolution as the f32 one: its inputs widened into the calling
// thread's buffers (the weights packed widened already where `packed_weights`), its result
// computed in f32 with the post-ops, then rounded to its type, or written in place where
// it is f32. Element by element, so in whatever layout `layout` says they lie
// (conv_native_layouts).
Status run_conv_widened(const format::Conv& conv, ConvTypes types, uint8_t* const* args, int threads,
                        const uint8_t* packed_weights, StepLayout layout, ThreadPool* pool) {
  const int64_t elements[3] = {elements_of(operand_dims(conv, 0)), elements_of(operand_dims(conv, 1)),
                               elements_of(operand_dims(conv, 2))};
  return run_widened(args, result_argument(conv.post_ops()), elements, packed_weights != nullptr,
                     types.out == format::DType::F32, half_type(types), pool, threads, [&](uint8_t* const* wide_args) {
                       return run_conv(conv, kF32, wide_args, threads, packed_weights, layout, pool);
                     });
}

}  // namespace

std::string conv_implementation(const format::Conv& conv, ConvTypes types, bool few_channels_blocked,
                                bool packed_weights) {
  const DnnlApi* api = dnnl_api();
  if (!api) return std::string();
  if (widens(api, conv, types, few_channels_blocked)) {
    const std::string f32 = conv_implementation(conv, kF32, few_channels_blocked, packed_weights);
    return f32.empty() ? f32 : "widened to f32 + " + f32;
  }
  const Prepared& prep = prepared(*api, conv, types, few_channels_blocked);
  return prep.winograd && packed_weights ? prep.winograd->implementation() : prep.implementation;
}

std::optional<ConvNativeLayouts> conv_native_layouts(const format::Conv& conv, ConvTypes types,
                                                     bool few_channels_blocked) {
  const DnnlApi* api = dnnl_api();
  if (!api || conv.kind() != format::ConvKind::Forward) return std::nullopt;
  if (widens(api, conv, types, few_channels_blocked)) {
    // The f32 primitive's layouts in the values' own types: x and y widen and narrow
    // element by element in place of their order. MobileNetV2 in f16 ran 4.7 times as long
    // as in f32 with its activations reordered to the plain layout around each widening.
    std::optional<ConvNativeLayouts> f32 = conv_native_layouts(conv, kF32, few_channels_blocked);
    if (f32) {
      f32->x.data_type = dnnl_type(types.in);
      f32->y.data_type = dnnl_type(types.out);
    }
    return f32;
  }
  const Prepared& p = prepared(*api, conv, types, few_channels_blocked);
  if (!p.primitive.primitive) return std::nullopt;
  return ConvNativeLayouts{p.x.chosen, p.y.chosen, p.y.chosen_bytes == api->memory_desc_get_size(&p.y.plain)};
}

int conv_added_input(const format::Conv& conv) { return added_input(conv); }

Status run_conv(const format::Conv& conv, ConvTypes types, uint8_t* const* args, int threads,
                const uint8_t* packed_weights, StepLayout layout, ThreadPool* pool) {
  const DnnlApi* api = dnnl_api();
  if (widens(api, conv, types, layout.y_blocked))
    return run_conv_widened(conv, types, args, threads, packed_weights, layout, pool);
  // args: x, w (or their backward counterparts), the post-ops' operands, the result.
  PostOpOperands post = post_op_operands(conv.post_ops(), args);
  uint8_t* const core[3] = {args[0], args[1], post.result};
  const Prepared* prep = api ? &prepared(*api, conv, types, layout.y_blocked) : nullptr;
  // The memory plan may put the result over the residual it adds (the sum post-op reads
  // it from there). Where the residual must move first (the portable path computes the
  // result before adding it; a reorder cannot run in place), it moves from a copy.
  const bool added_in_place = post.added && post.added == post.result;
  thread_local std::vector<uint8_t> residual;
  auto set_residual_aside = [&] {
    residual.assign(post.added, post.added + result_bytes(conv));
    for (uint8_t*& p : post.per_post_op) p = p == post.added ? residual.data() : p;
    post.added = residual.data();
  };
  // As for matmuls: where oneDNN has no primitive for a call, the portable path runs it.
  if (!prep || !prep->primitive.primitive) {
    if (added_in_place) set_residual_aside();
    KILN_RETURN_IF_ERROR(run_conv_gemm(conv, core));
    const int64_t elements = static_cast<int64_t>(result_bytes(conv) / sizeof(float)), channels = conv.y()->Get(1);
    apply_post_ops(conv.post_ops(), post, elements, channels, elements / conv.y()->Get(0) / channels);
    return Status::Ok();
  }
  // Operands in another layout than the primitive's go through the calling thread's
  // buffers, reordered in before and out after.
  thread_local std::vector<uint8_t> buffers[3];
  std::vector<DnnlArg> operands(3);
  for (int i = 0; i < 3; ++i) {
    const Operand& o = *prep->in_order[i];
    void* at = core[i];
    const bool native = (i == 0 && layout.x_native) || (i == 2 && layout.y_native);
    if (&o == &prep->w && packed_weights) {
      at = const_cast<uint8_t*>(packed_weights);
    } else if (o.reordered() && !native) {
      at = aligned_in(buffers[i], o.chosen_bytes);
      if (i < 2) {
        const DnnlArg reorder[] = {{DNNL_ARG_FROM, &o.plain, core[i]}, {DNNL_ARG_TO, &o.chosen, at}};
        KILN_RETURN_IF_ERROR(dnnl_run(*api, o.reorder, reorder, threads, prep->reorder_what));
      }
    }
    operands[i] = {prep->roles[i], &o.chosen, at};
  }
  if (prep->sum) {  // the sum post-op adds what the result's buffer holds
    if (layout.added_native || !prep->y.reordered()) {
      if (operands[2].data != post.added) std::memcpy(operands[2].data, post.added, prep->y.chosen_bytes);
    } else {
      if (operands[2].data == post.added) set_residual_aside();
      const DnnlArg reorder[] = {{DNNL_ARG_FROM, &prep->y.plain, post.added},
                                 {DNNL_ARG_TO, &prep->y.chosen, operands[2].data}};
      KILN_RETURN_IF_ERROR(dnnl_run(*api, prep->y_in, reorder, threads, prep->reorder_what));
    }
  }
  if (prep->bias) operands.push_back({DNNL_ARG_BIAS, &prep->bias_md, post.bias});
  for (auto [k, arg] : prep->binary) operands.push_back({arg, &prep->channel_md, post.per_post_op[k]});
  // Packed weights were packed for Winograd where it applies (pack_conv_weights).
  if (prep->winograd && packed_weights)
    KILN_RETURN_IF_ERROR(prep->winograd->run(static_cast<const uint8_t*>(operands[0].data), packed_weights,
                                             static_cast<uint8_t*>(operands[2].data), post, threads, pool));
  else KILN_RETURN_IF_ERROR(dnnl_run(*api, prep->primitive, operands, threads, prep->what));
  if (const Operand& out = *prep->in_order[2]; out.reordered() && !layout.y_native) {
    const DnnlArg reorder[] = {{DNNL_ARG_FROM, &out.chosen, operands[2].data}, {DNNL_ARG_TO, &out.plain, core[2]}};
    KILN_RETURN_IF_ERROR(dnnl_run(*api, out.reorder, reorder, threads, prep->reorder_what));
  }
  return Status::Ok();
}

}  // namespace kiln::runtime::cpu
