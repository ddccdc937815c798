// Memory registration for one protection domain: a cache for pinned host ranges (registered once,
// kept until the range is forgotten and dropForgotten() runs, or the cache is destroyed) and
// one-transfer registrations for everything else.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <map>
#include <optional>

#include "transport/pinned_memory.h"
#include "transport/rdma/rdma_transport.h"

namespace gpupool::transport::rdma {

// Keys for one transfer. Deregisters a one-transfer registration when it goes out of scope.
class RegistrationLease {
 public:
  RegistrationLease() = default;
  RegistrationLease(uint32_t lkey, uint32_t rkey, ibv_mr* temporary, RdmaStats* stats)
      : lkey_(lkey), rkey_(rkey), temporary_(temporary), stats_(stats) {}
  RegistrationLease(RegistrationLease&& other) noexcept { *this = std::move(other); }
  RegistrationLease& operator=(RegistrationLease&& other) noexcept;
  RegistrationLease(const RegistrationLease&) = delete;
  RegistrationLease& operator=(const RegistrationLease&) = delete;
  ~RegistrationLease() { release(); }

  uint32_t lkey() const { return lkey_; }
  uint32_t rkey() const { return rkey_; }
  // True when the keys outlive the lease (a cached pinned range), false for a one-transfer one.
  bool cached() const { return temporary_ == nullptr; }
  void release();

 private:
  uint32_t lkey_ = 0;
  uint32_t rkey_ = 0;
  ibv_mr* temporary_ = nullptr;
  RdmaStats* stats_ = nullptr;
};

class MemoryRegistrations {
 public:
  MemoryRegistrations(ibv_pd* pd, const PinnedMemory& pinned, RdmaStats* stats)
      : pd_(pd), pinned_(pinned), stats_(stats) {}
  ~MemoryRegistrations() { clear(); }
  MemoryRegistrations(const MemoryRegistrations&) = delete;
  MemoryRegistrations& operator=(const MemoryRegistrations&) = delete;

  // Keys covering [p, p + size) with at least `access`. Pinned ranges come from (or enter) the
  // cache, except ranges the peer must not reach (PeerAccess::kNone) when `access` asks for remote
  // rights, and such ranges over kLargestCachedPrivateRange; other memory gets a registration that
  // lives as long as the lease. nullopt when the memory cannot be registered (e.g. read-only pages
  // asked for local write).
  std::optional<RegistrationLease> acquire(const void* p, size_t size, int access);

  // Deregisters the cached ranges forgotten since the last call. Only where no key of a cached
  // range is still in use (nothing of ours lent to the peer, no transfer of ours in flight).
  // Costs one atomic load when nothing was forgotten.
  void dropForgotten();

  // Registering a range commits all of it, so private ranges (a server's device memory, committed
  // only where touched) larger than this are registered piece by piece instead.
  static constexpr size_t kLargestCachedPrivateRange = size_t{1} << 30;

  // Deregisters every cached range (on close; the PD goes away next).
  void clear();

 private:
  struct Cached {
    ibv_mr* mr;
    uintptr_t base;
    size_t size;
  };
  ibv_pd* pd_;
  const PinnedMemory& pinned_;
  RdmaStats* stats_;
  std::map<uint64_t, Cached> cache_;  // by PinnedRange::id
  uint64_t forgottenSeen_ = 0;        // pinned_.forgottenCount() at the last dropForgotten
};

}  // namespace gpupool::transport::rdma
