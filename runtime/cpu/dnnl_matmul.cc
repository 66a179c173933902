#include "runtime/cpu/dnnl_matmul.h"

#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::runtime::cpu {

namespace {

// The memory descriptors of one call: A [batch..., m, k], B [batch..., k, n], C
// [batch..., m, n], transposes and batch strides as strides; an operand broadcast along a
// batch dim (stride 0) has extent 1 there, as the matmul primitive broadcasts.
struct Descs {
  dnnl_memory_desc_t a, b, c;
};

bool describe(const DnnlApi& p, const format::Matmul& mm, dnnl_data_type_t t, Descs& d) {
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
  a_strides.insert(a_strides.end(), {mm.trans_a() ? 1 : k, mm.trans_a() ? m : 1});
  b_strides.insert(b_strides.end(), {mm.trans_b() ? 1 : n, mm.trans_b() ? k : 1});
  c_strides.insert(c_strides.end(), {n, 1});
  const int ndims = static_cast<int>(c_dims.size());
  if (ndims > DNNL_MAX_NDIMS) return false;
  return p.memory_desc_init_by_strides(&d.a, ndims, a_dims.data(), t, a_strides.data()) == dnnl_success &&
         p.memory_desc_init_by_strides(&d.b, ndims, b_dims.data(), t, b_strides.data()) == dnnl_success &&
         p.memory_desc_init_by_strides(&d.c, ndims, c_dims.data(), t, c_strides.data()) == dnnl_success;
}

struct Prepared {
  DnnlPrimitive primitive;
  Descs descs;
  std::string what;  // for errors: "a MxNxK matmul"
};

// The primitive of each distinct call (its shape, strides and type), created once.
const Prepared& prepared(const DnnlApi& p, const format::Matmul& mm, dnnl_data_type_t type) {
  static std::mutex mutex;
  static std::map<std::vector<int64_t>, Prepared> cache;
  std::vector<int64_t> key = {type, mm.m(), mm.n(), mm.k(), mm.trans_a(), mm.trans_b()};
  if (mm.batch())
    for (const format::BatchDim* bd : *mm.batch())
      key.insert(key.end(), {bd->count(), bd->a_stride(), bd->b_stride(), bd->c_stride()});
  std::lock_guard<std::mutex> lock(mutex);
  auto [it, inserted] = cache.try_emplace(key);
  if (!inserted) return it->second;
  Prepared& prep = it->second;
  prep.what = "a " + std::to_string(mm.m()) + "x" + std::to_string(mm.n()) + "x" + std::to_string(mm.k()) + " matmul";
  dnnl_matmul_desc_t desc;
  if (describe(p, mm, type, prep.descs) &&
      p.matmul_desc_init(&desc, &prep.descs.a, &prep.descs.b, nullptr, &prep.descs.c) == dnnl_success) {
    dnnl_primitive_desc_t pd = dnnl_describe(p, &desc, nullptr);
    // oneDNN's reference kernel ran a batch of small products 100x slower than a loop of
    // sgemm calls: such a call is left to the caller.
    const char* impl = nullptr;
    const bool reference = pd && p.primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success &&
                           impl && std::string_view(impl).starts_with("ref");
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

const PackedPrepared& packed_prepared(const DnnlApi& p, const format::Matmul& mm) {
  static std::mutex mutex;
  static std::map<std::vector<int64_t>, PackedPrepared> cache;
  std::vector<int64_t> key = {mm.m(), mm.n(), mm.k(), mm.trans_a(), mm.trans_b()};
  std::lock_guard<std::mutex> lock(mutex);
  auto [it, inserted] = cache.try_emplace(key);
  if (!inserted) return it->second;
  PackedPrepared& prep = it->second;
  prep.what = "a " + std::to_string(mm.m()) + "x" + std::to_string(mm.n()) + "x" + std::to_string(mm.k()) +
              " matmul with packed weights";
  if (mm.batch() && mm.batch()->size() > 0) return prep;
  dnnl_memory_desc_t any_b;
  const dnnl_dim_t b_dims[] = {mm.k(), mm.n()};
  dnnl_matmul_desc_t desc;
  if (!describe(p, mm, dnnl_f32, prep.descs) ||
      p.memory_desc_init_by_tag(&any_b, 2, b_dims, dnnl_f32, dnnl_format_tag_any) != dnnl_success ||
      p.matmul_desc_init(&desc, &prep.descs.a, &any_b, nullptr, &prep.descs.c) != dnnl_success)
    return prep;
  dnnl_primitive_desc_t pd = dnnl_describe(p, &desc, nullptr);
  if (!pd) return prep;
  if (const dnnl_memory_desc_t* chosen = p.primitive_desc_query_md(pd, dnnl_query_weights_md, 0)) {
    prep.packed_b = *chosen;
    prep.packed_bytes = p.memory_desc_get_size(chosen);
    prep.reorder = dnnl_reorder(p, prep.descs.b, prep.packed_b);
    if (prep.reorder.primitive) prep.primitive = dnnl_create(p, pd);
  }
  p.primitive_desc_destroy(pd);
  return prep;
}

}  // namespace

size_t packed_matmul_weights_bytes(const format::Matmul& mm) {
  const DnnlApi* p = dnnl_api();
  if (!p) return 0;
  const PackedPrepared& prep = packed_prepared(*p, mm);
  return prep.primitive.primitive ? prep.packed_bytes : 0;
}

Status pack_matmul_weights(const format::Matmul& mm, const uint8_t* b, uint8_t* to, int threads) {
  const DnnlApi* p = dnnl_api();
  const PackedPrepared* prep = p ? &packed_prepared(*p, mm) : nullptr;
  if (!prep || !prep->primitive.primitive)
    return make_error("runtime: " + std::string(prep ? prep->what : "a matmul") + " has no oneDNN primitive");
  const DnnlArg reorder[] = {{DNNL_ARG_FROM, &prep->descs.b, const_cast<uint8_t*>(b)},
                             {DNNL_ARG_TO, &prep->packed_b, to}};
  return dnnl_run(*p, prep->reorder, reorder, threads, "the packing of " + prep->what);
}

Status dnnl_packed_matmul(const format::Matmul& mm, const uint8_t* packed_b, uint8_t* const* args, int threads) {
  const DnnlApi* p = dnnl_api();
  const PackedPrepared* prep = p ? &packed_prepared(*p, mm) : nullptr;
  if (!prep || !prep->primitive.primitive)
    return make_error("runtime: " + std::string(prep ? prep->what : "a matmul") + " has no oneDNN primitive");
  const DnnlArg operands[] = {{DNNL_ARG_SRC, &prep->descs.a, args[0]},
                              {DNNL_ARG_WEIGHTS, &prep->packed_b, const_cast<uint8_t*>(packed_b)},
                              {DNNL_ARG_DST, &prep->descs.c, args[2]}};
  return dnnl_run(*p, prep->primitive, operands, threads, prep->what);
}

Result<bool> dnnl_matmul(const format::Matmul& mm, dnnl_data_type_t type, uint8_t* const* args, int threads) {
  const DnnlApi* p = dnnl_api();
  if (!p) return false;
  const Prepared& prep = prepared(*p, mm, type);
  if (!prep.primitive.primitive) return false;
  const DnnlArg operands[] = {{DNNL_ARG_SRC, &prep.descs.a, args[0]},
                              {DNNL_ARG_WEIGHTS, &prep.descs.b, args[1]},
                              {DNNL_ARG_DST, &prep.descs.c, args[2]}};
  KILN_RETURN_IF_ERROR(dnnl_run(*p, prep.primitive, operands, threads, prep.what));
  return true;
}

}  // namespace kiln::runtime::cpu
