#include "transport/rdma_pinned_ranges.h"

#include <atomic>
#include <map>
#include <mutex>
#include <unordered_set>

namespace gpupool::transport {
namespace {

struct Registry {
  std::mutex mutex;
  std::map<uintptr_t, rdma::PinnedRange> byBase;
  std::unordered_set<uint64_t> live;  // ids in byBase
  uint64_t nextId = 1;
  std::atomic<uint64_t> forgotten{0};
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: used from atexit-time frees too
  return *r;
}

// Removes the entry at `it` (lock held).
void forget(Registry& r, std::map<uintptr_t, rdma::PinnedRange>::iterator it) {
  r.live.erase(it->second.id);
  r.byBase.erase(it);
  r.forgotten.fetch_add(1, std::memory_order_release);
}

}  // namespace

void notePinnedHostRange(const void* base, size_t size, PeerAccess access) {
  if (!base || !size) return;
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  auto b = reinterpret_cast<uintptr_t>(base);
  // Noting a base again replaces the old range: caches must not keep its registration.
  if (auto it = r.byBase.find(b); it != r.byBase.end()) forget(r, it);
  uint64_t id = r.nextId++;
  r.byBase[b] = rdma::PinnedRange{id, b, size, access};
  r.live.insert(id);
}

void forgetPinnedHostRange(const void* base) {
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  if (auto it = r.byBase.find(reinterpret_cast<uintptr_t>(base)); it != r.byBase.end()) {
    forget(r, it);
  }
}

namespace rdma {

std::optional<PinnedRange> findPinnedRange(const void* p, size_t size) {
  auto& r = registry();
  auto a = reinterpret_cast<uintptr_t>(p);
  std::lock_guard lock(r.mutex);
  auto it = r.byBase.upper_bound(a);
  if (it == r.byBase.begin()) return std::nullopt;
  --it;
  const PinnedRange& range = it->second;
  if (a + size <= range.base + range.size) return range;
  return std::nullopt;
}

bool pinnedRangeAlive(uint64_t id) {
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  return r.live.count(id) != 0;
}

uint64_t pinnedRangesForgotten() { return registry().forgotten.load(std::memory_order_acquire); }

}  // namespace rdma
}  // namespace gpupool::transport
