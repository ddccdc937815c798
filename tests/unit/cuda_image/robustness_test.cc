// Truncated and corrupted images must give errors, never crashes or reads outside the input.
// Each input is copied into a buffer of exactly its size so that the ASan build of these tests
// (cuda_image_tests_asan) flags any read past the end.
#include <gtest/gtest.h>

#include <random>

#include "gpupool/image/cubin_params.h"
#include "gpupool/image/fatbin.h"
#include "gpupool/image/image_kind.h"
#include "gpupool/image/ptx_selection.h"
#include "test_images.h"

namespace gpupool::image {
namespace {

using testing::readImage;

// Runs every reader over `bytes`; returns whether the fatbin parsed.
bool exerciseAll(const std::vector<uint8_t>& bytes) {
  const std::span<const uint8_t> span(bytes);
  (void)classify(span);
  (void)elfExtent(span);
  (void)readKernelParams(span);
  (void)ptxForDevice(span, 86);
  auto fatbin = Fatbin::parse(span);
  if (!fatbin) {
    EXPECT_FALSE(fatbin.status().message.empty());
    return false;
  }
  for (const auto& entry : fatbin->entries()) {
    auto payload = fatbin->payload(entry);
    if (payload && entry.isElf()) (void)readKernelParams(*payload);
    (void)entry.archName();
  }
  (void)selectPtx(*fatbin, 80);
  (void)fatbin->describeArchs();
  return true;
}

TEST(Robustness, EveryFatbinPrefixIsAnError) {
  for (const char* name : {"default.fatbin", "lz4.fatbin", "multi.fatbin"}) {
    const auto whole = readImage(name);
    ASSERT_FALSE(whole.empty());
    for (size_t length = 0; length < whole.size(); ++length) {
      const std::vector<uint8_t> prefix(whole.begin(), whole.begin() + length);
      const auto fatbin = Fatbin::parse(prefix);
      ASSERT_FALSE(fatbin) << name << " prefix " << length;
      ASSERT_FALSE(fatbin.status().message.empty());
      ASSERT_FALSE(ptxForDevice(prefix, 90)) << name << " prefix " << length;
      (void)classify(std::span<const uint8_t>(prefix));
    }
  }
}

TEST(Robustness, EveryCubinPrefixIsAnError) {
  const auto whole = readImage("sm75.cubin");
  ASSERT_FALSE(whole.empty());
  for (size_t length = 0; length < whole.size(); ++length) {
    const std::vector<uint8_t> prefix(whole.begin(), whole.begin() + length);
    const auto extent = elfExtent(prefix);
    ASSERT_FALSE(extent) << length;
    ASSERT_FALSE(extent.status().message.empty());
    ASSERT_FALSE(readKernelParams(prefix)) << length;
  }
}

TEST(Robustness, FatbinHeaderBitFlipsAreErrors) {
  const auto whole = readImage("default.fatbin");
  // Magic (bytes 0-3) and fatSize (bytes 8-15): any change makes the container inconsistent.
  for (size_t byte : {0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15}) {
    for (int bit = 0; bit < 8; ++bit) {
      auto flipped = whole;
      flipped[byte] ^= static_cast<uint8_t>(1u << bit);
      EXPECT_FALSE(Fatbin::parse(flipped)) << "byte " << byte << " bit " << bit;
    }
  }
}

TEST(Robustness, EveryHeaderBitFlipIsSurvived) {
  // Each bit of the fatbin header and of both entry headers, one at a time.
  const auto whole = readImage("default.fatbin");
  const auto original = Fatbin::parse(whole);
  ASSERT_TRUE(original);
  std::vector<size_t> headerBytes;
  for (size_t i = 0; i < 16; ++i) headerBytes.push_back(i);
  for (const auto& entry : original->entries()) {
    const size_t headerSize =
        static_cast<size_t>(entry.stored.data() - whole.data()) - entry.offset;
    for (size_t i = 0; i < headerSize; ++i) headerBytes.push_back(entry.offset + i);
  }
  int rejected = 0;
  for (size_t byte : headerBytes) {
    for (int bit = 0; bit < 8; ++bit) {
      auto flipped = whole;
      flipped[byte] ^= static_cast<uint8_t>(1u << bit);
      if (!exerciseAll(flipped)) ++rejected;
    }
  }
  // Sizes and magics are a good part of the headers; many flips must be caught.
  EXPECT_GT(rejected, 100);
}

TEST(Robustness, RandomBitFlipsAreSurvived) {
  std::mt19937 random(20240611);  // fixed seed: failures are reproducible
  for (const char* name : {"default.fatbin", "lz4.fatbin", "compress_all.fatbin", "sm75.cubin"}) {
    const auto whole = readImage(name);
    ASSERT_FALSE(whole.empty());
    std::uniform_int_distribution<size_t> position(0, whole.size() * 8 - 1);
    for (int round = 0; round < 1500; ++round) {
      auto flipped = whole;
      const int flips = 1 + round % 8;
      for (int i = 0; i < flips; ++i) {
        const size_t bit = position(random);
        flipped[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
      }
      exerciseAll(flipped);
    }
  }
}

TEST(Robustness, RandomBytesAreNotImages) {
  std::mt19937 random(7);
  for (size_t length = 0; length < 600; ++length) {
    std::vector<uint8_t> bytes(length);
    for (auto& b : bytes) b = static_cast<uint8_t>(random());
    EXPECT_FALSE(exerciseAll(bytes));
  }
}

}  // namespace
}  // namespace gpupool::image
