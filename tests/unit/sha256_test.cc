// SHA-256 against the FIPS 180-2 example vectors, and incremental hashing against one-shot.
#include "protocol/sha256.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gpupool::protocol {
namespace {

std::span<const uint8_t> bytesOf(const std::string& text) {
  return {reinterpret_cast<const uint8_t*>(text.data()), text.size()};
}

std::string hexOf(const std::string& text) { return toHex(Sha256::of(bytesOf(text))); }

TEST(Sha256Test, EmptyString) {
  EXPECT_EQ(hexOf(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(Sha256Test, Abc) {
  EXPECT_EQ(hexOf("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256Test, TwoBlockMessage448Bits) {
  EXPECT_EQ(hexOf("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256Test, Message896Bits) {
  EXPECT_EQ(hexOf("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopq"
                  "klmnopqrlmnopqrsmnopqrstnopqrstu"),
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

TEST(Sha256Test, OneMillionA) {
  EXPECT_EQ(hexOf(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256Test, IncrementalUpdatesMatchOneShot) {
  std::vector<uint8_t> data(10007);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 131 + 7);
  Sha256Digest expected = Sha256::of(data);
  // Chunk sizes that straddle the 64-byte block boundary in different ways.
  for (size_t chunk : {1u, 3u, 55u, 56u, 63u, 64u, 65u, 1000u}) {
    Sha256 hasher;
    for (size_t offset = 0; offset < data.size(); offset += chunk) {
      size_t n = std::min(chunk, data.size() - offset);
      hasher.update(std::span<const uint8_t>(data.data() + offset, n));
    }
    EXPECT_EQ(hasher.finish(), expected) << "chunk " << chunk;
  }
}

TEST(Sha256Test, DifferentInputsDiffer) { EXPECT_NE(hexOf("module-a"), hexOf("module-b")); }

TEST(Sha256Test, ToHexIsLowercaseTwoDigitsPerByte) {
  const uint8_t bytes[] = {0x00, 0x0f, 0xa0, 0xff};
  EXPECT_EQ(toHex(bytes), "000fa0ff");
}

}  // namespace
}  // namespace gpupool::protocol
