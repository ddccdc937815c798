// The heap behind device-side malloc()/free() of one context. Blocks live in kHeapWindow so that a
// generic address can be classified with one compare; contents persist across launches of the
// context. Each context owns its own heap (LaunchServices::heap): a pointer malloc'ed by one
// tenant's kernel means nothing in another tenant's kernel, as on a GPU where every context has its
// own heap.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

namespace gpupool::ptx {

class DeviceHeap {
 public:
  DeviceHeap() = default;
  DeviceHeap(const DeviceHeap&) = delete;
  DeviceHeap& operator=(const DeviceHeap&) = delete;

  // Returns a 16-byte aligned device address, or 0 when the heap is exhausted (as CUDA does).
  // Thread-safe (blocks of one launch run on several threads).
  uint64_t allocate(uint64_t size);
  void release(uint64_t address);  // free(); unknown or null addresses are ignored
  // Host pointer for [addr, addr+len) inside one live block, else nullptr.
  void* translate(uint64_t addr, uint64_t len);

  static constexpr uint64_t kCapacity = 64ull << 20;  // > cudaLimitMallocHeapSize default (8 MiB)

 private:
  std::mutex mutex_;
  std::unique_ptr<uint8_t[]> arena_;   // allocated at the first malloc()
  std::map<uint64_t, uint64_t> live_;  // offset -> size
};

}  // namespace gpupool::ptx
