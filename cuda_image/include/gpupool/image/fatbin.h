// Parsing nvcc's fatbin container (magic 0xBA55ED50) and extracting its entries.
//
// Layout (see shared/docs/driver-interposition.md §7): a 16-byte header {u32 magic, u16 version,
// u16 headerSize, u64 fatSize}, then entries, each an entry header (headerSize >= 0x40) followed
// by payloadSize bytes. Nothing read from the image is trusted: every offset and size is checked
// against the span, and malformed input yields CUDA_ERROR_INVALID_IMAGE with the reason, never a
// crash.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"

namespace gpupool::image {

enum class EntryKind : uint16_t {
  kPtx = 1,
  kElf = 2,  // SASS cubin
  kLto = 8,  // LTO-IR / NVVM (-dlto)
};

// A fatbin starts with a header of this size: magic, version, header size, payload size.
inline constexpr uint64_t kFatbinHeaderBytes = 16;

// Entry flag bits that this library interprets.
inline constexpr uint64_t kEntryFlag64Bit = 0x1;
inline constexpr uint64_t kEntryFlagLz4 = 0x2000;
inline constexpr uint64_t kEntryFlagZstd = 0x8000;

struct FatbinEntry {
  uint16_t kind = 0;  // an EntryKind value; unknown kinds are listed, not rejected
  uint32_t arch = 0;  // sm_XX for ELF, compute_XX for PTX (75, 80, 90, 120...)
  // PTX ISA version for PTX (major << 16 | minor, e.g. 0x00090000 for 9.0); 0x00010008 for ELF.
  uint32_t codeVersion = 0;
  uint64_t flags = 0;
  // Compiler options recorded by fatbinary (e.g. "-O2  --generate-line-info "); empty when absent
  // or when the block is not text (sm_100a+ cubins store binary data there).
  std::string options;
  uint32_t compressedSize = 0;      // 0 when stored uncompressed
  uint64_t uncompressedSize = 0;    // from the header; 0 when stored uncompressed
  uint64_t offset = 0;              // of the entry header, from the start of the fatbin
  std::span<const uint8_t> stored;  // payload bytes as stored (padded, maybe compressed)

  bool isPtx() const { return kind == static_cast<uint16_t>(EntryKind::kPtx); }
  bool isElf() const { return kind == static_cast<uint16_t>(EntryKind::kElf); }
  bool compressed() const { return (flags & (kEntryFlagLz4 | kEntryFlagZstd)) != 0; }
  // "sm_75", "compute_90", "lto_90" or "kind7_90".
  std::string archName() const;
};

class Fatbin {
 public:
  // Parses a fatbin. A fatbin wrapper is not accepted (the pointer inside it means nothing in a
  // received span): resolve it with imageBytes() first. Bytes past headerSize + fatSize are ignored
  // (the client may ship padding). The span must outlive the Fatbin: entries point into it.
  static Result<Fatbin> parse(std::span<const uint8_t> bytes);
  // Entries would dangle into a destroyed temporary.
  static Result<Fatbin> parse(std::vector<uint8_t>&& bytes) = delete;

  const std::vector<FatbinEntry>& entries() const { return entries_; }

  // The entry's contents: decompressed (ZSTD or LZ4) when compressed; for PTX with trailing NULs
  // and padding removed so the result is the text without terminator. CUDA_ERROR_INVALID_IMAGE on
  // corrupt compressed data or implausible sizes.
  Result<std::vector<uint8_t>> payload(const FatbinEntry& entry) const;

  // "sm_75, compute_75" style list of everything the image carries, for error messages.
  std::string describeArchs() const;

 private:
  std::vector<FatbinEntry> entries_;
};

}  // namespace gpupool::image
