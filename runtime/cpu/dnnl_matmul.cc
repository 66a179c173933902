#include "runtime/cpu/dnnl_matmul.h"

#include <bit>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/cpu/post_ops.h"

namespace kiln::runtime::cpu {

namespace {

// The memory descriptors of one call: A [batch..., m, k], B [batch..., k, n], C
// [batch..., m, n], transposes and batch strides as strides; an operand broadcast along a
// batch dim (stride 0) has extent 1 there, as the matmul primitive broadcasts.
struct Descs {
  dnnl_memory_desc_t a, b, c;
  bool bias = false;  // the first post-op, oneDNN's bias argument: [1, ..., 1, n]
  dnnl_memory_desc_t bias_md{};
};

// The bytes of one element of A and B: f32, or bf16 (f16 widens before it reaches oneDNN).
int64_t operand_bytes(dnnl_data_type_t type) { return type == dnnl_f32 ? 4 : 2; }

bool describe(const DnnlApi& p, const format::Matmul& mm, dnnl_data_type_t t, dnnl_data_type_t c_t, Descs& d) {
  std::vector<dnnl_dim_t> a_dims, b_dims, c_dims, a_strides, b_strides, c_strides;
  if (mm.batch())
    for (const format::BatchDim* bd : *mm.batch()) {
      if (bd->count() == 1) continue;  // its strides are arbitrary; oneDNN ran such calls on its reference kernel
      a_dims.push_back(bd->a_stride() ? bd->count() : 1);
      b_dims.push_back(bd->b_stride() ? bd->count() : 1);
      c_dims.push_back(bd->count());
      a_strides.push_back(bd->a_stride());
      b_strides.push_back(bd->b_stride());
      c_strides.push_back(bd->c_stride());
    }
  const int64_t m = mm.m(), n = mm.n(), k = mm.k();
  a_dims.insert(a_dims.end(), {m, k});
  b_dims.insert(b_dims.end(), {k, n});
  c_dims.insert(c_dims.end(), {m, n});
  const int64_t lda = format::matmul_lda(mm), ldb = format::matmul_ldb(mm);
  a_strides.insert(a_strides.end(), {mm.trans_a() ? 1 : lda, mm.trans_a() ? lda : 1});
  b_strides.insert(b_strides.end(), {mm.trans_b() ? 1 : ldb, mm.trans_b() ? ldb : 1});
  c_strides.insert(c_strides.end(), {n, 1});
  const int ndims = static_cast<int>(c_dims.size());
  if (ndims > DNNL_MAX_NDIMS) return false;
  if (p.memory_desc_init_by_strides(&d.a, ndims, a_dims.data(), t, a_strides.data()) != dnnl_success ||
      p.memory_desc_init_by_strides(&d.b, ndims, b_dims.data(), t, b_strides.data()) != dnnl_success ||
      p.memory_desc_init_by_strides(&d.c, ndims, c_dims.data(), c_t, c_strides.data()) != dnnl_success)
    return false;
  d.bias = mm.post_ops() && mm.post_ops()->size() > 0 && mm.post_ops()->Get(0)->kind() == format::PostOpKind::Bias;
  std::vector<dnnl_dim_t> bias_dims(static_cast<size_t>(ndims), 1), bias_strides(static_cast<size_t>(ndims), n);
  bias_dims.back() = n;
  bias_strides.back() = 1;
  return !d.bias || p.memory_desc_init_by_strides(&d.bias_md, ndims, bias_dims.data(), dnnl_f32, bias_strides.data()) ==
                        dnnl_success;  // post-op operands are f32 (the reader checks)
}

// oneDNN's chain of a call's post-ops after its bias (null where it has none), or false
// where oneDNN refuses one.
bool activations(const DnnlApi& p, const format::Matmul& mm, dnnl_post_ops_t& chain) {
  chain = nullptr;
  if (!mm.post_ops() || mm.post_ops()->size() == 0) return true;
  if (p.post_ops_create(&chain) != dnnl_success) return false;
  for (const format::PostOp* op : *mm.post_ops())
    if (op->kind() != format::PostOpKind::Bias && !append_dnnl_activation(p, chain, *op)) return false;
  return true;
}

// A cache key's words for a call's post-ops.
void key_post_ops(const format::Matmul& mm, std::vector<int64_t>& key) {
  if (mm.post_ops())
    for (const format::PostOp* op : *mm.post_ops())
      key.insert(key.end(), {-1 - static_cast<int64_t>(op->kind()), std::bit_cast<int32_t>(op->lo()),
                             std::bit_cast<int32_t>(op->hi())});
}

// The primitive descriptor of a call with its post-ops, B as `b` describes it, or null.
dnnl_primitive_desc_t describe_call(const DnnlApi& p, const format::Matmul& mm, const Descs& d,
                                    const dnnl_memory_desc_t& b) {
  dnnl_matmul_desc_t desc;
  dnnl_post_ops_t chain = nullptr;
  dnnl_primitive_desc_t pd = nullptr;
  if (activations(p, mm, chain) &&
      p.matmul_desc_init(&desc, &d.a, &b, d.bias ? &d.bias_md : nullptr, &d.c) == dnnl_success)
    pd = dnnl_describe(p, &desc, nullptr, chain);
  if (chain) p.post_ops_destroy(chain);
  return pd;
}

struct Prepared {
  DnnlPrimitive primitive;
  Descs descs;
  std::string what;            // for errors: "a MxNxK matmul"
  std::string implementation;  // bf16 products: oneDNN's kernel, where it made one
};

// The primitive of each distinct call (its shape, strides and type), created once.
const Prepared& prepared(const DnnlApi& p, const format::Matmul& mm, dnnl_data_type_t type, dnnl_data_type_t c_type) {
  static std::mutex mutex;
  static std::map<std::vector<int64_t>, Prepared> cache;
  std::vector<int64_t> key = {type, c_type, mm.m(), mm.n(), mm.k(), mm.trans_a(), mm.trans_b(), mm.lda(), mm.ldb()};
  if (mm.batch())
    for (const format::BatchDim* bd : *mm.batch())
      key.insert(key.end(), {bd->count(), bd->a_stride(), bd->b_stride(), bd->c_stride()});
  key_post_ops(mm, key);
  std::lock_guard<std::mutex> lock(mutex);
  auto [it, inserted] = cache.try_emplace(key);
  if (!inserted) return it->second;
  Prepared& prep = it->second;
  prep.what = "a " + std::to_string(mm.m()) + "x" + std::to_string(mm.n()) + "x" + std::to_string(mm.k()) + " matmul";
  if (describe(p, mm, type, c_type, prep.descs)) {
    dnnl_primitive_desc_t pd = describe_call(p, mm, prep.descs, prep.descs.b);
    // oneDNN's reference kernel ran a batch of small products 100x slower than a loop of
    // sgemm calls: such a call is left to the caller.
    const bool reference = pd && dnnl_reference(dnnl_implementation(p, pd));
    if (!reference) prep.primitive = dnnl_create(p, pd);
    if (pd) p.primitive_desc_destroy(pd);
  }
  return prep;
}

// An f32 call whose B the primitive reads in the layout it chose, and the reorder there.
struct PackedPrepared {
  DnnlPrimitive primitive, reorder;
  Descs descs;
  dnnl_memory_desc_t packed_b{};
  size_t packed_bytes = 0;
  std::string what;
};

const PackedPrepared& packed_prepared(const DnnlApi& p, const format::Matmul& mm, dnnl_data_type_t type,
                                      dnnl_data_type_t c_type) {
  static std::mutex mutex;
  static std::map<std::vector<int64_t>, PackedPrepared> cache;
  std::vector<int64_t> key = {type, c_type, mm.m(), mm.n(), mm.k(), mm.trans_a(), mm.trans_b(), mm.lda(), mm.ldb()};
  key_post_ops(mm, key);
  std::lock_guard<std::mutex> lock(mutex);
  auto [it, inserted] = cache.try_emplace(key);
  if (!inserted) return it->second;
  PackedPrepared& prep = it->second;
  prep.what = "a " + std::to_string(mm.m()) + "x" + std::to_string(mm.n()) + "x" + std::to_string(mm.k()) +
              " matmul with packed weights";
  if (mm.batch() && mm.batch()->size() > 0) return prep;
  dnnl_memory_desc_t any_b;
  const dnnl_dim_t b_dims[] = {mm.k(), mm.n()};
  if (!describe(p, mm, type, c_type, prep.descs) ||
      p.memory_desc_init_by_tag(&any_b, 2, b_dims, type, dnnl_format_tag_any) != dnnl_success)
    return prep;
  dnnl_primitive_desc_t pd = describe_call(p, mm, prep.descs, any_b);
  if (!pd) return prep;
  if (dnnl_reference(dnnl_implementation(p, pd))) {  // slower than the unpacked call's fallbacks
    p.primitive_desc_destroy(pd);
    return prep;
  }
  if (const dnnl_memory_desc_t* chosen = p.primitive_desc_query_md(pd, dnnl_query_weights_md, 0)) {
    prep.packed_b = *chosen;
    prep.packed_bytes = p.memory_desc_get_size(chosen);
    prep.reorder = dnnl_reorder(p, prep.descs.b, prep.packed_b);
    if (prep.reorder.primitive) prep.primitive = dnnl_create(p, pd);
  }
  p.primitive_desc_destroy(pd);
  return prep;
}

// The primitive of each distinct bf16 product, made once.
const Prepared& prepared_gemm(const DnnlApi& p, const Bf16Gemm& g) {
  static std::mutex mutex;
  static std::map<std::vector<int64_t>, Prepared> cache;
  const std::vector<int64_t> key = {g.trans_b, g.accumulate, g.trans_a, g.m, g.n, g.k, g.lda, g.ldb, g.ldc, g.c_type};
  std::lock_guard<std::mutex> lock(mutex);
  auto [it, inserted] = cache.try_emplace(key);
  if (!inserted) return it->second;
  Prepared& prep = it->second;
  prep.what = "a " + std::to_string(g.m) + "x" + std::to_string(g.n) + "x" + std::to_string(g.k) + " bf16 product";
  const dnnl_dim_t a_dims[] = {g.m, g.k}, b_dims[] = {g.k, g.n}, c_dims[] = {g.m, g.n};
  const dnnl_dim_t a_strides[] = {g.trans_a ? 1 : g.lda, g.trans_a ? g.lda : 1}, c_strides[] = {g.ldc, 1};
  const dnnl_dim_t b_strides[] = {g.trans_b ? 1 : g.ldb, g.trans_b ? g.ldb : 1};
  Descs& d = prep.descs;
  dnnl_matmul_desc_t desc;
  if (p.memory_desc_init_by_strides(&d.a, 2, a_dims, dnnl_bf16, a_strides) != dnnl_success ||
      p.memory_desc_init_by_strides(&d.b, 2, b_dims, dnnl_bf16, b_strides) != dnnl_success ||
      p.memory_desc_init_by_strides(&d.c, 2, c_dims, g.c_type, c_strides) != dnnl_success ||
      p.matmul_desc_init(&desc, &d.a, &d.b, nullptr, &d.c) != dnnl_success)
    return prep;
  dnnl_post_ops_t sum = nullptr;
  if (g.accumulate && (p.post_ops_create(&sum) != dnnl_success || p.post_ops_append_sum(sum, 1.0f) != dnnl_success)) {
    if (sum) p.post_ops_destroy(sum);
    return prep;
  }
  if (dnnl_primitive_desc_t pd = dnnl_describe(p, &desc, nullptr, sum)) {
    const std::string implementation = dnnl_implementation(p, pd);
    if (!dnnl_reference(implementation)) prep.primitive = dnnl_create(p, pd);
    if (prep.primitive.primitive) prep.implementation = implementation;
    p.primitive_desc_destroy(pd);
  }
  if (sum) p.post_ops_destroy(sum);
  return prep;
}

}  // namespace

std::string bf16_gemm_implementation(const Bf16Gemm& gemm) {
  const DnnlApi* p = dnnl_api();
  return p ? prepared_gemm(*p, gemm).implementation : std::string();
}

Status run_bf16_gemm(const Bf16Gemm& gemm, const uint16_t* a, const uint16_t* b, void* c, int threads) {
  const DnnlApi* p = dnnl_api();
  const Prepared* prep = p ? &prepared_gemm(*p, gemm) : nullptr;
  if (!prep || !prep->primitive.primitive)
    return make_error("runtime: oneDNN has no bf16 kernel for " + std::string(prep ? prep->what : "a bf16 product"));
  const DnnlArg operands[] = {{DNNL_ARG_SRC, &prep->descs.a, const_cast<uint16_t*>(a)},
                              {DNNL_ARG_WEIGHTS, &prep->descs.b, const_cast<uint16_t*>(b)},
                              {DNNL_ARG_DST, &prep->descs.c, c}};
  return dnnl_run(*p, prep->primitive, operands, threads, prep->what);
}

size_t packed_matmul_weights_bytes(const format::Matmul& mm, dnnl_data_type_t type, dnnl_data_type_t c_type) {
  const DnnlApi* p = dnnl_api();
  if (!p) return 0;
  const PackedPrepared& prep = packed_prepared(*p, mm, type, c_type);
  return prep.primitive.primitive ? prep.packed_bytes : 0;
}

Status pack_matmul_weights(const format::Matmul& mm, dnnl_data_type_t type, dnnl_data_type_t c_type, const uint8_t* b,
                           uint8_t* to, int threads) {
  const DnnlApi* p = dnnl_api();
  const PackedPrepared* prep = p ? &packed_prepared(*p, mm, type, c_type) : nullptr;
  if (!prep || !prep->primitive.primitive)
    return make_error("runtime: " + std::string(prep ? prep->what : "a matmul") + " has no oneDNN primitive");
  const int64_t element = operand_bytes(type);
  const DnnlArg reorder[] = {{DNNL_ARG_FROM, &prep->descs.b, const_cast<uint8_t*>(b) + mm.b_offset() * element},
                             {DNNL_ARG_TO, &prep->packed_b, to}};
  return dnnl_run(*p, prep->reorder, reorder, threads, "the packing of " + prep->what);
}

Status dnnl_packed_matmul(const format::Matmul& mm, dnnl_data_type_t type, dnnl_data_type_t c_type,
                          const uint8_t* packed_b, uint8_t* const* args, int threads) {
  const DnnlApi* p = dnnl_api();
  const PackedPrepared* prep = p ? &packed_prepared(*p, mm, type, c_type) : nullptr;
  if (!prep || !prep->primitive.primitive)
    return make_error("runtime: " + std::string(prep ? prep->what : "a matmul") + " has no oneDNN primitive");
  const PostOpOperands post = post_op_operands(mm.post_ops(), args);
  const int64_t element = operand_bytes(type);
  const DnnlArg operands[] = {{DNNL_ARG_SRC, &prep->descs.a, args[0] + mm.a_offset() * element},
                              {DNNL_ARG_WEIGHTS, &prep->packed_b, const_cast<uint8_t*>(packed_b)},
                              {DNNL_ARG_DST, &prep->descs.c, post.result},
                              {DNNL_ARG_BIAS, &prep->descs.bias_md, post.bias}};
  return dnnl_run(*p, prep->primitive, std::span(operands, prep->descs.bias ? 4 : 3), threads, prep->what);
}

Result<bool> dnnl_matmul(const format::Matmul& mm, dnnl_data_type_t type, dnnl_data_type_t c_type, uint8_t* const* args,
                         int threads) {
  const DnnlApi* p = dnnl_api();
  if (!p) return false;
  const Prepared& prep = prepared(*p, mm, type, c_type);
  if (!prep.primitive.primitive) return false;
  const PostOpOperands post = post_op_operands(mm.post_ops(), args);
  const int64_t element = operand_bytes(type);
  const DnnlArg operands[] = {{DNNL_ARG_SRC, &prep.descs.a, args[0] + mm.a_offset() * element},
                              {DNNL_ARG_WEIGHTS, &prep.descs.b, args[1] + mm.b_offset() * element},
                              {DNNL_ARG_DST, &prep.descs.c, post.result},
                              {DNNL_ARG_BIAS, &prep.descs.bias_md, post.bias}};
  KILN_RETURN_IF_ERROR(dnnl_run(*p, prep.primitive, std::span(operands, prep.descs.bias ? 4 : 3), threads, prep.what));
  return true;
}

}  // namespace kiln::runtime::cpu
