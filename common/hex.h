// Addresses and sizes in error messages, as the driver's own tools print them ("0x7f00...").
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace gpupool {

inline std::string hex(uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(value));
  return text;
}

}  // namespace gpupool
