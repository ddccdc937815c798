// The pinned staging buffers of one CudaContext (BackendContext::stagingBuffer and friends): page-
// locked host memory from cuMemHostAlloc, so the driver copies between it and the device
// asynchronously, each buffer with an event that marks when its last transfer has completed.
//
// Contract: the owning context is current on the calling thread for every call, including the
// destructor, which must run before the context is destroyed. Allocated at the first use and kept;
// when the driver cannot allocate pinned memory, buffer() gives null and callers fall back to the
// plain copy functions.
#pragma once

#include <array>
#include <functional>
#include <memory>

#include "server/backend.h"
#include "server/backends/cuda/cuda_driver.h"
#include "transport/pinned_memory.h"

namespace gpupool::server {

class CudaStaging {
 public:
  // The buffers are noted in `pinnedMemory` (when given) while they exist.
  CudaStaging(std::shared_ptr<CudaDriver> driver, transport::PinnedMemory* pinnedMemory)
      : driver_(std::move(driver)), pinnedMemory_(pinnedMemory) {}
  // Waits for transfers still in flight (errors ignored), then frees the buffers and events.
  ~CudaStaging();
  CudaStaging(const CudaStaging&) = delete;
  CudaStaging& operator=(const CudaStaging&) = delete;

  Status buffer(unsigned slot, void** buffer);
  Status toDevice(unsigned slot, CUdeviceptr dst, uint64_t bytes, CUstream stream);
  Status fromDevice(unsigned slot, CUdeviceptr src, uint64_t bytes, CUstream stream);

 private:
  struct Slot {
    void* host = nullptr;
    CUevent done = nullptr;
    bool inFlight = false;
  };

  // Allocates every slot; false (and nothing kept) when the driver cannot.
  bool allocate();
  void release();
  Status checkSlot(unsigned slot, uint64_t bytes) const;
  // Checks the slot, has `enqueue` queue the copy between its buffer and the device on `stream`,
  // then marks the slot in flight until an event recorded after the copy.
  Status transfer(unsigned slot, uint64_t bytes, CUstream stream,
                  const std::function<Status(void* host)>& enqueue);

  std::shared_ptr<CudaDriver> driver_;
  transport::PinnedMemory* pinnedMemory_;
  std::array<Slot, BackendContext::kStagingSlots> slots_{};
  bool allocated_ = false;
  bool unavailable_ = false;  // the driver could not allocate: no staging for this context
};

}  // namespace gpupool::server
