// Texture sampling and surface addressing for the emu (texture_sampling.h).
#include "texture_sampling.h"

#include <cuda.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/texture_descriptor.h"
#include "half_float.h"

namespace gpupool::ptx {
namespace {

// One texel: four channels, as floats (a float-returning texture) or integers.
struct Texel {
  float f[4] = {0, 0, 0, 1};
  int64_t i[4] = {0, 0, 0, 1};
};

float srgbToLinear(float c) {
  return c <= 0.04045f ? c / 12.92f : std::pow((c + 0.055f) / 1.055f, 2.4f);
}

Texel readTexel(const TextureView& t, const uint8_t* p) {
  Texel texel;
  const bool toFloat = textureReturnsFloat(t);
  for (unsigned c = 0; c < t.channels && c < 4; ++c) {
    float f = 0;
    int64_t v = 0;
    switch (t.format) {
      case CU_AD_FORMAT_UNSIGNED_INT8:
        v = p[c];
        f = static_cast<float>(v) / 255.0f;
        if (t.srgb && c < 3) f = srgbToLinear(f);
        break;
      case CU_AD_FORMAT_SIGNED_INT8:
        v = static_cast<int8_t>(p[c]);
        f = std::max(static_cast<float>(v) / 127.0f, -1.0f);
        break;
      case CU_AD_FORMAT_UNSIGNED_INT16: {
        uint16_t x;
        std::memcpy(&x, p + 2 * c, 2);
        v = x;
        f = static_cast<float>(v) / 65535.0f;
        break;
      }
      case CU_AD_FORMAT_SIGNED_INT16: {
        int16_t x;
        std::memcpy(&x, p + 2 * c, 2);
        v = x;
        f = std::max(static_cast<float>(v) / 32767.0f, -1.0f);
        break;
      }
      case CU_AD_FORMAT_HALF: {
        uint16_t x;
        std::memcpy(&x, p + 2 * c, 2);
        f = halfToFloat(x);
        break;
      }
      case CU_AD_FORMAT_FLOAT:
        std::memcpy(&f, p + 4 * c, 4);
        break;
      case CU_AD_FORMAT_UNSIGNED_INT32: {
        uint32_t x;
        std::memcpy(&x, p + 4 * c, 4);
        v = x;
        break;
      }
      case CU_AD_FORMAT_SIGNED_INT32: {
        int32_t x;
        std::memcpy(&x, p + 4 * c, 4);
        v = x;
        break;
      }
      default:
        break;
    }
    if (toFloat) {
      texel.f[c] = f;
    } else {
      texel.i[c] = v;
    }
  }
  if (!toFloat) {
    for (unsigned c = t.channels; c < 4; ++c) texel.i[c] = c == 3 ? 1 : 0;
  }
  return texel;
}

Texel borderTexel(const TextureView& t) {
  Texel texel;
  for (int c = 0; c < 4; ++c) {
    texel.f[c] = t.borderColor[c];
    texel.i[c] = static_cast<int64_t>(t.borderColor[c]);
  }
  return texel;
}

// The texel index along one axis after the address mode; -1 for the border colour. Wrap and
// mirror need normalized coordinates; with unnormalized ones they clamp, as on the hardware.
int64_t addressIndex(int64_t i, int64_t n, unsigned mode, bool normalized) {
  if (!normalized && (mode == CU_TR_ADDRESS_MODE_WRAP || mode == CU_TR_ADDRESS_MODE_MIRROR)) {
    mode = CU_TR_ADDRESS_MODE_CLAMP;
  }
  switch (mode) {
    case CU_TR_ADDRESS_MODE_WRAP:
      return ((i % n) + n) % n;
    case CU_TR_ADDRESS_MODE_MIRROR: {
      int64_t m = ((i % (2 * n)) + 2 * n) % (2 * n);
      return m < n ? m : 2 * n - 1 - m;
    }
    case CU_TR_ADDRESS_MODE_BORDER:
      return i < 0 || i >= n ? -1 : i;
    default:
      return std::clamp<int64_t>(i, 0, n - 1);
  }
}

// Keeps floor() of a coordinate within int64_t (NaN samples texel 0).
double boundedCoordinate(double c) {
  if (std::isnan(c)) return 0;
  return std::clamp(c, -1e15, 1e15);
}

// The texel at resolved indices (any -1: the border colour) of layer `layerIndex`.
Texel texelAt(const TextureView& t, const uint8_t* data, const int64_t idx[3],
              uint64_t layerIndex) {
  for (unsigned d = 0; d < t.dims; ++d)
    if (idx[d] < 0) return borderTexel(t);
  const uint64_t eb = arrayChannelBytes(t.format) * t.channels;
  uint64_t z = t.layered ? layerIndex : static_cast<uint64_t>(t.dims > 2 ? idx[2] : 0);
  uint64_t y = static_cast<uint64_t>(t.dims > 1 ? idx[1] : 0);
  uint64_t off = z * t.slicePitch + y * t.rowPitch + static_cast<uint64_t>(idx[0]) * eb;
  if (off + eb > t.bytes) return Texel{};  // cannot happen for a view the backend checked
  return readTexel(t, data + off);
}

uint64_t layerOf(const TextureView& t, int32_t layer) {
  return t.layered ? static_cast<uint64_t>(std::clamp<int64_t>(layer, 0, t.layers - 1)) : 0;
}

}  // namespace

void cubemapFace(const float direction[3], unsigned* face, float* u, float* v) {
  const float x = direction[0], y = direction[1], z = direction[2];
  const float ax = std::fabs(x), ay = std::fabs(y), az = std::fabs(z);
  float m, s, t;
  if (ax >= ay && ax >= az) {
    m = ax;
    *face = x >= 0 ? 0 : 1;
    s = x >= 0 ? -z : z;
    t = -y;
  } else if (ay >= az) {
    m = ay;
    *face = y >= 0 ? 2 : 3;
    s = x;
    t = y >= 0 ? z : -z;
  } else {
    m = az;
    *face = z >= 0 ? 4 : 5;
    s = z >= 0 ? x : -x;
    t = -y;
  }
  if (m == 0) {  // no direction: the centre of the first face
    *u = *v = 0.5f;
    return;
  }
  *u = (s / m + 1) / 2;
  *v = (t / m + 1) / 2;
}

void sampleCubemap(const TextureView& t, const uint8_t* data, const float direction[3],
                   int32_t cubeLayer, const LevelOfDetail& lod, uint32_t out[4]) {
  unsigned face = 0;
  float uv[3] = {0, 0, 0};
  cubemapFace(direction, &face, &uv[0], &uv[1]);
  TextureView faces = t;
  faces.normalizedCoords = true;  // the face coordinates are normalized whatever the sampler says
  const int64_t cubes = static_cast<int64_t>(t.layers / 6);
  const int64_t cube = t.cubemapLayered ? std::clamp<int64_t>(cubeLayer, 0, cubes - 1) : 0;
  sampleTextureLevels(faces, data, uv, static_cast<int32_t>(cube * 6 + face), lod, out);
}

namespace {

// The view of level `l` of mipmapped view `t`, with `data` moved to the level's first texel.
TextureView levelView(const TextureView& t, unsigned l, const uint8_t** data) {
  TextureView v = t;
  const TextureView::Level& level = t.level[l];
  v.levels = 1;
  v.width = level.width;
  v.height = level.height;
  v.depth = level.depth;
  v.rowPitch = level.rowPitch;
  v.slicePitch = level.slicePitch;
  v.bytes = t.bytes - level.offset;
  *data += level.offset;
  return v;
}

// log2 of the longest of the derivative vectors measured in level 0's texels.
float gradientLevel(const TextureView& t, const LevelOfDetail& lod) {
  const double extent[3] = {static_cast<double>(t.width), static_cast<double>(t.height),
                            static_cast<double>(t.depth)};
  double longest = 0;
  for (const float* d : {lod.dPdx, lod.dPdy}) {
    double sum = 0;
    for (unsigned i = 0; i < t.dims; ++i) {
      double texels = t.normalizedCoords ? d[i] * extent[i] : d[i];
      sum += texels * texels;
    }
    longest = std::max(longest, std::sqrt(sum));
  }
  // No change across the footprint: the most detailed level, as a length of 0 asks.
  return longest > 0 ? static_cast<float>(std::log2(longest)) : -INFINITY;
}

}  // namespace

void sampleTextureLevels(const TextureView& t, const uint8_t* data, const float coords[3],
                         int32_t layer, const LevelOfDetail& lod, uint32_t out[4]) {
  const int32_t zero[3] = {0, 0, 0};
  if (t.levels <= 1) {
    sampleTexture(t, data, coords, zero, false, layer, out);
    return;
  }
  float lambda = lod.kind == LevelOfDetail::Kind::kLevel       ? lod.level
                 : lod.kind == LevelOfDetail::Kind::kGradients ? gradientLevel(t, lod)
                                                               : 0.0f;
  lambda += t.mipmapLevelBias;
  lambda = std::min(std::max(lambda, t.minMipmapLevelClamp), t.maxMipmapLevelClamp);
  lambda = std::clamp(lambda, 0.0f, static_cast<float>(t.levels - 1));
  // Unnormalized coordinates count level 0's texels: each level halves them.
  auto sampleLevel = [&](unsigned l, uint32_t result[4]) {
    const uint8_t* levelData = data;
    TextureView v = levelView(t, l, &levelData);
    float c[3] = {coords[0], coords[1], coords[2]};
    if (!t.normalizedCoords) {
      c[0] *= static_cast<float>(v.width) / static_cast<float>(t.width);
      c[1] *= static_cast<float>(v.height) / static_cast<float>(t.height);
      c[2] *= static_cast<float>(v.depth) / static_cast<float>(t.depth);
    }
    sampleTexture(v, levelData, c, zero, false, layer, result);
  };
  if (t.mipmapFilterMode != CU_TR_FILTER_MODE_LINEAR) {
    // The nearest level: d = ceil(lambda + 1/2) - 1, as OpenGL rounds halves down.
    sampleLevel(static_cast<unsigned>(std::ceil(lambda + 0.5f)) - 1, out);
    return;
  }
  const unsigned lower = static_cast<unsigned>(std::floor(lambda));
  const float fraction = lambda - static_cast<float>(lower);
  sampleLevel(lower, out);
  if (fraction == 0 || lower + 1 >= t.levels) return;
  uint32_t upper[4];
  sampleLevel(lower + 1, upper);
  for (unsigned k = 0; k < 4; ++k) {  // linear mipmap filtering applies to float results only
    float a, b;
    std::memcpy(&a, &out[k], 4);
    std::memcpy(&b, &upper[k], 4);
    float blended = a + (b - a) * fraction;
    std::memcpy(&out[k], &blended, 4);
  }
}

void gatherTexture(const TextureView& t, const uint8_t* data, const float coords[2], int32_t layer,
                   unsigned component, uint32_t out[4]) {
  const int64_t extent[2] = {static_cast<int64_t>(t.width), static_cast<int64_t>(t.height)};
  const uint64_t layerIndex = layerOf(t, layer);
  // The bilinear footprint: the texels around the sample point, as linear filtering takes them.
  int64_t lower[2], upper[2];
  for (unsigned d = 0; d < 2; ++d) {
    double c = coords[d];
    if (t.normalizedCoords) c *= static_cast<double>(extent[d]);
    const auto base = static_cast<int64_t>(std::floor(boundedCoordinate(c) - 0.5));
    lower[d] = addressIndex(base, extent[d], t.addressMode[d], t.normalizedCoords);
    upper[d] = addressIndex(base + 1, extent[d], t.addressMode[d], t.normalizedCoords);
  }
  const int64_t corners[4][3] = {{lower[0], upper[1], 0},
                                 {upper[0], upper[1], 0},
                                 {upper[0], lower[1], 0},
                                 {lower[0], lower[1], 0}};
  const bool isFloat = textureReturnsFloat(t);
  for (unsigned k = 0; k < 4; ++k) {
    const Texel texel = texelAt(t, data, corners[k], layerIndex);
    if (isFloat) {
      std::memcpy(&out[k], &texel.f[component], 4);
    } else {
      out[k] = static_cast<uint32_t>(texel.i[component]);
    }
  }
}

bool textureReturnsFloat(const TextureView& t) {
  return textureFormatReturnsFloat(t.format, t.readAsInteger ? CU_TRSF_READ_AS_INTEGER : 0);
}

unsigned textureElementBytes(const TextureView& t) {
  return arrayChannelBytes(t.format) * t.channels;
}

void sampleTexture(const TextureView& t, const uint8_t* data, const float coords[3],
                   const int32_t integerCoords[3], bool useIntegerCoords, int32_t layer,
                   uint32_t out[4]) {
  const int64_t extent[3] = {static_cast<int64_t>(t.width), static_cast<int64_t>(t.height),
                             static_cast<int64_t>(t.depth)};
  const uint64_t layerIndex = layerOf(t, layer);
  const bool isFloat = textureReturnsFloat(t);
  auto emit = [&](const Texel& texel) {
    for (int c = 0; c < 4; ++c) {
      if (isFloat) {
        std::memcpy(&out[c], &texel.f[c], 4);
      } else {
        out[c] = static_cast<uint32_t>(texel.i[c]);
      }
    }
  };
  if (useIntegerCoords) {
    int64_t idx[3] = {0, 0, 0};
    for (unsigned d = 0; d < t.dims; ++d) {
      idx[d] = integerCoords[d];
      if (t.resource != TextureResource::kArray) {
        if (idx[d] < 0 || idx[d] >= extent[d]) {  // tex1Dfetch out of range reads zeros
          emit(Texel{{0, 0, 0, 0}, {0, 0, 0, 0}});
          return;
        }
      } else {
        idx[d] = addressIndex(idx[d], extent[d], t.addressMode[d], false);
      }
    }
    emit(texelAt(t, data, idx, layerIndex));
    return;
  }
  double scaled[3] = {0, 0, 0};
  for (unsigned d = 0; d < t.dims; ++d) {
    double c = coords[d];
    if (t.normalizedCoords) c *= static_cast<double>(extent[d]);
    scaled[d] = boundedCoordinate(c);
  }
  if (t.filterMode != CU_TR_FILTER_MODE_LINEAR || !isFloat) {
    int64_t idx[3] = {0, 0, 0};
    for (unsigned d = 0; d < t.dims; ++d) {
      idx[d] = addressIndex(static_cast<int64_t>(std::floor(scaled[d])), extent[d],
                            t.addressMode[d], t.normalizedCoords);
    }
    emit(texelAt(t, data, idx, layerIndex));
    return;
  }
  // Linear: blend the 2^dims texels around the sample point, weights in 1/256 steps.
  int64_t base[3] = {0, 0, 0};
  float weight[3] = {0, 0, 0};
  for (unsigned d = 0; d < t.dims; ++d) {
    double xb = scaled[d] - 0.5;
    double fl = std::floor(xb);
    base[d] = static_cast<int64_t>(fl);
    weight[d] = static_cast<float>(std::nearbyint((xb - fl) * 256.0) / 256.0);
  }
  Texel result;
  for (int c = 0; c < 4; ++c) result.f[c] = 0;
  const unsigned corners = 1u << t.dims;
  for (unsigned k = 0; k < corners; ++k) {
    int64_t idx[3] = {0, 0, 0};
    float w = 1;
    for (unsigned d = 0; d < t.dims; ++d) {
      const bool upper = (k >> d) & 1;
      idx[d] =
          addressIndex(base[d] + (upper ? 1 : 0), extent[d], t.addressMode[d], t.normalizedCoords);
      w *= upper ? weight[d] : 1 - weight[d];
    }
    if (w == 0) continue;
    Texel texel = texelAt(t, data, idx, layerIndex);
    for (int c = 0; c < 4; ++c) result.f[c] += w * texel.f[c];
  }
  emit(result);
}

uint32_t queryTexture(const TextureView& t, TexQuery query, bool surface, bool atLevel,
                      int32_t level) {
  const auto clip = [](uint64_t v) { return static_cast<uint32_t>(std::min<uint64_t>(v, ~0u)); };
  // The ISA's address modes: {wrap, mirror, clamp_ogl, clamp_to_edge, clamp_to_border}.
  const auto addressMode = [](unsigned mode) -> uint32_t {
    switch (mode) {
      case CU_TR_ADDRESS_MODE_WRAP:
        return 0;
      case CU_TR_ADDRESS_MODE_MIRROR:
        return 1;
      case CU_TR_ADDRESS_MODE_BORDER:
        return 4;
      default:  // CU_TR_ADDRESS_MODE_CLAMP
        return 3;
    }
  };
  const bool dimension =
      query == TexQuery::kWidth || query == TexQuery::kHeight || query == TexQuery::kDepth;
  if (dimension && atLevel) {
    // A level the texture does not have has no extent.
    if (level < 0 || level >= static_cast<int32_t>(t.levels)) return 0;
    if (t.levels > 1) {
      const TextureView::Level& l = t.level[level];
      return clip(query == TexQuery::kWidth    ? l.width
                  : query == TexQuery::kHeight ? l.height
                                               : l.depth);
    }
  }
  switch (query) {
    case TexQuery::kWidth:
      return clip(t.width);
    case TexQuery::kHeight:
      return clip(t.height);
    case TexQuery::kDepth:
      return clip(t.depth);
    case TexQuery::kArraySize:
      if (!t.layered) return 0;
      // tex.acube addresses cubes, a cubemap's surface its faces (as a layered 2D surface).
      if (t.cubemap && !surface) return t.cubemapLayered ? clip(t.layers / 6) : 0;
      return clip(t.layers);
    case TexQuery::kNumMipmapLevels:
      return t.mipmapped ? t.levels : 0;
    case TexQuery::kNumSamples:
    case TexQuery::kMemoryLayout:
      return 0;
    case TexQuery::kNormalizedCoords:
      return t.normalizedCoords ? 1 : 0;
    case TexQuery::kFilterMode:
      return t.filterMode == CU_TR_FILTER_MODE_LINEAR ? 1 : 0;
    case TexQuery::kAddrMode0:
      return addressMode(t.addressMode[0]);
    case TexQuery::kAddrMode1:
      return addressMode(t.addressMode[1]);
    case TexQuery::kAddrMode2:
      return addressMode(t.addressMode[2]);
  }
  return 0;
}

SurfaceAccess surfaceOffset(const TextureView& t, int64_t xBytes, int64_t y, int64_t z,
                            unsigned bytes, SurfaceBoundary boundary, uint64_t* offset) {
  const int64_t rowBytes = static_cast<int64_t>(t.width * textureElementBytes(t));
  const int64_t rows = t.dims > 1 ? static_cast<int64_t>(t.height) : 1;
  const int64_t slices = t.layered    ? static_cast<int64_t>(t.layers)
                         : t.dims > 2 ? static_cast<int64_t>(t.depth)
                                      : 1;
  if (static_cast<int64_t>(bytes) > rowBytes) {
    return boundary == SurfaceBoundary::kZero ? SurfaceAccess::kOutsideZero
                                              : SurfaceAccess::kOutsideTrap;
  }
  if (t.dims < 2) y = 0;
  if (t.dims < 3 && !t.layered) z = 0;
  const bool inside =
      xBytes >= 0 && xBytes + bytes <= rowBytes && y >= 0 && y < rows && z >= 0 && z < slices;
  if (!inside) {
    if (boundary == SurfaceBoundary::kTrap) return SurfaceAccess::kOutsideTrap;
    if (boundary == SurfaceBoundary::kZero) return SurfaceAccess::kOutsideZero;
    xBytes = std::clamp<int64_t>(xBytes, 0, rowBytes - bytes);
    y = std::clamp<int64_t>(y, 0, rows - 1);
    z = std::clamp<int64_t>(z, 0, slices - 1);
  }
  *offset = static_cast<uint64_t>(z) * t.slicePitch + static_cast<uint64_t>(y) * t.rowPitch +
            static_cast<uint64_t>(xBytes);
  return SurfaceAccess::kInside;
}

}  // namespace gpupool::ptx
