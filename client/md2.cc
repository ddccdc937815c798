#include "md2.h"

#include <algorithm>
#include <vector>

namespace gpupool::client {
namespace {

constexpr std::size_t kBlock = 16;

// RFC 1319's permutation of 0..255, derived from the digits of pi.
constexpr std::uint8_t kPiSubstitution[256] = {
    41,  46,  67,  201, 162, 216, 124, 1,   61,  54,  84,  161, 236, 240, 6,   19,  98,  167, 5,
    243, 192, 199, 115, 140, 152, 147, 43,  217, 188, 76,  130, 202, 30,  155, 87,  60,  253, 212,
    224, 22,  103, 66,  111, 24,  138, 23,  229, 18,  190, 78,  196, 214, 218, 158, 222, 73,  160,
    251, 245, 142, 187, 47,  238, 122, 169, 104, 121, 145, 21,  178, 7,   63,  148, 194, 16,  137,
    11,  34,  95,  33,  128, 127, 93,  154, 90,  144, 50,  39,  53,  62,  204, 231, 191, 247, 151,
    3,   255, 25,  48,  179, 72,  165, 181, 209, 215, 94,  146, 42,  172, 86,  170, 198, 79,  184,
    56,  210, 150, 164, 125, 182, 118, 252, 107, 226, 156, 116, 4,   241, 69,  157, 112, 89,  100,
    113, 135, 32,  134, 91,  207, 101, 230, 45,  168, 2,   27,  96,  37,  173, 174, 176, 185, 246,
    28,  70,  97,  105, 52,  64,  126, 15,  85,  71,  163, 35,  221, 81,  175, 58,  195, 92,  249,
    206, 186, 197, 234, 38,  44,  83,  13,  110, 133, 40,  132, 9,   211, 223, 205, 244, 65,  129,
    77,  82,  106, 220, 55,  200, 108, 193, 171, 250, 36,  225, 123, 8,   12,  189, 177, 74,  120,
    136, 149, 139, 227, 99,  232, 109, 233, 203, 213, 254, 59,  0,   29,  57,  242, 239, 183, 14,
    102, 88,  208, 228, 166, 119, 114, 248, 235, 117, 75,  10,  49,  68,  80,  180, 143, 237, 31,
    26,  219, 153, 141, 51,  159, 17,  131, 20};

// MD2 state: the 48-byte buffer X and the running checksum with its last byte L.
class Md2 {
 public:
  void update(std::span<const std::uint8_t> data) {
    for (std::uint8_t byte : data) {
      pending_[pendingSize_++] = byte;
      if (pendingSize_ == kBlock) {
        absorbBlock(pending_.data(), /*withChecksum=*/true);
        pendingSize_ = 0;
      }
    }
  }

  Md2Digest finish() {
    // Padding: i bytes of value i, 1 <= i <= 16, so the length becomes a multiple of 16.
    const auto pad = static_cast<std::uint8_t>(kBlock - pendingSize_);
    std::vector<std::uint8_t> padding(pad, pad);
    update(padding);
    // The checksum block is hashed but does not feed the checksum itself.
    const auto checksum = checksum_;
    absorbBlock(checksum.data(), /*withChecksum=*/false);
    Md2Digest digest;
    for (std::size_t i = 0; i < kBlock; ++i) digest[i] = state_[i];
    return digest;
  }

 private:
  void absorbBlock(const std::uint8_t* block, bool withChecksum) {
    if (withChecksum) {
      for (std::size_t j = 0; j < kBlock; ++j) {
        checksum_[j] ^= kPiSubstitution[block[j] ^ lastChecksumByte_];
        lastChecksumByte_ = checksum_[j];
      }
    }
    for (std::size_t j = 0; j < kBlock; ++j) {
      state_[16 + j] = block[j];
      state_[32 + j] = static_cast<std::uint8_t>(state_[16 + j] ^ state_[j]);
    }
    std::uint8_t t = 0;
    for (std::size_t round = 0; round < 18; ++round) {
      for (std::uint8_t& x : state_) {
        x ^= kPiSubstitution[t];
        t = x;
      }
      t = static_cast<std::uint8_t>(t + round);
    }
  }

  std::array<std::uint8_t, 48> state_{};
  std::array<std::uint8_t, kBlock> checksum_{};
  std::uint8_t lastChecksumByte_ = 0;
  std::array<std::uint8_t, kBlock> pending_{};
  std::size_t pendingSize_ = 0;
};

}  // namespace

Md2Digest md2(std::span<const std::uint8_t> message) {
  Md2 hash;
  hash.update(message);
  return hash.finish();
}

Md2Digest hmacMd2(std::span<const std::uint8_t> key, std::span<const std::uint8_t> message) {
  std::array<std::uint8_t, kBlock> blockKey{};
  if (key.size() > kBlock) {
    const Md2Digest hashed = md2(key);
    std::copy(hashed.begin(), hashed.end(), blockKey.begin());
  } else {
    std::copy(key.begin(), key.end(), blockKey.begin());
  }
  std::array<std::uint8_t, kBlock> pad;
  for (std::size_t i = 0; i < kBlock; ++i) pad[i] = blockKey[i] ^ 0x36;
  Md2 inner;
  inner.update(pad);
  inner.update(message);
  const Md2Digest innerDigest = inner.finish();
  for (std::size_t i = 0; i < kBlock; ++i) pad[i] = blockKey[i] ^ 0x5c;
  Md2 outer;
  outer.update(pad);
  outer.update(innerDigest);
  return outer.finish();
}

}  // namespace gpupool::client
