#include "codegen/cuda/nvrtc_compile.h"

#include <fmt/format.h>
#include <nvrtc.h>
#include <unistd.h>
#include <xxhash.h>
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <future>
#include <optional>

#include "base/file.h"
#include "runtime/format/target.h"

namespace kiln::codegen::cuda {
namespace {

// The options every compile passes: C++17, fused multiply-adds (nvcc's default), no
// warnings (generated code names values it may not use; the log then holds errors only),
// and the optimizer's work split over threads (docs/cuda.md). A fixed split, not one per
// hardware thread: the cubin's bytes depend on it, and an artifact's bytes should not
// depend on the machine that compiled it.
constexpr const char* kCommonOptions[] = {"-std=c++17", "--fmad=true", "--disable-warnings", "--split-compile=8"};

// Written to a temporary name and renamed, so a concurrent reader never sees half a file.
// Returns why it could not be stored, or "".
std::string write_cached(const std::string& dir, const std::string& path, const std::vector<uint8_t>& bytes) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return fmt::format("cannot create '{}': {}", dir, ec.message());
  std::string entry(bytes.begin(), bytes.end());
  const uint64_t hash = XXH64(bytes.data(), bytes.size(), 0);
  entry.append(reinterpret_cast<const char*>(&hash), 8);
  std::string temp = fmt::format("{}.{}.tmp", path, getpid());
  if (Status written = write_file(temp, entry); !written.ok()) return written.error().message;
  std::filesystem::rename(temp, path, ec);
  if (!ec) return "";
  std::filesystem::remove(temp, ec);
  return fmt::format("cannot rename it to '{}'", path);
}

// One NVRTC compile for a real architecture: its cubin and its PTX.
Result<std::pair<std::vector<uint8_t>, std::vector<uint8_t>>> nvrtc(const std::string& source,
                                                                    const std::string& arch) {
  nvrtcProgram program;
  if (nvrtcResult r = nvrtcCreateProgram(&program, source.c_str(), "kiln.cu", 0, nullptr, nullptr); r != NVRTC_SUCCESS)
    return make_error(fmt::format("cuda codegen: NVRTC cannot create a program: {}", nvrtcGetErrorString(r)));
  std::string arch_option = "--gpu-architecture=" + arch;
  std::vector<const char*> options = {arch_option.c_str()};
  for (const char* o : kCommonOptions) options.push_back(o);
  nvrtcResult compiled = nvrtcCompileProgram(program, static_cast<int>(options.size()), options.data());
  size_t log_size = 0;
  nvrtcGetProgramLogSize(program, &log_size);
  std::string log(log_size, '\0');
  if (log_size > 0) nvrtcGetProgramLog(program, log.data());
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  if (compiled != NVRTC_SUCCESS) {
    nvrtcDestroyProgram(&program);
    return make_error(fmt::format("cuda codegen: NVRTC could not compile the program for {} ({}):\n{}", arch,
                                  nvrtcGetErrorString(compiled), log));
  }
  size_t cubin_size = 0, ptx_size = 0;
  nvrtcGetCUBINSize(program, &cubin_size);
  nvrtcGetPTXSize(program, &ptx_size);
  std::vector<uint8_t> cubin(cubin_size), ptx(ptx_size);
  nvrtcGetCUBIN(program, reinterpret_cast<char*>(cubin.data()));
  nvrtcGetPTX(program, reinterpret_cast<char*>(ptx.data()));
  nvrtcDestroyProgram(&program);
  return std::pair{std::move(cubin), std::move(ptx)};
}

}  // namespace

std::optional<std::vector<uint8_t>> read_cache_entry(const std::string& path) {
  auto text = read_file(path, uint64_t{1} << 30);
  if (!text.ok() || text->size() <= 8) return std::nullopt;
  const size_t size = text->size() - 8;
  uint64_t hash = 0;
  std::memcpy(&hash, text->data() + size, 8);
  if (XXH64(text->data(), size, 0) != hash) return std::nullopt;
  return std::vector<uint8_t>(text->begin(), text->begin() + static_cast<std::ptrdiff_t>(size));
}

std::string nvrtc_version() {
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  return fmt::format("{}.{}", major, minor);
}

std::string default_cache_dir() {
  if (const char* dir = std::getenv("KILN_CACHE_DIR"); dir && *dir) return std::string(dir) + "/nvrtc";
  if (const char* dir = std::getenv("XDG_CACHE_HOME"); dir && *dir) return std::string(dir) + "/kiln/nvrtc";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/kiln/nvrtc";
  return "/tmp/kiln-cache/nvrtc";
}

Status check_archs(const std::vector<std::string>& archs) {
  if (archs.empty()) return make_error("cuda codegen: no GPU architecture given (for example --cuda-arch=sm_90)");
  int count = 0;
  nvrtcGetNumSupportedArchs(&count);
  std::vector<int> supported(static_cast<size_t>(count));
  if (count > 0) nvrtcGetSupportedArchs(supported.data());
  std::string names;
  for (int a : supported) names += fmt::format("{}sm_{}", names.empty() ? "" : " ", a);
  for (size_t i = 0; i < archs.size(); ++i) {
    const std::string& arch = archs[i];
    if (std::find(archs.begin(), archs.begin() + static_cast<std::ptrdiff_t>(i), arch) !=
        archs.begin() + static_cast<std::ptrdiff_t>(i))
      return make_error(fmt::format("cuda codegen: --cuda-arch names {} twice", arch));
    bool well_formed = arch.size() > 3 && arch.starts_with("sm_") &&
                       std::all_of(arch.begin() + 3, arch.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!well_formed)
      return make_error(
          fmt::format("cuda codegen: '{}' is not a GPU architecture (expected sm_NN, such as sm_90)", arch));
    if (std::find(supported.begin(), supported.end(), format::cuda_arch_number(arch)) == supported.end())
      return make_error(
          fmt::format("cuda codegen: NVRTC {} cannot compile for {} (it supports: {})", nvrtc_version(), arch, names));
  }
  return Status::Ok();
}

Result<std::vector<CodeObject>> compile_program(const std::string& source, const NvrtcOptions& options,
                                                NvrtcStats* stats) {
  KILN_RETURN_IF_ERROR(check_archs(options.archs));
  const std::vector<std::string>& archs = options.archs;
  const std::string newest = *std::max_element(archs.begin(), archs.end(), [](const auto& a, const auto& b) {
    return format::cuda_arch_number(a) < format::cuda_arch_number(b);
  });
  const std::string dir = options.cache_dir.empty() ? default_cache_dir() : options.cache_dir;
  struct Compiled {
    Result<std::pair<std::vector<uint8_t>, std::vector<uint8_t>>> code = Error{};
    bool hit = false;
    double ms = 0;
    std::string cubin_path;
    std::string not_stored;  // why the cache could not keep the result, or ""
  };
  // One thread per architecture (each compile splits its work over threads of its own).
  auto compile_one = [&](const std::string& arch) {
    Compiled c;
    std::string keyed = source + '\0' + arch + "\0cache entries with xxh64";
    for (const char* o : kCommonOptions) keyed += std::string("\0", 1) + o;
    keyed += '\0' + nvrtc_version();
    const std::string key = fmt::format("{:016x}", XXH64(keyed.data(), keyed.size(), 0));
    c.cubin_path = fmt::format("{}/{}-{}.cubin", dir, key, arch);
    const std::string ptx_path = fmt::format("{}/{}-{}.ptx", dir, key, arch);
    // The source beside its code, to read what an entry holds (and for the CUDA emulator
    // of tests/cuda_emulator, which runs an image by compiling its source for the host).
    const std::string source_path = fmt::format("{}/{}-{}.cu", dir, key, arch);
    if (options.use_cache && !std::filesystem::exists(source_path))
      write_cached(dir, source_path, std::vector<uint8_t>(source.begin(), source.end()));
    if (options.use_cache) {
      auto cubin = read_cache_entry(c.cubin_path), ptx = read_cache_entry(ptx_path);
      if (cubin && ptx) {
        c.code = std::pair{std::move(*cubin), std::move(*ptx)};
        c.hit = true;
        return c;
      }
    }
    auto start = std::chrono::steady_clock::now();
    c.code = nvrtc(source, arch);
    c.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (c.code.ok() && options.use_cache) {
      c.not_stored = write_cached(dir, c.cubin_path, c.code->first);
      if (c.not_stored.empty()) c.not_stored = write_cached(dir, ptx_path, c.code->second);
    }
    return c;
  };
  std::vector<std::future<Compiled>> running;
  for (const std::string& arch : archs) running.push_back(std::async(std::launch::async, compile_one, arch));
  std::vector<CodeObject> objects;
  std::vector<uint8_t> newest_ptx;
  NvrtcStats local;
  for (size_t i = 0; i < archs.size(); ++i) {
    Compiled c = running[i].get();
    if (!c.code.ok()) return c.code.error();
    if (c.hit) {
      ++local.cache_hits;
      if (options.verbose) fmt::print(stderr, "nvrtc: {}: cache hit {}\n", archs[i], c.cubin_path);
    } else {
      ++local.cache_misses;
      local.nvrtc_ms += c.ms;
      if (options.verbose)
        fmt::print(stderr, "nvrtc: {}: compiled in {:.0f} ms ({})\n", archs[i], c.ms,
                   !options.use_cache     ? "cache off"
                   : c.not_stored.empty() ? "cache miss, stored as " + c.cubin_path
                                          : "cache miss, not stored: " + c.not_stored);
    }
    objects.push_back({"cubin", archs[i], std::move(c.code->first)});
    if (archs[i] == newest) newest_ptx = std::move(c.code->second);
  }
  objects.push_back({"ptx", "compute_" + newest.substr(3), std::move(newest_ptx)});
  if (stats) *stats = local;
  return objects;
}

}  // namespace kiln::codegen::cuda
