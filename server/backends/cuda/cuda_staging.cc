#include "server/backends/cuda/cuda_staging.h"

#include <string>

namespace gpupool::server {

CudaStaging::~CudaStaging() { release(); }

bool CudaStaging::allocate() {
  for (Slot& slot : slots_) {
    // Blocking sync: a session waiting for a slot sleeps instead of spinning a core.
    unsigned flags = CU_EVENT_DISABLE_TIMING | CU_EVENT_BLOCKING_SYNC;
    if (!driver_->call(driver_->memHostAlloc, &slot.host, size_t{BackendContext::kStagingBytes}, 0u)
             .ok() ||
        !driver_->call(driver_->eventCreate, &slot.done, flags).ok()) {
      release();
      return false;
    }
    // Page-locked for the context's life: an RDMA connection registers it once and keeps it.
    if (pinnedMemory_) pinnedMemory_->note(slot.host, BackendContext::kStagingBytes);
  }
  allocated_ = true;
  return true;
}

void CudaStaging::release() {
  for (Slot& slot : slots_) {
    // The driver may still be reading or writing the buffer: it must not be freed under it.
    if (slot.inFlight) (void)driver_->call(driver_->eventSynchronize, slot.done);
    if (slot.done) (void)driver_->call(driver_->eventDestroy, slot.done);
    if (slot.host) {
      if (pinnedMemory_) pinnedMemory_->forget(slot.host);
      (void)driver_->call(driver_->memFreeHost, slot.host);
    }
    slot = Slot{};
  }
  allocated_ = false;
}

Status CudaStaging::buffer(unsigned slot, void** buffer) {
  *buffer = nullptr;
  if (slot >= slots_.size()) {
    return Status::error(CUDA_ERROR_INVALID_VALUE, "no staging slot " + std::to_string(slot));
  }
  if (!allocated_ && (unavailable_ || !allocate())) {
    unavailable_ = true;
    return Status::success();
  }
  Slot& s = slots_[slot];
  if (s.inFlight) {
    s.inFlight = false;
    if (Status st = driver_->call(driver_->eventSynchronize, s.done); !st.ok()) return st;
  }
  *buffer = s.host;
  return Status::success();
}

Status CudaStaging::checkSlot(unsigned slot, uint64_t bytes) const {
  if (slot >= slots_.size() || !allocated_ || slots_[slot].inFlight ||
      bytes > BackendContext::kStagingBytes) {
    return Status::error(CUDA_ERROR_INVALID_VALUE,
                         "staging slot " + std::to_string(slot) + " is not ready for " +
                             std::to_string(bytes) + " bytes (call stagingBuffer first)");
  }
  return Status::success();
}

Status CudaStaging::transfer(unsigned slot, uint64_t bytes, CUstream stream,
                             const std::function<Status(void* host)>& enqueue) {
  if (Status s = checkSlot(slot, bytes); !s.ok()) return s;
  Slot& s = slots_[slot];
  if (Status st = enqueue(s.host); !st.ok()) return st;
  // Without the event the slot's completion is unknown: wait for the stream instead.
  if (!driver_->call(driver_->eventRecord, s.done, stream).ok()) {
    return driver_->call(driver_->streamSynchronize, stream);
  }
  s.inFlight = true;
  return Status::success();
}

Status CudaStaging::toDevice(unsigned slot, CUdeviceptr dst, uint64_t bytes, CUstream stream) {
  return transfer(slot, bytes, stream, [&](void* host) {
    return driver_->call(driver_->memcpyHtoDAsync, dst, host, bytes, stream);
  });
}

Status CudaStaging::fromDevice(unsigned slot, CUdeviceptr src, uint64_t bytes, CUstream stream) {
  return transfer(slot, bytes, stream, [&](void* host) {
    return driver_->call(driver_->memcpyDtoHAsync, host, src, bytes, stream);
  });
}

}  // namespace gpupool::server
