// The pinned host range list that decides which memory an RDMA connection may keep registered.
// Needs no verbs device.
#include <gtest/gtest.h>

#include <vector>

#include "transport/pinned_memory.h"

namespace gpupool::transport {
namespace {

TEST(RdmaPinnedRanges, OnlyWhollyContainedRangesAreFound) {
  PinnedMemory pinned;
  std::vector<char> memory(3 * 4096);
  char* base = memory.data() + 4096;
  pinned.note(base, 4096);
  auto whole = pinned.find(base, 4096);
  ASSERT_TRUE(whole);
  EXPECT_EQ(whole->base, reinterpret_cast<uintptr_t>(base));
  EXPECT_EQ(whole->size, 4096u);
  auto inner = pinned.find(base + 100, 10);
  ASSERT_TRUE(inner);
  EXPECT_EQ(inner->id, whole->id);
  EXPECT_FALSE(pinned.find(base - 1, 10));     // starts before
  EXPECT_FALSE(pinned.find(base + 4090, 10));  // runs past the end
  EXPECT_FALSE(pinned.find(base + 4096, 1));   // just after
  pinned.forget(base);
  EXPECT_FALSE(pinned.find(base, 1));
  EXPECT_FALSE(pinned.alive(whole->id));
}

TEST(RdmaPinnedRanges, ANewRangeAtTheSameAddressGetsANewId) {
  PinnedMemory pinned;
  std::vector<char> memory(4096);
  pinned.note(memory.data(), memory.size());
  uint64_t first = pinned.find(memory.data(), 1)->id;
  pinned.forget(memory.data());
  pinned.note(memory.data(), memory.size());
  uint64_t second = pinned.find(memory.data(), 1)->id;
  EXPECT_NE(first, second);
  EXPECT_TRUE(pinned.alive(second));
  EXPECT_FALSE(pinned.alive(first));
  pinned.forget(memory.data());
}

}  // namespace
}  // namespace gpupool::transport
