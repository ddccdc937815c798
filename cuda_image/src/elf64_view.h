// A bounds-checked view of a little-endian ELF64 image (as nvcc's cubins are).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace gpupool::image::detail {

struct ElfSection {
  std::string_view name;  // points into the image's section-name table
  uint32_t type = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
  uint32_t link = 0;
  uint32_t info = 0;
};

// End of the ELF header and of the section/program header tables, read from the first 64 bytes
// of `header` alone. Validates class/endianness/entry sizes; nothing on malformed headers.
Result<uint64_t> elfHeaderTablesEnd(std::span<const uint8_t> header);

// Furthest end of the header tables and of every section (except SHT_NOBITS) and segment file
// image, as the tables declare it. Only the header tables must lie inside `tables`.
Result<uint64_t> elfDeclaredEnd(std::span<const uint8_t> tables);

// Furthest end of the header tables and of every section (except SHT_NOBITS) and segment file
// image. Everything must lie inside `bytes`.
Result<uint64_t> elfContentEnd(std::span<const uint8_t> bytes);

// All sections with their names; every section's data lies inside `bytes`.
Result<std::vector<ElfSection>> elfSections(std::span<const uint8_t> bytes);

}  // namespace gpupool::image::detail
