// The emu device memory's spans (EmuMemory::span, OwnerDeviceMemory), which the interpreter keeps
// to resolve global accesses without asking again: a span is the whole range an access resolves
// in, only for its owner, and any change of the tables moves changes(), so a kept span of freed
// or unmapped memory is never used again.
#include <gtest/gtest.h>

#include "server/backends/emu/emu_memory.h"
#include "server/backends/emu/owner_device_memory.h"

namespace gpupool::server::emu {
namespace {

constexpr uint64_t kAlice = 1, kBob = 2;
constexpr unsigned kSlot = 9;  // an address slot no other test in this process uses

TEST(EmuMemorySpan, CoversTheWholeAllocationForItsOwnerOnly) {
  EmuMemory memory(kSlot, 0, 64ull << 20);
  const uint64_t a = memory.allocate(10000, kAlice);
  ASSERT_NE(a, 0u);
  uint64_t base = 0, size = 0, count = 0;
  ASSERT_TRUE(memory.span(a + 100, 8, kAlice, &base, &size, &count));
  EXPECT_EQ(base, a);
  EXPECT_EQ(size, 10000u);
  EXPECT_EQ(count, memory.changes().load());
  // Past the end, and someone else's: no span, as translate() gives nothing.
  EXPECT_FALSE(memory.span(a + 9996, 8, kAlice, &base, &size, &count));
  EXPECT_FALSE(memory.span(a + 100, 8, kBob, &base, &size, &count));
  EXPECT_EQ(memory.translate(a + 100, 8, kBob), nullptr);
}

TEST(EmuMemorySpan, FreeingMovesTheChangeCountBeforeTheMemoryGoes) {
  EmuMemory memory(kSlot, 0, 64ull << 20);
  const uint64_t a = memory.allocate(4096, kAlice);
  uint64_t base = 0, size = 0, count = 0;
  ASSERT_TRUE(memory.span(a, 4, kAlice, &base, &size, &count));
  ASSERT_TRUE(memory.release(a, kAlice));
  EXPECT_NE(memory.changes().load(), count);
  EXPECT_FALSE(memory.span(a, 4, kAlice, &base, &size, &count));
  // Another owner's allocation at the same address is a different span, under a newer count.
  const uint64_t b = memory.allocate(4096, kBob);
  uint64_t newer = 0;
  if (b == a) {
    EXPECT_FALSE(memory.span(a, 4, kAlice, &base, &size, &newer));
    ASSERT_TRUE(memory.span(b, 4, kBob, &base, &size, &newer));
    EXPECT_GT(newer, count);
  }
}

TEST(EmuMemorySpan, AMappedRunIsOneSpanUntilAccessIsTakenAway) {
  EmuMemory memory(kSlot, 0, 64ull << 20);
  const uint64_t g = EmuMemory::kVmmGranularity;
  uint64_t address = 0, first = 0, second = 0;
  ASSERT_EQ(memory.vmmReserve(2 * g, 0, 0, kAlice, &address), CUDA_SUCCESS);
  ASSERT_EQ(memory.vmmCreate(g, false, kAlice, &first), CUDA_SUCCESS);
  ASSERT_EQ(memory.vmmCreate(g, false, kAlice, &second), CUDA_SUCCESS);
  ASSERT_EQ(memory.vmmMap(address, g, first, 0, kAlice), CUDA_SUCCESS);
  ASSERT_EQ(memory.vmmMap(address + g, g, second, 0, kAlice), CUDA_SUCCESS);
  uint64_t base = 0, size = 0, count = 0;
  // Mapped but not yet accessible: nothing resolves.
  EXPECT_FALSE(memory.span(address, 4, kAlice, &base, &size, &count));
  ASSERT_EQ(memory.vmmSetAccess(address, 2 * g, true, kAlice), CUDA_SUCCESS);
  ASSERT_TRUE(memory.span(address + g + 8, 4, kAlice, &base, &size, &count));
  EXPECT_EQ(base, address);
  EXPECT_EQ(size, 2 * g);
  ASSERT_EQ(memory.vmmSetAccess(address + g, g, false, kAlice), CUDA_SUCCESS);
  EXPECT_NE(memory.changes().load(), count);
  EXPECT_FALSE(memory.span(address + g + 8, 4, kAlice, &base, &size, &count));
  ASSERT_TRUE(memory.span(address, 4, kAlice, &base, &size, &count));
  EXPECT_EQ(size, g);
}

TEST(EmuMemorySpan, TheInterpretersViewUsesTheDeviceAddressesInPlace) {
  EmuMemory memory(kSlot, 0, 64ull << 20);
  const uint64_t a = memory.allocate(256, kAlice);
  OwnerDeviceMemory alice(memory, kAlice), bob(memory, kBob);
  uint64_t base = 0, size = 0, count = 0;
  uint8_t* host = nullptr;
  ASSERT_TRUE(alice.span(a + 16, 4, &base, &size, &host, &count));
  EXPECT_EQ(host, reinterpret_cast<uint8_t*>(a));
  EXPECT_EQ(alice.translate(a + 16, 4), reinterpret_cast<void*>(a + 16));
  EXPECT_EQ(alice.changes(), &memory.changes());
  EXPECT_FALSE(bob.span(a + 16, 4, &base, &size, &host, &count));
}

}  // namespace
}  // namespace gpupool::server::emu
