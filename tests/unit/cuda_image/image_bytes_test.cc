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
    auto bytes = imageBytes(file.data());
    ASSERT_TRUE(bytes) << name << ": " << bytes.status().message;
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
    auto bytes = imageBytes(&wrapper);
    ASSERT_TRUE(bytes) << bytes.status().message;
    EXPECT_EQ(bytes->data(), padded.data());
    EXPECT_EQ(bytes->size(), file.size());
  }
}

TEST(ImageBytes, WrapperErrors) {
  const auto file = readImage("default.fatbin");
  const uint8_t notFatbin[16] = {1, 2, 3, 4};
  const Wrapper badTarget{kFatbinWrapperMagic, 1, notFatbin, nullptr};
  std::string error = testing::failureOf(imageBytes(&badTarget));
  EXPECT_NE(error.find("magic"), std::string::npos) << error;
  const Wrapper nullTarget{kFatbinWrapperMagic, 1, nullptr, nullptr};
  EXPECT_EQ(imageBytes(&nullTarget).status().code, CUDA_ERROR_INVALID_IMAGE);
  const Wrapper badVersion{kFatbinWrapperMagic, 7, file.data(), nullptr};
  error = testing::failureOf(imageBytes(&badVersion));
  EXPECT_NE(error.find("version"), std::string::npos) << error;
}

TEST(ImageBytes, FatbinLargerThanFourGibIsRefused) {
  std::vector<uint8_t> header = readImage("default.fatbin");
  const uint64_t huge = uint64_t{5} << 30;
  std::memcpy(header.data() + 8, &huge, sizeof(huge));
  testing::failureOf(imageBytes(header.data()));
}

TEST(ImageBytes, ElfExtentIgnoresTrailingBytes) {
  const auto cubin = readImage("sm75.cubin");
  std::vector<uint8_t> padded = cubin;
  padded.resize(cubin.size() + 4096, 0xab);
  auto bytes = imageBytes(padded.data());
  ASSERT_TRUE(bytes) << bytes.status().message;
  EXPECT_EQ(bytes->size(), cubin.size());
  const std::vector<uint8_t>* images[] = {&padded, &cubin};
  for (const auto* image : images) {
    auto extent = elfExtent(*image);
    ASSERT_TRUE(extent) << extent.status().message;
    EXPECT_EQ(*extent, cubin.size());
  }
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
  testing::failureOf(imageBytes(cubin.data()));
  testing::failureOf(elfExtent(cubin));
}

TEST(ImageBytes, PtxIncludesTerminator) {
  const std::string ptx = testing::readImageText("default.ptx");
  auto bytes = imageBytes(ptx.c_str());
  ASSERT_TRUE(bytes);
  EXPECT_EQ(bytes->size(), ptx.size() + 1);
  EXPECT_EQ(bytes->back(), 0);
}

TEST(ImageBytes, UnknownIsAnError) {
  testing::failureOf(imageBytes("not an image"));
  EXPECT_EQ(imageBytes(nullptr).status().code, CUDA_ERROR_INVALID_IMAGE);
}

}  // namespace
}  // namespace gpupool::image
