#include "device_heap.h"

#include "ptx_launch.h"

namespace gpupool::ptx {

uint64_t DeviceHeap::allocate(uint64_t size) {
  std::lock_guard lock(mutex_);
  if (size > kCapacity) return 0;
  if (!arena_) arena_ = std::make_unique<uint8_t[]>(kCapacity);
  size = (size + 15) & ~uint64_t{15};
  if (size == 0) size = 16;
  // First fit over the gaps between live blocks; offset 0 is skipped so no block is null.
  uint64_t candidate = 16;
  for (auto& [off, sz] : live_) {
    if (candidate + size <= off) break;
    candidate = (off + sz + 15) & ~uint64_t{15};
  }
  if (candidate + size > kCapacity) return 0;
  live_[candidate] = size;
  return kHeapWindow + candidate;
}

void DeviceHeap::release(uint64_t address) {
  std::lock_guard lock(mutex_);
  if (address < kHeapWindow) return;
  live_.erase(address - kHeapWindow);
}

void* DeviceHeap::translate(uint64_t addr, uint64_t len) {
  std::lock_guard lock(mutex_);
  if (addr < kHeapWindow || !arena_) return nullptr;
  uint64_t off = addr - kHeapWindow;
  if (off + len < off) return nullptr;
  auto it = live_.upper_bound(off);
  if (it == live_.begin()) return nullptr;
  --it;
  if (off + len > it->first + it->second) return nullptr;
  return arena_.get() + off;
}

}  // namespace gpupool::ptx
