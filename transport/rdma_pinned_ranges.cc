#include "transport/rdma_pinned_ranges.h"

#include <map>
#include <mutex>

#include "transport/rdma_transport.h"

namespace gpupool::transport {
namespace {

struct Registry {
  std::mutex mutex;
  std::map<uintptr_t, rdma::PinnedRange> byBase;
  uint64_t nextId = 1;
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: used from atexit-time frees too
  return *r;
}

}  // namespace

void notePinnedHostRange(const void* base, size_t size) {
  if (!base || !size) return;
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  auto b = reinterpret_cast<uintptr_t>(base);
  r.byBase[b] = rdma::PinnedRange{r.nextId++, b, size};
}

void forgetPinnedHostRange(const void* base) {
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  r.byBase.erase(reinterpret_cast<uintptr_t>(base));
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
  for (auto& [base, range] : r.byBase) {
    if (range.id == id) return true;
  }
  return false;
}

}  // namespace rdma
}  // namespace gpupool::transport
