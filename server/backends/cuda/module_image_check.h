// Checks a module image from a client before it is handed to cuModuleLoadData.
//
// cuModuleLoadData takes a bare pointer with no size, and the driver trusts what the image says
// about itself: a fatbin's declared size, an ELF's table offsets, a PTX string's terminating NUL,
// and, for a fatbin *wrapper* (magic 0x466243B1), a host pointer to the real data. An image from a
// remote client must therefore be bounded before the driver sees it, or a short or forged image
// makes the server read its own memory.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace gpupool::server {

// Accepts: a fatbin whose header and declared payload fit in `image`; a 64-bit ELF whose header,
// program/section header tables and section contents fit in `image`; otherwise text (PTX) with a
// NUL inside `image`. Everything else, including fatbin wrappers, is rejected with the reason in
// *why.
bool isBoundedModuleImage(std::span<const uint8_t> image, std::string* why);

}  // namespace gpupool::server
