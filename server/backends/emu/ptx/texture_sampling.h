// Texture and surface objects as the interpreter sees them (public: the emu backend fills
// TextureView from cuTexObjectCreate / cuSurfObjectCreate descriptors), and the sampling math the
// tex / tld4 / suld / sust instructions use: addressing modes, point and linear filtering, read
// modes.
//
// Linear filtering follows the hardware (CUDA Programming Guide, "Linear Filtering"): the weight
// of the upper texel is the fraction rounded to 9-bit fixed point with 8 fractional bits, and the
// texels are blended in single precision.
#pragma once

#include <cstdint>

namespace gpupool::ptx {

enum class TextureResource : uint8_t { kArray, kLinear, kPitch2D };

struct TextureView {
  TextureResource resource = TextureResource::kArray;
  bool surface = false;
  uint64_t address = 0;  // device address of element (0, 0, 0)
  uint64_t bytes = 0;    // the resource's extent in bytes from address
  unsigned format = 0;   // CUarray_format: 8/16/32-bit integers, half, float
  unsigned channels = 1;
  // Elements; unused extents are 1. A layered array keeps its layers in `layers`, not in depth.
  uint64_t width = 1, height = 1, depth = 1, layers = 1;
  uint64_t rowPitch = 0, slicePitch = 0;  // bytes between rows, between slices (or layers)
  unsigned dims = 1;                      // 1, 2 or 3
  bool layered = false;
  // A cubemap: a layered 2D view whose layers are faces (+x, -x, +y, -y, +z, -z; of each cube
  // layer in turn when `cubemapLayered`), which tex.cube / tex.acube sample by direction.
  bool cubemap = false;
  bool cubemapLayered = false;
  // A mipmapped texture's levels (levels > 1): each one's place from `address` and extent; level
  // 0 is the view's own extent above. Levels of detail are chosen and blended as the sampler's
  // mipmap fields say.
  static constexpr unsigned kMaxLevels = 18;  // 1 + log2 of the largest extent, 131072
  struct Level {
    uint64_t offset = 0;
    uint64_t width = 1, height = 1, depth = 1;
    uint64_t rowPitch = 0, slicePitch = 0;
  };
  unsigned levels = 1;
  bool mipmapped = false;  // from a mipmapped array (which may have a single level)
  Level level[kMaxLevels] = {};
  unsigned mipmapFilterMode = 0;  // CUfilter_mode
  float mipmapLevelBias = 0, minMipmapLevelClamp = 0, maxMipmapLevelClamp = 0;
  // The sampler (CUDA_TEXTURE_DESC); unused for surfaces.
  unsigned addressMode[3] = {};  // CUaddress_mode
  unsigned filterMode = 0;       // CUfilter_mode
  bool readAsInteger = false;    // CU_TRSF_READ_AS_INTEGER
  bool normalizedCoords = false;
  bool srgb = false;
  float borderColor[4] = {};
};

// The handle tex/suld/sust use for a module's texture or surface reference (ptx_module.h,
// TextureReference): outside the handles backends mint for objects, so the launch's table can
// tell the two apart.
inline constexpr uint64_t kTextureReferenceHandleBase = 0xfe7e'0000'0000'0000ull;
inline constexpr uint64_t textureReferenceHandle(uint32_t index) {
  return kTextureReferenceHandleBase | index;
}

// Resolves a handle a kernel holds to its object; null when the context has none by that value.
class TextureTable {
 public:
  virtual ~TextureTable() = default;
  virtual const TextureView* find(uint64_t handle) const = 0;
};

// Whether tex on this view returns floats (float/half formats, or 8/16-bit integers read as
// normalized floats) rather than integers.
bool textureReturnsFloat(const TextureView& t);
unsigned textureElementBytes(const TextureView& t);

// One tex: `data` is the resource's memory (t.bytes of it). Float coordinates (coords[0..dims))
// are sampled through the view's sampler; integer ones (integerCoords) fetch the texel directly,
// and out of range give zeros for linear memory or the address mode's texel for arrays. `layer` is
// clamped to the layers. out: four 32-bit words (float bits or integers).
void sampleTexture(const TextureView& t, const uint8_t* data, const float coords[3],
                   const int32_t integerCoords[3], bool useIntegerCoords, int32_t layer,
                   uint32_t out[4]);

// How a tex chooses its level of detail on a mipmapped view: none given (level 0 before the
// sampler's bias and clamps), an explicit level (tex.level), or gradients (tex.grad: the level
// whose texels the larger of the two derivative vectors spans, log2 of its length in texels).
struct LevelOfDetail {
  enum class Kind : uint8_t { kNone, kLevel, kGradients } kind = Kind::kNone;
  float level = 0;
  float dPdx[3] = {}, dPdy[3] = {};
};

// One tex on a mipmapped view (t.levels > 1; else the same as sampleTexture): the level of detail
// plus the sampler's bias, clamped to its min/max level clamps and to the levels there are; the
// nearest level (mipmap filter point) or the two around it blended by the fraction (linear).
// Coordinates are in level 0's terms (normalized ones are the same at every level).
void sampleTextureLevels(const TextureView& t, const uint8_t* data, const float coords[3],
                         int32_t layer, const LevelOfDetail& lod, uint32_t out[4]);

// One tex.cube / tex.acube on a cubemap view: the direction (x, y, z) selects a face and a
// point on it as the CUDA Programming Guide's cubemap table says (the major axis m, then
// ((s / m + 1) / 2, (t / m + 1) / 2) in the face's normalized coordinates), which is sampled
// through the view's sampler; `cubeLayer` picks the cube of a layered cubemap (clamped).
void sampleCubemap(const TextureView& t, const uint8_t* data, const float direction[3],
                   int32_t cubeLayer, const LevelOfDetail& lod, uint32_t out[4]);
// The face (0-5) and normalized face coordinates that `direction` selects.
void cubemapFace(const float direction[3], unsigned* face, float* u, float* v);

// One tld4 (tex2Dgather) on a 2D or layered 2D view: channel `component` (0-3: r, g, b, a) of
// the four texels that linear filtering at `coords` would blend, in the order the ISA gives:
// (i0, j1), (i1, j1), (i1, j0), (i0, j0), i0 and j0 the lower texel along x and y. Address modes
// and normalized coordinates apply as for tex; the filter mode does not.
void gatherTexture(const TextureView& t, const uint8_t* data, const float coords[2], int32_t layer,
                   unsigned component, uint32_t out[4]);

// What txq and suq ask (queryTexture gives the answers).
enum class TexQuery : uint8_t {
  kWidth,
  kHeight,
  kDepth,
  kNormalizedCoords,
  kArraySize,
  kNumMipmapLevels,
  kNumSamples,
  kFilterMode,
  kAddrMode0,
  kAddrMode1,
  kAddrMode2,
  kMemoryLayout,
};

// The answer to txq (surface false) or suq (surface true) on `t`; with `atLevel` (txq.level) the
// width, height and depth of level `level` (0 for a level the texture does not have).
// Extents are in elements (a surface's width too, although suld/sust address x in bytes) and
// are 1 along dimensions the resource does not have; array_size counts the layers of a layered
// texture (cubes for a layered cubemap, faces for its surface), 0 for others; num_mipmap_levels
// is 0 unless the texture is mipmapped; num_samples is 0 (CUDA has no multi-sample textures);
// the sampler's filter and address modes are the ISA's enumerations ({nearest, linear} and
// {wrap, mirror, clamp_ogl, clamp_to_edge, clamp_to_border}); memory_layout is 0 (block-linear
// CUDA arrays; surfaces over linear memory do not exist in CUDA).
uint32_t queryTexture(const TextureView& t, TexQuery query, bool surface, bool atLevel,
                      int32_t level);

// Surface access: suld/sust.b address x in bytes, y and z (or the layer) in elements.
enum class SurfaceBoundary : uint8_t { kTrap, kClamp, kZero };
enum class SurfaceAccess : uint8_t { kInside, kOutsideZero, kOutsideTrap };
// The byte offset of an access of `bytes` bytes at (xBytes, y, z); clamps when asked.
SurfaceAccess surfaceOffset(const TextureView& t, int64_t xBytes, int64_t y, int64_t z,
                            unsigned bytes, SurfaceBoundary boundary, uint64_t* offset);

}  // namespace gpupool::ptx
