#include "gpupool/image/image_kind.h"

#include <algorithm>
#include <cstring>

#include "byte_reader.h"
#include "elf64_view.h"
#include "gpupool/image/fatbin.h"

namespace gpupool::image {
namespace {

using detail::invalidImage;
using detail::readLe;

// Leading comments of a PTX file (nvcc writes a few lines of them) are bounded by this; past it
// the text is not treated as PTX, which keeps classify() from scanning arbitrary memory.
constexpr size_t kMaxPtxPreamble = 64 * 1024;

bool isSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'; }

// Reads characters through `at(i)`, which yields '\0' at the end of the text. True when, after
// whitespace and comments, the text starts with the `.version` directive every PTX module has.
template <typename CharAt>
bool looksLikePtx(CharAt at) {
  size_t i = 0;
  while (i < kMaxPtxPreamble) {
    const char c = at(i);
    if (isSpace(c)) {
      ++i;
    } else if (c == '/' && at(i + 1) == '/') {
      i += 2;
      while (i < kMaxPtxPreamble && at(i) != '\n' && at(i) != '\0') ++i;
    } else if (c == '/' && at(i + 1) == '*') {
      i += 2;
      while (i < kMaxPtxPreamble && at(i) != '\0' && !(at(i) == '*' && at(i + 1) == '/')) ++i;
      if (at(i) == '\0') return false;
      i += 2;
    } else {
      constexpr std::string_view kVersion = ".version";
      for (size_t k = 0; k < kVersion.size(); ++k) {
        if (at(i + k) != kVersion[k]) return false;
      }
      return true;
    }
  }
  return false;
}

ImageKind classifyMagic(uint32_t magic) {
  if (magic == kFatbinWrapperMagic) return ImageKind::kFatbinWrapper;
  if (magic == kFatbinMagic) return ImageKind::kFatbin;
  if (std::memcmp(&magic,
                  "\x7f"
                  "ELF",
                  4) == 0)
    return ImageKind::kElf;
  return ImageKind::kUnknown;
}

// Size of the fatbin whose header starts at `header` (16 readable bytes).
Result<uint64_t> fatbinSize(const uint8_t* header) {
  const std::span<const uint8_t> bytes(header, kFatbinHeaderBytes);
  if (readLe<uint32_t>(bytes, 0) != kFatbinMagic) {
    return invalidImage("fatbin magic 0xBA55ED50 not found");
  }
  const uint16_t headerSize = *readLe<uint16_t>(bytes, 6);
  const uint64_t fatSize = *readLe<uint64_t>(bytes, 8);
  if (headerSize < kFatbinHeaderBytes || fatSize > kMaxPlausibleImageBytes) {
    return invalidImage("fatbin header size " + std::to_string(headerSize) + " or payload size " +
                        std::to_string(fatSize) + " is implausible");
  }
  return headerSize + fatSize;
}

}  // namespace

const char* toString(ImageKind kind) {
  switch (kind) {
    case ImageKind::kFatbinWrapper:
      return "fatbin wrapper";
    case ImageKind::kFatbin:
      return "fatbin";
    case ImageKind::kElf:
      return "ELF cubin";
    case ImageKind::kPtx:
      return "PTX";
    case ImageKind::kUnknown:
      break;
  }
  return "unknown";
}

ImageKind classify(const void* p) {
  if (p == nullptr) return ImageKind::kUnknown;
  const auto* text = static_cast<const char*>(p);
  // Read byte by byte until the magic is known to be binary: a short PTX string may be
  // shorter than 4 bytes, so a 4-byte load could run past its NUL.
  for (size_t i = 0; i < 4; ++i) {
    if (text[i] == '\0') return ImageKind::kUnknown;
  }
  uint32_t magic;
  std::memcpy(&magic, p, sizeof(magic));
  if (const ImageKind kind = classifyMagic(magic); kind != ImageKind::kUnknown) return kind;
  // Reads are (almost) monotonic; remember how far the text is known to be NUL-free so that no
  // byte past the terminating NUL is ever touched.
  size_t scanned = 0;
  bool hitNul = false;
  const auto at = [&](size_t i) -> char {
    while (!hitNul && scanned <= i) {
      if (text[scanned] == '\0') {
        hitNul = true;
      } else {
        ++scanned;
      }
    }
    return i < scanned ? text[i] : '\0';
  };
  return looksLikePtx(at) ? ImageKind::kPtx : ImageKind::kUnknown;
}

ImageKind classify(std::span<const uint8_t> bytes) {
  if (auto magic = readLe<uint32_t>(bytes, 0)) {
    if (const ImageKind kind = classifyMagic(*magic); kind != ImageKind::kUnknown) return kind;
  }
  return looksLikePtx(
             [bytes](size_t i) { return i < bytes.size() ? static_cast<char>(bytes[i]) : '\0'; })
             ? ImageKind::kPtx
             : ImageKind::kUnknown;
}

Result<uint64_t> elfExtent(std::span<const uint8_t> bytes) { return detail::elfContentEnd(bytes); }

Result<uint64_t> imageExtent(std::span<const uint8_t> bytes) {
  switch (classify(bytes)) {
    case ImageKind::kFatbinWrapper:
      return invalidImage(
          "fatbin wrappers hold a host pointer and cannot be sent; send the fatbin itself");
    case ImageKind::kFatbin: {
      if (bytes.size() < kFatbinHeaderBytes) {
        return invalidImage("fatbin image is shorter than its 16-byte header");
      }
      auto size = fatbinSize(bytes.data());
      if (!size) return size.status();
      if (*size > bytes.size()) {
        return invalidImage("fatbin header declares " + std::to_string(*size) +
                            " bytes but the image has " + std::to_string(bytes.size()));
      }
      return size;
    }
    case ImageKind::kElf:
      return elfExtent(bytes);
    case ImageKind::kPtx:
    case ImageKind::kUnknown:
      break;
  }
  const auto nul = std::find(bytes.begin(), bytes.end(), uint8_t{0});
  if (nul == bytes.end()) {
    return invalidImage(
        "image is neither a fatbin nor an ELF cubin, and as text it has no terminating NUL");
  }
  return static_cast<uint64_t>(nul - bytes.begin()) + 1;
}

Result<std::span<const uint8_t>> imageBytes(const void* p) {
  const auto* start = static_cast<const uint8_t*>(p);
  switch (classify(p)) {
    case ImageKind::kFatbinWrapper: {
      // {u32 magic, u32 version, const u64* data, void* filename_or_fatbins}
      uint32_t version;
      std::memcpy(&version, start + 4, sizeof(version));
      if (version != 1 && version != 2) {
        return invalidImage("fatbin wrapper version " + std::to_string(version) + " is unknown");
      }
      const uint8_t* fatbin;
      std::memcpy(&fatbin, start + 8, sizeof(fatbin));
      if (fatbin == nullptr) {
        return invalidImage("fatbin wrapper has a null fatbin pointer");
      }
      auto size = fatbinSize(fatbin);
      if (!size) return size.status();
      return std::span<const uint8_t>(fatbin, *size);
    }
    case ImageKind::kFatbin: {
      auto size = fatbinSize(start);
      if (!size) return size.status();
      return std::span<const uint8_t>(start, *size);
    }
    case ImageKind::kElf: {
      // Read the header, then the tables it describes, then the extents in those tables.
      auto tablesEnd = detail::elfHeaderTablesEnd(std::span<const uint8_t>(start, 64));
      if (!tablesEnd) return tablesEnd.status();
      if (*tablesEnd > kMaxPlausibleImageBytes) {
        return invalidImage("ELF header tables lie beyond 4 GiB");
      }
      auto end = detail::elfDeclaredEnd(std::span<const uint8_t>(start, *tablesEnd));
      if (!end) return end.status();
      if (*end > kMaxPlausibleImageBytes) {
        return invalidImage("ELF image extends beyond 4 GiB");
      }
      return std::span<const uint8_t>(start, *end);
    }
    case ImageKind::kPtx: {
      const size_t length = strnlen(reinterpret_cast<const char*>(start), kMaxPlausibleImageBytes);
      if (length == kMaxPlausibleImageBytes) {
        return invalidImage("PTX text is not NUL-terminated within 4 GiB");
      }
      return std::span<const uint8_t>(start, length + 1);
    }
    case ImageKind::kUnknown:
      break;
  }
  return invalidImage("not a CUDA module image (no fatbin, ELF or PTX signature)");
}

}  // namespace gpupool::image
