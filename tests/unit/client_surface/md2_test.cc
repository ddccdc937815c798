#include "md2.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <string_view>

#include "hmac_md2_expected.h"

namespace {

using gpupool::client::hmacMd2;
using gpupool::client::md2;
using gpupool::client::Md2Digest;

std::span<const std::uint8_t> bytesOf(std::string_view text) {
  return {reinterpret_cast<const std::uint8_t*>(text.data()), text.size()};
}

std::string hex(const Md2Digest& digest) {
  std::string out;
  char byte[3];
  for (std::uint8_t b : digest) {
    std::snprintf(byte, sizeof(byte), "%02x", b);
    out += byte;
  }
  return out;
}

// RFC 1319, appendix A.5 ("test suite").
TEST(Md2, Rfc1319TestSuite) {
  EXPECT_EQ(hex(md2(bytesOf(""))), "8350e5a3e24c153df2275c9f80692773");
  EXPECT_EQ(hex(md2(bytesOf("a"))), "32ec01ec4a6dac72c0ab96fb34c0b5d1");
  EXPECT_EQ(hex(md2(bytesOf("abc"))), "da853b0d3f88d99b30283a69e6ded6bb");
  EXPECT_EQ(hex(md2(bytesOf("message digest"))), "ab4f496bfb2a530b219ff33031fe06b0");
  EXPECT_EQ(hex(md2(bytesOf("abcdefghijklmnopqrstuvwxyz"))), "4e8ddff3650292ab5a4108c3aa47940b");
  EXPECT_EQ(hex(md2(bytesOf("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"))),
            "da33def2a42df13975352846c30338cd");
  EXPECT_EQ(hex(md2(bytesOf("1234567890123456789012345678901234567890"
                            "1234567890123456789012345678901234567890"))),
            "d5976f79d83d3a0dc9806c3c66f3efd8");
}

TEST(Md2, BlockSizedInputGetsAFullPaddingBlock) {
  // 16 bytes must differ from the same 16 bytes with a 17th: padding is always added.
  EXPECT_NE(md2(bytesOf("0123456789abcdef")), md2(bytesOf("0123456789abcdef\x10")));
}

TEST(Md2, ReferenceImplementationAgreesWithRfc) {
  // Guards the independent Python reference that the HMAC tests below rely on.
  Md2Digest reference;
  std::copy(std::begin(reference::kMd2Abc), std::end(reference::kMd2Abc), reference.begin());
  EXPECT_EQ(hex(reference), "da853b0d3f88d99b30283a69e6ded6bb");
}

TEST(HmacMd2, ShortKeyMatchesIndependentImplementation) {
  const Md2Digest digest = hmacMd2(bytesOf(reference::kShortKey), bytesOf(reference::kMessage));
  EXPECT_TRUE(std::equal(digest.begin(), digest.end(), std::begin(reference::kShortKeyHmac)));
}

TEST(HmacMd2, LongKeyIsHashedFirst) {
  const Md2Digest digest = hmacMd2(reference::kLongKey, bytesOf(reference::kMessage));
  EXPECT_TRUE(std::equal(digest.begin(), digest.end(), std::begin(reference::kLongKeyHmac)));
}

}  // namespace
