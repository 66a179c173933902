#include "runtime/cuda/blas_lt.h"

#include <algorithm>
#include <mutex>

#include "runtime/cuda/driver.h"

namespace kiln::runtime::cuda {
namespace {

Result<const BlasLt*> open_blas_lt() {
  KILN_ASSIGN_OR_RETURN(auto opened,
                        open_library("KILN_LIBCUBLASLT", "libcublasLt.so.13", "libcublasLt.so", "cuBLASLt"));
  auto [library, file] = opened;
  static BlasLt lt;
  std::string missing;
  bind_symbol(library, lt.create, "cublasLtCreate", missing);
  bind_symbol(library, lt.destroy, "cublasLtDestroy", missing);
  bind_symbol(library, lt.matmul_desc_create, "cublasLtMatmulDescCreate", missing);
  bind_symbol(library, lt.matmul_desc_destroy, "cublasLtMatmulDescDestroy", missing);
  bind_symbol(library, lt.matmul_desc_set_attribute, "cublasLtMatmulDescSetAttribute", missing);
  bind_symbol(library, lt.layout_create, "cublasLtMatrixLayoutCreate", missing);
  bind_symbol(library, lt.layout_destroy, "cublasLtMatrixLayoutDestroy", missing);
  bind_symbol(library, lt.layout_set_attribute, "cublasLtMatrixLayoutSetAttribute", missing);
  bind_symbol(library, lt.preference_create, "cublasLtMatmulPreferenceCreate", missing);
  bind_symbol(library, lt.preference_destroy, "cublasLtMatmulPreferenceDestroy", missing);
  bind_symbol(library, lt.preference_set_attribute, "cublasLtMatmulPreferenceSetAttribute", missing);
  bind_symbol(library, lt.algo_get_heuristic, "cublasLtMatmulAlgoGetHeuristic", missing);
  bind_symbol(library, lt.matmul, "cublasLtMatmul", missing);
  bind_symbol(library, lt.status_string, "cublasLtGetStatusString", missing);
  if (!missing.empty()) return make_error("cuBLASLt in " + file + " lacks " + missing);
  return &lt;
}

// The largest power of two up to 256 that divides the address: what the heuristic may
// assume of it.
uint32_t alignment_of(CUdeviceptr p) {
  if (p == 0) return 256;
  return static_cast<uint32_t>(std::min<CUdeviceptr>(256, p & (~p + 1)));
}

}  // namespace

Result<const BlasLt*> blas_lt() {
  static std::once_flag once;
  static Result<const BlasLt*> opened = Error{};
  std::call_once(once, [] { opened = open_blas_lt(); });
  return opened;
}

Status LtMatmul::check(cublasStatus_t status, const char* call) const {
  if (status == CUBLAS_STATUS_SUCCESS) return Status::Ok();
  return make_error("runtime: cuBLASLt error in step " + name_ + " (" + call + "): " + lt_->status_string(status));
}

Result<std::unique_ptr<LtMatmul>> LtMatmul::create(const BlasLt* lt, cublasLtHandle_t handle, const format::Matmul& mm,
                                                   format::DType dtype, bool allow_tf32, size_t workspace_bytes,
                                                   std::string step_name) {
  std::unique_ptr<LtMatmul> op(new LtMatmul(lt, handle, std::move(step_name)));
  op->workspace_bytes_ = workspace_bytes;
  cudaDataType_t type;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  switch (dtype) {
    case format::DType::F32:
      type = CUDA_R_32F;
      if (allow_tf32) compute = CUBLAS_COMPUTE_32F_FAST_TF32;
      break;
    case format::DType::F16: type = CUDA_R_16F; break;
    case format::DType::BF16: type = CUDA_R_16BF; break;
    default:
      return make_error("runtime: step " + op->name_ + ": cuBLASLt runs f32, f16 and bf16 matmuls, not " +
                        format::EnumNameDType(dtype));
  }
  // The epilogue: a bias first, then at most one activation (the reader checked the order).
  bool bias = false;
  cublasLtEpilogue_t activation = CUBLASLT_EPILOGUE_DEFAULT;
  if (mm.post_ops())
    for (const format::PostOp* p : *mm.post_ops()) {
      if (p->kind() == format::PostOpKind::Bias) bias = true;
      else if (p->kind() == format::PostOpKind::Relu) activation = CUBLASLT_EPILOGUE_RELU;
      else if (p->kind() == format::PostOpKind::GeluTanh) activation = CUBLASLT_EPILOGUE_GELU;
      else
        return make_error("runtime: step " + op->name_ + " has a post-op cuBLASLt does not apply (" +
                          format::EnumNamePostOpKind(p->kind()) + ")");
    }
  if (bias) {
    op->epilogue_ = activation == CUBLASLT_EPILOGUE_RELU   ? CUBLASLT_EPILOGUE_RELU_BIAS
                    : activation == CUBLASLT_EPILOGUE_GELU ? CUBLASLT_EPILOGUE_GELU_BIAS
                                                           : CUBLASLT_EPILOGUE_BIAS;
  } else {
    op->epilogue_ = activation;
  }
  // Row-major C[m,n] = op(A)·op(B) is column-major Cᵀ[n,m] = op(B)ᵀ·op(A)ᵀ: cuBLASLt's
  // first operand is B, stored column-major as [n,k] (or [k,n] transposed).
  const uint64_t m = static_cast<uint64_t>(mm.m()), n = static_cast<uint64_t>(mm.n()),
                 k = static_cast<uint64_t>(mm.k());
  const int64_t lda = mm.lda() ? mm.lda() : static_cast<int64_t>(mm.trans_a() ? m : k);
  const int64_t ldb = mm.ldb() ? mm.ldb() : static_cast<int64_t>(mm.trans_b() ? k : n);
  const cublasOperation_t first_op = mm.trans_b() ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t second_op = mm.trans_a() ? CUBLAS_OP_T : CUBLAS_OP_N;
  KILN_RETURN_IF_ERROR(op->check(lt->matmul_desc_create(&op->desc_, compute, CUDA_R_32F), "cublasLtMatmulDescCreate"));
  auto set = [&](cublasLtMatmulDescAttributes_t attribute, const auto& value) {
    return op->check(lt->matmul_desc_set_attribute(op->desc_, attribute, &value, sizeof value),
                     "cublasLtMatmulDescSetAttribute");
  };
  KILN_RETURN_IF_ERROR(set(CUBLASLT_MATMUL_DESC_TRANSA, first_op));
  KILN_RETURN_IF_ERROR(set(CUBLASLT_MATMUL_DESC_TRANSB, second_op));
  KILN_RETURN_IF_ERROR(set(CUBLASLT_MATMUL_DESC_EPILOGUE, op->epilogue_));
  const bool first_t = mm.trans_b(), second_t = mm.trans_a();
  KILN_RETURN_IF_ERROR(op->check(lt->layout_create(&op->first_, type, first_t ? k : n, first_t ? n : k, ldb),
                                 "cublasLtMatrixLayoutCreate"));
  KILN_RETURN_IF_ERROR(op->check(lt->layout_create(&op->second_, type, second_t ? m : k, second_t ? k : m, lda),
                                 "cublasLtMatrixLayoutCreate"));
  KILN_RETURN_IF_ERROR(
      op->check(lt->layout_create(&op->result_, type, n, m, static_cast<int64_t>(n)), "cublasLtMatrixLayoutCreate"));
  // The innermost batch dim is a strided batch (the executor loops over outer ones).
  if (mm.batch() && mm.batch()->size() > 0) {
    const format::BatchDim* inner = mm.batch()->Get(mm.batch()->size() - 1);
    const int32_t count = static_cast<int32_t>(inner->count());
    const std::pair<cublasLtMatrixLayout_t, int64_t> strides[] = {
        {op->first_, inner->b_stride()}, {op->second_, inner->a_stride()}, {op->result_, inner->c_stride()}};
    for (auto [layout, stride] : strides) {
      KILN_RETURN_IF_ERROR(
          op->check(lt->layout_set_attribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count),
                    "cublasLtMatrixLayoutSetAttribute"));
      KILN_RETURN_IF_ERROR(op->check(
          lt->layout_set_attribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride),
          "cublasLtMatrixLayoutSetAttribute"));
    }
  }
  return op;
}

LtMatmul::~LtMatmul() {
  if (desc_) lt_->matmul_desc_destroy(desc_);
  for (cublasLtMatrixLayout_t layout : {first_, second_, result_})
    if (layout) lt_->layout_destroy(layout);
}

const char* LtMatmul::epilogue_name() const {
  switch (epilogue_) {
    case CUBLASLT_EPILOGUE_BIAS: return "BIAS";
    case CUBLASLT_EPILOGUE_RELU: return "RELU";
    case CUBLASLT_EPILOGUE_RELU_BIAS: return "RELU_BIAS";
    case CUBLASLT_EPILOGUE_GELU: return "GELU";
    case CUBLASLT_EPILOGUE_GELU_BIAS: return "GELU_BIAS";
    default: return "DEFAULT";
  }
}

Result<const cublasLtMatmulAlgo_t*> LtMatmul::algorithm(std::array<uint32_t, 3> alignment) const {
  if (auto known = algorithms_.find(alignment); known != algorithms_.end()) return &known->second;
  cublasLtMatmulPreference_t preference = nullptr;
  KILN_RETURN_IF_ERROR(check(lt_->preference_create(&preference), "cublasLtMatmulPreferenceCreate"));
  // cuBLASLt's A is kiln's B (create's comment): alignment = {A, B, C} in kiln's terms.
  const uint64_t workspace = workspace_bytes_;
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> aligned[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignment[1]},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignment[0]},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, alignment[2]},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, alignment[2]}};
  Status status = check(
      lt_->preference_set_attribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace),
      "cublasLtMatmulPreferenceSetAttribute");
  for (auto [attribute, bytes] : aligned)
    if (status.ok())
      status = check(lt_->preference_set_attribute(preference, attribute, &bytes, sizeof bytes),
                     "cublasLtMatmulPreferenceSetAttribute");
  cublasLtMatmulHeuristicResult_t found{};
  int count = 0;
  if (status.ok())
    status =
        check(lt_->algo_get_heuristic(handle_, desc_, first_, second_, result_, result_, preference, 1, &found, &count),
              "cublasLtMatmulAlgoGetHeuristic");
  lt_->preference_destroy(preference);
  KILN_RETURN_IF_ERROR(status);
  if (count < 1)
    return make_error("runtime: step " + name_ + ": cuBLASLt has no algorithm for this matmul with epilogue " +
                      epilogue_name() + " and operands aligned to " + std::to_string(alignment[0]) + ", " +
                      std::to_string(alignment[1]) + " and " + std::to_string(alignment[2]) + " bytes");
  return &(algorithms_[alignment] = found.algo);
}

Status LtMatmul::prepare(CUdeviceptr a, CUdeviceptr b, CUdeviceptr c) const {
  auto chosen = algorithm({alignment_of(a), alignment_of(b), alignment_of(c)});
  if (!chosen.ok()) return chosen.error();
  return Status::Ok();
}

Status LtMatmul::enqueue(CUdeviceptr a, CUdeviceptr b, CUdeviceptr c, CUdeviceptr bias, CUstream stream,
                         CUdeviceptr workspace) const {
  KILN_ASSIGN_OR_RETURN(const cublasLtMatmulAlgo_t* algo,
                        algorithm({alignment_of(a), alignment_of(b), alignment_of(c)}));
  if (epilogue_ & CUBLASLT_EPILOGUE_BIAS) {
    const void* pointer = reinterpret_cast<const void*>(bias);
    KILN_RETURN_IF_ERROR(
        check(lt_->matmul_desc_set_attribute(desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &pointer, sizeof pointer),
              "cublasLtMatmulDescSetAttribute"));
  }
  const float one = 1, zero = 0;
  return check(
      lt_->matmul(handle_, desc_, &one, reinterpret_cast<const void*>(b), first_, reinterpret_cast<const void*>(a),
                  second_, &zero, reinterpret_cast<const void*>(c), result_, reinterpret_cast<void*>(c), result_, algo,
                  reinterpret_cast<void*>(workspace), workspace_bytes_, stream),
      "cublasLtMatmul");
}

}  // namespace kiln::runtime::cuda
