#include "runtime/cpu/widened.h"

#include <vector>

#include "runtime/cpu/dnnl.h"

namespace kiln::runtime::cpu {

Status run_widened(uint8_t* const* args, uint32_t result, const int64_t (&elements)[3], bool second_widened,
                   bool result_f32, Half type, ThreadPool* pool, int threads,
                   const std::function<Status(uint8_t* const*)>& f32_call) {
  std::vector<uint8_t*> wide_args(args, args + result + 1);
  thread_local std::vector<uint8_t> wide[3];
  for (int i = 0; i < (second_widened ? 1 : 2); ++i) {
    float* to = reinterpret_cast<float*>(aligned_in(wide[i], static_cast<size_t>(elements[i]) * sizeof(float)));
    widen_half(reinterpret_cast<const uint16_t*>(args[i]), to, elements[i], type, pool, threads);
    wide_args[i] = reinterpret_cast<uint8_t*>(to);
  }
  if (!result_f32) wide_args[result] = aligned_in(wide[2], static_cast<size_t>(elements[2]) * sizeof(float));
  KILN_RETURN_IF_ERROR(f32_call(wide_args.data()));
  if (!result_f32)
    narrow_to_half(reinterpret_cast<const float*>(wide_args[result]), reinterpret_cast<uint16_t*>(args[result]),
                   elements[2], type, pool, threads);
  return Status::Ok();
}

}  // namespace kiln::runtime::cpu
