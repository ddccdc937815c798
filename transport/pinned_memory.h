// Which long-lived page-locked host ranges a process has (cuMemHostAlloc, cuMemHostRegister, a
// server's device memory), for transports that can register memory with their device (RDMA). A
// connection registers such a range once, as a whole, and keeps it registered until the range is
// forgotten (dropped at the connection's next safe point: the next frame it receives with none of
// its own memory lent to the peer) or the connection closes. Memory not listed is treated as
// pageable: registered for one transfer only, because it may be unmapped and its addresses reused
// afterwards. Transports without registration ignore it.
//
// gpupoold builds one PinnedMemory in main() and hands it to its backends and its listener; the
// client library (a driver shim without a main) uses processPinnedMemory().
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <unordered_set>

namespace gpupool::transport {

enum class PeerAccess {
  kReadWrite,  // the peer may be given keys to it (client pinned memory: the server READs and
               // WRITEs it directly)
  kNone,       // ours alone (server device memory): cached for local access only; a transfer that
               // must expose it to the peer registers just that piece, for just that transfer
};

struct PinnedRange {
  uint64_t
      id;  // unique per noted range, never reused, so a stale cached registration is detectable
  uintptr_t base;
  size_t size;
  PeerAccess access;
};

// Thread-safe.
class PinnedMemory {
 public:
  PinnedMemory() = default;
  PinnedMemory(const PinnedMemory&) = delete;
  PinnedMemory& operator=(const PinnedMemory&) = delete;

  // Notes [base, base + size) as pinned. Noting a base again replaces the old range.
  void note(const void* base, size_t size, PeerAccess access = PeerAccess::kReadWrite);
  // Call before the range is freed or unregistered.
  void forget(const void* base);

  // The noted range that contains [p, p + size), if any.
  std::optional<PinnedRange> find(const void* p, size_t size) const;
  // Whether the range with this id is still noted.
  bool alive(uint64_t id) const;
  // How many ranges have been forgotten so far: a cache that saw this number has nothing stale to
  // drop while it stays the same. Lock-free, for hot paths.
  uint64_t forgottenCount() const { return forgotten_.load(std::memory_order_acquire); }

 private:
  void forgetLocked(std::map<uintptr_t, PinnedRange>::iterator it);

  mutable std::mutex mutex_;
  std::map<uintptr_t, PinnedRange> byBase_;
  std::unordered_set<uint64_t> live_;  // ids in byBase_
  uint64_t nextId_ = 1;
  std::atomic<uint64_t> forgotten_{0};
};

// The client library's one instance (never destroyed: used from atexit-time frees too).
PinnedMemory& processPinnedMemory();

}  // namespace gpupool::transport
