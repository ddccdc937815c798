// Lookup side of the process-wide pinned host range list declared in rdma_transport.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

namespace gpupool::transport::rdma {

struct PinnedRange {
  uint64_t
      id;  // unique per noted range, never reused, so a stale cached registration is detectable
  uintptr_t base;
  size_t size;
};

// The noted range that contains [p, p + size), if any.
std::optional<PinnedRange> findPinnedRange(const void* p, size_t size);
// Whether the range with this id is still noted.
bool pinnedRangeAlive(uint64_t id);

}  // namespace gpupool::transport::rdma
