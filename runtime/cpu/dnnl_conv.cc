#include "runtime/cpu/dnnl_conv.h"

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/cpu/conv_gemm.h"
#include "runtime/cpu/dnnl.h"

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

struct Prepared {
  DnnlPrimitive primitive;
  dnnl_memory_desc_t x{}, w{}, y{};
};

std::string describe(const format::Conv& c) {
  static const char* kinds[] = {"convolution", "convolution's input gradient", "convolution's weight gradient"};
  return std::string(kinds[static_cast<int>(c.kind())]) + " of x " + shape_text(c.x()) + " with w " +
         shape_text(c.w()) + " to y " + shape_text(c.y());
}

// The primitive of each distinct convolution, made once.
const Prepared& prepared(const DnnlApi& api, const format::Conv& c) {
  static std::mutex mutex;
  static std::map<std::vector<int64_t>, Prepared> cache;
  std::vector<int64_t> key = {static_cast<int64_t>(c.kind()), c.groups()};
  for (const auto* v : {c.x(), c.w(), c.y(), c.strides(), c.dilations(), c.pads_lo(), c.pads_hi()}) {
    key.push_back(-1);
    key.insert(key.end(), v->begin(), v->end());
  }
  std::lock_guard<std::mutex> lock(mutex);
  auto [it, inserted] = cache.try_emplace(key);
  if (!inserted) return it->second;
  Prepared& prep = it->second;
  std::vector<dnnl_dim_t> x = dims_of(c.x()), y = dims_of(c.y()), w = dims_of(c.w());
  if (c.groups() > 1) {  // grouped weights: [G, O/G, C/G, K...]
    w[0] /= c.groups();
    w.insert(w.begin(), c.groups());
  }
  std::vector<dnnl_dim_t> strides = dims_of(c.strides()), dilations = dims_of(c.dilations()), lo = dims_of(c.pads_lo()),
                          hi = dims_of(c.pads_hi());
  for (dnnl_dim_t& d : dilations) d -= 1;  // oneDNN counts the gaps between taps
  if (api.memory_desc_init_by_tag(&prep.x, static_cast<int>(x.size()), x.data(), dnnl_f32, plain(x.size())) !=
          dnnl_success ||
      api.memory_desc_init_by_tag(&prep.w, static_cast<int>(w.size()), w.data(), dnnl_f32, plain(w.size())) !=
          dnnl_success ||
      api.memory_desc_init_by_tag(&prep.y, static_cast<int>(y.size()), y.data(), dnnl_f32, plain(y.size())) !=
          dnnl_success)
    return prep;
  dnnl_convolution_desc_t forward;
  const bool inference = c.kind() == format::ConvKind::Forward;
  if (api.conv_forward_desc_init(&forward, inference ? dnnl_forward_inference : dnnl_forward_training,
                                 dnnl_convolution_direct, &prep.x, &prep.w, nullptr, &prep.y, strides.data(),
                                 dilations.data(), lo.data(), hi.data()) != dnnl_success)
    return prep;
  dnnl_primitive_desc_t forward_pd = dnnl_describe(api, &forward, nullptr);
  if (!forward_pd) return prep;
  if (inference) {
    prep.primitive = dnnl_create(api, forward_pd);
  } else {
    dnnl_convolution_desc_t backward;
    const bool data = c.kind() == format::ConvKind::BackwardData;
    const dnnl_status_t made =
        data ? api.conv_backward_data_desc_init(&backward, dnnl_convolution_direct, &prep.x, &prep.w, &prep.y,
                                                strides.data(), dilations.data(), lo.data(), hi.data())
             : api.conv_backward_weights_desc_init(&backward, dnnl_convolution_direct, &prep.x, &prep.w, nullptr,
                                                   &prep.y, strides.data(), dilations.data(), lo.data(), hi.data());
    if (made == dnnl_success) {
      dnnl_primitive_desc_t pd = dnnl_describe(api, &backward, forward_pd);
      prep.primitive = dnnl_create(api, pd);
      if (pd) api.primitive_desc_destroy(pd);
    }
  }
  api.primitive_desc_destroy(forward_pd);
  return prep;
}

}  // namespace

Status run_conv(const format::Conv& conv, uint8_t* const* args, int threads) {
  const DnnlApi* api = dnnl_api();
  if (!api) return run_conv_gemm(conv, args);
  const Prepared& prep = prepared(*api, conv);
  if (!prep.primitive.primitive) return make_error("runtime: oneDNN has no primitive for the " + describe(conv));
  std::vector<DnnlArg> operands;
  switch (conv.kind()) {
    case format::ConvKind::Forward:
      operands = {
          {DNNL_ARG_SRC, &prep.x, args[0]}, {DNNL_ARG_WEIGHTS, &prep.w, args[1]}, {DNNL_ARG_DST, &prep.y, args[2]}};
      break;
    case format::ConvKind::BackwardData:
      operands = {{DNNL_ARG_DIFF_DST, &prep.y, args[0]},
                  {DNNL_ARG_WEIGHTS, &prep.w, args[1]},
                  {DNNL_ARG_DIFF_SRC, &prep.x, args[2]}};
      break;
    case format::ConvKind::BackwardWeights:
      operands = {{DNNL_ARG_SRC, &prep.x, args[0]},
                  {DNNL_ARG_DIFF_DST, &prep.y, args[1]},
                  {DNNL_ARG_DIFF_WEIGHTS, &prep.w, args[2]}};
      break;
  }
  return dnnl_run(*api, prep.primitive, operands, threads, "the " + describe(conv));
}

}  // namespace kiln::runtime::cpu
