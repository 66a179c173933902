#include "runtime/cpu/page_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <utility>

#include "base/allocation.h"

namespace kiln::runtime::cpu {
namespace {

constexpr uint64_t kHugePage = uint64_t{2} << 20;

uint64_t round_up(uint64_t bytes, uint64_t unit) { return (bytes + unit - 1) / unit * unit; }

}  // namespace

Result<PageMemory> PageMemory::allocate(uint64_t bytes, std::string_view what) {
  KILN_RETURN_IF_ERROR(check_allocation(bytes, what));
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const bool huge = bytes >= kHugePage;
  // A huge buffer maps one huge page more than it needs, to start at a 2 MiB boundary.
  const uint64_t used = huge ? round_up(bytes, kHugePage) : round_up(bytes > 0 ? bytes : 1, page);
  const uint64_t mapped = huge ? used + kHugePage : used;
  void* at = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (at == MAP_FAILED) return allocation_error(bytes, what, std::strerror(errno));
  PageMemory memory;
  memory.mapping_ = at;
  memory.mapping_bytes_ = mapped;
  memory.size_ = bytes;
  const uintptr_t start = reinterpret_cast<uintptr_t>(at);
  memory.data_ = reinterpret_cast<uint8_t*>(huge ? round_up(start, kHugePage) : start);
#ifdef MADV_HUGEPAGE
  if (huge) memory.advised_ = madvise(memory.data_, used, MADV_HUGEPAGE) == 0;
#endif
  return memory;
}

PageMemory::~PageMemory() {
  if (mapping_) munmap(mapping_, mapping_bytes_);
}

PageMemory::PageMemory(PageMemory&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      mapping_(std::exchange(other.mapping_, nullptr)),
      mapping_bytes_(std::exchange(other.mapping_bytes_, 0)),
      advised_(std::exchange(other.advised_, false)) {}

PageMemory& PageMemory::operator=(PageMemory&& other) noexcept {
  if (this != &other) {
    if (mapping_) munmap(mapping_, mapping_bytes_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    mapping_ = std::exchange(other.mapping_, nullptr);
    mapping_bytes_ = std::exchange(other.mapping_bytes_, 0);
    advised_ = std::exchange(other.advised_, false);
  }
  return *this;
}

std::string transparent_huge_pages() {
  // The file lists every mode with the current one in brackets: "always [madvise] never".
  std::ifstream file("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  if (!std::getline(file, line)) return "unknown";
  const size_t open = line.find('['), close = line.find(']');
  if (open == std::string::npos || close == std::string::npos || close < open) return "unknown";
  return line.substr(open + 1, close - open - 1);
}

}  // namespace kiln::runtime::cpu
