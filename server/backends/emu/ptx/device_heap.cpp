#include "device_heap.h"

#include <map>
#include <memory>
#include <mutex>

#include "ptx_launch.h"

namespace gpupool::ptx {
namespace {

struct HeapState {
  std::mutex mutex;
  std::unique_ptr<uint8_t[]> arena;
  std::map<uint64_t, uint64_t> live;  // offset -> size
};

HeapState& state() {
  static HeapState s;
  return s;
}

}  // namespace

DeviceHeap& DeviceHeap::instance() {
  static DeviceHeap heap;
  return heap;
}

uint64_t DeviceHeap::allocate(uint64_t size) {
  HeapState& s = state();
  std::lock_guard lock(s.mutex);
  if (!s.arena) s.arena = std::make_unique<uint8_t[]>(kCapacity);
  size = (size + 15) & ~uint64_t{15};
  if (size == 0) size = 16;
  // First fit over the gaps between live blocks; offset 0 is skipped so no block is null.
  uint64_t candidate = 16;
  for (auto& [off, sz] : s.live) {
    if (candidate + size <= off) break;
    candidate = (off + sz + 15) & ~uint64_t{15};
  }
  if (candidate + size > kCapacity) return 0;
  s.live[candidate] = size;
  return kHeapWindow + candidate;
}

void DeviceHeap::release(uint64_t address) {
  HeapState& s = state();
  std::lock_guard lock(s.mutex);
  if (address < kHeapWindow) return;
  s.live.erase(address - kHeapWindow);
}

void* DeviceHeap::translate(uint64_t addr, uint64_t len) {
  HeapState& s = state();
  std::lock_guard lock(s.mutex);
  if (addr < kHeapWindow || !s.arena) return nullptr;
  uint64_t off = addr - kHeapWindow;
  auto it = s.live.upper_bound(off);
  if (it == s.live.begin()) return nullptr;
  --it;
  if (off + len > it->first + it->second) return nullptr;
  return s.arena.get() + off;
}

}  // namespace gpupool::ptx
