// Allocations whose size comes from a user's input (a shape, a file header, a flag): a
// failure is an error that names the bytes asked for, never an uncaught std::bad_alloc.
#pragma once

#include <cstdint>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>

#include "base/result.h"

namespace kiln {

/// This machine's memory that an allocation can use: physical memory plus swap.
uint64_t memory_limit_bytes();

/// "1.5 GiB", "512 bytes": a byte count for messages.
std::string format_bytes(uint64_t bytes);

/// The error for an allocation of `bytes` for `what` ("the arena") that cannot succeed:
/// "cannot allocate 400000000000 bytes (372.5 GiB) for the arena: out of memory" (or
/// another `why`, such as the system's reason for a failed mmap).
Error allocation_error(uint64_t bytes, std::string_view what, std::string_view why = "out of memory");

/// Checks an allocation of `bytes` for `what` against this machine's memory before it
/// is made: larger than memory plus swap is an error, as overcommit would otherwise let
/// it succeed and be killed when touched.
Status check_allocation(uint64_t bytes, std::string_view what);

/// Resizes a container to `count` elements of `element_bytes` each, returning an
/// allocation error (checked first against memory, then std::bad_alloc) instead of
/// throwing.
template <class Container>
Status resize_or_error(Container& container, uint64_t count, std::string_view what) {
  const uint64_t element_bytes = sizeof(typename Container::value_type);
  const uint64_t bytes = count > UINT64_MAX / element_bytes ? UINT64_MAX : count * element_bytes;
  KILN_RETURN_IF_ERROR(check_allocation(bytes, what));
  try {
    container.resize(static_cast<typename Container::size_type>(count));
  } catch (const std::bad_alloc&) {
    return allocation_error(bytes, what);
  } catch (const std::length_error&) {
    return allocation_error(bytes, what);
  }
  return Status::Ok();
}

}  // namespace kiln
