#include "runtime/cpu/page_memory.h"

#include <sys/mman.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <utility>

using kiln::runtime::cpu::PageMemory;

namespace {

bool all_zero(const PageMemory& m) {
  for (uint64_t i = 0; i < m.size(); ++i)
    if (m.data()[i] != 0) return false;
  return true;
}

}  // namespace

TEST_CASE("page memory: small buffers are whole zeroed pages, not advised") {
  for (uint64_t bytes : {uint64_t{0}, uint64_t{1}, uint64_t{4096}, uint64_t{1} << 20}) {
    auto m = PageMemory::allocate(bytes, "the arena");
    REQUIRE(m.ok());
    REQUIRE(m->data() != nullptr);
    CHECK(m->size() == bytes);
    CHECK(reinterpret_cast<uintptr_t>(m->data()) % 4096 == 0);
    CHECK(all_zero(*m));
    CHECK_FALSE(m->huge_pages_advised());
  }
}

TEST_CASE("page memory: 2 MiB and larger start on a 2 MiB boundary, writable to the end") {
  const uint64_t bytes = (uint64_t{5} << 20) + 12345;  // not a whole number of huge pages
  auto m = PageMemory::allocate(bytes, "the packed weights");
  REQUIRE(m.ok());
  CHECK(reinterpret_cast<uintptr_t>(m->data()) % (uint64_t{2} << 20) == 0);
  CHECK(all_zero(*m));
  for (uint64_t i = 0; i < bytes; i += 4096) m->data()[i] = 7;
  m->data()[bytes - 1] = 9;
  CHECK(m->data()[bytes - 1] == 9);
#ifdef MADV_HUGEPAGE
  // The advice fails only on a kernel built without transparent huge pages.
  if (kiln::runtime::cpu::transparent_huge_pages() != "unknown") CHECK(m->huge_pages_advised());
#endif
}

TEST_CASE("page memory: moves hand over the mapping") {
  auto m = PageMemory::allocate(3 << 20, "the arena");
  REQUIRE(m.ok());
  uint8_t* at = m->data();
  at[0] = 1;
  PageMemory moved = std::move(*m);
  CHECK(moved.data() == at);
  CHECK(moved.size() == uint64_t{3} << 20);
  CHECK(m->data() == nullptr);
  PageMemory assigned;
  assigned = std::move(moved);
  CHECK(assigned.data() == at);
  CHECK(assigned.data()[0] == 1);
  CHECK(moved.data() == nullptr);
}

TEST_CASE("page memory: more than the machine has is an error naming the bytes and the buffer") {
  auto m = PageMemory::allocate(uint64_t{1} << 62, "the arena");
  REQUIRE_FALSE(m.ok());
  CHECK_THAT(m.error().message,
             Catch::StartsWith("cannot allocate 4611686018427387904 bytes (4.0 EiB) for the arena: this machine has "));
}

TEST_CASE("page memory: the system's transparent huge page mode is one of the kernel's") {
  const std::string mode = kiln::runtime::cpu::transparent_huge_pages();
  CHECK((mode == "always" || mode == "madvise" || mode == "never" || mode == "unknown"));
}
