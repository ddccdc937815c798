#include <gtest/gtest.h>

#include <cstring>

#include "gpupool/image/image_kind.h"
#include "test_images.h"

namespace gpupool::image {
namespace {

using testing::readImage;

struct Wrapper {
  uint32_t magic;
  uint32_t version;
  const void* data;
  const void* filenameOrFatbins;
};

TEST(ImageBytes, FatbinIsWholeFile) {
  for (const char* name : {"default.fatbin", "lz4.fatbin", "multi.fatbin", "sass90_only.fatbin"}) {
    const auto file = readImage(name);
    std::string error;
    auto bytes = imageBytes(file.data(), &error);
    ASSERT_TRUE(bytes) << name << ": " << error;
    EXPECT_EQ(bytes->data(), file.data()) << name;
    EXPECT_EQ(bytes->size(), file.size()) << name;
  }
}

TEST(ImageBytes, WrapperResolvesToItsFatbin) {
  const auto file = readImage("default.fatbin");
  // Bytes after the fatbin (the next fatbin in .nv_fatbin, say) must not be counted.
  std::vector<uint8_t> padded = file;
  padded.resize(file.size() + 64, 0xcc);
  for (uint32_t version : {1u, 2u}) {
    const Wrapper wrapper{kFatbinWrapperMagic, version, padded.data(), nullptr};
    std::string error;
    auto bytes = imageBytes(&wrapper, &error);
    ASSERT_TRUE(bytes) << error;
    EXPECT_EQ(bytes->data(), padded.data());
    EXPECT_EQ(bytes->size(), file.size());
  }
}

TEST(ImageBytes, WrapperErrors) {
  const auto file = readImage("default.fatbin");
  const uint8_t notFatbin[16] = {1, 2, 3, 4};
  std::string error;
  const Wrapper badTarget{kFatbinWrapperMagic, 1, notFatbin, nullptr};
  EXPECT_FALSE(imageBytes(&badTarget, &error));
  EXPECT_NE(error.find("magic"), std::string::npos) << error;
  const Wrapper nullTarget{kFatbinWrapperMagic, 1, nullptr, nullptr};
  EXPECT_FALSE(imageBytes(&nullTarget, &error));
  const Wrapper badVersion{kFatbinWrapperMagic, 7, file.data(), nullptr};
  EXPECT_FALSE(imageBytes(&badVersion, &error));
  EXPECT_NE(error.find("version"), std::string::npos) << error;
}

TEST(ImageBytes, FatbinLargerThanFourGibIsRefused) {
  std::vector<uint8_t> header = readImage("default.fatbin");
  const uint64_t huge = uint64_t{5} << 30;
  std::memcpy(header.data() + 8, &huge, sizeof(huge));
  std::string error;
  EXPECT_FALSE(imageBytes(header.data(), &error));
  EXPECT_FALSE(error.empty());
}

TEST(ImageBytes, ElfExtentIgnoresTrailingBytes) {
  const auto cubin = readImage("sm75.cubin");
  std::vector<uint8_t> padded = cubin;
  padded.resize(cubin.size() + 4096, 0xab);
  std::string error;
  auto bytes = imageBytes(padded.data(), &error);
  ASSERT_TRUE(bytes) << error;
  EXPECT_EQ(bytes->size(), cubin.size());
  EXPECT_EQ(elfExtent(padded, &error).value_or(0), cubin.size()) << error;
  EXPECT_EQ(elfExtent(cubin, &error).value_or(0), cubin.size()) << error;
}

TEST(ImageBytes, ElfInsideFatbinHasSameExtent) {
  // The ELF entry of a -no-compress fatbin is the cubin nvcc -cubin writes.
  const auto fatbin = readImage("no_compress.fatbin");
  const auto cubin = readImage("sm75.cubin");
  const uint8_t* elf = fatbin.data() + 16 + 0x40;  // first entry: 64-byte ELF entry header
  ASSERT_EQ(classify(elf), ImageKind::kElf);
  auto bytes = imageBytes(elf);
  ASSERT_TRUE(bytes);
  EXPECT_EQ(bytes->size(), cubin.size());
}

TEST(ImageBytes, ElfWithImplausibleTablesIsRefused) {
  auto cubin = readImage("sm75.cubin");
  const uint64_t far = uint64_t{8} << 30;  // e_shoff beyond 4 GiB
  std::memcpy(cubin.data() + 0x28, &far, sizeof(far));
  std::string error;
  EXPECT_FALSE(imageBytes(cubin.data(), &error));
  EXPECT_FALSE(error.empty());
  EXPECT_FALSE(elfExtent(cubin, &error));
}

TEST(ImageBytes, PtxIncludesTerminator) {
  const std::string ptx = testing::readImageText("default.ptx");
  auto bytes = imageBytes(ptx.c_str());
  ASSERT_TRUE(bytes);
  EXPECT_EQ(bytes->size(), ptx.size() + 1);
  EXPECT_EQ(bytes->back(), 0);
}

TEST(ImageBytes, UnknownIsAnError) {
  std::string error;
  EXPECT_FALSE(imageBytes("not an image", &error));
  EXPECT_FALSE(error.empty());
  EXPECT_FALSE(imageBytes(nullptr, &error));
}

}  // namespace
}  // namespace gpupool::image
