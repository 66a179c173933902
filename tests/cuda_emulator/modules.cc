// Loading a module. Its image (a cubin or PTX that NVRTC made) carries no source, so the
// emulator finds the image among the NVRTC cache's entries, which keep the source they
// were compiled from beside them (codegen/cuda/nvrtc_compile.cc), and compiles that
// source with the host compiler ($KILN_CUDA_EMULATOR_CXX, else c++) after
// device_header(), precompiled once per process.
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "codegen/cuda/nvrtc_compile.h"
#include "tests/cuda_emulator/emulator.h"

namespace kiln::cuda_emulator {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The image's bytes: an ELF file up to the end of its last part (section headers, program
// headers or a section's data), PTX up to and with its terminating zero.
std::string_view image_bytes(const void* image) {
  const char* p = static_cast<const char*>(image);
  if (std::memcmp(p,
                  "\x7f"
                  "ELF",
                  4) != 0)
    return {p, std::strlen(p) + 1};
  auto u64 = [&](size_t at) {
    uint64_t v;
    std::memcpy(&v, p + at, 8);
    return v;
  };
  auto u32 = [&](size_t at) {
    uint32_t v;
    std::memcpy(&v, p + at, 4);
    return v;
  };
  auto u16 = [&](size_t at) {
    uint16_t v;
    std::memcpy(&v, p + at, 2);
    return v;
  };
  const uint64_t shoff = u64(0x28), phoff = u64(0x20);
  const uint16_t phentsize = u16(0x36), phnum = u16(0x38), shentsize = u16(0x3a), shnum = u16(0x3c);
  uint64_t end = std::max(shoff + uint64_t{shentsize} * shnum, phoff + uint64_t{phentsize} * phnum);
  for (uint16_t i = 0; i < shnum; ++i) {
    const size_t header = shoff + size_t{i} * shentsize;
    constexpr uint32_t kNoBits = 8;
    if (u32(header + 4) != kNoBits) end = std::max(end, u64(header + 0x18) + u64(header + 0x20));
  }
  return {p, static_cast<size_t>(end)};
}

// The source beside the cache entry that holds these bytes, or why there is none.
bool find_source(std::string_view image, std::string& source, std::string& error) {
  const std::string dir = codegen::cuda::default_cache_dir();
  std::error_code ec;
  std::filesystem::path found;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string extension = entry.path().extension().string();
    if (extension != ".cubin" && extension != ".ptx") continue;
    auto code = codegen::cuda::read_cache_entry(entry.path().string());
    if (code && std::string_view(reinterpret_cast<const char*>(code->data()), code->size()) == image) {
      found = std::filesystem::path(entry.path()).replace_extension(".cu");
      break;
    }
  }
  if (ec) {
    error = "the emulator found no NVRTC cache at " + dir;
    return false;
  }
  if (found.empty()) {
    error = "the emulator found no entry of the NVRTC cache at " + dir + " with this image's bytes";
    return false;
  }
  auto text = codegen::cuda::read_cache_entry(found.string());
  if (!text || text->empty()) {
    error = "the emulator found no source at " + found.string();
    return false;
  }
  source.assign(text->begin(), text->end());
  return true;
}

// A fresh directory for the compiler's files, under the test's temporary directory.
bool make_directory(std::string& path, std::string& error) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  path = std::string(tmp && *tmp ? tmp : "/tmp") + "/kiln-cuda-emulator-XXXXXX";
  if (mkdtemp(path.data())) return true;
  error = "the emulator cannot make a directory " + path;
  return false;
}

// Runs the host compiler on `arguments` (its output to a log in `directory`).
bool run_compiler(const std::string& arguments, const std::string& directory, std::string& error) {
  const char* cxx = std::getenv("KILN_CUDA_EMULATOR_CXX");
  // Without F16C, each f16 conversion is a call into libgcc's software routine, a large
  // part of the f16 attention cases' time (docs/benchmarks.md). F16C converts exactly as
  // that routine does.
  const char* f16c = __builtin_cpu_supports("f16c") ? " -mf16c" : "";
  // A load or store through a pointer misaligned for its type (a 16-byte vector one element
  // past an aligned address) traps, SIGILL, where a GPU faults with a misaligned address;
  // the checks cost the emulated kernels about 5%.
  const std::string log = directory + "/log.txt";
  const std::string command = std::string(cxx && *cxx ? cxx : "c++") +
                              " -std=c++20 -O1 -fPIC -w -fno-strict-aliasing -fsanitize=alignment "
                              "-fsanitize-undefined-trap-on-error" +
                              f16c + " " + arguments + " > " + log + " 2>&1";
  if (std::system(command.c_str()) == 0) return true;
  error = "the host compiler failed (" + command + "):\n" + read_file(log).substr(0, 4000);
  return false;
}

// The directory of device_header() and its precompiled form, made once per process: the
// header's standard headers took most of a small program's compile.
const std::string* header_directory(std::string& error) {
  static std::string directory;
  if (!directory.empty()) return &directory;
  std::string made;
  if (!make_directory(made, error)) return nullptr;
  std::ofstream(made + "/kiln_emu_device.h") << device_header();
  if (!run_compiler("-x c++-header -o " + made + "/kiln_emu_device.h.gch " + made + "/kiln_emu_device.h", made, error))
    return nullptr;
  directory = made;
  return &directory;
}

// The program as a host library: the header, the source, and per kernel an entry point
// and its parameters' sizes.
void* compile_program(const std::string& source, std::string& error) {
  static std::map<std::string, void*> compiled;  // by source
  if (auto known = compiled.find(source); known != compiled.end()) return known->second;
  const std::string* header = header_directory(error);
  if (!header) return nullptr;
  std::string text = "#include \"kiln_emu_device.h\"\n";
  text += source;
  static const std::regex kernel(R"(extern "C" __global__ void (?:__launch_bounds__\([^)]*\) )?(\w+)\()");
  for (auto it = std::sregex_iterator(source.begin(), source.end(), kernel); it != std::sregex_iterator(); ++it) {
    const std::string name = (*it)[1];
    text += "extern \"C\" void kiln_emu_entry_" + name + "(void** p) { kiln_emu_call(" + name + ", p); }\n";
    text += "extern \"C\" unsigned kiln_emu_sizes_" + name + "(unsigned* s) { return kiln_emu_sizes_of(" + name +
            ", s); }\n";
  }
  std::string directory;
  if (!make_directory(directory, error)) return nullptr;
  const std::string cc = directory + "/program.cc", so = directory + "/program.so";
  std::ofstream(cc) << text;
  if (!run_compiler("-shared -I " + *header + " -o " + so + " " + cc, directory, error)) return nullptr;
  void* library = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    error = std::string("the emulator cannot open the compiled program: ") + dlerror();
    return nullptr;
  }
  // Kept where the compile failed, to read; once open, the files are not needed.
  std::error_code ignored;
  std::filesystem::remove_all(directory, ignored);
  auto bind = reinterpret_cast<void (*)(const void*)>(dlsym(library, "kiln_emu_bind"));
  bind_program(bind);
  return compiled[source] = library;
}

}  // namespace

void* load_program(const void* image, std::string& error) {
  std::string source;
  if (!find_source(image_bytes(image), source, error)) return nullptr;
  return compile_program(source, error);
}

}  // namespace kiln::cuda_emulator
