#include "gpupool/image/ptx_selection.h"

#include <gtest/gtest.h>

#include "test_images.h"

namespace gpupool::image {
namespace {

using testing::readImage;

Fatbin parseOrFail(const std::vector<uint8_t>& bytes) {
  std::string error;
  auto fatbin = Fatbin::parse(bytes, &error);
  EXPECT_TRUE(fatbin) << error;
  return fatbin ? *fatbin : Fatbin{};
}
// Entries point into the parsed bytes, so they must outlive the Fatbin.
Fatbin parseOrFail(std::vector<uint8_t>&&) = delete;

TEST(SelectPtx, HighestArchNotAboveDevice) {
  const auto bytes = readImage("multi.fatbin");  // compute_75, compute_86, sm_90
  const Fatbin fatbin = parseOrFail(bytes);
  const std::pair<int, uint32_t> cases[] = {{75, 75}, {80, 75}, {86, 86},
                                            {89, 86}, {90, 86}, {120, 86}};
  for (const auto& [capability, expected] : cases) {
    const PtxSelection selection = selectPtx(fatbin, capability);
    ASSERT_EQ(selection.status, CUDA_SUCCESS) << capability << ": " << selection.message;
    ASSERT_NE(selection.entry, nullptr);
    EXPECT_TRUE(selection.entry->isPtx());
    EXPECT_EQ(selection.entry->arch, expected) << capability;
  }
}

TEST(SelectPtx, OnlyNewerPtxIsNoBinary) {
  const auto multiBytes = readImage("multi.fatbin");
  const Fatbin multi = parseOrFail(multiBytes);
  const PtxSelection old = selectPtx(multi, 70);
  EXPECT_EQ(old.status, CUDA_ERROR_NO_BINARY_FOR_GPU);
  EXPECT_EQ(old.entry, nullptr);
  EXPECT_NE(old.message.find("compute_75"), std::string::npos) << old.message;
  EXPECT_NE(old.message.find("sm_90"), std::string::npos) << old.message;

  const auto ptx90Bytes = readImage("ptx90_only.fatbin");
  const Fatbin ptx90 = parseOrFail(ptx90Bytes);
  const PtxSelection ampere = selectPtx(ptx90, 80);
  EXPECT_EQ(ampere.status, CUDA_ERROR_NO_BINARY_FOR_GPU);
  EXPECT_NE(ampere.message.find("compute_90"), std::string::npos) << ampere.message;
  EXPECT_EQ(selectPtx(ptx90, 90).status, CUDA_SUCCESS);
}

TEST(SelectPtx, SassOnlyIsNoBinary) {
  const auto fatbinBytes = readImage("sass90_only.fatbin");
  const Fatbin fatbin = parseOrFail(fatbinBytes);
  for (int capability : {75, 90, 100}) {
    const PtxSelection selection = selectPtx(fatbin, capability);
    EXPECT_EQ(selection.status, CUDA_ERROR_NO_BINARY_FOR_GPU);
    EXPECT_NE(selection.message.find("sm_90"), std::string::npos) << selection.message;
  }
}

TEST(PtxForDevice, EveryImageKind) {
  const auto expected = testing::normalizePtx(testing::readImageText("default.ptx"));

  const auto fatbin = readImage("default.fatbin");
  const PtxText fromFatbin = ptxForDevice(fatbin, 80);
  ASSERT_EQ(fromFatbin.status, CUDA_SUCCESS) << fromFatbin.message;
  EXPECT_EQ(fromFatbin.arch, 75u);
  EXPECT_EQ(testing::normalizePtx(fromFatbin.ptx), expected);

  std::string ptx = testing::readImageText("default.ptx");
  std::vector<uint8_t> shipped(ptx.begin(), ptx.end());
  shipped.push_back(0);
  const PtxText fromPtx = ptxForDevice(shipped, 80);
  ASSERT_EQ(fromPtx.status, CUDA_SUCCESS) << fromPtx.message;
  EXPECT_EQ(fromPtx.ptx, ptx);
  shipped.pop_back();
  EXPECT_EQ(ptxForDevice(shipped, 80).status, CUDA_ERROR_INVALID_PTX);

  EXPECT_EQ(ptxForDevice(readImage("sm75.cubin"), 75).status, CUDA_ERROR_NO_BINARY_FOR_GPU);
  EXPECT_EQ(ptxForDevice(readImage("sass90_only.fatbin"), 90).status, CUDA_ERROR_NO_BINARY_FOR_GPU);

  const uint8_t garbage[] = {'g', 'a', 'r', 'b', 'a', 'g', 'e', 0};
  const PtxText bad = ptxForDevice(garbage, 80);
  EXPECT_EQ(bad.status, CUDA_ERROR_INVALID_IMAGE);
  EXPECT_FALSE(bad.message.empty());

  auto truncated = fatbin;
  truncated.resize(truncated.size() / 2);
  EXPECT_EQ(ptxForDevice(truncated, 80).status, CUDA_ERROR_INVALID_IMAGE);
}

}  // namespace
}  // namespace gpupool::image
