// The pinned host range list that decides which memory an RDMA connection may keep registered.
// Needs no verbs device.
#include "transport/rdma_pinned_ranges.h"

#include <gtest/gtest.h>

#include <vector>

#include "transport/rdma_transport.h"

namespace gpupool::transport::rdma {
namespace {

TEST(RdmaPinnedRanges, OnlyWhollyContainedRangesAreFound) {
  std::vector<char> memory(3 * 4096);
  char* base = memory.data() + 4096;
  notePinnedHostRange(base, 4096);
  auto whole = findPinnedRange(base, 4096);
  ASSERT_TRUE(whole);
  EXPECT_EQ(whole->base, reinterpret_cast<uintptr_t>(base));
  EXPECT_EQ(whole->size, 4096u);
  auto inner = findPinnedRange(base + 100, 10);
  ASSERT_TRUE(inner);
  EXPECT_EQ(inner->id, whole->id);
  EXPECT_FALSE(findPinnedRange(base - 1, 10));     // starts before
  EXPECT_FALSE(findPinnedRange(base + 4090, 10));  // runs past the end
  EXPECT_FALSE(findPinnedRange(base + 4096, 1));   // just after
  forgetPinnedHostRange(base);
  EXPECT_FALSE(findPinnedRange(base, 1));
  EXPECT_FALSE(pinnedRangeAlive(whole->id));
}

TEST(RdmaPinnedRanges, ANewRangeAtTheSameAddressGetsANewId) {
  std::vector<char> memory(4096);
  notePinnedHostRange(memory.data(), memory.size());
  uint64_t first = findPinnedRange(memory.data(), 1)->id;
  forgetPinnedHostRange(memory.data());
  notePinnedHostRange(memory.data(), memory.size());
  uint64_t second = findPinnedRange(memory.data(), 1)->id;
  EXPECT_NE(first, second);
  EXPECT_TRUE(pinnedRangeAlive(second));
  EXPECT_FALSE(pinnedRangeAlive(first));
  forgetPinnedHostRange(memory.data());
}

}  // namespace
}  // namespace gpupool::transport::rdma
