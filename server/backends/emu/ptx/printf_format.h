// Formats one device printf call the way CUDA's vprintf does: the arguments are packed in a
// buffer with natural alignment (4 bytes for int/char/unsigned, 8 for long long, double - floats
// are promoted - and pointers, including %s strings).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace gpupool::ptx {

struct PrintfArguments {
  // Copies `len` bytes at `offset` of the argument buffer into `out`; false if unreadable.
  std::function<bool(uint64_t offset, void* out, uint64_t len)> read;
  // Reads a NUL-terminated device string at a generic address; nullopt-like empty + false if bad.
  std::function<bool(uint64_t address, std::string* out)> readString;
};

// Returns the formatted text. Conversions: %d %i %u %x %X %o %c %s %f %F %e %E %g %G %a %A %p %%
// with flags, width, precision (also `*`) and length modifiers hh h l ll z j t.
std::string formatDevicePrintf(std::string_view format, const PrintfArguments& args);

}  // namespace gpupool::ptx
