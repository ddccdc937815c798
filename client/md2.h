// MD2 (RFC 1319) and HMAC-MD2 (RFC 2104 with MD2's 16-byte block).
// Only used for the driver integrity check that cudart verifies; not for security.
#pragma once

#include <array>
#include <cstdint>
#include <span>

namespace gpupool::client {

using Md2Digest = std::array<std::uint8_t, 16>;

// MD2 of message.
Md2Digest md2(std::span<const std::uint8_t> message);

// HMAC-MD2: MD2((K ^ opad) || MD2((K ^ ipad) || message)) with a 16-byte block; keys longer
// than 16 bytes are replaced by their MD2, shorter ones are zero-padded.
Md2Digest hmacMd2(std::span<const std::uint8_t> key, std::span<const std::uint8_t> message);

}  // namespace gpupool::client
