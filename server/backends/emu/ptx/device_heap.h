// Process-wide heap behind device-side malloc()/free(). Blocks live in kHeapWindow so that a
// generic address can be classified with one compare; contents persist across launches.
#pragma once

#include <cstdint>

namespace gpupool::ptx {

class DeviceHeap {
 public:
  static DeviceHeap& instance();
  // Returns a 16-byte aligned device address, or 0 when the heap is exhausted (as CUDA does).
  uint64_t allocate(uint64_t size);
  void release(uint64_t address);  // free(); unknown or null addresses are ignored
  // Host pointer for [addr, addr+len) inside one live block, else nullptr.
  void* translate(uint64_t addr, uint64_t len);

  static constexpr uint64_t kCapacity = 64ull << 20;  // > cudaLimitMallocHeapSize default (8 MiB)

 private:
  DeviceHeap() = default;
};

}  // namespace gpupool::ptx
