#include <oneapi/dnnl/dnnl.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
using namespace dnnl;
using tag = memory::format_tag;
double med(std::vector<double> t) { std::sort(t.begin(), t.end()); return t[t.size() / 2]; }
static std::vector<float> junk(64<<20>>2); float sink;
template <class F> double timeit(F f) { std::vector<double> t; for (int i = 0; i < 200; ++i) { if (getenv("COLD")) { for (size_t j = 0; j < junk.size(); j += 16) junk[j] += 1.f; } auto a = std::chrono::steady_clock::now(); f(); t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count()); } t.erase(t.begin(), t.begin() + 40); return med(t); }
int main(int argc, char** argv) {
  engine eng(engine::kind::cpu, 0); stream s(eng);
  int ic = atoi(argv[1]), oc = atoi(argv[2]), hw = atoi(argv[3]), k = argc > 4 ? atoi(argv[4]) : 1;
  memory::dims x{1, ic, hw, hw}, w{oc, ic, k, k}, y{1, oc, hw, hw};
  struct Case { const char* name; tag xt, yt; };
  Case cases[] = {{"nhwc", tag::nhwc, tag::nhwc}, {"nChw16c", tag::nChw16c, tag::nChw16c}, {"any", tag::any, tag::any}};
  for (auto& c : cases) {
    auto xd = memory::desc(x, memory::data_type::f32, c.xt), wd = memory::desc(w, memory::data_type::f32, tag::any),
         yd = memory::desc(y, memory::data_type::f32, c.yt);
    auto d = convolution_forward::desc(prop_kind::forward_inference, algorithm::convolution_direct, xd, wd, yd,
                                       {1,1}, {k/2,k/2}, {k/2,k/2});
    post_ops po; po.append_eltwise(1.f, algorithm::eltwise_relu, 0, 0); primitive_attr at; at.set_post_ops(po);
    convolution_forward::primitive_desc pd(d, at, eng);
    memory xm(pd.src_desc(), eng), wm(pd.weights_desc(), eng), ym(pd.dst_desc(), eng);
    convolution_forward p(pd);
    double t = timeit([&] { p.execute(s, {{DNNL_ARG_SRC, xm}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DST, ym}}); s.wait(); });
    std::printf("conv %-8s %-26s %.3f ms\n", c.name, pd.impl_info_str(), t);
  }
  if (k == 1) {
    memory::dims a{hw * hw, ic}, b{ic, oc}, r{hw * hw, oc};
    auto ad = memory::desc(a, memory::data_type::f32, tag::ab), bd = memory::desc(b, memory::data_type::f32, tag::any),
         rd = memory::desc(r, memory::data_type::f32, tag::ab);
    post_ops po; po.append_eltwise(1.f, algorithm::eltwise_relu, 0, 0); primitive_attr at; at.set_post_ops(po);
    matmul::primitive_desc pd(matmul::desc(ad, bd, rd), at, eng);
    memory am(ad, eng), bm(pd.weights_desc(), eng), rm(rd, eng);
    matmul p(pd);
    double t = timeit([&] { p.execute(s, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, rm}}); s.wait(); });
    std::printf("matmul   %-26s %.3f ms\n", pd.impl_info_str(), t);
    auto id = inner_product_forward::desc(prop_kind::forward_inference, memory::desc({hw*hw, ic}, memory::data_type::f32, tag::ab),
        memory::desc({oc, ic}, memory::data_type::f32, tag::any), memory::desc({hw*hw, oc}, memory::data_type::f32, tag::ab));
    inner_product_forward::primitive_desc ipd(id, at, eng);
    memory im(ipd.src_desc(), eng), iw(ipd.weights_desc(), eng), io(ipd.dst_desc(), eng);
    inner_product_forward ip(ipd);
    t = timeit([&] { ip.execute(s, {{DNNL_ARG_SRC, im}, {DNNL_ARG_WEIGHTS, iw}, {DNNL_ARG_DST, io}}); s.wait(); });
    std::printf("ip       %-26s %.3f ms\n", ipd.impl_info_str(), t);
  }
}
