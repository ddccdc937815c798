// SHA-256 (FIPS 180-4). Module images are keyed by it in the server's cache, so a tenant cannot
// make another tenant's module resolve to different bytes.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace gpupool::protocol {

using Sha256Digest = std::array<uint8_t, 32>;

class Sha256 {
 public:
  Sha256();
  void update(std::span<const uint8_t> bytes);
  Sha256Digest finish();

  static Sha256Digest of(std::span<const uint8_t> bytes);

 private:
  void block(const uint8_t* p);
  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t length_ = 0;
};

std::string toHex(std::span<const uint8_t> bytes);

}  // namespace gpupool::protocol
