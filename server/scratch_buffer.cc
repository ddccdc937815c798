#include "server/scratch_buffer.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <new>

namespace gpupool::server {

void ScratchBuffer::unmap() {
  if (!data_) return;
  // Forgotten first: no connection may hand out this registration once the pages are gone.
  if (pinned_) pinned_->forget(data_);
  munmap(data_, capacity_);
}

ScratchBuffer::~ScratchBuffer() { unmap(); }

void ScratchBuffer::resize(size_t n) {
  if (n <= capacity_) {
    size_ = n;
    return;
  }
  // Doubling keeps a session that grows step by step to a few mappings (and registrations).
  size_t capacity = std::max<size_t>({n, capacity_ * 2, size_t{64} << 10});
  capacity = (capacity + 4095) & ~size_t{4095};
  void* p = mmap(nullptr, capacity, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  auto* data = static_cast<uint8_t*>(p);
  if (size_) std::memcpy(data, data_, size_);
  unmap();
  data_ = data;
  capacity_ = capacity;
  size_ = n;
  if (pinned_) pinned_->note(data_, capacity_, transport::PeerAccess::kNone);
}

}  // namespace gpupool::server
