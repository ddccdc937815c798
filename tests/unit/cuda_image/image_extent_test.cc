// imageExtent(): the bounds check the cuda backend runs before cuModuleLoadData (the suite keeps
// the name it had when the backend had its own parser).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "gpupool/image/image_kind.h"
#include "test_images.h"

namespace gpupool::image {
namespace {

using Bytes = std::vector<uint8_t>;

template <typename T>
void put(Bytes& bytes, size_t offset, T value) {
  if (bytes.size() < offset + sizeof(T)) bytes.resize(offset + sizeof(T));
  std::memcpy(bytes.data() + offset, &value, sizeof(T));
}

Bytes fatbin(uint16_t headerSize, uint64_t payloadSize, size_t actualBytes) {
  Bytes bytes(actualBytes);
  put<uint32_t>(bytes, 0, 0xBA55ED50);
  put<uint16_t>(bytes, 4, 1);
  put<uint16_t>(bytes, 6, headerSize);
  put<uint64_t>(bytes, 8, payloadSize);
  bytes.resize(actualBytes);
  return bytes;
}

// A 64-bit ELF header with one section header table of `sections` entries at offset 64.
Bytes elf(uint16_t sections, uint64_t sectionOffset, uint64_t sectionSize) {
  Bytes bytes(64 + sections * 64, 0);
  std::memcpy(bytes.data(),
              "\x7f"
              "ELF",
              4);
  bytes[4] = 2;                    // ELFCLASS64
  bytes[5] = 1;                    // ELFDATA2LSB, as every cubin
  put<uint64_t>(bytes, 0x28, 64);  // e_shoff
  put<uint16_t>(bytes, 0x3A, 64);  // e_shentsize
  put<uint16_t>(bytes, 0x3C, sections);
  for (uint16_t i = 0; i < sections; ++i) {
    put<uint32_t>(bytes, 64 + i * 64 + 4, 1);  // SHT_PROGBITS
    put<uint64_t>(bytes, 64 + i * 64 + 0x18, sectionOffset);
    put<uint64_t>(bytes, 64 + i * 64 + 0x20, sectionSize);
  }
  return bytes;
}

bool accepted(const Bytes& image) {
  const auto extent = imageExtent(image);
  if (!extent) {
    EXPECT_EQ(extent.status().code, CUDA_ERROR_INVALID_IMAGE);
    EXPECT_FALSE(extent.status().message.empty());
    return false;
  }
  EXPECT_LE(*extent, image.size());
  return true;
}

TEST(ModuleImageCheck, FatbinMustHoldItsDeclaredPayload) {
  EXPECT_TRUE(accepted(fatbin(16, 100, 116)));
  EXPECT_TRUE(accepted(fatbin(16, 100, 200)));
  EXPECT_FALSE(accepted(fatbin(16, 101, 116)));
  EXPECT_FALSE(accepted(fatbin(16, ~uint64_t{0}, 116)));  // must not wrap around
  EXPECT_FALSE(accepted(fatbin(8, 0, 116)));              // header smaller than a header
  EXPECT_FALSE(accepted(fatbin(16, 0, 12)));              // truncated header
}

TEST(ModuleImageCheck, FatbinWrapperIsRejectedBecauseItHoldsAPointer) {
  Bytes wrapper(24, 0);
  put<uint32_t>(wrapper, 0, 0x466243B1);
  const std::string why = testing::failureOf(imageExtent(wrapper));
  EXPECT_NE(why.find("wrapper"), std::string::npos) << why;
}

TEST(ModuleImageCheck, ElfTablesAndSectionsMustLieInsideTheImage) {
  Bytes good = elf(2, 64, 128);
  EXPECT_TRUE(accepted(good));
  EXPECT_FALSE(accepted(elf(2, 64, 129)));          // second byte past the end
  EXPECT_FALSE(accepted(elf(1, ~uint64_t{0}, 2)));  // offset wraps
  Bytes truncated = good;
  truncated.resize(100);  // cuts the section header table
  EXPECT_FALSE(accepted(truncated));
  Bytes thirtyTwoBit = good;
  thirtyTwoBit[4] = 1;
  EXPECT_FALSE(accepted(thirtyTwoBit));
  Bytes bigEndian = good;
  bigEndian[5] = 2;
  EXPECT_FALSE(accepted(bigEndian));
}

TEST(ModuleImageCheck, TextNeedsATerminatingNul) {
  std::string ptx = ".version 8.0\n.target sm_80\n";
  Bytes withNul(ptx.begin(), ptx.end());
  withNul.push_back(0);
  EXPECT_TRUE(accepted(withNul));
  Bytes withoutNul(ptx.begin(), ptx.end());
  EXPECT_FALSE(accepted(withoutNul));
  EXPECT_FALSE(accepted(Bytes{}));
}

TEST(ModuleImageCheck, AcceptsWhatNvccProduces) {
  Bytes fat = testing::readImage("default.fatbin");
  Bytes cubin = testing::readImage("sm75.cubin");
  Bytes ptx = testing::readImage("default.ptx");
  ptx.push_back(0);  // a PTX image travels NUL-terminated
  for (const Bytes* image : {&fat, &cubin, &ptx}) {
    auto extent = imageExtent(*image);
    ASSERT_TRUE(extent) << extent.status().message;
    EXPECT_EQ(*extent, image->size());
  }
  // And the same images cut short are refused.
  fat.resize(fat.size() - 1);
  EXPECT_FALSE(accepted(fat));
  cubin.resize(cubin.size() / 2);
  EXPECT_FALSE(accepted(cubin));
}

}  // namespace
}  // namespace gpupool::image
