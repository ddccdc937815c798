// What an owner (a context) of the emu device memory holds, and the most it ever held
// (EmuMemory::usedBy, peakBy: status, quotas and NVML accounting read them): allocations count
// until their owner frees them, even while another context keeps one open through CUDA IPC;
// physical VMM memory counts from cuMemCreate (or an import) until released; releaseAll gives
// everything back.
#include <gtest/gtest.h>

#include "server/backends/emu/emu_memory.h"

namespace gpupool::server::emu {
namespace {

constexpr uint64_t kAlice = 1, kBob = 2;
constexpr unsigned kSlot = 10;  // an address slot no other test in this process uses

TEST(EmuMemoryUsage, CountsAllocationsAndKeepsThePeak) {
  EmuMemory memory(kSlot, 0, 64ull << 20);
  const uint64_t a = memory.allocate(10000, kAlice);  // 12288 bytes: whole pages
  const uint64_t b = memory.allocate(4096, kAlice);
  ASSERT_NE(a, 0u);
  ASSERT_NE(b, 0u);
  EXPECT_EQ(memory.usedBy(kAlice), 12288u + 4096u);
  EXPECT_EQ(memory.usedBy(kBob), 0u);
  ASSERT_TRUE(memory.release(a, kAlice));
  EXPECT_EQ(memory.usedBy(kAlice), 4096u);
  EXPECT_EQ(memory.peakBy(kAlice), 12288u + 4096u);
  EXPECT_FALSE(memory.release(a, kAlice));  // twice: nothing more given back
  EXPECT_EQ(memory.usedBy(kAlice), 4096u);
}

TEST(EmuMemoryUsage, AnIpcOpenKeepsTheMemoryButNotTheOwnersCharge) {
  EmuMemory memory(kSlot, 0, 64ull << 20);
  const uint64_t a = memory.allocate(8192, kAlice);
  uint64_t bytes = 0, generation = 0;
  ASSERT_TRUE(memory.exportable(a, kAlice, &bytes, &generation));
  ASSERT_TRUE(memory.openShared(a, generation, kBob));
  ASSERT_TRUE(memory.release(a, kAlice));
  EXPECT_EQ(memory.usedBy(kAlice), 0u);
  EXPECT_EQ(memory.usedBy(kBob), 0u);  // an opener is charged nothing
  EXPECT_NE(memory.translate(a, 8, kBob), nullptr);
  ASSERT_TRUE(memory.closeShared(a, kBob));
  EXPECT_EQ(memory.usedBy(kAlice), 0u);
  EXPECT_EQ(memory.peakBy(kAlice), 8192u);
}

TEST(EmuMemoryUsage, PhysicalMemoryCountsUntilReleasedAndReleaseAllForgetsTheOwner) {
  EmuMemory memory(kSlot, 0, 64ull << 20);
  const uint64_t g = EmuMemory::kVmmGranularity;
  uint64_t handle = 0;
  ASSERT_EQ(memory.vmmCreate(2 * g, false, kAlice, &handle), CUDA_SUCCESS);
  const uint64_t a = memory.allocate(4096, kAlice);
  ASSERT_NE(a, 0u);
  EXPECT_EQ(memory.usedBy(kAlice), 2 * g + 4096);
  uint64_t freed = 0;
  ASSERT_EQ(memory.vmmRelease(handle, kAlice, &freed), CUDA_SUCCESS);
  EXPECT_EQ(memory.usedBy(kAlice), 4096u);
  EXPECT_EQ(memory.peakBy(kAlice), 2 * g + 4096);
  EXPECT_EQ(memory.releaseAll(kAlice), 4096u);
  EXPECT_EQ(memory.usedBy(kAlice), 0u);
  EXPECT_EQ(memory.peakBy(kAlice), 0u);  // the owner is gone
}

}  // namespace
}  // namespace gpupool::server::emu
