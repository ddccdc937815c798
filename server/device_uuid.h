// Device UUIDs as NVIDIA tools write them: "GPU-" (or "MIG-" for a MIG instance) and the 16 bytes
// in hex, grouped 8-4-4-4-12. Header-only, so the cuda backend, the pool configuration and
// gpupoold share it without linking each other.
#pragma once

#include <array>
#include <cctype>
#include <cstdint>
#include <string>
#include <string_view>

namespace gpupool::server {

// "GPU-5c2a9d0e-7a36-2e1c-7d0b-0f1f5e3d8a11" for prefix "GPU-".
inline std::string formatDeviceUuid(std::string_view prefix, const std::array<uint8_t, 16>& uuid) {
  static const char digits[] = "0123456789abcdef";
  std::string out(prefix);
  for (size_t i = 0; i < uuid.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    out += digits[uuid[i] >> 4];
    out += digits[uuid[i] & 15];
  }
  return out;
}

// The 32 lowercase hex digits of "GPU-…" or "MIG-…" (dashes anywhere after the prefix are
// ignored); empty when the text is not such a UUID.
inline std::string deviceUuidDigits(std::string_view text) {
  if (text.substr(0, 4) != "GPU-" && text.substr(0, 4) != "MIG-") return {};
  std::string digits;
  for (char c : text.substr(4)) {
    if (c == '-') continue;
    if (!std::isxdigit(static_cast<unsigned char>(c))) return {};
    digits += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return digits.size() == 32 ? digits : std::string();
}

// Whether `text` ("GPU-…"/"MIG-…") names the device whose bytes are `uuid`.
inline bool deviceUuidMatches(std::string_view text, const std::array<uint8_t, 16>& uuid) {
  std::string digits = deviceUuidDigits(text);
  return !digits.empty() && deviceUuidDigits(formatDeviceUuid("GPU-", uuid)) == digits;
}

}  // namespace gpupool::server
