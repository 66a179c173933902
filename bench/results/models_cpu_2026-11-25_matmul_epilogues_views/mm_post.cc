#include <dnnl.hpp>
#include <chrono>
#include <vector>
#include <algorithm>
#include <cstdio>
using namespace dnnl;
int main(int argc, char** argv) {
  int M = atoi(argv[1]), N = atoi(argv[2]), K = atoi(argv[3]);
  engine eng(engine::kind::cpu, 0); stream s(eng);
  memory::desc a_md({M, K}, memory::data_type::f32, memory::format_tag::ab);
  memory::desc b_any({K, N}, memory::data_type::f32, memory::format_tag::any);
  memory::desc b_md({K, N}, memory::data_type::f32, memory::format_tag::ab);
  memory::desc bias_md({1, N}, memory::data_type::f32, memory::format_tag::ab);
  memory::desc c_md({M, N}, memory::data_type::f32, memory::format_tag::ab);
  std::vector<float> A(size_t(M)*K, 0.01f), B(size_t(K)*N, 0.02f), bias(N, 0.1f), C(size_t(M)*N);
  memory a(a_md, eng, A.data()), bm(b_md, eng, B.data()), bi(bias_md, eng, bias.data()), c(c_md, eng, C.data());
  auto make = [&](int variant) {
    primitive_attr attr; post_ops po;
    if (variant == 2) po.append_eltwise(1.f, algorithm::eltwise_gelu_erf, 0, 0);
    if (variant == 3) po.append_eltwise(1.f, algorithm::eltwise_gelu_tanh, 0, 0);
    attr.set_post_ops(po);
    auto d = variant ? matmul::desc(a_md, b_any, bias_md, c_md) : matmul::desc(a_md, b_any, c_md);
    return matmul::primitive_desc(d, attr, eng);
  };
  std::vector<matmul::primitive_desc> pds; std::vector<matmul> prims; std::vector<memory> packed;
  for (int v = 0; v < 4; ++v) { pds.push_back(make(v)); prims.emplace_back(pds.back());
    memory p(pds.back().weights_desc(), eng); reorder(bm, p).execute(s, bm, p); packed.push_back(p); }
  printf("impl %s\n", pds[2].impl_info_str());
  std::vector<std::vector<double>> t(4);
  for (int r = 0; r < 30; ++r) for (int v = 0; v < 4; ++v) {
    auto t0 = std::chrono::steady_clock::now();
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, packed[v]}, {DNNL_ARG_DST, c}};
    if (v) args.insert({DNNL_ARG_BIAS, bi});
    prims[v].execute(s, args); s.wait();
    t[v].push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  const char* names[] = {"plain", "bias", "bias+gelu_erf", "bias+gelu_tanh"};
  for (int v = 0; v < 4; ++v) { auto x = t[v]; std::sort(x.begin(), x.end()); printf("%-16s median %.3f ms\n", names[v], x[x.size()/2]); }
}
