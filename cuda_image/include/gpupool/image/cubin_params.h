// Kernel parameter layouts from an ELF cubin's `.nv.info.<kernel>` sections.
//
// The driver knows each kernel's parameter sizes only from the cubin; cudart passes launch
// arguments as bare pointers. This reader lets the cuda backend (and tests) recover the layout
// when cuFuncGetParamInfo is unavailable. Records are {u8 format, u8 attribute, u16 value or
// size}; format 0x04 is followed by `size` bytes. See shared/docs/driver-interposition.md §7.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"

namespace gpupool::image {

inline constexpr uint8_t kEiattrParamCbank = 0x0a;
inline constexpr uint8_t kEiattrKparamInfo = 0x17;
inline constexpr uint8_t kEiattrCbankParamSize = 0x19;

struct KernelParam {
  uint16_t ordinal = 0;
  uint16_t offset = 0;  // byte offset in the parameter buffer
  uint32_t size = 0;    // bytes (bits 18-31 of the record's last word)
};

struct KernelParamLayout {
  std::string name;                 // mangled kernel name, from the section name
  std::vector<KernelParam> params;  // sorted by ordinal, ordinals 0..n-1 without gaps
  // Total parameter bytes (EIATTR_CBANK_PARAM_SIZE), when the cubin records it.
  std::optional<uint32_t> paramBytes;
  // Where the parameters start in constant bank 0 (EIATTR_PARAM_CBANK; 0x160 on sm_75, 0x210 on
  // sm_90), when recorded.
  std::optional<uint16_t> cbankOffset;
};

// One layout per `.nv.info.<kernel>` section, in section order. `elf` must be a whole, already
// decompressed cubin (Fatbin::payload() of an ELF entry, or an ELF image). Errors (malformed ELF,
// records running past their section, unknown record formats, gaps or duplicates in ordinals)
// are CUDA_ERROR_INVALID_IMAGE with the reason.
Result<std::vector<KernelParamLayout>> readKernelParams(std::span<const uint8_t> elf);

}  // namespace gpupool::image
