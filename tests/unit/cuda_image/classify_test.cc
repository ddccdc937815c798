#include <gtest/gtest.h>

#include <cstring>

#include "gpupool/image/image_kind.h"
#include "test_images.h"

namespace gpupool::image {
namespace {

using testing::readImage;

std::span<const uint8_t> asBytes(const std::string& text) {
  return {reinterpret_cast<const uint8_t*>(text.data()), text.size()};
}

TEST(Classify, NvccOutputs) {
  for (const char* name : {"default.fatbin", "no_compress.fatbin", "lz4.fatbin", "multi.fatbin"}) {
    const auto bytes = readImage(name);
    EXPECT_EQ(classify(bytes.data()), ImageKind::kFatbin) << name;
    EXPECT_EQ(classify(std::span<const uint8_t>(bytes)), ImageKind::kFatbin) << name;
  }
  const auto cubin = readImage("sm75.cubin");
  EXPECT_EQ(classify(cubin.data()), ImageKind::kElf);
  EXPECT_EQ(classify(std::span<const uint8_t>(cubin)), ImageKind::kElf);

  // nvcc -ptx output starts with "//" comment lines before .version.
  const std::string ptx = testing::readImageText("default.ptx");
  ASSERT_TRUE(ptx.starts_with("//"));
  EXPECT_EQ(classify(ptx.c_str()), ImageKind::kPtx);
  EXPECT_EQ(classify(asBytes(ptx)), ImageKind::kPtx);
}

TEST(Classify, WrapperMagicWithBothVersions) {
  const auto fatbin = readImage("default.fatbin");
  for (uint32_t version : {1u, 2u}) {
    struct {
      uint32_t magic;
      uint32_t version;
      const void* data;
      const void* extra;
    } wrapper{kFatbinWrapperMagic, version, fatbin.data(), nullptr};
    EXPECT_EQ(classify(&wrapper), ImageKind::kFatbinWrapper) << version;
  }
}

TEST(Classify, PtxPreambles) {
  EXPECT_EQ(classify(".version 8.0\n.target sm_80\n"), ImageKind::kPtx);
  EXPECT_EQ(classify("  \n\t.version 9.0"), ImageKind::kPtx);
  EXPECT_EQ(classify("// generated\n//\n.version 9.0\n"), ImageKind::kPtx);
  EXPECT_EQ(classify("/* block\n comment */ .version 9.0\n"), ImageKind::kPtx);
  // Fatbin-embedded PTX keeps the newlines of stripped comments.
  EXPECT_EQ(classify("\n\n\n\n.version 9.0\n"), ImageKind::kPtx);
}

TEST(Classify, NotImages) {
  EXPECT_EQ(classify(static_cast<const void*>(nullptr)), ImageKind::kUnknown);
  EXPECT_EQ(classify(""), ImageKind::kUnknown);
  EXPECT_EQ(classify("ab"), ImageKind::kUnknown);
  EXPECT_EQ(classify("hello world"), ImageKind::kUnknown);
  EXPECT_EQ(classify(".target sm_80\n.version 9.0"), ImageKind::kUnknown);
  EXPECT_EQ(classify("// only a comment"), ImageKind::kUnknown);
  EXPECT_EQ(classify("/* unterminated .version 9.0"), ImageKind::kUnknown);
  EXPECT_EQ(classify(".vers"), ImageKind::kUnknown);
  const uint8_t garbage[] = {0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 0};
  EXPECT_EQ(classify(garbage), ImageKind::kUnknown);
  EXPECT_EQ(classify(std::span<const uint8_t>(garbage)), ImageKind::kUnknown);
  EXPECT_EQ(classify(std::span<const uint8_t>()), ImageKind::kUnknown);
  // A magic needs all four bytes inside the span.
  const auto fatbin = readImage("default.fatbin");
  EXPECT_EQ(classify(std::span<const uint8_t>(fatbin).first(3)), ImageKind::kUnknown);
}

TEST(Classify, SpanPtxNeedsNoTerminator) {
  const std::string text = "\n.version 9.0\n.target sm_75";
  EXPECT_EQ(classify(asBytes(text)), ImageKind::kPtx);
  // Cut inside the directive: not PTX.
  EXPECT_EQ(classify(asBytes(text).first(5)), ImageKind::kUnknown);
}

TEST(Classify, KindNames) {
  EXPECT_STREQ(toString(ImageKind::kFatbin), "fatbin");
  EXPECT_STREQ(toString(ImageKind::kPtx), "PTX");
  EXPECT_STREQ(toString(ImageKind::kUnknown), "unknown");
}

}  // namespace
}  // namespace gpupool::image
