#include "gpupool/image/ptx_selection.h"

#include <gtest/gtest.h>

#include "test_images.h"

namespace gpupool::image {
namespace {

using testing::parseOrFail;
using testing::readImage;

TEST(SelectPtx, HighestArchNotAboveDevice) {
  const auto bytes = readImage("multi.fatbin");  // compute_75, compute_86, sm_90
  const Fatbin fatbin = parseOrFail(bytes);
  const std::pair<int, uint32_t> cases[] = {{75, 75}, {80, 75}, {86, 86},
                                            {89, 86}, {90, 86}, {120, 86}};
  for (const auto& [capability, expected] : cases) {
    const auto selection = selectPtx(fatbin, capability);
    ASSERT_EQ(selection.status().code, CUDA_SUCCESS)
        << capability << ": " << selection.status().message;
    ASSERT_NE(*selection, nullptr);
    EXPECT_TRUE((*selection)->isPtx());
    EXPECT_EQ((*selection)->arch, expected) << capability;
  }
}

TEST(SelectPtx, OnlyNewerPtxIsNoBinary) {
  const auto multiBytes = readImage("multi.fatbin");
  const Fatbin multi = parseOrFail(multiBytes);
  const auto old = selectPtx(multi, 70);
  EXPECT_EQ(old.status().code, CUDA_ERROR_NO_BINARY_FOR_GPU);
  EXPECT_NE(old.status().message.find("compute_75"), std::string::npos) << old.status().message;
  EXPECT_NE(old.status().message.find("sm_90"), std::string::npos) << old.status().message;

  const auto ptx90Bytes = readImage("ptx90_only.fatbin");
  const Fatbin ptx90 = parseOrFail(ptx90Bytes);
  const auto ampere = selectPtx(ptx90, 80);
  EXPECT_EQ(ampere.status().code, CUDA_ERROR_NO_BINARY_FOR_GPU);
  EXPECT_NE(ampere.status().message.find("compute_90"), std::string::npos)
      << ampere.status().message;
  EXPECT_EQ(selectPtx(ptx90, 90).status().code, CUDA_SUCCESS);
}

TEST(SelectPtx, SassOnlyIsNoBinary) {
  const auto fatbinBytes = readImage("sass90_only.fatbin");
  const Fatbin fatbin = parseOrFail(fatbinBytes);
  for (int capability : {75, 90, 100}) {
    const auto selection = selectPtx(fatbin, capability);
    EXPECT_EQ(selection.status().code, CUDA_ERROR_NO_BINARY_FOR_GPU);
    EXPECT_NE(selection.status().message.find("sm_90"), std::string::npos)
        << selection.status().message;
  }
}

TEST(PtxForDevice, EveryImageKind) {
  const auto expected = testing::normalizePtx(testing::readImageText("default.ptx"));

  const auto fatbin = readImage("default.fatbin");
  const auto fromFatbin = ptxForDevice(fatbin, 80);
  ASSERT_EQ(fromFatbin.status().code, CUDA_SUCCESS) << fromFatbin.status().message;
  EXPECT_EQ(fromFatbin->arch, 75u);
  EXPECT_EQ(testing::normalizePtx(fromFatbin->ptx), expected);

  std::string ptx = testing::readImageText("default.ptx");
  std::vector<uint8_t> shipped(ptx.begin(), ptx.end());
  shipped.push_back(0);
  const auto fromPtx = ptxForDevice(shipped, 80);
  ASSERT_EQ(fromPtx.status().code, CUDA_SUCCESS) << fromPtx.status().message;
  EXPECT_EQ(fromPtx->ptx, ptx);
  shipped.pop_back();
  EXPECT_EQ(ptxForDevice(shipped, 80).status().code, CUDA_ERROR_INVALID_PTX);

  EXPECT_EQ(ptxForDevice(readImage("sm75.cubin"), 75).status().code, CUDA_ERROR_NO_BINARY_FOR_GPU);
  EXPECT_EQ(ptxForDevice(readImage("sass90_only.fatbin"), 90).status().code,
            CUDA_ERROR_NO_BINARY_FOR_GPU);

  const uint8_t garbage[] = {'g', 'a', 'r', 'b', 'a', 'g', 'e', 0};
  const auto bad = ptxForDevice(garbage, 80);
  EXPECT_EQ(bad.status().code, CUDA_ERROR_INVALID_IMAGE);
  EXPECT_FALSE(bad.status().message.empty());

  auto truncated = fatbin;
  truncated.resize(truncated.size() / 2);
  EXPECT_EQ(ptxForDevice(truncated, 80).status().code, CUDA_ERROR_INVALID_IMAGE);
}

}  // namespace
}  // namespace gpupool::image
