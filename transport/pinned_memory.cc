#include "transport/pinned_memory.h"

namespace gpupool::transport {

void PinnedMemory::forgetLocked(std::map<uintptr_t, PinnedRange>::iterator it) {
  live_.erase(it->second.id);
  byBase_.erase(it);
  forgotten_.fetch_add(1, std::memory_order_release);
}

void PinnedMemory::note(const void* base, size_t size, PeerAccess access) {
  if (!base || !size) return;
  std::lock_guard lock(mutex_);
  auto b = reinterpret_cast<uintptr_t>(base);
  // Noting a base again replaces the old range: caches must not keep its registration.
  if (auto it = byBase_.find(b); it != byBase_.end()) forgetLocked(it);
  uint64_t id = nextId_++;
  byBase_[b] = PinnedRange{id, b, size, access};
  live_.insert(id);
}

void PinnedMemory::forget(const void* base) {
  std::lock_guard lock(mutex_);
  if (auto it = byBase_.find(reinterpret_cast<uintptr_t>(base)); it != byBase_.end()) {
    forgetLocked(it);
  }
}

std::optional<PinnedRange> PinnedMemory::find(const void* p, size_t size) const {
  auto a = reinterpret_cast<uintptr_t>(p);
  std::lock_guard lock(mutex_);
  auto it = byBase_.upper_bound(a);
  if (it == byBase_.begin()) return std::nullopt;
  --it;
  const PinnedRange& range = it->second;
  if (a + size <= range.base + range.size) return range;
  return std::nullopt;
}

bool PinnedMemory::alive(uint64_t id) const {
  std::lock_guard lock(mutex_);
  return live_.count(id) != 0;
}

PinnedMemory& processPinnedMemory() {
  static PinnedMemory* instance = new PinnedMemory();
  return *instance;
}

}  // namespace gpupool::transport
