#include "runtime/cpu/winograd.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <string_view>

namespace kiln::runtime::cpu {

Result<bool> winograd_allowed() {
  static const Result<bool> allowed = []() -> Result<bool> {
    const char* setting = std::getenv("KILN_CPU_WINOGRAD");
    if (!setting || std::string_view(setting) == "on") return true;
    if (std::string_view(setting) == "off") return false;
    return make_error("runtime: KILN_CPU_WINOGRAD is '" + std::string(setting) + "'; it takes on or off");
  }();
  return allowed;
}

namespace {

// The matrices of the products, (m + 2)² of them: matrix i*(m + 2)+j holds element (i, j)
// of every tile's transformed block, a row per tile.
int64_t matrices(const WinogradShape& s) { return (s.m + 2) * (s.m + 2); }

// The shape with tiles of m x m outputs.
WinogradShape tiled(WinogradShape s, int64_t m) {
  s.m = m;
  s.tiles_h = (s.oh + m - 1) / m, s.tiles_w = (s.ow + m - 1) / m, s.tiles = s.n * s.tiles_h * s.tiles_w;
  return s;
}

// The transformed input and products of one pass at most, in bytes: the tiles run in
// passes of equal size within it (a batch of 32 images of ResNet's first layers would
// take 115 MB each at once; one image takes at most 3.6 MB, one pass).
constexpr int64_t kPassBytes = int64_t{8} << 20;

// G, which transforms the 3x3 weights g into U = G g Gᵀ, for F(2x2, 3x3) and F(4x4, 3x3)
// (Lavin and Gray).
constexpr double kG2[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
constexpr double kG4[6][3] = {{1.0 / 4, 0, 0},
                              {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                              {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                              {1.0 / 24, 1.0 / 12, 1.0 / 6},
                              {1.0 / 24, -1.0 / 12, 1.0 / 6},
                              {0, 0, 1}};

bool all_equal(const flatbuffers::Vector<int64_t>* v, int64_t value) {
  for (int64_t d : *v)
    if (d != value) return false;
  return true;
}

}  // namespace

std::unique_ptr<WinogradConv> WinogradConv::plan(const DnnlApi& api, const format::Conv& c) {
  if (!__builtin_cpu_supports("avx512f")) return nullptr;
  if (c.kind() != format::ConvKind::Forward || c.groups() > 1 || c.x()->size() != 4 || c.w()->Get(2) != 3 ||
      c.w()->Get(3) != 3 || !all_equal(c.strides(), 1) || !all_equal(c.dilations(), 1))
    return nullptr;
  WinogradShape s{};
  s.n = c.x()->Get(0), s.c = c.x()->Get(1), s.h = c.x()->Get(2), s.w = c.x()->Get(3);
  s.k = c.y()->Get(1), s.oh = c.y()->Get(2), s.ow = c.y()->Get(3);
  s.pad_top = c.pads_lo()->Get(0), s.pad_left = c.pads_lo()->Get(1);
  // The larger tiles where there are enough of them: 4x4 outputs take 36 products per pair
  // of channels for 16 outputs (2.25 per output), 2x2 ones 16 for 4 (4 per output).
  s = tiled(s, 4);
  if (s.tiles < kWinogradMinTiles) s = tiled(s, 2);
  if (s.c % 16 != 0 || s.k % 16 != 0 || s.c < kWinogradMinChannels || s.k < kWinogradMinChannels ||
      s.tiles < kWinogradMinTiles)
    return nullptr;
  const int64_t passes = (matrices(s) * s.tiles * (s.c + s.k) * 4 + kPassBytes - 1) / kPassBytes;
  s.rows = (s.tiles + passes - 1) / passes;
  std::unique_ptr<WinogradConv> p(new WinogradConv);
  // Every post-op but an erf GELU, which has no erf here (oneDNN's kernel applies it).
  if (c.post_ops())
    for (const format::PostOp* op : *c.post_ops()) {
      if (op->kind() == format::PostOpKind::GeluErf) return nullptr;
      p->post_ops_.push_back({op->kind(), op->lo(), op->hi()});
    }
  // The products of a pass: [(m+2)², rows, C] x [(m+2)², C, K] -> [(m+2)², rows, K], B in
  // the layout oneDNN picks.
  const dnnl_dim_t v_dims[] = {matrices(s), s.rows, s.c}, u_dims[] = {matrices(s), s.c, s.k},
                   m_dims[] = {matrices(s), s.rows, s.k};
  dnnl_memory_desc_t u_any;
  if (api.memory_desc_init_by_tag(&p->v_md_, 3, v_dims, dnnl_f32, dnnl_abc) != dnnl_success ||
      api.memory_desc_init_by_tag(&p->u_plain_md_, 3, u_dims, dnnl_f32, dnnl_abc) != dnnl_success ||
      api.memory_desc_init_by_tag(&u_any, 3, u_dims, dnnl_f32, dnnl_format_tag_any) != dnnl_success ||
      api.memory_desc_init_by_tag(&p->m_md_, 3, m_dims, dnnl_f32, dnnl_abc) != dnnl_success)
    return nullptr;
  dnnl_matmul_desc_t desc;
  if (api.matmul_desc_init(&desc, &p->v_md_, &u_any, nullptr, &p->m_md_) != dnnl_success) return nullptr;
  dnnl_primitive_desc_t pd = dnnl_describe(api, &desc, nullptr);
  if (!pd) return nullptr;
  const dnnl_memory_desc_t* chosen = api.primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
  const std::string impl = dnnl_implementation(api, pd);
  if (chosen && !impl.empty() && !dnnl_reference(impl)) {
    p->u_md_ = *chosen;
    p->packed_bytes_ = api.memory_desc_get_size(chosen);
    p->pack_reorder_ = dnnl_reorder(api, p->u_plain_md_, p->u_md_);
    if (p->pack_reorder_.primitive) p->products_ = dnnl_create(api, pd);
    p->implementation_ = "winograd_" + std::to_string(s.m) + "x" + std::to_string(s.m) + "_3x3 + " + impl;
  }
  api.primitive_desc_destroy(pd);
  if (!p->products_.primitive) return nullptr;
  p->api_ = &api;
  p->shape_ = s;
  p->what_ = "the Winograd products of a " + std::to_string(s.h) + "x" + std::to_string(s.w) + " convolution of " +
             std::to_string(s.c) + " to " + std::to_string(s.k) + " channels";
  return p;
}

Status WinogradConv::pack(const uint8_t* w, uint8_t* to, int threads) const {
  // U = G g Gᵀ per pair of channels, in double and rounded once.
  const WinogradShape& s = shape_;
  const int n = static_cast<int>(s.m) + 2;
  const double(*g)[3] = s.m == 4 ? kG4 : kG2;
  std::vector<float> u(static_cast<size_t>(matrices(s) * s.c * s.k));
  const float* weights = reinterpret_cast<const float*>(w);
  for (int64_t k = 0; k < s.k; ++k)
    for (int64_t c = 0; c < s.c; ++c) {
      const float* taps = weights + (k * s.c + c) * 9;
      double gw[6][3];  // G g
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < 3; ++j) gw[i][j] = g[i][0] * taps[j] + g[i][1] * taps[3 + j] + g[i][2] * taps[6 + j];
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j)
          u[static_cast<size_t>(((i * n + j) * s.c + c) * s.k + k)] =
              static_cast<float>(gw[i][0] * g[j][0] + gw[i][1] * g[j][1] + gw[i][2] * g[j][2]);
    }
  const DnnlArg reorder[] = {{DNNL_ARG_FROM, &u_plain_md_, u.data()}, {DNNL_ARG_TO, &u_md_, to}};
  return dnnl_run(*api_, pack_reorder_, reorder, threads, "the packing of " + what_);
}

Status WinogradConv::run(const uint8_t* x, const uint8_t* packed, uint8_t* y, const PostOpOperands& post, int threads,
                         ThreadPool* pool) const {
  const WinogradShape& s = shape_;
  thread_local std::vector<uint8_t> v_buffer, m_buffer;
  float* v = reinterpret_cast<float*>(aligned_in(v_buffer, matrices(s) * s.rows * s.c * sizeof(float)));
  float* m = reinterpret_cast<float*>(aligned_in(m_buffer, matrices(s) * s.rows * s.k * sizeof(float)));
  std::vector<const float*> operands;
  for (uint8_t* operand : post.per_post_op) operands.push_back(reinterpret_cast<const float*>(operand));
  const float* xf = reinterpret_cast<const float*>(x);
  float* yf = reinterpret_cast<float*>(y);
  const DnnlArg products[] = {
      {DNNL_ARG_SRC, &v_md_, v}, {DNNL_ARG_WEIGHTS, &u_md_, const_cast<uint8_t*>(packed)}, {DNNL_ARG_DST, &m_md_, m}};
  // A last pass of fewer tiles multiplies the rows the one before left too; its output
  // transform reads only its own.
  for (int64_t first = 0; first < s.tiles; first += s.rows) {
    const int64_t count = std::min(s.rows, s.tiles - first);
    auto over_tiles = [&](const std::function<void(int64_t, int64_t)>& body) {
      auto shifted = [&](int64_t begin, int64_t end) { body(first + begin, first + end); };
      if (pool) pool->parallel_for(count, 4, shifted);
      else shifted(0, count);
    };
    over_tiles([&](int64_t begin, int64_t end) { winograd_input_tiles(s, xf, v, first, begin, end); });
    KILN_RETURN_IF_ERROR(dnnl_run(*api_, products_, products, threads, what_));
    over_tiles([&](int64_t begin, int64_t end) {
      winograd_output_tiles(s, m, yf, post_ops_, operands.data(), first, begin, end);
    });
  }
  return Status::Ok();
}

}  // namespace kiln::runtime::cpu
