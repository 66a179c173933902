#include "runtime/cpu/matmul.h"

#include <cblas.h>
#include <string>
#include <vector>

namespace kiln::runtime::cpu {
namespace {

// Matmul for element types BLAS does not cover, in the accumulation the interpreter uses.
template <class T, class Acc>
void matmul_loop(const T* a, const T* b, T* c, int64_t m, int64_t n, int64_t k, bool ta, bool tb) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      Acc acc = 0;
      for (int64_t q = 0; q < k; ++q)
        acc += static_cast<Acc>(a[ta ? q * m + i : i * k + q]) * static_cast<Acc>(b[tb ? j * k + q : q * n + j]);
      c[i * n + j] = static_cast<T>(acc);
    }
}

}  // namespace

Status run_matmul(const format::Matmul& mm, ElementType t, uint8_t* const* ptr) {
  int64_t m = mm.m(), n = mm.n(), k = mm.k();
  // Batch dims as an odometer over per-dim strides (0 where an operand broadcasts).
  std::vector<const format::BatchDim*> dims;
  if (mm.batch())
    for (const format::BatchDim* d : *mm.batch()) dims.push_back(d);
  std::vector<int64_t> at(dims.size(), 0);
  int64_t count = 1;
  for (const auto* d : dims) count *= d->count();
  int size = element_bytes(t);
  for (int64_t p = 0; p < count; ++p) {
    int64_t ao = 0, bo = 0, co = 0;
    for (size_t i = 0; i < dims.size(); ++i) {
      ao += at[i] * dims[i]->a_stride();
      bo += at[i] * dims[i]->b_stride();
      co += at[i] * dims[i]->c_stride();
    }
    const uint8_t* a = ptr[0] + ao * size;
    const uint8_t* b = ptr[1] + bo * size;
    uint8_t* c = ptr[2] + co * size;
    CBLAS_TRANSPOSE ta = mm.trans_a() ? CblasTrans : CblasNoTrans, tb = mm.trans_b() ? CblasTrans : CblasNoTrans;
    int lda = static_cast<int>(mm.trans_a() ? m : k), ldb = static_cast<int>(mm.trans_b() ? k : n);
    switch (t) {
      case ElementType::F32:
        cblas_sgemm(CblasRowMajor, ta, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.0f,
                    reinterpret_cast<const float*>(a), lda, reinterpret_cast<const float*>(b), ldb, 0.0f,
                    reinterpret_cast<float*>(c), static_cast<int>(n));
        break;
      case ElementType::F64:
        cblas_dgemm(CblasRowMajor, ta, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.0,
                    reinterpret_cast<const double*>(a), lda, reinterpret_cast<const double*>(b), ldb, 0.0,
                    reinterpret_cast<double*>(c), static_cast<int>(n));
        break;
      case ElementType::I32:
        matmul_loop<int32_t, int64_t>(reinterpret_cast<const int32_t*>(a), reinterpret_cast<const int32_t*>(b),
                                      reinterpret_cast<int32_t*>(c), m, n, k, mm.trans_a(), mm.trans_b());
        break;
      case ElementType::I64:
        matmul_loop<int64_t, int64_t>(reinterpret_cast<const int64_t*>(a), reinterpret_cast<const int64_t*>(b),
                                      reinterpret_cast<int64_t*>(c), m, n, k, mm.trans_a(), mm.trans_b());
        break;
      default: return make_error("runtime: matmul on " + std::string(element_type_name(t)) + " is not supported");
    }
    for (size_t i = dims.size(); i-- > 0;) {
      if (++at[i] < dims[i]->count()) break;
      at[i] = 0;
    }
  }
  return Status::Ok();
}

}  // namespace kiln::runtime::cpu
