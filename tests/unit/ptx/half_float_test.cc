// Exhaustive checks of the binary16/bfloat16 conversions against independent references.
#include "half_float.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>

namespace gpupool::ptx {
namespace {

TEST(HalfFloat, AllBinary16EncodingsRoundTripAndMatchGcc) {
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    uint16_t h = static_cast<uint16_t>(bits);
    _Float16 reference = std::bit_cast<_Float16>(h);
    double d = halfToDouble(h);
    if (std::isnan(static_cast<double>(reference))) {
      EXPECT_TRUE(std::isnan(d)) << bits;
      EXPECT_EQ(doubleToHalf(d), 0x7fff) << bits;  // canonical NaN
      continue;
    }
    ASSERT_EQ(d, static_cast<double>(reference)) << bits;
    ASSERT_EQ(doubleToHalf(d), h) << bits;
    ASSERT_EQ(floatToHalf(static_cast<float>(d)), h) << bits;
  }
}

TEST(HalfFloat, RoundingFromFloatMatchesGcc) {
  // Every 997th float pattern: covers ties, overflow, subnormals and both signs.
  for (uint64_t bits = 0; bits < (1ull << 32); bits += 997) {
    float f = std::bit_cast<float>(static_cast<uint32_t>(bits));
    if (std::isnan(f)) continue;
    uint16_t expect = std::bit_cast<uint16_t>(static_cast<_Float16>(f));
    ASSERT_EQ(floatToHalf(f), expect) << std::hex << bits;
  }
}

TEST(HalfFloat, Bfloat16MatchesTruncationWithRoundToNearestEven) {
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    uint16_t b = static_cast<uint16_t>(bits);
    float widened = std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
    if (std::isnan(widened)) continue;
    ASSERT_EQ(bfloatToFloat(b), widened) << bits;
    ASSERT_EQ(floatToBfloat(widened), b) << bits;
  }
  // Ties to even: 1 + 2^-8 is halfway between 1 and 1 + 2^-7.
  EXPECT_EQ(floatToBfloat(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(floatToBfloat(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_EQ(doubleToHalf(1.0 + std::ldexp(1.0, -11), SmallFloatRounding::kUp), 0x3c01);
  EXPECT_EQ(doubleToHalf(-1.0 - std::ldexp(1.0, -11), SmallFloatRounding::kTowardZero), 0xbc00);
  EXPECT_EQ(doubleToHalf(1e6, SmallFloatRounding::kTowardZero), 0x7bff);
}

}  // namespace
}  // namespace gpupool::ptx
