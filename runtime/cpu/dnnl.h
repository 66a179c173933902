// oneDNN, opened at run time: the library, the calls of its C API kiln makes, and running
// one primitive on the calling thread (runtime/cpu/dnnl_matmul.cc, dnnl_conv.cc).
#pragma once

#include <oneapi/dnnl/dnnl.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace kiln::runtime::cpu {

struct DnnlLibrary {
  void* handle = nullptr;  ///< null when it could not be opened, and why_not says why
  std::string why_not;
  /// The OpenMP runtime oneDNN's threads come from (found through oneDNN's dependencies);
  /// null where it threads otherwise, when --threads cannot bound it.
  void (*omp_set_num_threads)(int) = nullptr;
  /// Its parallel region (libgomp's GOMP_parallel), which the runtime's thread pool runs
  /// its kernels on, so that kernels and oneDNN's calls share one team of threads; null
  /// where oneDNN threads otherwise.
  void (*gomp_parallel)(void (*)(void*), void*, unsigned, unsigned) = nullptr;
  /// A team thread's number (omp_get_thread_num), by which the pool gives each its part.
  int (*omp_get_thread_num)() = nullptr;
};
/// libdnnl.so.2, or $KILN_LIBDNNL, opened once.
const DnnlLibrary& dnnl_library();

/// The calls of oneDNN's C API kiln makes (the header gives their types only), and its CPU
/// engine.
struct DnnlApi {
  decltype(&dnnl_engine_create) engine_create = nullptr;
  decltype(&dnnl_stream_create) stream_create = nullptr;
  decltype(&dnnl_memory_desc_init_by_strides) memory_desc_init_by_strides = nullptr;
  decltype(&dnnl_memory_desc_init_by_tag) memory_desc_init_by_tag = nullptr;
  decltype(&dnnl_matmul_desc_init) matmul_desc_init = nullptr;
  decltype(&dnnl_dilated_convolution_forward_desc_init) conv_forward_desc_init = nullptr;
  decltype(&dnnl_dilated_convolution_backward_data_desc_init) conv_backward_data_desc_init = nullptr;
  decltype(&dnnl_dilated_convolution_backward_weights_desc_init) conv_backward_weights_desc_init = nullptr;
  decltype(&dnnl_primitive_desc_create) primitive_desc_create = nullptr;
  decltype(&dnnl_primitive_desc_destroy) primitive_desc_destroy = nullptr;
  decltype(&dnnl_primitive_create) primitive_create = nullptr;
  decltype(&dnnl_memory_create) memory_create = nullptr;
  decltype(&dnnl_memory_destroy) memory_destroy = nullptr;
  decltype(&dnnl_primitive_execute) primitive_execute = nullptr;
  decltype(&dnnl_stream_wait) stream_wait = nullptr;
  decltype(&dnnl_stream_destroy) stream_destroy = nullptr;
  decltype(&dnnl_primitive_attr_create) attr_create = nullptr;
  decltype(&dnnl_primitive_attr_destroy) attr_destroy = nullptr;
  decltype(&dnnl_primitive_attr_set_scratchpad_mode) attr_set_scratchpad_mode = nullptr;
  decltype(&dnnl_primitive_desc_query_md) primitive_desc_query_md = nullptr;
  decltype(&dnnl_primitive_desc_query) primitive_desc_query = nullptr;
  decltype(&dnnl_memory_desc_get_size) memory_desc_get_size = nullptr;
  decltype(&dnnl_memory_desc_equal) memory_desc_equal = nullptr;
  decltype(&dnnl_reorder_primitive_desc_create) reorder_desc_create = nullptr;
  decltype(&dnnl_post_ops_create) post_ops_create = nullptr;
  decltype(&dnnl_post_ops_destroy) post_ops_destroy = nullptr;
  decltype(&dnnl_post_ops_append_eltwise) post_ops_append_eltwise = nullptr;
  decltype(&dnnl_post_ops_append_sum) post_ops_append_sum = nullptr;
  decltype(&dnnl_post_ops_append_binary) post_ops_append_binary = nullptr;
  decltype(&dnnl_primitive_attr_set_post_ops) attr_set_post_ops = nullptr;
  dnnl_engine_t engine = nullptr;
};
/// The API, or null when oneDNN cannot be opened or lacks one of the calls.
const DnnlApi* dnnl_api();

/// A primitive made to take its scratchpad from the caller (with oneDNN's own, one
/// primitive run from two threads at once shared it, and results came out wrong unless
/// oneDNN was built for concurrent execution).
struct DnnlPrimitive {
  dnnl_primitive_t primitive = nullptr;  ///< null: oneDNN has none for this op
  dnnl_memory_desc_t scratchpad{};
  size_t scratchpad_bytes = 0;
};

/// The primitive descriptor of `op_desc` (with a user scratchpad; `hint` is a backward
/// primitive's forward descriptor; `post_ops` applied to its result where not null), or
/// null. The caller destroys it.
dnnl_primitive_desc_t dnnl_describe(const DnnlApi& api, const void* op_desc, const_dnnl_primitive_desc_t hint,
                                    const_dnnl_post_ops_t post_ops = nullptr);
/// A reorder from one layout to another (with a user scratchpad), or none.
DnnlPrimitive dnnl_reorder(const DnnlApi& api, const dnnl_memory_desc_t& from, const dnnl_memory_desc_t& to);
/// The primitive of a descriptor (left to the caller to destroy).
DnnlPrimitive dnnl_create(const DnnlApi& api, const_dnnl_primitive_desc_t pd);

/// One argument of a primitive: its kind (DNNL_ARG_SRC, ...), layout and bytes.
struct DnnlArg {
  int kind;
  const dnnl_memory_desc_t* desc;
  void* data;
};

/// oneDNN's name for the kernel a primitive descriptor picked ("brgconv:avx512_core"), or
/// "" where it gives none.
std::string dnnl_implementation(const DnnlApi& api, const_dnnl_primitive_desc_t pd);
/// Whether that kernel is oneDNN's reference code ("ref:any"), tens of times slower than
/// its optimized ones.
inline bool dnnl_reference(std::string_view implementation) { return implementation.starts_with("ref"); }

/// A 64-byte aligned run of at least `bytes` in `buffer`, grown to hold it: the calling
/// thread's buffers for scratchpads, reorders and Winograd's transforms.
uint8_t* aligned_in(std::vector<uint8_t>& buffer, size_t bytes);

/// Runs a primitive on the calling thread's stream with its scratchpad, oneDNN's OpenMP
/// threads bounded by `threads`; errors name `what`.
Status dnnl_run(const DnnlApi& api, const DnnlPrimitive& primitive, std::span<const DnnlArg> args, int threads,
                std::string_view what);

}  // namespace kiln::runtime::cpu
