#include "server/backends/cuda/device_address_map.h"

#include <gtest/gtest.h>

#include <limits>

namespace gpupool::server {
namespace {

TEST(DeviceAddressMap, CoversOnlyRangesInsideOneEntry) {
  DeviceAddressMap map;
  map.add(0x1000, 0x100, DeviceAddressMap::kAllocation);
  map.add(0x1100, 0x100, DeviceAddressMap::kAllocation);  // adjacent, but a separate allocation
  EXPECT_TRUE(map.covers(0x1000, 0x100));
  EXPECT_TRUE(map.covers(0x1080, 0x80));
  EXPECT_FALSE(map.covers(0x1080, 0x81));  // would run into the neighbour
  EXPECT_FALSE(map.covers(0xfff, 1));
  EXPECT_FALSE(map.covers(0x1200, 0));
  EXPECT_TRUE(map.covers(0x11ff, 1));
  EXPECT_FALSE(map.covers(0x1000, std::numeric_limits<uint64_t>::max()));
}

TEST(DeviceAddressMap, FindReturnsTheContainingRange) {
  DeviceAddressMap map;
  map.add(0x2000, 0x40, 7);
  auto range = map.find(0x203f);
  ASSERT_TRUE(range.has_value());
  EXPECT_EQ(range->base, 0x2000u);
  EXPECT_EQ(range->bytes, 0x40u);
  EXPECT_EQ(range->owner, 7u);
  EXPECT_FALSE(map.find(0x2040).has_value());
}

TEST(DeviceAddressMap, RangeAtTheTopOfTheAddressSpaceDoesNotOverflow) {
  DeviceAddressMap map;
  uint64_t top = std::numeric_limits<uint64_t>::max() - 0xf;
  map.add(top, 0x10, DeviceAddressMap::kAllocation);
  EXPECT_TRUE(map.covers(top + 8, 8));
  EXPECT_FALSE(map.covers(top + 8, 9));
}

TEST(DeviceAddressMap, RemoveAllocationNeedsTheExactBaseOfAnAllocation) {
  DeviceAddressMap map;
  map.add(0x1000, 0x100, DeviceAddressMap::kAllocation);
  map.add(0x3000, 0x10, 5);  // a module global
  EXPECT_FALSE(map.removeAllocation(0x1010).has_value());
  EXPECT_FALSE(map.removeAllocation(0x3000).has_value());
  EXPECT_EQ(map.removeAllocation(0x1000), std::optional<uint64_t>(0x100));
  EXPECT_FALSE(map.covers(0x1000, 1));
  EXPECT_TRUE(map.covers(0x3000, 0x10));
}

TEST(DeviceAddressMap, RemoveOwnedByDropsOnlyThatModulesGlobals) {
  DeviceAddressMap map;
  map.add(0x1000, 0x10, 5);
  map.add(0x2000, 0x10, 6);
  map.add(0x3000, 0x10, DeviceAddressMap::kAllocation);
  map.removeOwnedBy(5);
  EXPECT_FALSE(map.covers(0x1000, 1));
  EXPECT_TRUE(map.covers(0x2000, 1));
  EXPECT_TRUE(map.covers(0x3000, 1));
  EXPECT_EQ(map.ranges().size(), 2u);
}

}  // namespace
}  // namespace gpupool::server
