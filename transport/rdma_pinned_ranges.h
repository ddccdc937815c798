// Lookup side of the process-wide pinned host range list declared in rdma_transport.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "transport/rdma_transport.h"

namespace gpupool::transport::rdma {

struct PinnedRange {
  uint64_t
      id;  // unique per noted range, never reused, so a stale cached registration is detectable
  uintptr_t base;
  size_t size;
  PeerAccess access;
};

// The noted range that contains [p, p + size), if any.
std::optional<PinnedRange> findPinnedRange(const void* p, size_t size);
// Whether the range with this id is still noted.
bool pinnedRangeAlive(uint64_t id);
// How many ranges have been forgotten so far: a cache that saw this number has nothing stale to
// drop while it stays the same. Lock-free, for hot paths.
uint64_t pinnedRangesForgotten();

}  // namespace gpupool::transport::rdma
