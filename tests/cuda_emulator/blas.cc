// The cuBLAS and cuBLASLt calls kiln's runtime makes (runtime/cuda/driver.h's Blas,
// blas_lt.h's BlasLt), as a reference GEMM in stream order: double sums of the operands'
// values, the epilogue in float, rounded once to the result's type. An attribute or type
// the emulator does not know is an error, so a runtime that starts using one fails its
// emulated tests until the emulator learns it.
#include <cublasLt.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <vector>

#include "tests/cuda_emulator/emulator.h"

namespace kiln::cuda_emulator {
namespace {

float load(const void* base, cudaDataType_t type, size_t i) {
  switch (type) {
    case CUDA_R_32F: return static_cast<const float*>(base)[i];
    case CUDA_R_16F: {
      _Float16 h;
      std::memcpy(&h, static_cast<const char*>(base) + 2 * i, 2);
      return static_cast<float>(h);
    }
    case CUDA_R_16BF: {
      uint32_t bits = uint32_t{static_cast<const uint16_t*>(base)[i]} << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    }
    default: return NAN;
  }
}

void store(void* base, cudaDataType_t type, size_t i, float v) {
  switch (type) {
    case CUDA_R_32F: static_cast<float*>(base)[i] = v; break;
    case CUDA_R_16F: {
      const _Float16 h = static_cast<_Float16>(v);
      std::memcpy(static_cast<char*>(base) + 2 * i, &h, 2);
      break;
    }
    case CUDA_R_16BF: {
      uint32_t bits;
      std::memcpy(&bits, &v, 4);
      static_cast<uint16_t*>(base)[i] =
          v != v ? uint16_t{0x7fff} : static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
      break;
    }
    default: break;
  }
}

bool known_type(cudaDataType_t t) { return t == CUDA_R_32F || t == CUDA_R_16F || t == CUDA_R_16BF; }

// Column-major D = alpha·op(A)·op(B) + beta·C over a strided batch, C and D the same
// matrix; then per row i of D a bias and an activation.
struct Gemm {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0, stride_a = 0, stride_b = 0, stride_c = 0, batch = 1;
  cudaDataType_t type_a = CUDA_R_32F, type_b = CUDA_R_32F, type_c = CUDA_R_32F;
  double alpha = 1, beta = 0;
  bool tf32 = false;  // f32 operands rounded to TF32's 10 bits of mantissa, as tensor cores take them
  const void* bias = nullptr;
  enum Activation { kNone, kRelu, kGelu } activation = kNone;

  // op(A) of batch index p as rows of k (a_rows[i·k + l]) and op(B) as columns of k
  // (b_cols[j·k + l]), each element read once, so every sum runs along two arrays.
  template <class Load>
  void widen(int64_t p, const Load& load_a, const Load& load_b, std::vector<double>& a_rows,
             std::vector<double>& b_cols) const {
    a_rows.resize(static_cast<size_t>(m * k));
    b_cols.resize(static_cast<size_t>(n * k));
    for (int64_t i = 0; i < m; ++i)
      for (int64_t l = 0; l < k; ++l)
        a_rows[static_cast<size_t>(i * k + l)] = load_a(p * stride_a + (trans_a ? l + i * lda : i + l * lda));
    for (int64_t j = 0; j < n; ++j)
      for (int64_t l = 0; l < k; ++l)
        b_cols[static_cast<size_t>(j * k + l)] = load_b(p * stride_b + (trans_b ? j + l * ldb : l + j * ldb));
  }

  double dot(const std::vector<double>& a_rows, const std::vector<double>& b_cols, int64_t i, int64_t j) const {
    double sum = 0;
    const double *x = a_rows.data() + i * k, *y = b_cols.data() + j * k;
    for (int64_t l = 0; l < k; ++l) sum += x[l] * y[l];
    return sum;
  }

  template <class T>
  void run_typed(const T* a, const T* b, T* c) const {
    std::vector<double> a_rows, b_cols;
    for (int64_t p = 0; p < batch; ++p) {
      widen(p, std::function<double(int64_t)>([&](int64_t at) { return static_cast<double>(a[at]); }),
            std::function<double(int64_t)>([&](int64_t at) { return static_cast<double>(b[at]); }), a_rows, b_cols);
      for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < m; ++i) {
          T& out = c[p * stride_c + i + j * ldc];
          out = static_cast<T>(alpha * dot(a_rows, b_cols, i, j) + (beta != 0 ? beta * static_cast<double>(out) : 0.0));
        }
    }
  }

  // cvt.rna.tf32.f32: to nearest, ties away from zero.
  static float to_tf32(float v) {
    if (!std::isfinite(v)) return v;
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    bits = (bits + 0x1000u) & ~0x1fffu;
    std::memcpy(&v, &bits, 4);
    return v;
  }

  float operand(const void* base, cudaDataType_t type, size_t i) const {
    const float v = load(base, type, i);
    return tf32 && type == CUDA_R_32F ? to_tf32(v) : v;
  }

  void run(const void* a, const void* b, void* c) const {
    std::vector<double> a_rows, b_cols;
    for (int64_t p = 0; p < batch; ++p) {
      widen(p, std::function<double(int64_t)>([&](int64_t at) { return operand(a, type_a, static_cast<size_t>(at)); }),
            std::function<double(int64_t)>([&](int64_t at) { return operand(b, type_b, static_cast<size_t>(at)); }),
            a_rows, b_cols);
      for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < m; ++i) {
          const size_t at = static_cast<size_t>(p * stride_c + i + j * ldc);
          float v =
              static_cast<float>(alpha * dot(a_rows, b_cols, i, j) + (beta != 0 ? beta * load(c, type_c, at) : 0.0));
          if (bias) v += load(bias, type_c, i);
          if (activation == kRelu) v = v > 0 ? v : 0;
          if (activation == kGelu) v = 0.5f * v * (1 + std::tanh(0.7978845608f * (v + 0.044715f * v * v * v)));
          store(c, type_c, at, v);
        }
    }
  }
};

}  // namespace
}  // namespace kiln::cuda_emulator

using namespace kiln::cuda_emulator;

struct cublasContext {
  CUstream stream = nullptr;
  bool tf32 = false;
};

// cuBLAS: the v2 entry points the runtime binds, with its own declarations' types.
extern "C" {

cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) {
  *handle = new cublasContext;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  handle->stream = reinterpret_cast<CUstream>(stream);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t, void*, size_t) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  if (mode != CUBLAS_DEFAULT_MATH && mode != CUBLAS_TF32_TENSOR_OP_MATH) return CUBLAS_STATUS_NOT_SUPPORTED;
  handle->tf32 = mode == CUBLAS_TF32_TENSOR_OP_MATH;
  return CUBLAS_STATUS_SUCCESS;
}
const char* cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "CUBLAS_STATUS_INVALID_VALUE";
  }
}

// The strided-batched call's GEMM; f32 operands rounded to TF32 where the handle's math
// mode allows it.
static Gemm strided(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, double alpha,
                    int lda, long long sa, int ldb, long long sb, double beta, int ldc, long long sc, int batch) {
  Gemm g;
  g.trans_a = ta != CUBLAS_OP_N;
  g.trans_b = tb != CUBLAS_OP_N;
  g.m = m, g.n = n, g.k = k, g.lda = lda, g.ldb = ldb, g.ldc = ldc;
  g.stride_a = sa, g.stride_b = sb, g.stride_c = sc, g.batch = batch;
  g.alpha = alpha, g.beta = beta;
  g.tf32 = h->tf32;
  return g;
}

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                         int k, const float* alpha, const float* a, int lda, long long sa,
                                         const float* b, int ldb, long long sb, const float* beta, float* c, int ldc,
                                         long long sc, int batch) {
  const Gemm g = strided(h, ta, tb, m, n, k, *alpha, lda, sa, ldb, sb, *beta, ldc, sc, batch);
  enqueue(h->stream, [g, a, b, c] { g.run(a, b, c); });
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                         int k, const double* alpha, const double* a, int lda, long long sa,
                                         const double* b, int ldb, long long sb, const double* beta, double* c, int ldc,
                                         long long sc, int batch) {
  const Gemm g = strided(h, ta, tb, m, n, k, *alpha, lda, sa, ldb, sb, *beta, ldc, sc, batch);
  enqueue(h->stream, [g, a, b, c] { g.run_typed(a, b, c); });
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                          int k, const void* alpha, const void* a, cudaDataType_t type_a, int lda,
                                          long long sa, const void* b, cudaDataType_t type_b, int ldb, long long sb,
                                          const void* beta, void* c, cudaDataType_t type_c, int ldc, long long sc,
                                          int batch, cublasComputeType_t compute, cublasGemmAlgo_t) {
  if (compute != CUBLAS_COMPUTE_32F || !known_type(type_a) || !known_type(type_b) || !known_type(type_c))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  Gemm g = strided(h, ta, tb, m, n, k, *static_cast<const float*>(alpha), lda, sa, ldb, sb,
                   *static_cast<const float*>(beta), ldc, sc, batch);
  g.type_a = type_a, g.type_b = type_b, g.type_c = type_c;
  enqueue(h->stream, [g, a, b, c] { g.run(a, b, c); });
  return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"

// cuBLASLt: descriptors as plain structs behind its opaque pointers.
namespace {

struct LtDesc {
  cublasComputeType_t compute;
  cublasOperation_t trans_a = CUBLAS_OP_N, trans_b = CUBLAS_OP_N;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
};
struct LtLayout {
  cudaDataType_t type;
  uint64_t rows, cols;
  int64_t ld;
  int32_t batch = 1;
  int64_t stride = 0;
};

template <class T>
cublasStatus_t read_attribute(T& to, const void* buffer, size_t size) {
  if (size != sizeof(T)) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(&to, buffer, sizeof(T));
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t unknown(const char* what, int attribute) {
  std::fprintf(stderr, "kiln CUDA emulator: cuBLASLt %s attribute %d is not emulated\n", what, attribute);
  return CUBLAS_STATUS_NOT_SUPPORTED;
}

}  // namespace

extern "C" {

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  static int the_handle;
  *handle = reinterpret_cast<cublasLtHandle_t>(&the_handle);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t) { return CUBLAS_STATUS_SUCCESS; }
const char* cublasLtGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "CUBLAS_STATUS_INVALID_VALUE";
  }
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute, cudaDataType_t scale) {
  if (scale != CUDA_R_32F || (compute != CUBLAS_COMPUTE_32F && compute != CUBLAS_COMPUTE_32F_FAST_TF32))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  *desc = reinterpret_cast<cublasLtMatmulDesc_t>(new LtDesc{compute});
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete reinterpret_cast<LtDesc*>(desc);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute,
                                              const void* buffer, size_t size) {
  LtDesc& d = *reinterpret_cast<LtDesc*>(desc);
  switch (attribute) {
    case CUBLASLT_MATMUL_DESC_TRANSA: return read_attribute(d.trans_a, buffer, size);
    case CUBLASLT_MATMUL_DESC_TRANSB: return read_attribute(d.trans_b, buffer, size);
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: return read_attribute(d.bias, buffer, size);
    case CUBLASLT_MATMUL_DESC_EPILOGUE: {
      cublasStatus_t s = read_attribute(d.epilogue, buffer, size);
      switch (d.epilogue) {
        case CUBLASLT_EPILOGUE_DEFAULT:
        case CUBLASLT_EPILOGUE_BIAS:
        case CUBLASLT_EPILOGUE_RELU:
        case CUBLASLT_EPILOGUE_RELU_BIAS:
        case CUBLASLT_EPILOGUE_GELU:
        case CUBLASLT_EPILOGUE_GELU_BIAS: return s;
        default: return unknown("epilogue", d.epilogue);
      }
    }
    default: return unknown("matmul descriptor", attribute);
  }
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType_t type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  if (!known_type(type)) return CUBLAS_STATUS_NOT_SUPPORTED;
  *layout = reinterpret_cast<cublasLtMatrixLayout_t>(new LtLayout{type, rows, cols, ld});
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete reinterpret_cast<LtLayout*>(layout);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout,
                                                cublasLtMatrixLayoutAttribute_t attribute, const void* buffer,
                                                size_t size) {
  LtLayout& l = *reinterpret_cast<LtLayout*>(layout);
  switch (attribute) {
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: return read_attribute(l.batch, buffer, size);
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET: return read_attribute(l.stride, buffer, size);
    default: return unknown("matrix layout", attribute);
  }
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* preference) {
  static int the_preference;
  *preference = reinterpret_cast<cublasLtMatmulPreference_t>(&the_preference);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t,
                                                    cublasLtMatmulPreferenceAttributes_t attribute, const void*,
                                                    size_t) {
  switch (attribute) {
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES: return CUBLAS_STATUS_SUCCESS;
    default: return unknown("preference", attribute);
  }
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t,
                                              cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                                              cublasLtMatmulPreference_t, int requested,
                                              cublasLtMatmulHeuristicResult_t* results, int* count) {
  *count = 0;
  if (requested < 1) return CUBLAS_STATUS_INVALID_VALUE;
  std::memset(&results[0], 0, sizeof results[0]);
  results[0].state = CUBLAS_STATUS_SUCCESS;
  *count = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t desc, const void* alpha, const void* a,
                              cublasLtMatrixLayout_t a_layout, const void* b, cublasLtMatrixLayout_t b_layout,
                              const void* beta, const void* c, cublasLtMatrixLayout_t c_layout, void* d,
                              cublasLtMatrixLayout_t d_layout, const cublasLtMatmulAlgo_t*, void*, size_t,
                              cudaStream_t stream) {
  const LtDesc& dd = *reinterpret_cast<const LtDesc*>(desc);
  const LtLayout &la = *reinterpret_cast<const LtLayout*>(a_layout), &lb = *reinterpret_cast<const LtLayout*>(b_layout),
                 &lc = *reinterpret_cast<const LtLayout*>(c_layout), &ld = *reinterpret_cast<const LtLayout*>(d_layout);
  Gemm g;
  g.trans_a = dd.trans_a == CUBLAS_OP_T;
  g.trans_b = dd.trans_b == CUBLAS_OP_T;
  g.m = static_cast<int64_t>(ld.rows), g.n = static_cast<int64_t>(ld.cols);
  g.k = static_cast<int64_t>(g.trans_a ? la.rows : la.cols);
  const bool shapes_agree = (g.trans_a ? la.cols : la.rows) == ld.rows &&
                            (g.trans_b ? lb.cols : lb.rows) == uint64_t(g.k) &&
                            (g.trans_b ? lb.rows : lb.cols) == ld.cols && lc.rows == ld.rows && lc.cols == ld.cols &&
                            la.batch == ld.batch && lb.batch == ld.batch && lc.batch == ld.batch;
  if (!shapes_agree || c != d || lc.ld != ld.ld || lc.type != ld.type) return CUBLAS_STATUS_INVALID_VALUE;
  g.lda = la.ld, g.ldb = lb.ld, g.ldc = ld.ld;
  g.stride_a = la.stride, g.stride_b = lb.stride, g.stride_c = ld.stride, g.batch = ld.batch;
  g.type_a = la.type, g.type_b = lb.type, g.type_c = ld.type;
  g.alpha = *static_cast<const float*>(alpha), g.beta = *static_cast<const float*>(beta);
  g.tf32 = dd.compute == CUBLAS_COMPUTE_32F_FAST_TF32;
  if (dd.epilogue & CUBLASLT_EPILOGUE_BIAS) {
    if (!dd.bias) return CUBLAS_STATUS_INVALID_VALUE;
    g.bias = dd.bias;
  }
  const int activation = dd.epilogue & ~CUBLASLT_EPILOGUE_BIAS;
  g.activation = activation == CUBLASLT_EPILOGUE_RELU   ? Gemm::kRelu
                 : activation == CUBLASLT_EPILOGUE_GELU ? Gemm::kGelu
                                                        : Gemm::kNone;
  enqueue(reinterpret_cast<CUstream>(stream), [g, a, b, d] { g.run(a, b, d); });
  return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"
