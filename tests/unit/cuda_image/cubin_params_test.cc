#include "gpupool/image/cubin_params.h"

#include <gtest/gtest.h>

#include <cstring>

#include "gpupool/image/fatbin.h"
#include "test_images.h"

namespace gpupool::image {
namespace {

using testing::readImage;

const KernelParamLayout* findKernel(const std::vector<KernelParamLayout>& layouts,
                                    const std::string& name) {
  for (const auto& layout : layouts) {
    if (layout.name == name) return &layout;
  }
  return nullptr;
}

// Checks the layouts nvcc gives the kernels of kernels.cu, whatever the SM.
void expectKernelsCuLayouts(const std::vector<uint8_t>& cubin, const std::string& label) {
  auto layouts = readKernelParams(cubin);
  ASSERT_TRUE(layouts) << label << ": " << layouts.status().message;
  EXPECT_EQ(layouts->size(), 3u) << label;

  const KernelParamLayout* vecAdd = findKernel(*layouts, testing::kVecAdd);
  ASSERT_NE(vecAdd, nullptr) << label;
  ASSERT_EQ(vecAdd->params.size(), 5u) << label;
  const uint16_t offsets[] = {0, 8, 16, 24, 32};
  const uint32_t sizes[] = {8, 8, 8, 4, 8};
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(vecAdd->params[i].ordinal, i) << label;
    EXPECT_EQ(vecAdd->params[i].offset, offsets[i]) << label << " param " << i;
    EXPECT_EQ(vecAdd->params[i].size, sizes[i]) << label << " param " << i;
  }
  EXPECT_EQ(vecAdd->paramBytes, 40u) << label;
  EXPECT_TRUE(vecAdd->cbankOffset.has_value()) << label;

  const KernelParamLayout* structParam = findKernel(*layouts, testing::kStructParam);
  ASSERT_NE(structParam, nullptr) << label;
  ASSERT_EQ(structParam->params.size(), 2u);
  EXPECT_EQ(structParam->params[0].offset, 0u);
  EXPECT_EQ(structParam->params[0].size, 100u);
  EXPECT_EQ(structParam->params[1].offset, 104u);
  EXPECT_EQ(structParam->params[1].size, 8u);
  EXPECT_EQ(structParam->paramBytes, 112u);

  const KernelParamLayout* noParams = findKernel(*layouts, testing::kNoParams);
  ASSERT_NE(noParams, nullptr) << label;
  EXPECT_TRUE(noParams->params.empty());
}

TEST(CubinParams, NvccCubin) { expectKernelsCuLayouts(readImage("sm75.cubin"), "sm75.cubin"); }

TEST(CubinParams, FatbinElfEntries) {
  for (const char* name : {"default.fatbin", "compress_all.fatbin", "sass90_only.fatbin"}) {
    const auto bytes = readImage(name);
    auto fatbin = Fatbin::parse(bytes);
    ASSERT_TRUE(fatbin) << fatbin.status().message;
    int elfEntries = 0;
    for (const auto& entry : fatbin->entries()) {
      if (!entry.isElf()) continue;
      ++elfEntries;
      auto cubin = fatbin->payload(entry);
      ASSERT_TRUE(cubin) << cubin.status().message;
      expectKernelsCuLayouts(*cubin, std::string(name) + " " + entry.archName());
    }
    EXPECT_EQ(elfEntries, 1) << name;
  }
}

TEST(CubinParams, NotElfIsAnError) {
  EXPECT_EQ(readKernelParams(readImage("default.fatbin")).status().code, CUDA_ERROR_INVALID_IMAGE);
}

// Finds `needle` (a KPARAM_INFO record header) in the cubin and returns its offset.
size_t findBytes(const std::vector<uint8_t>& haystack, std::initializer_list<uint8_t> needle) {
  auto it = std::search(haystack.begin(), haystack.end(), needle.begin(), needle.end());
  return it == haystack.end() ? std::string::npos : static_cast<size_t>(it - haystack.begin());
}

TEST(CubinParams, MalformedRecordsAreErrors) {
  const auto cubin = readImage("sm75.cubin");
  const size_t record = findBytes(cubin, {0x04, kEiattrKparamInfo, 0x0c, 0x00});
  ASSERT_NE(record, std::string::npos);

  auto unknownFormat = cubin;
  unknownFormat[record] = 0x09;
  std::string error = testing::failureOf(readKernelParams(unknownFormat));
  EXPECT_NE(error.find("format"), std::string::npos) << error;

  auto overlong = cubin;
  overlong[record + 3] = 0x7f;  // record claims 0x7f0c bytes
  error = testing::failureOf(readKernelParams(overlong));
  EXPECT_NE(error.find("past"), std::string::npos) << error;

  auto duplicate = cubin;
  const uint16_t ordinal = 0x3ff;  // a gap in the ordinals
  std::memcpy(duplicate.data() + record + 8, &ordinal, sizeof(ordinal));
  error = testing::failureOf(readKernelParams(duplicate));
  EXPECT_NE(error.find("ordinal"), std::string::npos) << error;
}

}  // namespace
}  // namespace gpupool::image
