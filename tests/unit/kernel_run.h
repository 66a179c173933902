// Runs a planned graph's CPU kernels, compiled into a shared object, through its arena,
// as codegen tests do: kernel steps call the compiled code, library steps the interpreter.
#pragma once

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "codegen/cpu/compile.h"
#include "ir/interpreter.h"
#include "ir/reduction_split.h"
#include "ir/row_class.h"
#include "tests/unit/test_util.h"

namespace kiln::testing {

using Kernel = void (*)(uint8_t* const*, int64_t, int64_t);

// Compiles a planned graph's kernels and runs it through its arena: kernel steps call
// the compiled code, library steps (matmul, OpenBLAS in the runtime) the interpreter.
// With `chunk` > 0, each kernel runs over its work items in pieces of that many, as the
// runtime's threads do.
inline Result<std::vector<ir::Tensor>> run_compiled(const ir::Graph& g, const std::map<std::string, ir::Tensor>& inputs,
                                                    const std::string& tag, int64_t chunk = 0,
                                                    int64_t streaming_bytes = int64_t{16} << 20) {
  codegen::cpu::CompileOptions options;
  options.streaming_store_bytes = streaming_bytes;
  KILN_ASSIGN_OR_RETURN(codegen::cpu::KernelLibrary library, codegen::cpu::compile_kernels(g, options));
  const std::vector<uint8_t>& so = library.elf;
  std::string path =
      std::string(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp") + "/kernels-" + tag + ".so";
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(so.data()), static_cast<std::streamsize>(so.size()));
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) return make_error(std::string("dlopen: ") + dlerror());
  auto result =
      ir::evaluate_program(g, inputs, [&](const ir::Step& step, std::span<uint8_t* const> buffers) -> Result<bool> {
        if (step.kind == ir::StepKind::Library) return false;
        auto kernel = reinterpret_cast<Kernel>(dlsym(handle, ("kiln_" + step.name).c_str()));
        if (!kernel) return make_error("no kernel kiln_" + step.name);
        auto over = [&](Kernel k, uint8_t* const* args, int64_t items) {
          for (int64_t begin = 0; begin<items; begin += chunk> 0 ? chunk : items)
            k(args, begin, chunk > 0 ? std::min(items, begin + chunk) : items);
        };
        if (auto split = ir::reduction_split(g, step, ir::kCpuSplit)) {  // its parts first, into scratch
          auto partial = reinterpret_cast<Kernel>(dlsym(handle, ("kiln_" + step.name + "_partial").c_str()));
          if (!partial) return make_error("no kernel kiln_" + step.name + "_partial");
          std::vector<double> scratch(static_cast<size_t>(split->scratch_bytes) / sizeof(double));
          std::vector<uint8_t*> args(buffers.begin(), buffers.end());
          args.push_back(reinterpret_cast<uint8_t*>(scratch.data()));
          over(partial, args.data(), split->partial_items);
          over(kernel, args.data(), ir::work_items(g, step));
          return true;
        }
        over(kernel, buffers.data(), ir::work_items(g, step));
        return true;
      });
  dlclose(handle);
  return result;
}

}  // namespace kiln::testing
