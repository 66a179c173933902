// Helpers of the GPU tier's cases (cuda_gpu_test.cc, cuda_attention_gpu_test.cc): whether
// a GPU (or the CUDA emulator) runs them, and runs of one artifact from 8 threads.
#pragma once

#include <atomic>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "compiler/compile.h"
#include "runtime/cuda/driver.h"
#include "runtime/model.h"
#include "tests/unit/run_util.h"

namespace kiln::testing::gpu_tier {

// Whether a GPU can run the cases; prints why not once.
inline bool have_gpu() {
  auto driver = runtime::cuda::driver();
  if (driver.ok()) return true;
  const char* require = std::getenv("KILN_REQUIRE_GPU");
  if (require && std::string(require) == "1") FAIL("KILN_REQUIRE_GPU=1 but: " << driver.error().message);
  WARN("skipped (no GPU): " << driver.error().message);
  return false;
}

// Whether the driver is kiln's CUDA emulator (tests/cuda_emulator), which runs one CUDA
// thread at a time on the host: repeating a run there checks nothing that the first run
// does not (its launches are serialized and deterministic) and costs seconds each.
inline bool on_emulator() {
  auto driver = runtime::cuda::driver();
  char name[64] = {};
  return driver.ok() && (*driver)->device_get_name(name, sizeof name, 0) == CUDA_SUCCESS &&
         std::string(name) == "kiln CUDA emulator";
}

// How many times to repeat a run: `on_gpu`, or `emulated` on the emulator.
inline int repeats(int on_gpu, int emulated = 1) { return on_emulator() ? emulated : on_gpu; }

// Loads the artifact, runs it once with `args`, then `runs` times on each of 8 threads:
// how many of those failed or gave other bytes than the first run.
inline int runs_differing(std::vector<uint8_t> artifact, const std::map<std::string, ir::Tensor>& args, int runs) {
  auto loaded = runtime::Model::load_bytes(std::move(artifact));
  REQUIRE(loaded.ok());
  const runtime::Model& model = **loaded;
  std::map<std::string, runtime::HostTensor> inputs;
  for (const auto& [name, t] : args) inputs[name] = host(t, name);
  auto run = model.run(inputs);
  REQUIRE(run.ok());
  const std::vector<runtime::HostTensor>& first = *run;
  std::atomic<int> differing{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] {
      for (int r = 0; r < runs; ++r) {
        auto out = model.run(inputs);
        if (!out.ok() || out->size() != first.size()) {
          ++differing;
          continue;
        }
        for (size_t o = 0; o < out->size(); ++o) differing += (*out)[o].data != first[o].data;
      }
    });
  for (auto& th : threads) th.join();
  return differing;
}

inline CompileOptions cuda_options(bool fuse) {
  CompileOptions options;
  options.target = "cuda";
  options.fuse = fuse;
  return options;
}

// Runs the model once on device buffers each one element past an aligned address (inputs
// `inputs`, outputs `names` of the sizes `like` gives them): the outputs' bytes.
inline std::vector<std::vector<uint8_t>> run_unaligned(const runtime::Model& model,
                                                       const std::map<std::string, runtime::HostTensor>& inputs,
                                                       const std::vector<std::string>& names,
                                                       const std::vector<runtime::HostTensor>& like) {
  const runtime::cuda::Driver& cu = **runtime::cuda::driver();
  std::vector<CUdeviceptr> allocations;
  auto unaligned = [&](size_t bytes, size_t element) {
    CUdeviceptr p = 0;
    REQUIRE(cu.mem_alloc(&p, bytes + 16) == CUDA_SUCCESS);
    allocations.push_back(p);
    return p + element;
  };
  std::map<std::string, uint64_t> in, out;
  for (const auto& [name, t] : inputs) {
    in[name] = unaligned(t.data.size(), ir::dtype_size(static_cast<ir::DType>(t.info.type)));
    REQUIRE(cu.memcpy_htod(in[name], t.data.data(), t.data.size()) == CUDA_SUCCESS);
  }
  REQUIRE(names.size() == like.size());
  for (size_t o = 0; o < names.size(); ++o)
    out[names[o]] = unaligned(like[o].data.size(), ir::dtype_size(static_cast<ir::DType>(like[o].info.type)));
  Status ran = model.run_device(in, out);
  if (!ran.ok()) FAIL(ran.error().message);
  std::vector<std::vector<uint8_t>> got;
  for (size_t o = 0; o < names.size(); ++o) {
    got.emplace_back(like[o].data.size());
    REQUIRE(cu.memcpy_dtoh(got.back().data(), out[names[o]], got.back().size()) == CUDA_SUCCESS);
  }
  for (CUdeviceptr p : allocations) cu.mem_free(p);
  return got;
}

}  // namespace kiln::testing::gpu_tier
