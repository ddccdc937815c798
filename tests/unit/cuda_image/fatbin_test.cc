#include "gpupool/image/fatbin.h"

#include <gtest/gtest.h>

#include <cstring>

#include "gpupool/image/cubin_params.h"
#include "gpupool/image/image_kind.h"
#include "test_images.h"

namespace gpupool::image {
namespace {

using testing::normalizePtx;
using testing::parseOrFail;
using testing::readImage;

const FatbinEntry* findEntry(const Fatbin& fatbin, EntryKind kind, uint32_t arch) {
  for (const auto& entry : fatbin.entries()) {
    if (entry.kind == static_cast<uint16_t>(kind) && entry.arch == arch) return &entry;
  }
  return nullptr;
}

std::string payloadText(const Fatbin& fatbin, const FatbinEntry& entry) {
  auto bytes = fatbin.payload(entry);
  EXPECT_TRUE(bytes) << entry.archName() << ": " << bytes.status().message;
  return bytes ? std::string(bytes->begin(), bytes->end()) : std::string();
}

// "major.minor" from the .version directive of nvcc -ptx output, as major << 16 | minor.
uint32_t ptxIsaOf(const std::string& ptx) {
  const auto at = ptx.find(".version ");
  EXPECT_NE(at, std::string::npos);
  unsigned major = 0, minor = 0;
  EXPECT_EQ(std::sscanf(ptx.c_str() + at, ".version %u.%u", &major, &minor), 2);
  return major << 16 | minor;
}

TEST(Fatbin, DefaultBuildHasSass75AndZstdPtx75) {
  const auto bytes = readImage("default.fatbin");
  const Fatbin fatbin = parseOrFail(bytes);
  ASSERT_EQ(fatbin.entries().size(), 2u) << fatbin.describeArchs();
  const FatbinEntry* elf = findEntry(fatbin, EntryKind::kElf, 75);
  const FatbinEntry* ptx = findEntry(fatbin, EntryKind::kPtx, 75);
  ASSERT_TRUE(elf && ptx) << fatbin.describeArchs();
  EXPECT_FALSE(elf->compressed());
  EXPECT_NE(ptx->flags & kEntryFlagZstd, 0u);
  EXPECT_NE(ptx->flags & kEntryFlag64Bit, 0u);
  EXPECT_EQ(ptx->codeVersion, ptxIsaOf(testing::readImageText("default.ptx")));
  EXPECT_EQ(fatbin.describeArchs(), "sm_75, compute_75");
  // Entries point into the parsed bytes.
  EXPECT_GE(ptx->stored.data(), bytes.data());
  EXPECT_LE(ptx->stored.data() + ptx->stored.size(), bytes.data() + bytes.size());
}

TEST(Fatbin, PtxPayloadMatchesNvccPtxInEveryCompression) {
  const auto expected = normalizePtx(testing::readImageText("default.ptx"));
  ASSERT_GT(expected.size(), 10u);
  for (const char* name :
       {"default.fatbin", "no_compress.fatbin", "lz4.fatbin", "compress_all.fatbin"}) {
    const auto bytes = readImage(name);
    const Fatbin fatbin = parseOrFail(bytes);
    const FatbinEntry* ptx = findEntry(fatbin, EntryKind::kPtx, 75);
    ASSERT_TRUE(ptx) << name << ": " << fatbin.describeArchs();
    const std::string text = payloadText(fatbin, *ptx);
    EXPECT_EQ(text.find('\0'), std::string::npos) << name;
    EXPECT_EQ(normalizePtx(text), expected) << name;
    EXPECT_NE(text.find(".entry " + std::string(testing::kVecAdd)), std::string::npos) << name;
    EXPECT_NE(text.find(".entry " + std::string(testing::kStructParam)), std::string::npos);
    EXPECT_NE(text.find(".entry " + std::string(testing::kNoParams)), std::string::npos);
  }
}

TEST(Fatbin, CompressionFlagsPerFlavour) {
  const auto noneBytes = readImage("no_compress.fatbin");
  const Fatbin none = parseOrFail(noneBytes);
  for (const auto& entry : none.entries()) {
    EXPECT_FALSE(entry.compressed()) << entry.archName();
    EXPECT_EQ(entry.compressedSize, 0u);
  }
  const auto lz4Bytes = readImage("lz4.fatbin");
  const Fatbin lz4 = parseOrFail(lz4Bytes);
  const FatbinEntry* lz4Ptx = findEntry(lz4, EntryKind::kPtx, 75);
  ASSERT_TRUE(lz4Ptx);
  EXPECT_NE(lz4Ptx->flags & kEntryFlagLz4, 0u);
  EXPECT_EQ(lz4Ptx->flags & kEntryFlagZstd, 0u);
  EXPECT_GT(lz4Ptx->uncompressedSize, lz4Ptx->compressedSize);
}

TEST(Fatbin, CompressedCubinDecompressesToTheCubin) {
  const auto fatbinBytes = readImage("compress_all.fatbin");
  const Fatbin fatbin = parseOrFail(fatbinBytes);
  const FatbinEntry* elf = findEntry(fatbin, EntryKind::kElf, 75);
  ASSERT_TRUE(elf);
  EXPECT_NE(elf->flags & kEntryFlagZstd, 0u);
  auto cubin = fatbin.payload(*elf);
  ASSERT_TRUE(cubin) << cubin.status().message;
  EXPECT_EQ(*cubin, readImage("sm75.cubin"));
}

TEST(Fatbin, UncompressedCubinIsTheCubin) {
  const auto fatbinBytes = readImage("default.fatbin");
  const Fatbin fatbin = parseOrFail(fatbinBytes);
  const FatbinEntry* elf = findEntry(fatbin, EntryKind::kElf, 75);
  ASSERT_TRUE(elf);
  auto cubin = fatbin.payload(*elf);
  ASSERT_TRUE(cubin);
  const auto expected = readImage("sm75.cubin");
  ASSERT_GE(cubin->size(), expected.size());
  EXPECT_TRUE(std::equal(expected.begin(), expected.end(), cubin->begin()));
}

TEST(Fatbin, OptionsStringAndSm90) {
  const auto fatbinBytes = readImage("sm90_lineinfo.fatbin");
  const Fatbin fatbin = parseOrFail(fatbinBytes);
  EXPECT_TRUE(findEntry(fatbin, EntryKind::kElf, 90)) << fatbin.describeArchs();
  const FatbinEntry* ptx = findEntry(fatbin, EntryKind::kPtx, 90);
  ASSERT_TRUE(ptx) << fatbin.describeArchs();
  EXPECT_NE(ptx->options.find("line-info"), std::string::npos) << "options: " << ptx->options;
  EXPECT_EQ(ptx->archName(), "compute_90");
}

TEST(Fatbin, MultiArchListing) {
  const auto fatbinBytes = readImage("multi.fatbin");
  const Fatbin fatbin = parseOrFail(fatbinBytes);
  EXPECT_TRUE(findEntry(fatbin, EntryKind::kPtx, 75));
  EXPECT_TRUE(findEntry(fatbin, EntryKind::kPtx, 86));
  EXPECT_TRUE(findEntry(fatbin, EntryKind::kElf, 90));
  EXPECT_EQ(fatbin.entries().size(), 3u) << fatbin.describeArchs();
}

TEST(Fatbin, TrailingBytesAfterFatbinAreIgnored) {
  auto bytes = readImage("default.fatbin");
  const size_t size = bytes.size();
  bytes.resize(size + 100, 0x5a);
  const Fatbin fatbin = parseOrFail(bytes);
  EXPECT_EQ(fatbin.entries().size(), 2u);
}

TEST(Fatbin, HeaderErrors) {
  const auto good = readImage("default.fatbin");
  auto badMagic = good;
  badMagic[0] ^= 1;
  const Status magicError = Fatbin::parse(badMagic).status();
  EXPECT_EQ(magicError.code, CUDA_ERROR_INVALID_IMAGE);
  EXPECT_NE(magicError.message.find("magic"), std::string::npos) << magicError.message;

  auto tooLong = good;
  const uint64_t fatSize = good.size();  // 16 more than really present
  std::memcpy(tooLong.data() + 8, &fatSize, sizeof(fatSize));
  EXPECT_FALSE(Fatbin::parse(tooLong));

  auto badEntryHeader = good;
  const uint32_t tiny = 8;  // below the 64-byte minimum
  std::memcpy(badEntryHeader.data() + 16 + 4, &tiny, sizeof(tiny));
  EXPECT_FALSE(Fatbin::parse(badEntryHeader));

  auto hugePayload = good;
  const uint32_t huge = 0xfffffff0;
  std::memcpy(hugePayload.data() + 16 + 8, &huge, sizeof(huge));
  const Status sizeError = Fatbin::parse(hugePayload).status();
  EXPECT_EQ(sizeError.code, CUDA_ERROR_INVALID_IMAGE);
  EXPECT_NE(sizeError.message.find("do not fit"), std::string::npos) << sizeError.message;
}

TEST(Fatbin, CorruptCompressedPayloadIsAnError) {
  for (const char* name : {"default.fatbin", "lz4.fatbin"}) {
    auto bytes = readImage(name);
    const Fatbin original = parseOrFail(bytes);
    const FatbinEntry* ptx = findEntry(original, EntryKind::kPtx, 75);
    ASSERT_TRUE(ptx);
    // Declare an uncompressed size that disagrees with the stream.
    const uint64_t wrongSize = ptx->uncompressedSize + 1;
    std::memcpy(bytes.data() + ptx->offset + 56, &wrongSize, sizeof(wrongSize));
    const Fatbin fatbin = parseOrFail(bytes);
    const auto payload = fatbin.payload(*findEntry(fatbin, EntryKind::kPtx, 75));
    EXPECT_FALSE(payload) << name;
    EXPECT_FALSE(payload.status().message.empty());
  }
}

TEST(Fatbin, EmptyFatbinHasNoEntries) {
  const uint8_t header[16] = {0x50, 0xed, 0x55, 0xba, 1, 0, 16, 0};
  auto fatbin = Fatbin::parse(header);
  ASSERT_TRUE(fatbin) << fatbin.status().message;
  EXPECT_TRUE(fatbin->entries().empty());
  EXPECT_EQ(fatbin->describeArchs(), "nothing");
}

}  // namespace
}  // namespace gpupool::image
