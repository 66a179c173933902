#include "runtime/cpu/kernel_library.h"

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cerrno>
#include <cstring>

#include "runtime/cpu/host_cpu.h"
#include "runtime/format/target.h"

namespace kiln::runtime::cpu {
namespace {

// The ELF object with the most CPU features that this CPU all has (objects from before
// format 1.2 record none and run anywhere, as they did).
Result<const format::CodeObject*> runnable_elf(const format::Artifact& a) {
  const format::CodeObject* best = nullptr;
  std::vector<std::string> fewest_missing;
  std::string fewest_cpu;
  bool any = false;
  if (a.code())
    for (const format::CodeObject* c : *a.code()) {
      if (!c->kind() || c->kind()->string_view() != "elf") continue;
      std::vector<std::string> needed;
      if (c->cpu_features())
        for (const auto* f : *c->cpu_features()) needed.push_back(f->str());
      std::vector<std::string> missing = missing_cpu_features(needed);
      if (missing.empty()) {
        if (!best || needed.size() > (best->cpu_features() ? best->cpu_features()->size() : 0)) best = c;
      } else if (!any || missing.size() < fewest_missing.size()) {
        fewest_missing = missing;
        fewest_cpu = c->cpu() ? c->cpu()->str() : "?";
      }
      any = true;
    }
  if (best) return best;
  if (!any) return make_error("runtime: the artifact has no CPU code (an 'elf' code object)");
  std::string names;
  for (const std::string& f : fewest_missing) names += (names.empty() ? "" : ", ") + f;
  return Error{"artifact: missing CPU features: its kernels were compiled for --cpu=" + fewest_cpu + " and need " +
                   names + ", which this CPU lacks; compile for this machine with --cpu=x86-64-v3 or --cpu=native",
               static_cast<int>(format::ArtifactErrorKind::MissingCpuFeatures)};
}

// A kernel of format 1.2 or later carries the bytes of each argument it was compiled
// for: metadata that gives it others would have it run off the end of a buffer.
// `symbol` is the step's kernel, or one of its kernels in oneDNN's layouts (format
// 1.10: the same bytes, and never split).
Status check_signature(void* library, const format::Step& step, const std::string& symbol, const Signature& sig) {
  const auto* words = static_cast<const int64_t*>(dlsym(library, format::kernel_signature_symbol(symbol).c_str()));
  auto refuse = [&](const std::string& why) {
    return Error{"artifact: shape mismatch: step " + (step.name() ? step.name()->str() : symbol) + ": " + why,
                 static_cast<int>(format::ArtifactErrorKind::ShapeMismatch)};
  };
  std::vector<uint32_t> args;
  for (uint32_t v : *step.inputs()) args.push_back(v);
  for (uint32_t v : *step.outputs()) args.push_back(v);
  if (!words) return refuse("its kernel " + symbol + " has no signature");
  if (words[0] != static_cast<int64_t>(args.size()))
    return refuse("its kernel takes " + std::to_string(words[0]) + " arguments, the metadata gives it " +
                  std::to_string(args.size()));
  for (size_t i = 0; i < args.size(); ++i)
    if (words[i + 1] != sig.value_bytes[args[i]])
      return refuse("argument " + std::to_string(i) + " of its kernel is " + std::to_string(words[i + 1]) +
                    " bytes, the metadata's %" + sig.values[args[i]].name + " " +
                    std::to_string(sig.value_bytes[args[i]]));
  // A split step's kernels (format 1.4) end their signature with the scratch they write
  // and the partial kernel's work items; a kernel compiled unsplit has no partial kernel,
  // which the loader refuses first.
  if (symbol == step.symbol()->str() && step.partial_symbol() && step.partial_symbol()->size() > 0) {
    const int64_t* split = words + 1 + args.size();
    if (split[0] != step.scratch_bytes() || split[1] != step.partial_items())
      return refuse("its kernels sum " + std::to_string(split[1]) + " parts into " + std::to_string(split[0]) +
                    " bytes of scratch, the metadata gives " + std::to_string(step.partial_items()) + " and " +
                    std::to_string(step.scratch_bytes()));
  }
  return Status::Ok();
}

}  // namespace

KernelLibrary::KernelLibrary(KernelLibrary&& other) noexcept
    : library_(other.library_),
      fd_(other.fd_),
      cpu_(std::move(other.cpu_)),
      kernels_(std::move(other.kernels_)),
      partial_kernels_(std::move(other.partial_kernels_)),
      layout_kernels_(std::move(other.layout_kernels_)) {
  other.library_ = nullptr;
  other.fd_ = -1;
}

KernelLibrary::~KernelLibrary() {
  if (library_) dlclose(library_);
  if (fd_ >= 0) close(fd_);
}

Result<KernelLibrary> KernelLibrary::load(const format::ArtifactView& view, const Signature& sig) {
  const format::Artifact& a = view.metadata();
  KernelLibrary lib;
  lib.kernels_.assign(a.steps()->size(), nullptr);
  lib.partial_kernels_.assign(a.steps()->size(), nullptr);
  lib.layout_kernels_.assign(a.steps()->size(), {});
  bool needs_code = false;
  for (const format::Step* s : *a.steps()) needs_code = needs_code || s->kind() != format::StepKind::Library;
  if (!needs_code) return lib;
  KILN_ASSIGN_OR_RETURN(const format::CodeObject* elf, runnable_elf(a));
  lib.cpu_ = elf->cpu() ? elf->cpu()->str() : "";
  // From memory: an anonymous file no other process can swap, opened through /proc.
  int fd = memfd_create("kiln-kernels", MFD_CLOEXEC);
  if (fd < 0) return make_error(std::string("runtime: memfd_create failed: ") + std::strerror(errno));
  auto code = view.section(*elf->section());
  size_t written = 0;
  while (written < code.size()) {
    ssize_t w = write(fd, code.data() + written, code.size() - written);
    if (w <= 0) {
      close(fd);
      return make_error("runtime: cannot write the kernels to memory");
    }
    written += static_cast<size_t>(w);
  }
  std::string path = "/proc/self/fd/" + std::to_string(fd);
  lib.library_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  // The descriptor stays open while the library is loaded: dlopen treats a path it has
  // loaded before as the same library, so a second model must not get this fd number.
  if (!lib.library_) {
    close(fd);
    return make_error(std::string("runtime: cannot load the kernels: ") + dlerror());
  }
  lib.fd_ = fd;
  for (uint32_t s = 0; s < a.steps()->size(); ++s) {
    const format::Step* step = a.steps()->Get(s);
    if (step->kind() == format::StepKind::Library) continue;
    lib.kernels_[s] = reinterpret_cast<Kernel>(dlsym(lib.library_, step->symbol()->c_str()));
    if (!lib.kernels_[s]) return make_error("runtime: the kernels have no entry point " + step->symbol()->str());
    if (step->partial_symbol() && step->partial_symbol()->size() > 0) {
      lib.partial_kernels_[s] = reinterpret_cast<Kernel>(dlsym(lib.library_, step->partial_symbol()->c_str()));
      if (!lib.partial_kernels_[s])
        return make_error("runtime: the kernels have no entry point " + step->partial_symbol()->str());
    }
    if (view.format_minor() >= 2)
      KILN_RETURN_IF_ERROR(check_signature(lib.library_, *step, step->symbol()->str(), sig));
    if (!step->channel_layouts()) continue;
    for (int32_t block : *step->channel_layouts()) {
      const std::string symbol = format::channel_layout_kernel_symbol(step->symbol()->str(), block);
      auto kernel = reinterpret_cast<Kernel>(dlsym(lib.library_, symbol.c_str()));
      if (!kernel) return make_error("runtime: the kernels have no entry point " + symbol);
      KILN_RETURN_IF_ERROR(check_signature(lib.library_, *step, symbol, sig));
      lib.layout_kernels_[s].emplace_back(block, kernel);
    }
  }
  return lib;
}

}  // namespace kiln::runtime::cpu
