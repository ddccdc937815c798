#include "server/backends/cuda/module_image_check.h"

#include <algorithm>
#include <cstring>

namespace gpupool::server {
namespace {

constexpr uint32_t kFatbinMagic = 0xBA55ED50;
constexpr uint32_t kFatbinWrapperMagic = 0x466243B1;
constexpr uint32_t kSectionNoBits = 8;  // SHT_NOBITS: occupies no bytes in the file

template <typename T>
T readLittleEndian(std::span<const uint8_t> bytes, uint64_t offset) {
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(T));  // the server is little endian (x86/arm64)
  return value;
}

// [offset, offset + count*size) inside `total`, without overflow.
bool tableFits(uint64_t offset, uint64_t count, uint64_t size, uint64_t total) {
  if (offset > total) return false;
  if (size != 0 && count > (total - offset) / size) return false;
  return true;
}

bool checkFatbin(std::span<const uint8_t> image, std::string* why) {
  constexpr size_t kHeaderBytes = 16;  // magic u32, version u16, header size u16, payload size u64
  if (image.size() < kHeaderBytes) {
    *why = "fatbin image is shorter than its header";
    return false;
  }
  uint64_t headerSize = readLittleEndian<uint16_t>(image, 6);
  uint64_t payloadSize = readLittleEndian<uint64_t>(image, 8);
  if (headerSize < kHeaderBytes || !tableFits(headerSize, 1, payloadSize, image.size())) {
    *why = "fatbin header declares " + std::to_string(headerSize) + "+" +
           std::to_string(payloadSize) + " bytes but the image has " + std::to_string(image.size());
    return false;
  }
  return true;
}

bool checkElf(std::span<const uint8_t> image, std::string* why) {
  constexpr size_t kHeaderBytes = 64;
  if (image.size() < kHeaderBytes || image[4] != 2 /* ELFCLASS64 */) {
    *why = "ELF image is not a complete 64-bit ELF header";
    return false;
  }
  uint64_t programOffset = readLittleEndian<uint64_t>(image, 0x20);
  uint64_t sectionOffset = readLittleEndian<uint64_t>(image, 0x28);
  uint64_t programEntry = readLittleEndian<uint16_t>(image, 0x36);
  uint64_t programCount = readLittleEndian<uint16_t>(image, 0x38);
  uint64_t sectionEntry = readLittleEndian<uint16_t>(image, 0x3A);
  uint64_t sectionCount = readLittleEndian<uint16_t>(image, 0x3C);
  if (!tableFits(programOffset, programCount, programEntry, image.size()) ||
      !tableFits(sectionOffset, sectionCount, sectionEntry, image.size())) {
    *why = "ELF header tables lie outside the image";
    return false;
  }
  if (sectionCount != 0 && sectionEntry < 0x28) {
    *why = "ELF section header entries are too small";
    return false;
  }
  for (uint64_t i = 0; i < sectionCount; ++i) {
    uint64_t header = sectionOffset + i * sectionEntry;
    if (readLittleEndian<uint32_t>(image, header + 4) == kSectionNoBits) continue;
    uint64_t offset = readLittleEndian<uint64_t>(image, header + 0x18);
    uint64_t size = readLittleEndian<uint64_t>(image, header + 0x20);
    if (!tableFits(offset, 1, size, image.size())) {
      *why = "ELF section " + std::to_string(i) + " lies outside the image";
      return false;
    }
  }
  return true;
}

}  // namespace

bool isBoundedModuleImage(std::span<const uint8_t> image, std::string* why) {
  if (image.size() >= 4) {
    uint32_t magic = readLittleEndian<uint32_t>(image, 0);
    if (magic == kFatbinMagic) return checkFatbin(image, why);
    if (magic == kFatbinWrapperMagic) {
      *why = "fatbin wrappers hold a host pointer and cannot be sent; send the fatbin itself";
      return false;
    }
    if (std::memcmp(image.data(),
                    "\x7f"
                    "ELF",
                    4) == 0)
      return checkElf(image, why);
  }
  if (std::find(image.begin(), image.end(), uint8_t{0}) == image.end()) {
    *why = "image is neither a fatbin nor an ELF cubin, and as PTX text it has no terminating NUL";
    return false;
  }
  return true;
}

}  // namespace gpupool::server
