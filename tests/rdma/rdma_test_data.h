// Test data for the RDMA transport tests: position-dependent byte patterns, recognizable
// messages, and page-locked buffers noted in the pinned list as cuMemHostAlloc would note them.
#pragma once

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "transport/connection.h"
#include "transport/rdma/rdma_transport.h"

namespace gpupool::transport::testing {

// Bytes that differ at every position and between seeds, so a misplaced chunk cannot match.
inline void fillPattern(std::byte* p, size_t n, uint32_t seed) {
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    p[i] = std::byte(x >> 24);
  }
}

inline std::vector<uint64_t> messageOf(size_t words, uint64_t tag) {
  std::vector<uint64_t> m(words);
  for (size_t i = 0; i < words; ++i) m[i] = tag * 1000003 + i;
  return m;
}

inline void expectMessage(const ReceivedFrame& frame, const std::vector<uint64_t>& want) {
  ASSERT_EQ(frame.message.size(), want.size() * 8);
  EXPECT_EQ(std::memcmp(frame.message.data(), want.data(), want.size() * 8), 0);
}

// Page-locked memory as cuMemHostAlloc would hand it out (or, with PeerAccess::kNone, as a server
// notes its device memory), noted in the pinned list.
class PinnedBuffer {
 public:
  explicit PinnedBuffer(size_t size, PeerAccess access = PeerAccess::kReadWrite) : size_(size) {
    data_ = static_cast<std::byte*>(
        mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (data_ == MAP_FAILED) throw std::runtime_error("mmap failed");
    processPinnedMemory().note(data_, size_, access);
  }
  ~PinnedBuffer() {
    processPinnedMemory().forget(data_);
    munmap(data_, size_);
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  std::byte* data() { return data_; }

 private:
  std::byte* data_;
  size_t size_;
};

}  // namespace gpupool::transport::testing
