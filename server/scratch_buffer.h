// A session's reusable bulk buffer (pings, sinks, chunked and 2D copies, staged replies).
//
// It lives in its own mapping, noted as a private pinned range (transport::PeerAccess::kNone) in
// the server's PinnedMemory for as long as that mapping exists, so an RDMA connection registers it
// once for local access instead of for every transfer. It only grows; growing maps a new range and
// keeps the contents.
#pragma once

#include <cstddef>
#include <cstdint>

#include "transport/pinned_memory.h"

namespace gpupool::server {

class ScratchBuffer {
 public:
  // Its mappings are noted in `pinned` (when given), which must outlive it.
  explicit ScratchBuffer(transport::PinnedMemory* pinned) : pinned_(pinned) {}
  ~ScratchBuffer();
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;

  // Makes size() == n, keeping the first min(n, size()) bytes. New bytes are zero the first time
  // the memory is used and unspecified after that. Throws std::bad_alloc when it cannot map.
  void resize(size_t n);
  uint8_t* data() { return data_; }
  size_t size() const { return size_; }

 private:
  void unmap();

  transport::PinnedMemory* pinned_;
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

}  // namespace gpupool::server
