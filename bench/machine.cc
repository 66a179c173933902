#include "bench/machine.h"

#include "runtime/model.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <new>

namespace kiln::bench {

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) return line.substr(line.find(':') + 2);
  return "unknown";
}

// The matmul libraries pick their kernels for the CPU they run on when they load; a
// library that does not know the CPU falls back to generic ones, which decides the matmul
// rows (the runtime says so).
std::string blas_description() { return runtime::cpu_matmul_library(); }

std::string today_utc() {
  std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[16];
  std::strftime(text, sizeof text, "%Y-%m-%d", &utc);
  return text;
}

Result<std::string> gpu_name(const runtime::cuda::Driver* cu) {
  CUdevice device = 0;
  char name[256] = {};
  if (cu->device_get(&device, 0) != CUDA_SUCCESS || cu->device_get_name(name, sizeof name, device) != CUDA_SUCCESS)
    return make_error("cannot read the name of CUDA device 0");
  return std::string(name);
}

AlignedBytes::AlignedBytes(size_t n, uint8_t fill)
    : n_(n), p_(static_cast<uint8_t*>(std::aligned_alloc(64, std::max<size_t>(64, (n + 63) / 64 * 64))), &std::free) {
  if (!p_) throw std::bad_alloc();  // as a std::vector of this size would
  std::memset(p_.get(), fill, n_);
}

void fill_random(const runtime::TensorInfo& info, uint64_t seed, uint8_t* data, double scale, int64_t int_bound) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  auto next = [&] {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  };
  const uint64_t bound = static_cast<uint64_t>(std::max<int64_t>(1, int_bound));
  for (int64_t i = 0; i < info.elements(); ++i) {
    const uint64_t r = next();
    const double unit = static_cast<double>(r >> 40) / static_cast<double>(1 << 24) * 2 - 1;
    switch (info.type) {
      case runtime::ElementType::F32: {
        float f = static_cast<float>(unit * scale);
        std::memcpy(data + 4 * i, &f, 4);
        break;
      }
      case runtime::ElementType::F64: {
        double d = unit * scale;
        std::memcpy(data + 8 * i, &d, 8);
        break;
      }
      case runtime::ElementType::I32: {
        int32_t v = static_cast<int32_t>(r % bound);
        std::memcpy(data + 4 * i, &v, 4);
        break;
      }
      case runtime::ElementType::I64: {
        int64_t v = static_cast<int64_t>(r % bound);
        std::memcpy(data + 8 * i, &v, 8);
        break;
      }
      case runtime::ElementType::Bool: data[i] = static_cast<uint8_t>(r >> 63); break;
      case runtime::ElementType::I8:
      case runtime::ElementType::U8: data[i] = static_cast<uint8_t>(r % std::min<uint64_t>(bound, 128)); break;
      case runtime::ElementType::F16: {
        _Float16 h = static_cast<_Float16>(unit * scale);
        std::memcpy(data + 2 * i, &h, 2);
        break;
      }
      case runtime::ElementType::BF16: {
        // The top half of the f32's bits is its bfloat16 (rounded toward zero: random data).
        float f = static_cast<float>(unit * scale);
        uint32_t bits = 0;
        std::memcpy(&bits, &f, 4);
        uint16_t half = static_cast<uint16_t>(bits >> 16);
        std::memcpy(data + 2 * i, &half, 2);
        break;
      }
    }
  }
}

Result<std::unique_ptr<ModelBuffers>> ModelBuffers::make(const runtime::Model& model, const Fill& fill) {
  std::unique_ptr<ModelBuffers> b(new ModelBuffers(model));
  for (size_t i = 0; i < model.inputs().size(); ++i) {
    const runtime::TensorInfo& info = model.inputs()[i];
    b->storage_.push_back(std::make_unique<AlignedBytes>(static_cast<size_t>(info.bytes())));
    KILN_RETURN_IF_ERROR(fill(info, i, b->storage_.back()->data()));
    b->inputs_[info.name] = b->storage_.back()->span();
  }
  // A state update stays in the state, as a training loop that wants its loss leaves it
  // (Model::output_states); runs on the GPU take every output (to_device).
  for (size_t i = 0; i < model.outputs().size(); ++i) {
    if (!model.output_states()[i].empty()) continue;
    const runtime::TensorInfo& info = model.outputs()[i];
    b->storage_.push_back(std::make_unique<AlignedBytes>(static_cast<size_t>(info.bytes())));
    b->outputs_[info.name] = b->storage_.back()->span();
  }
  return b;
}

ModelBuffers::~ModelBuffers() {
  for (auto* ptrs : {&device_inputs_, &device_outputs_})
    for (auto& [name, p] : *ptrs) cu_->mem_free(p);
}

Status ModelBuffers::to_device() {
  KILN_ASSIGN_OR_RETURN(cu_, runtime::cuda::driver());
  for (const auto& [name, bytes] : inputs_) {
    CUdeviceptr d = 0;
    if (cu_->mem_alloc(&d, std::max<size_t>(1, bytes.size())) != CUDA_SUCCESS)
      return make_error("cannot allocate the input %" + name + " on the GPU");
    device_inputs_[name] = d;
    if (cu_->memcpy_htod(d, bytes.data(), bytes.size()) != CUDA_SUCCESS)
      return make_error("cannot copy the input %" + name + " to the GPU");
  }
  for (const runtime::TensorInfo& info : model_.outputs()) {
    if (device_outputs_.count(info.name)) continue;  // returned twice
    CUdeviceptr d = 0;
    if (cu_->mem_alloc(&d, std::max<size_t>(1, static_cast<size_t>(info.bytes()))) != CUDA_SUCCESS)
      return make_error("cannot allocate the output %" + info.name + " on the GPU");
    device_outputs_[info.name] = d;
  }
  return Status::Ok();
}

Status ModelBuffers::run() const {
  return cu_ ? model_.run_device(device_inputs_, device_outputs_) : model_.run(inputs_, outputs_);
}

Result<runtime::RunProfile> ModelBuffers::profile() const {
  return cu_ ? model_.profile_device(device_inputs_, device_outputs_) : model_.profile(inputs_, outputs_);
}

HostCopy::HostCopy(int64_t bytes, runtime::ThreadPool& pool, int threads)
    : from_(static_cast<size_t>(bytes), 1), to_(static_cast<size_t>(bytes)), pool_(pool), threads_(threads) {}

void HostCopy::run() {
  // One chunk per thread, as large as can be: glibc's memcpy picks its fastest method
  // (non-temporal stores) only above a size threshold.
  const int64_t n = static_cast<int64_t>(from_.size());
  pool_.parallel_for(n, std::max<int64_t>(int64_t{1} << 16, (n + threads_ - 1) / threads_),
                     [&](int64_t begin, int64_t end) {
                       std::memcpy(to_.data() + begin, from_.data() + begin, static_cast<size_t>(end - begin));
                     });
}

Result<std::unique_ptr<DeviceCopy>> DeviceCopy::make(const runtime::cuda::Driver* cu, int64_t bytes) {
  std::unique_ptr<DeviceCopy> copy(new DeviceCopy(cu, static_cast<size_t>(bytes)));
  if (cu->mem_alloc(&copy->from_, copy->bytes_) != CUDA_SUCCESS ||
      cu->mem_alloc(&copy->to_, copy->bytes_) != CUDA_SUCCESS ||
      cu->stream_create(&copy->stream_, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS)
    return make_error("cannot allocate the buffers of a device-to-device copy of " + std::to_string(bytes) + " bytes");
  return copy;
}

DeviceCopy::~DeviceCopy() {
  if (from_) cu_->mem_free(from_);
  if (to_) cu_->mem_free(to_);
  if (stream_) cu_->stream_destroy(stream_);
}

void DeviceCopy::run() {
  cu_->memcpy_dtod_async(to_, from_, bytes_, stream_);
  cu_->stream_synchronize(stream_);
}

}  // namespace kiln::bench
