// Bounds-checked little-endian reads from an untrusted byte span.
//
// Every image parser in this library goes through these helpers so that no offset or size read
// from the image is ever used without checking it against the span first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "common/status.h"

namespace gpupool::image::detail {

// True when [offset, offset + size) lies inside a buffer of `total` bytes, without overflowing.
inline bool inBounds(uint64_t total, uint64_t offset, uint64_t size) {
  return offset <= total && size <= total - offset;
}

// Reads a little-endian T at `offset`, or nothing when it does not fit. Host is little-endian
// (x86-64/aarch64), which matches every CUDA image format.
template <typename T>
std::optional<T> readLe(std::span<const uint8_t> bytes, uint64_t offset) {
  if (!inBounds(bytes.size(), offset, sizeof(T))) return std::nullopt;
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}

// Sub-span [offset, offset + size), or nothing when it does not fit.
inline std::optional<std::span<const uint8_t>> subspan(std::span<const uint8_t> bytes,
                                                       uint64_t offset, uint64_t size) {
  if (!inBounds(bytes.size(), offset, size)) return std::nullopt;
  return bytes.subspan(static_cast<size_t>(offset), static_cast<size_t>(size));
}

// What every parser here reports for malformed input: the driver's answer to a bad image.
inline Status invalidImage(std::string message) {
  return Status::error(CUDA_ERROR_INVALID_IMAGE, std::move(message));
}

}  // namespace gpupool::image::detail
