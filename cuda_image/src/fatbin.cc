#include "gpupool/image/fatbin.h"

#include <lz4.h>
#include <zstd.h>

#include <algorithm>
#include <cstring>

#include "byte_reader.h"
#include "gpupool/image/image_kind.h"

namespace gpupool::image {
namespace {

using detail::inBounds;
using detail::invalidImage;
using detail::readLe;

constexpr uint64_t kMinEntryHeaderBytes = 0x40;
// Decompressed payloads above this are treated as corrupt sizes (cuBLAS's largest is ~14 MB).
constexpr uint64_t kMaxDecompressedBytes = uint64_t{1} << 30;
// An LZ4 block cannot expand by more than ~255x (one literal-length byte per 255 output bytes).
constexpr uint64_t kMaxLz4Ratio = 255;

bool isPrintableText(std::span<const uint8_t> bytes) {
  return std::all_of(bytes.begin(), bytes.end(),
                     [](uint8_t c) { return (c >= 0x20 && c < 0x7f) || c == '\t' || c == 0; });
}

// The options block is informational; a block that does not fit or is binary is ignored rather
// than failing the whole image.
std::string readOptions(std::span<const uint8_t> header, uint32_t optionsOffset) {
  if (optionsOffset == 0) return {};
  auto stringOffset = readLe<uint32_t>(header, optionsOffset);
  auto length = readLe<uint32_t>(header, uint64_t{optionsOffset} + 4);
  if (!stringOffset || !length) return {};
  auto text = detail::subspan(header, *stringOffset, *length);
  if (!text || !isPrintableText(*text)) return {};
  std::string options(text->begin(), text->end());
  options.resize(strnlen(options.c_str(), options.size()));
  return options;
}

Result<std::vector<uint8_t>> decompressZstd(std::span<const uint8_t> in, uint64_t headerSize) {
  uint64_t size = ZSTD_getFrameContentSize(in.data(), in.size());
  if (size == ZSTD_CONTENTSIZE_ERROR) {
    return invalidImage("ZSTD payload is not a valid frame");
  }
  if (size == ZSTD_CONTENTSIZE_UNKNOWN) {
    size = headerSize;
  } else if (headerSize != 0 && size != headerSize) {
    return invalidImage("ZSTD frame size " + std::to_string(size) +
                        " disagrees with the entry's uncompressed size " +
                        std::to_string(headerSize));
  }
  if (size == 0 || size > kMaxDecompressedBytes) {
    return invalidImage("ZSTD uncompressed size " + std::to_string(size) + " is implausible");
  }
  std::vector<uint8_t> out(size);
  const size_t produced = ZSTD_decompress(out.data(), out.size(), in.data(), in.size());
  if (ZSTD_isError(produced)) {
    return invalidImage(std::string("ZSTD decompression failed: ") + ZSTD_getErrorName(produced));
  }
  out.resize(produced);
  return out;
}

Result<std::vector<uint8_t>> decompressLz4(std::span<const uint8_t> in, uint64_t size) {
  // nvcc stores a raw LZ4 block, which carries no size of its own.
  if (size == 0 || size > kMaxDecompressedBytes || size > in.size() * kMaxLz4Ratio + 64 ||
      in.size() > static_cast<uint64_t>(LZ4_MAX_INPUT_SIZE)) {
    return invalidImage("LZ4 sizes (" + std::to_string(in.size()) + " -> " + std::to_string(size) +
                        ") are implausible");
  }
  std::vector<uint8_t> out(size);
  const int produced = LZ4_decompress_safe(
      reinterpret_cast<const char*>(in.data()), reinterpret_cast<char*>(out.data()),
      static_cast<int>(in.size()), static_cast<int>(out.size()));
  if (produced < 0 || static_cast<uint64_t>(produced) != size) {
    return invalidImage("LZ4 decompression failed (corrupt block)");
  }
  return out;
}

}  // namespace

std::string FatbinEntry::archName() const {
  switch (kind) {
    case static_cast<uint16_t>(EntryKind::kElf):
      return "sm_" + std::to_string(arch);
    case static_cast<uint16_t>(EntryKind::kPtx):
      return "compute_" + std::to_string(arch);
    case static_cast<uint16_t>(EntryKind::kLto):
      return "lto_" + std::to_string(arch);
    default:
      return "kind" + std::to_string(kind) + "_" + std::to_string(arch);
  }
}

Result<Fatbin> Fatbin::parse(std::span<const uint8_t> bytes) {
  const auto magic = readLe<uint32_t>(bytes, 0);
  if (!magic || bytes.size() < kFatbinHeaderBytes) {
    return invalidImage("fatbin shorter than its 16-byte header");
  }
  if (*magic != kFatbinMagic) {
    return invalidImage("fatbin magic 0xBA55ED50 not found");
  }
  const uint16_t headerSize = *readLe<uint16_t>(bytes, 6);
  const uint64_t fatSize = *readLe<uint64_t>(bytes, 8);
  if (headerSize < kFatbinHeaderBytes || !inBounds(bytes.size(), headerSize, fatSize)) {
    return invalidImage("fatbin declares " + std::to_string(headerSize) + " + " +
                        std::to_string(fatSize) + " bytes but only " +
                        std::to_string(bytes.size()) + " are present");
  }
  const uint64_t end = headerSize + fatSize;

  Fatbin fatbin;
  uint64_t offset = headerSize;
  while (offset < end) {
    const std::string where = "fatbin entry at offset " + std::to_string(offset);
    if (!inBounds(end, offset, kMinEntryHeaderBytes)) {
      return invalidImage(where + " is truncated");
    }
    const auto entryBytes = bytes.subspan(offset, end - offset);
    const uint32_t entryHeaderSize = *readLe<uint32_t>(entryBytes, 4);
    const uint32_t payloadSize = *readLe<uint32_t>(entryBytes, 8);
    if (entryHeaderSize < kMinEntryHeaderBytes ||
        !inBounds(entryBytes.size(), entryHeaderSize, payloadSize)) {
      return invalidImage(where + " declares header " + std::to_string(entryHeaderSize) +
                          " + payload " + std::to_string(payloadSize) +
                          " bytes, which do not fit in the fatbin");
    }
    FatbinEntry entry;
    entry.kind = *readLe<uint16_t>(entryBytes, 0);
    entry.compressedSize = *readLe<uint32_t>(entryBytes, 16);
    entry.codeVersion = *readLe<uint32_t>(entryBytes, 24);
    entry.arch = *readLe<uint32_t>(entryBytes, 28);
    entry.flags = *readLe<uint64_t>(entryBytes, 40);
    entry.uncompressedSize = *readLe<uint64_t>(entryBytes, 56);
    entry.offset = offset;
    entry.options =
        readOptions(entryBytes.first(entryHeaderSize), *readLe<uint32_t>(entryBytes, 20));
    entry.stored = entryBytes.subspan(entryHeaderSize, payloadSize);
    if (entry.compressed() && entry.compressedSize > payloadSize) {
      return invalidImage(where + " has compressed size " + std::to_string(entry.compressedSize) +
                          " larger than its payload " + std::to_string(payloadSize));
    }
    fatbin.entries_.push_back(std::move(entry));
    offset += uint64_t{entryHeaderSize} + payloadSize;
  }
  return fatbin;
}

Result<std::vector<uint8_t>> Fatbin::payload(const FatbinEntry& entry) const {
  const bool lz4 = (entry.flags & kEntryFlagLz4) != 0;
  const bool zstd = (entry.flags & kEntryFlagZstd) != 0;
  std::vector<uint8_t> out;
  if (lz4 && zstd) {
    return invalidImage(entry.archName() + " entry claims both LZ4 and ZSTD compression");
  } else if (lz4 || zstd) {
    // compressedSize 0 would mean "stored", which contradicts the flag; use the whole payload.
    const auto in =
        entry.compressedSize != 0 ? entry.stored.first(entry.compressedSize) : entry.stored;
    auto decompressed = zstd ? decompressZstd(in, entry.uncompressedSize)
                             : decompressLz4(in, entry.uncompressedSize);
    if (!decompressed) return decompressed.status();
    out = std::move(*decompressed);
  } else {
    out.assign(entry.stored.begin(), entry.stored.end());
  }
  if (entry.isPtx()) {
    // PTX is NUL-terminated and padded; text never contains NUL, so cut at the first one.
    const auto nul = std::find(out.begin(), out.end(), uint8_t{0});
    out.erase(nul, out.end());
  }
  return out;
}

std::string Fatbin::describeArchs() const {
  std::string list;
  for (const auto& entry : entries_) {
    if (!list.empty()) list += ", ";
    list += entry.archName();
  }
  return list.empty() ? "nothing" : list;
}

}  // namespace gpupool::image
