// cuBLASLt, opened at run time like cuBLAS: the f32, f16 and bf16 matmuls of CUDA
// artifacts, with their epilogues (a bias, relu, tanh GELU) applied on the way out.
#pragma once

#include <cublasLt.h>
#include <cuda.h>

#include <array>
#include <map>
#include <memory>
#include <string>

#include "base/result.h"
#include "runtime/format/artifact.h"

namespace kiln::runtime::cuda {

/// The cuBLASLt entry points the runtime calls (their types from cublasLt.h; nothing is
/// linked).
struct BlasLt {
  decltype(&::cublasLtCreate) create;
  decltype(&::cublasLtDestroy) destroy;
  decltype(&::cublasLtMatmulDescCreate) matmul_desc_create;
  decltype(&::cublasLtMatmulDescDestroy) matmul_desc_destroy;
  decltype(&::cublasLtMatmulDescSetAttribute) matmul_desc_set_attribute;
  decltype(&::cublasLtMatrixLayoutCreate) layout_create;
  decltype(&::cublasLtMatrixLayoutDestroy) layout_destroy;
  decltype(&::cublasLtMatrixLayoutSetAttribute) layout_set_attribute;
  decltype(&::cublasLtMatmulPreferenceCreate) preference_create;
  decltype(&::cublasLtMatmulPreferenceDestroy) preference_destroy;
  decltype(&::cublasLtMatmulPreferenceSetAttribute) preference_set_attribute;
  decltype(&::cublasLtMatmulAlgoGetHeuristic) algo_get_heuristic;
  decltype(&::cublasLtMatmul) matmul;
  decltype(&::cublasLtGetStatusString) status_string;
};

/// Opens cuBLASLt (once per process; $KILN_LIBCUBLASLT names another file).
Result<const BlasLt*> blas_lt();

/// One library step's cublasLtMatmul on one session: its descriptor (transposes, compute
/// type, epilogue), the three matrix layouts (the innermost batch dim as a strided batch)
/// and, per alignment of the pointers it is called with, the algorithm that
/// cublasLtMatmulAlgoGetHeuristic chose for them, asked once.
class LtMatmul {
 public:
  /// `dtype` is the operands' and the result's (f32, f16 or bf16); f32 uses TF32 tensor
  /// cores only with `allow_tf32`. The post-ops are a bias, then relu or GeluTanh, or
  /// fewer (format/artifact.fbs); anything else is an error naming the step.
  static Result<std::unique_ptr<LtMatmul>> create(const BlasLt* lt, cublasLtHandle_t handle, const format::Matmul& mm,
                                                  format::DType dtype, bool allow_tf32, size_t workspace_bytes,
                                                  std::string step_name);
  ~LtMatmul();
  LtMatmul(const LtMatmul&) = delete;
  LtMatmul& operator=(const LtMatmul&) = delete;

  /// Enqueues C = op(A)·op(B) (then the epilogue; `bias` where it has one) on `stream`.
  /// a, b and c are the first batch index's elements.
  Status enqueue(CUdeviceptr a, CUdeviceptr b, CUdeviceptr c, CUdeviceptr bias, CUstream stream,
                 CUdeviceptr workspace) const;

  /// Chooses the algorithm for these pointers (enqueue's), without enqueueing anything.
  Status prepare(CUdeviceptr a, CUdeviceptr b, CUdeviceptr c) const;

  /// The epilogue's name in cublasLt's terms ("GELU_BIAS"; "DEFAULT" without one).
  const char* epilogue_name() const;

 private:
  LtMatmul(const BlasLt* lt, cublasLtHandle_t handle, std::string step_name)
      : lt_(lt), handle_(handle), name_(std::move(step_name)) {}
  Status check(cublasStatus_t status, const char* call) const;
  // The heuristic's algorithm for pointers aligned to these bytes (A, B, C: powers of two
  // up to 256), asked on first use.
  Result<const cublasLtMatmulAlgo_t*> algorithm(std::array<uint32_t, 3> alignment) const;

  const BlasLt* lt_;
  cublasLtHandle_t handle_;
  std::string name_;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t first_ = nullptr, second_ = nullptr, result_ = nullptr;
  cublasLtEpilogue_t epilogue_ = CUBLASLT_EPILOGUE_DEFAULT;
  size_t workspace_bytes_ = 0;
  mutable std::map<std::array<uint32_t, 3>, cublasLtMatmulAlgo_t> algorithms_;
};

}  // namespace kiln::runtime::cuda
