// The emu's texture sampling and surface addressing math (texture_sampling.cc): address modes,
// point and linear filtering with the hardware's 8-bit fractional weights, normalized reads,
// integer coordinates on linear memory, and the surface boundary modes.
#include "server/backends/emu/ptx/texture_sampling.h"

#include <cuda.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace gpupool::ptx {
namespace {

TextureView floatArray1D(const std::vector<float>& v) {
  TextureView t;
  t.format = CU_AD_FORMAT_FLOAT;
  t.channels = 1;
  t.width = v.size();
  t.rowPitch = t.slicePitch = t.bytes = v.size() * sizeof(float);
  return t;
}

float sample1D(const TextureView& t, const std::vector<float>& v, float x) {
  const float coords[3] = {x, 0, 0};
  const int32_t none[3] = {0, 0, 0};
  uint32_t out[4];
  sampleTexture(t, reinterpret_cast<const uint8_t*>(v.data()), coords, none, false, 0, out);
  float f;
  std::memcpy(&f, &out[0], 4);
  return f;
}

TEST(TextureSampling, AddressModesOnNormalizedCoordinates) {
  std::vector<float> v = {10, 11, 12, 13};
  TextureView t = floatArray1D(v);
  t.normalizedCoords = true;
  t.borderColor[0] = -1;
  auto at = [](int texel) { return (texel + 0.5f) / 4; };
  t.addressMode[0] = CU_TR_ADDRESS_MODE_WRAP;
  EXPECT_EQ(sample1D(t, v, at(-1)), 13);
  EXPECT_EQ(sample1D(t, v, at(5)), 11);
  t.addressMode[0] = CU_TR_ADDRESS_MODE_MIRROR;
  EXPECT_EQ(sample1D(t, v, at(-1)), 10);
  EXPECT_EQ(sample1D(t, v, at(4)), 13);
  EXPECT_EQ(sample1D(t, v, at(6)), 11);
  t.addressMode[0] = CU_TR_ADDRESS_MODE_CLAMP;
  EXPECT_EQ(sample1D(t, v, at(-3)), 10);
  EXPECT_EQ(sample1D(t, v, at(9)), 13);
  t.addressMode[0] = CU_TR_ADDRESS_MODE_BORDER;
  EXPECT_EQ(sample1D(t, v, at(-1)), -1);
  EXPECT_EQ(sample1D(t, v, at(2)), 12);
}

TEST(TextureSampling, WrapNeedsNormalizedCoordinatesElseClamps) {
  std::vector<float> v = {1, 2, 3};
  TextureView t = floatArray1D(v);
  t.addressMode[0] = CU_TR_ADDRESS_MODE_WRAP;
  EXPECT_EQ(sample1D(t, v, 4.5f), 3);
  EXPECT_EQ(sample1D(t, v, -0.5f), 1);
}

TEST(TextureSampling, LinearFilterUsesEightBitWeights) {
  std::vector<float> v = {0, 256, 512};
  TextureView t = floatArray1D(v);
  t.filterMode = CU_TR_FILTER_MODE_LINEAR;
  EXPECT_EQ(sample1D(t, v, 0.75f), 64);  // weight 0.25
  EXPECT_EQ(sample1D(t, v, 1.5f), 256);  // on a texel centre
  EXPECT_EQ(sample1D(t, v, 1.0f), 128);  // halfway
  // 0.1 of the way lies between 25/256 and 26/256: the weight rounds to 26/256.
  EXPECT_EQ(sample1D(t, v, 0.6f), 26);
  EXPECT_EQ(sample1D(t, v, -4.0f), 0);  // clamped on both sides
}

TEST(TextureSampling, NormalizedReadsOfIntegers) {
  const uint8_t u[4] = {0, 51, 255, 128};
  TextureView t;
  t.format = CU_AD_FORMAT_UNSIGNED_INT8;
  t.channels = 4;
  t.width = 1;
  t.rowPitch = t.slicePitch = t.bytes = 4;
  const float coords[3] = {0.5f, 0, 0};
  const int32_t none[3] = {0, 0, 0};
  uint32_t out[4];
  sampleTexture(t, u, coords, none, false, 0, out);
  float f[4];
  std::memcpy(f, out, sizeof f);
  EXPECT_FLOAT_EQ(f[0], 0);
  EXPECT_FLOAT_EQ(f[1], 0.2f);
  EXPECT_FLOAT_EQ(f[2], 1);
  t.readAsInteger = true;
  sampleTexture(t, u, coords, none, false, 0, out);
  EXPECT_EQ(out[1], 51u);
  EXPECT_EQ(out[3], 128u);

  const int8_t s[2] = {-128, 127};
  t.format = CU_AD_FORMAT_SIGNED_INT8;
  t.channels = 2;
  t.readAsInteger = false;
  t.rowPitch = t.slicePitch = t.bytes = 2;
  sampleTexture(t, reinterpret_cast<const uint8_t*>(s), coords, none, false, 0, out);
  std::memcpy(f, out, sizeof f);
  EXPECT_FLOAT_EQ(f[0], -1);
  EXPECT_FLOAT_EQ(f[1], 1);
  EXPECT_FLOAT_EQ(f[3], 1);  // a missing alpha reads 1
}

TEST(TextureSampling, IntegerFetchOfLinearMemoryReadsZerosOutOfRange) {
  std::vector<float> v = {5, 6};
  TextureView t = floatArray1D(v);
  t.resource = TextureResource::kLinear;
  const float none[3] = {0, 0, 0};
  for (int32_t i : {-1, 0, 1, 2}) {
    const int32_t at[3] = {i, 0, 0};
    uint32_t out[4];
    sampleTexture(t, reinterpret_cast<const uint8_t*>(v.data()), none, at, true, 0, out);
    float f;
    std::memcpy(&f, &out[0], 4);
    EXPECT_EQ(f, i == 0 ? 5 : i == 1 ? 6 : 0) << i;
  }
}

// tld4: one channel of the bilinear footprint's four texels, in the order (i0, j1), (i1, j1),
// (i1, j0), (i0, j0); the address mode applies to each, the filter mode to none.
TEST(TextureSampling, GatherTakesOneChannelOfTheFootprint) {
  // 3x3 texels of two channels: channel 0 = 10 * row + column, channel 1 = its negative.
  std::vector<float> v;
  for (int row = 0; row < 3; ++row) {
    for (int column = 0; column < 3; ++column) {
      v.push_back(10.0f * row + column);
      v.push_back(-(10.0f * row + column));
    }
  }
  TextureView t;
  t.format = CU_AD_FORMAT_FLOAT;
  t.channels = 2;
  t.dims = 2;
  t.width = t.height = 3;
  t.rowPitch = 3 * 2 * sizeof(float);
  t.slicePitch = t.bytes = v.size() * sizeof(float);
  t.filterMode = CU_TR_FILTER_MODE_LINEAR;  // ignored by a gather
  auto gather = [&](float x, float y, unsigned channel) {
    const float coords[2] = {x, y};
    uint32_t out[4];
    gatherTexture(t, reinterpret_cast<const uint8_t*>(v.data()), coords, 0, channel, out);
    std::vector<float> f(4);
    std::memcpy(f.data(), out, sizeof out);
    return f;
  };
  // Between texels (0, 0) and (1, 1): i0 = j0 = 0.
  EXPECT_EQ(gather(1.0f, 1.0f, 0), (std::vector<float>{10, 11, 1, 0}));
  // x = 1.2, y = 1.9: i0 = 0, j0 = 1.
  EXPECT_EQ(gather(1.2f, 1.9f, 1), (std::vector<float>{-20, -21, -11, -10}));
  // Lower right corner (x = 2.7, y = 2.7): i0 = j0 = 2, and the upper ones clamp to 2.
  EXPECT_EQ(gather(2.7f, 2.7f, 0), (std::vector<float>{22, 22, 22, 22}));
  // Border: texels outside read the border colour's channel.
  t.addressMode[0] = t.addressMode[1] = CU_TR_ADDRESS_MODE_BORDER;
  t.borderColor[0] = -5;
  EXPECT_EQ(gather(0.2f, 0.2f, 0), (std::vector<float>{-5, 0, -5, -5}));  // i0 = j0 = -1
  // A channel the format lacks: alpha reads 1.
  EXPECT_EQ(gather(1.0f, 1.0f, 3), (std::vector<float>{1, 1, 1, 1}));
}

// The cubemap table: the major axis picks the face, the other two give its coordinates.
TEST(TextureSampling, CubemapDirectionsPickFacesAsTheTableSays) {
  struct Case {
    float d[3];
    unsigned face;
    float u, v;
  } cases[] = {
      {{2, 0, 0}, 0, 0.5f, 0.5f},
      {{-2, 0, 0}, 1, 0.5f, 0.5f},
      {{0, 3, 0}, 2, 0.5f, 0.5f},
      {{0, -3, 0}, 3, 0.5f, 0.5f},
      {{0, 0, 4}, 4, 0.5f, 0.5f},
      {{0, 0, -4}, 5, 0.5f, 0.5f},
      // +x: s = -z, t = -y; -y: s = x, t = -z; -z: s = -x, t = -y.
      {{1, 0.5f, -0.5f}, 0, 0.75f, 0.25f},
      {{0.5f, -1, 0.5f}, 3, 0.75f, 0.25f},
      {{0.5f, -0.5f, -1}, 5, 0.25f, 0.75f},
      // No direction at all: the first face's centre, not NaN.
      {{0, 0, 0}, 0, 0.5f, 0.5f},
  };
  for (const Case& c : cases) {
    unsigned face = 9;
    float u = -1, v = -1;
    cubemapFace(c.d, &face, &u, &v);
    EXPECT_EQ(face, c.face) << c.d[0] << "," << c.d[1] << "," << c.d[2];
    EXPECT_FLOAT_EQ(u, c.u) << c.d[0] << "," << c.d[1] << "," << c.d[2];
    EXPECT_FLOAT_EQ(v, c.v) << c.d[0] << "," << c.d[1] << "," << c.d[2];
  }
}

// A layered cubemap clamps the cube index into its cubes, then samples that cube's face.
TEST(TextureSampling, LayeredCubemapClampsTheCube) {
  // Two cubes of 1x1 faces: layer l holds l.
  std::vector<float> texels(12);
  for (int i = 0; i < 12; ++i) texels[i] = static_cast<float>(i);
  TextureView t;
  t.format = CU_AD_FORMAT_FLOAT;
  t.channels = 1;
  t.width = t.height = 1;
  t.dims = 2;
  t.layered = t.cubemap = t.cubemapLayered = true;
  t.layers = 12;
  t.rowPitch = sizeof(float);
  t.slicePitch = sizeof(float);
  t.bytes = sizeof(float) * 12;
  auto read = [&](float x, float y, float z, int32_t cube) {
    const float d[3] = {x, y, z};
    uint32_t out[4];
    sampleCubemap(t, reinterpret_cast<const uint8_t*>(texels.data()), d, cube, LevelOfDetail{},
                  out);
    float f;
    std::memcpy(&f, &out[0], 4);
    return f;
  };
  EXPECT_EQ(read(0, 0, -1, 0), 5.0f);
  EXPECT_EQ(read(0, 1, 0, 1), 8.0f);
  EXPECT_EQ(read(-1, 0, 0, 7), 7.0f);   // cube 7 of 2: the last
  EXPECT_EQ(read(-1, 0, 0, -3), 1.0f);  // below the first: the first
}

// A mipmapped 2D float texture of 8x8 down to 1x1, each level holding (level + 1) * 10.
struct Mipmapped {
  std::vector<float> texels;
  TextureView t;
  Mipmapped() {
    t.format = CU_AD_FORMAT_FLOAT;
    t.channels = 1;
    t.dims = 2;
    t.width = t.height = 8;
    t.normalizedCoords = true;
    t.levels = 4;
    uint64_t offset = 0;
    for (unsigned l = 0; l < 4; ++l) {
      const uint64_t w = 8 >> l;
      t.level[l] = {offset, w, w, 1, w * sizeof(float), w * w * sizeof(float)};
      for (uint64_t i = 0; i < w * w; ++i) texels.push_back(10.0f * (l + 1));
      offset += w * w * sizeof(float);
    }
    t.rowPitch = t.level[0].rowPitch;
    t.slicePitch = t.level[0].slicePitch;
    t.bytes = offset;
    t.maxMipmapLevelClamp = 3;
  }
  float read(const LevelOfDetail& lod) const {
    const float coords[3] = {0.4f, 0.6f, 0};
    uint32_t out[4];
    sampleTextureLevels(t, reinterpret_cast<const uint8_t*>(texels.data()), coords, 0, lod, out);
    float f;
    std::memcpy(&f, &out[0], 4);
    return f;
  }
};

LevelOfDetail atLevel(float level) {
  LevelOfDetail lod;
  lod.kind = LevelOfDetail::Kind::kLevel;
  lod.level = level;
  return lod;
}

TEST(TextureSampling, MipmapLevelsNearestAndBlended) {
  Mipmapped m;
  EXPECT_EQ(m.read(LevelOfDetail{}), 10.0f);  // no level given: the most detailed
  EXPECT_EQ(m.read(atLevel(1.4f)), 20.0f);
  EXPECT_EQ(m.read(atLevel(1.6f)), 30.0f);
  EXPECT_EQ(m.read(atLevel(9)), 40.0f);   // clamped to the last level
  EXPECT_EQ(m.read(atLevel(-3)), 10.0f);  // and to the first
  m.t.mipmapFilterMode = CU_TR_FILTER_MODE_LINEAR;
  EXPECT_EQ(m.read(atLevel(1.25f)), 22.5f);
  EXPECT_EQ(m.read(atLevel(2.5f)), 35.0f);
  EXPECT_EQ(m.read(atLevel(3)), 40.0f);
}

TEST(TextureSampling, MipmapBiasAndClamps) {
  Mipmapped m;
  m.t.mipmapLevelBias = 1;
  EXPECT_EQ(m.read(atLevel(0)), 20.0f);
  EXPECT_EQ(m.read(LevelOfDetail{}), 20.0f);
  m.t.mipmapLevelBias = 0;
  m.t.minMipmapLevelClamp = 2;
  EXPECT_EQ(m.read(atLevel(0)), 30.0f);
  m.t.minMipmapLevelClamp = 0;
  m.t.maxMipmapLevelClamp = 0;  // a zeroed descriptor's: level 0 only
  EXPECT_EQ(m.read(atLevel(3)), 10.0f);
}

TEST(TextureSampling, MipmapLevelFromGradients) {
  Mipmapped m;
  auto gradients = [](float dx0, float dx1, float dy0, float dy1) {
    LevelOfDetail lod;
    lod.kind = LevelOfDetail::Kind::kGradients;
    lod.dPdx[0] = dx0;
    lod.dPdx[1] = dx1;
    lod.dPdy[0] = dy0;
    lod.dPdy[1] = dy1;
    return lod;
  };
  const float texel = 1.0f / 8;
  EXPECT_EQ(m.read(gradients(texel, 0, 0, texel)), 10.0f);      // one texel a step: level 0
  EXPECT_EQ(m.read(gradients(2 * texel, 0, 0, texel)), 20.0f);  // the longer vector decides
  EXPECT_EQ(m.read(gradients(0, 0, 0, 4 * texel)), 30.0f);
  EXPECT_EQ(m.read(gradients(0, 0, 0, 0)), 10.0f);  // no footprint: the most detailed level
}

TEST(TextureSampling, SurfaceBoundaryModes) {
  TextureView t;
  t.surface = true;
  t.format = CU_AD_FORMAT_FLOAT;
  t.dims = 2;
  t.width = 4;
  t.height = 3;
  t.rowPitch = 16;
  t.slicePitch = t.bytes = 48;
  uint64_t offset = 0;
  EXPECT_EQ(surfaceOffset(t, 8, 2, 0, 4, SurfaceBoundary::kTrap, &offset), SurfaceAccess::kInside);
  EXPECT_EQ(offset, 40u);
  EXPECT_EQ(surfaceOffset(t, 16, 0, 0, 4, SurfaceBoundary::kTrap, &offset),
            SurfaceAccess::kOutsideTrap);
  EXPECT_EQ(surfaceOffset(t, 14, 0, 0, 4, SurfaceBoundary::kZero, &offset),
            SurfaceAccess::kOutsideZero);
  EXPECT_EQ(surfaceOffset(t, 100, -3, 0, 4, SurfaceBoundary::kClamp, &offset),
            SurfaceAccess::kInside);
  EXPECT_EQ(offset, 12u);
}

}  // namespace
}  // namespace gpupool::ptx
