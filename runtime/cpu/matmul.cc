#include "runtime/cpu/matmul.h"

#include <cblas.h>
#include <dlfcn.h>
#include <cstdint>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "runtime/cpu/dnnl_matmul.h"
#include "runtime/cpu/host_cpu.h"
#include "runtime/cpu/post_ops.h"
#include "runtime/cpu/score_rows.h"
#include "runtime/cpu/thread_pool.h"
#include "runtime/cpu/widened.h"

namespace kiln::runtime::cpu {
namespace {

// Matmul for element types BLAS does not cover, in the accumulation the interpreter uses.
template <class T, class Acc>
void matmul_loop(const T* a, const T* b, T* c, int64_t m, int64_t n, int64_t k, bool ta, bool tb, int64_t lda,
                 int64_t ldb) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      Acc acc = 0;
      for (int64_t q = 0; q < k; ++q)
        acc +=
            static_cast<Acc>(a[ta ? q * lda + i : i * lda + q]) * static_cast<Acc>(b[tb ? j * ldb + q : q * ldb + j]);
      c[i * n + j] = static_cast<T>(acc);
    }
}

// oneDNN's C API, declared here rather than through its headers (only the calls kiln makes).
struct Dnnl {
  struct Version {
    int major, minor, patch;
    const char* hash;
    unsigned cpu_runtime, gpu_runtime;
  };
  int (*sgemm)(char transa, char transb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
               const float* b, int64_t ldb, float beta, float* c, int64_t ldc) = nullptr;
  const Version* (*version)() = nullptr;
  int (*effective_cpu_isa)() = nullptr;
  std::string why_not;  // when sgemm is null
};

const Dnnl& dnnl() {
  static const Dnnl d = [] {
    Dnnl d;
    void* library = dnnl_library().handle;
    if (!library) {
      d.why_not = dnnl_library().why_not;
      return d;
    }
    d.sgemm = reinterpret_cast<decltype(d.sgemm)>(dlsym(library, "dnnl_sgemm"));
    d.version = reinterpret_cast<decltype(d.version)>(dlsym(library, "dnnl_version"));
    d.effective_cpu_isa = reinterpret_cast<decltype(d.effective_cpu_isa)>(dlsym(library, "dnnl_get_effective_cpu_isa"));
    if (!d.sgemm || !d.version || !d.effective_cpu_isa) {
      d.sgemm = nullptr;
      d.why_not = "oneDNN is too old: it lacks dnnl_sgemm, dnnl_version or dnnl_get_effective_cpu_isa";
    }
    return d;
  }();
  return d;
}

// The names of dnnl_cpu_isa_t, and whether each has AVX2 kernels (its bits include avx2's, 0x7).
std::string dnnl_isa_name(int isa) {
  switch (isa) {
    case 0x1: return "sse41";
    case 0x3: return "avx";
    case 0x7: return "avx2";
    case 0x407: return "avx2_vnni";
    case 0x27: return "avx512_core";
    case 0x67: return "avx512_core_vnni";
    case 0xe7: return "avx512_core_bf16";
    case 0x3e7: return "avx512_core_amx";
    default: return "isa " + std::to_string(isa);
  }
}

// OpenBLAS's kernel families with AVX2 or AVX-512 code; any other on an AVX2 CPU is a
// fallback (as on the H100 machine's Xeon, which OpenBLAS 0.3.21 ran with Prescott's).
bool openblas_uses_avx2(const std::string& core) {
  for (const char* name : {"Haswell", "Zen", "SkylakeX", "Cooperlake", "SapphireRapids", "Excavator"})
    if (core == name) return true;
  return false;
}

}  // namespace

Status sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
             const float* b, int64_t ldb, float* c, int64_t ldc, int threads, float beta) {
  if (const Dnnl& d = dnnl(); d.sgemm) {
    if (auto set_threads = dnnl_library().omp_set_num_threads) set_threads(threads);
    if (int status = d.sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc); status != 0)
      return make_error("runtime: oneDNN's sgemm failed with status " + std::to_string(status) + " for a " +
                        std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + " matmul");
    return Status::Ok();
  }
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta,
              c, static_cast<int>(ldc));
  return Status::Ok();
}

std::string matmul_library() {
  const bool avx2 = host_has_cpu_feature("avx2");
  const std::string core = openblas_get_corename() ? openblas_get_corename() : "unknown";
  const std::string config = openblas_get_config();  // "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ..."
  std::string openblas = config.substr(0, config.find(' ', config.find(' ') + 1));
  openblas += " (" + core + " kernels" +
              (avx2 && !openblas_uses_avx2(core) ? ": GENERIC, this CPU has AVX2 but OpenBLAS does not know it" : "") +
              ")";
  const Dnnl& d = dnnl();
  if (!d.sgemm) return openblas + " (" + d.why_not + ")";
  const Dnnl::Version* v = d.version();
  const int isa = d.effective_cpu_isa();
  const bool generic = avx2 && (isa & 0x7) != 0x7;
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch) + " (" +
         dnnl_isa_name(isa) + " kernels" + (generic ? ": GENERIC, this CPU has AVX2" : "") + ") for f32; " + openblas +
         " for f64";
}

namespace {

// The elements of operand `which` (0: A, 1: B, 2: C) a call reaches, from the start of its
// buffer: its offset, its last matrix's last row, and the batch strides (as the artifact
// reader checks them against the operand's bytes).
int64_t operand_reach(const format::Matmul& mm, int which) {
  const int64_t m = mm.m(), n = mm.n(), k = mm.k();
  const int64_t rows = which == 0 ? (mm.trans_a() ? k : m) : which == 1 ? (mm.trans_b() ? n : k) : m;
  const int64_t ld = which == 0 ? format::matmul_lda(mm) : which == 1 ? format::matmul_ldb(mm) : n;
  const int64_t cols = which == 0 ? (mm.trans_a() ? m : k) : which == 1 ? (mm.trans_b() ? k : n) : n;
  if (rows == 0 || cols == 0) return 0;
  int64_t reach = (which == 0 ? mm.a_offset() : which == 1 ? mm.b_offset() : 0) + (rows - 1) * ld + cols;
  if (mm.batch())
    for (const format::BatchDim* d : *mm.batch())
      reach += (d->count() - 1) * (which == 0 ? d->a_stride() : which == 1 ? d->b_stride() : d->c_stride());
  return reach;
}

// Below 64 rows of A, oneDNN's matmul primitive (its brgemm kernels, packed B or not)
// ran f32 GEMMs slower than its sgemm on the same B, up to 3x at one row (docs/cpu.md): a
// recurrent layer's steps and a decoder's single tokens are such GEMMs. Their post-ops
// then apply over C after sgemm, which is small. A batched call (windows of attention)
// stays one call of the primitive, not a loop of sgemm and post-ops per batch index.
bool few_rows(const format::Matmul& mm) { return mm.m() < 64 && (!mm.batch() || mm.batch()->size() == 0); }

// A bf16 or f16 matmul as the f32 one (widened.h): A and B widened as far as the call
// reaches into them (B at load already where `packed`), the f32 call with its post-ops (on
// oneDNN's primitive where it applies them), C rounded once to its type. Widening each
// product apart and the post-ops in plain C++ over its sums ran GPT-2's block in f16 at
// 2.8 times its f32 time (docs/benchmarks.md).
Status widened(const format::Matmul& mm, ElementType t, ElementType c_type, uint8_t* const* ptr, int threads,
               ThreadPool* pool, bool packed, const std::function<Status(uint8_t* const*)>& f32_call) {
  const int64_t elements[3] = {operand_reach(mm, 0), operand_reach(mm, 1), operand_reach(mm, 2)};
  return run_widened(ptr, result_argument(mm.post_ops()), elements, packed, c_type == ElementType::F32,
                     t == ElementType::BF16 ? Half::BF16 : Half::F16, pool, threads, f32_call);
}

}  // namespace

Status run_matmul(const format::Matmul& mm, ElementType t, ElementType c_type, uint8_t* const* ptr, int threads,
                  ThreadPool* pool) {
  int64_t m = mm.m(), n = mm.n(), k = mm.k();
  if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX)
    return make_error("runtime: a matmul of " + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) +
                      " has a dim past the 2147483647 a BLAS call takes");
  // Batch dims with per-dim strides (0 where an operand broadcasts).
  std::vector<const format::BatchDim*> dims;
  if (mm.batch())
    for (const format::BatchDim* d : *mm.batch()) dims.push_back(d);
  int64_t count = 1;
  for (const auto* d : dims) count *= d->count();
  // bf16 on oneDNN's matmul primitive, every batch index in one call: GPT-2's block ran
  // 1.55x faster than in f32 (AVX512-BF16), where widening to f32 ran it 2x slower. f16
  // widens: oneDNN 2.6's f16 primitive ran the block slower still (docs/benchmarks.md).
  // f32 with post-ops (a bias and an activation) there too: they apply while C is in
  // cache, where the portable path below goes over C again for each.
  const bool post_ops = mm.post_ops() && mm.post_ops()->size() > 0;
  if (t == ElementType::BF16 || (t == ElementType::F32 && post_ops && !few_rows(mm))) {
    const dnnl_data_type_t c = c_type == ElementType::F32 ? dnnl_f32 : dnnl_bf16;
    KILN_ASSIGN_OR_RETURN(bool ran, dnnl_matmul(mm, t == ElementType::BF16 ? dnnl_bf16 : dnnl_f32, c, ptr, threads));
    if (ran) return Status::Ok();
  }
  if (t == ElementType::F16 || t == ElementType::BF16)
    return widened(mm, t, c_type, ptr, threads, pool, false, [&](uint8_t* const* wide_args) {
      return run_matmul(mm, ElementType::F32, ElementType::F32, wide_args, threads, pool);
    });
  PostOpOperands operands = post_op_operands(mm.post_ops(), ptr);
  const int size = element_bytes(t);
  const CBLAS_TRANSPOSE ta = mm.trans_a() ? CblasTrans : CblasNoTrans, tb = mm.trans_b() ? CblasTrans : CblasNoTrans;
  const int64_t lda = format::matmul_lda(mm), ldb = format::matmul_ldb(mm);
  // The GEMM of batch index p (its operands' offsets from p's index along each dim) on
  // `gemm_threads` threads.
  auto gemm_at = [&](int64_t p, int gemm_threads) -> Status {
    int64_t ao = 0, bo = 0, co = 0;
    for (size_t i = dims.size(); i-- > 0;) {
      const int64_t at = p % dims[i]->count();
      p /= dims[i]->count();
      ao += at * dims[i]->a_stride();
      bo += at * dims[i]->b_stride();
      co += at * dims[i]->c_stride();
    }
    const uint8_t* a = ptr[0] + (mm.a_offset() + ao) * size;
    const uint8_t* b = ptr[1] + (mm.b_offset() + bo) * size;
    uint8_t* c = operands.result + co * size;
    switch (t) {
      case ElementType::F32:
        return sgemm(mm.trans_a(), mm.trans_b(), m, n, k, 1.0f, reinterpret_cast<const float*>(a), lda,
                     reinterpret_cast<const float*>(b), ldb, reinterpret_cast<float*>(c), n, gemm_threads);
      case ElementType::F64:
        cblas_dgemm(CblasRowMajor, ta, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.0,
                    reinterpret_cast<const double*>(a), static_cast<int>(lda), reinterpret_cast<const double*>(b),
                    static_cast<int>(ldb), 0.0, reinterpret_cast<double*>(c), static_cast<int>(n));
        return Status::Ok();
      case ElementType::I32:
        matmul_loop<int32_t, int64_t>(reinterpret_cast<const int32_t*>(a), reinterpret_cast<const int32_t*>(b),
                                      reinterpret_cast<int32_t*>(c), m, n, k, mm.trans_a(), mm.trans_b(), lda, ldb);
        return Status::Ok();
      case ElementType::I64:
        matmul_loop<int64_t, int64_t>(reinterpret_cast<const int64_t*>(a), reinterpret_cast<const int64_t*>(b),
                                      reinterpret_cast<int64_t*>(c), m, n, k, mm.trans_a(), mm.trans_b(), lda, ldb);
        return Status::Ok();
      default: return make_error("runtime: matmul on " + std::string(element_type_name(t)) + " is not supported");
    }
  };
  // f32 batches split across the threads, one single-threaded GEMM at a time each:
  // attention's [B, H] batches of 128x128x64 products ran 1.4-1.5x faster so than each
  // product split across the threads in turn (docs/benchmarks.md). Not where the batches
  // would leave a thread idle at the end (3 batches on 2 threads ran 1.25x slower).
  if (pool && threads > 1 && t == ElementType::F32 && count > 1 && (count % threads == 0 || count >= 4 * threads)) {
    std::mutex failed_mutex;
    Status failed = Status::Ok();
    pool->parallel_for(count, 1, [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p)
        if (Status s = gemm_at(p, 1); !s.ok()) {
          std::lock_guard<std::mutex> lock(failed_mutex);
          if (failed.ok()) failed = s;
        }
    });
    KILN_RETURN_IF_ERROR(failed);
  } else {
    for (int64_t p = 0; p < count; ++p) KILN_RETURN_IF_ERROR(gemm_at(p, threads));
  }
  if (post_ops)
    apply_post_ops_to_rows(mm.post_ops(), operands, count * m, n, pool, threads);  // f32 (the reader checks)
  return Status::Ok();
}

namespace {

// The types of a packed call's primitive: bf16 A and B with C bf16 or (post-ops) f32, as
// run_matmul runs it; f32 for f32 and for f16, which widens.
std::pair<dnnl_data_type_t, dnnl_data_type_t> packed_types(ElementType type, ElementType c_type) {
  if (type != ElementType::BF16) return {dnnl_f32, dnnl_f32};
  return {dnnl_bf16, c_type == ElementType::F32 ? dnnl_f32 : dnnl_bf16};
}

}  // namespace

size_t packed_weights_bytes(const format::Matmul& call, ElementType type, ElementType c_type) {
  if (type != ElementType::F32 && type != ElementType::F16 && type != ElementType::BF16) return 0;
  if (type == ElementType::F32 && few_rows(call)) return 0;  // sgemm reads B as it is
  const auto [t, c] = packed_types(type, c_type);
  return packed_matmul_weights_bytes(call, t, c);
}

Status pack_weights(const format::Matmul& call, ElementType type, ElementType c_type, const uint8_t* b, uint8_t* to,
                    int threads) {
  const auto [t, c] = packed_types(type, c_type);
  if (type != ElementType::F16) return pack_matmul_weights(call, t, c, b, to, threads);
  std::vector<float> wide(static_cast<size_t>(operand_reach(call, 1)));
  widen_half(reinterpret_cast<const uint16_t*>(b), wide.data(), static_cast<int64_t>(wide.size()), Half::F16);
  return pack_matmul_weights(call, t, c, reinterpret_cast<const uint8_t*>(wide.data()), to, threads);
}

Status run_packed_matmul(const format::Matmul& call, ElementType type, ElementType c_type, const uint8_t* packed_b,
                         uint8_t* const* args, int threads, ThreadPool* pool) {
  const auto [t, c] = packed_types(type, c_type);
  if (type != ElementType::F16) return dnnl_packed_matmul(call, t, c, packed_b, args, threads);
  return widened(call, type, c_type, args, threads, pool, true, [&](uint8_t* const* wide_args) {
    return dnnl_packed_matmul(call, t, c, packed_b, wide_args, threads);
  });
}

}  // namespace kiln::runtime::cpu
