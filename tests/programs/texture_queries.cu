// txq and suq (inline PTX; CUDA C has no intrinsic for them) on texture and surface objects of
// every kind of resource: linear memory, pitched 2D memory, 3D, layered 1D and 2D, cubemap and
// layered cubemap arrays, a mipmapped array (txq.level on each level and one past the last), and
// surfaces on 2D, layered 2D and cubemap arrays. Each answer is checked against the descriptor the
// object was made from: extents in elements (1 along a dimension the resource lacks), layers
// (cubes for a layered cubemap texture, faces for a cubemap's surface), levels (0 unless
// mipmapped), and the sampler's filter and address modes in the ISA's enumerations.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>

#include "self_check.h"

namespace {

// What txq answers, in this order (the last two: txq.level.width and .height at `level`).
enum TextureAnswer {
  kWidth,
  kHeight,
  kDepth,
  kNormalizedCoords,
  kArraySize,
  kMipmapLevels,
  kSamples,
  kFilterMode,
  kAddrMode0,
  kAddrMode1,
  kAddrMode2,
  kLevelWidth,
  kLevelHeight,
  kTextureAnswers
};
// The ISA's enumerations: filter {nearest, linear}; address {wrap, mirror, clamp_ogl,
// clamp_to_edge, clamp_to_border}.
constexpr unsigned kNearest = 0, kLinear = 1;
constexpr unsigned kWrap = 0, kMirror = 1, kClampToEdge = 3, kClampToBorder = 4;

__global__ void queryTexture(cudaTextureObject_t t, int level, unsigned* out) {
  unsigned v[kTextureAnswers];
  asm volatile("txq.width.b32 %0, [%1];" : "=r"(v[kWidth]) : "l"(t));
  asm volatile("txq.height.b32 %0, [%1];" : "=r"(v[kHeight]) : "l"(t));
  asm volatile("txq.depth.b32 %0, [%1];" : "=r"(v[kDepth]) : "l"(t));
  asm volatile("txq.normalized_coords.b32 %0, [%1];" : "=r"(v[kNormalizedCoords]) : "l"(t));
  asm volatile("txq.array_size.b32 %0, [%1];" : "=r"(v[kArraySize]) : "l"(t));
  asm volatile("txq.num_mipmap_levels.b32 %0, [%1];" : "=r"(v[kMipmapLevels]) : "l"(t));
  asm volatile("txq.num_samples.b32 %0, [%1];" : "=r"(v[kSamples]) : "l"(t));
  asm volatile("txq.filter_mode.b32 %0, [%1];" : "=r"(v[kFilterMode]) : "l"(t));
  asm volatile("txq.addr_mode_0.b32 %0, [%1];" : "=r"(v[kAddrMode0]) : "l"(t));
  asm volatile("txq.addr_mode_1.b32 %0, [%1];" : "=r"(v[kAddrMode1]) : "l"(t));
  asm volatile("txq.addr_mode_2.b32 %0, [%1];" : "=r"(v[kAddrMode2]) : "l"(t));
  asm volatile("txq.level.width.b32 %0, [%1], %2;" : "=r"(v[kLevelWidth]) : "l"(t), "r"(level));
  asm volatile("txq.level.height.b32 %0, [%1], %2;" : "=r"(v[kLevelHeight]) : "l"(t), "r"(level));
  for (int i = 0; i < kTextureAnswers; ++i) out[i] = v[i];
}

enum SurfaceAnswer {
  kSurfaceWidth,
  kSurfaceHeight,
  kSurfaceDepth,
  kSurfaceArraySize,
  kLayout,
  kSurfaceAnswers
};

__global__ void querySurface(cudaSurfaceObject_t s, unsigned* out) {
  unsigned v[kSurfaceAnswers];
  asm volatile("suq.width.b32 %0, [%1];" : "=r"(v[kSurfaceWidth]) : "l"(s));
  asm volatile("suq.height.b32 %0, [%1];" : "=r"(v[kSurfaceHeight]) : "l"(s));
  asm volatile("suq.depth.b32 %0, [%1];" : "=r"(v[kSurfaceDepth]) : "l"(s));
  asm volatile("suq.array_size.b32 %0, [%1];" : "=r"(v[kSurfaceArraySize]) : "l"(s));
  asm volatile("suq.memory_layout.b32 %0, [%1];" : "=r"(v[kLayout]) : "l"(s));
  for (int i = 0; i < kSurfaceAnswers; ++i) out[i] = v[i];
}

unsigned* answers = nullptr;

// Runs txq on `tex` at `level` and checks every answer against `want` (kTextureAnswers values).
void expectTexture(const char* what, cudaTextureObject_t tex, int level, const unsigned* want) {
  CHECK_CUDA(cudaMemset(answers, 0xff, kTextureAnswers * sizeof(unsigned)));
  queryTexture<<<1, 1>>>(tex, level, answers);
  CHECK_CUDA(cudaGetLastError());
  unsigned got[kTextureAnswers];
  CHECK_CUDA(cudaMemcpy(got, answers, sizeof got, cudaMemcpyDeviceToHost));
  static const char* const kNames[] = {"width",       "height",
                                       "depth",       "normalized_coords",
                                       "array_size",  "num_mipmap_levels",
                                       "num_samples", "filter_mode",
                                       "addr_mode_0", "addr_mode_1",
                                       "addr_mode_2", "level.width",
                                       "level.height"};
  for (int i = 0; i < kTextureAnswers; ++i)
    CHECK(got[i] == want[i], "%s: txq.%s is %u, expected %u", what, kNames[i], got[i], want[i]);
  std::printf("txq on %s: as described\n", what);
}

void expectSurface(const char* what, cudaSurfaceObject_t surf, const unsigned* want) {
  CHECK_CUDA(cudaMemset(answers, 0xff, kSurfaceAnswers * sizeof(unsigned)));
  querySurface<<<1, 1>>>(surf, answers);
  CHECK_CUDA(cudaGetLastError());
  unsigned got[kSurfaceAnswers];
  CHECK_CUDA(cudaMemcpy(got, answers, sizeof got, cudaMemcpyDeviceToHost));
  static const char* const kNames[] = {"width", "height", "depth", "array_size", "memory_layout"};
  for (int i = 0; i < kSurfaceAnswers; ++i)
    CHECK(got[i] == want[i], "%s: suq.%s is %u, expected %u", what, kNames[i], got[i], want[i]);
  std::printf("suq on %s: as described\n", what);
}

cudaTextureDesc sampler(bool normalized, cudaTextureFilterMode filter, cudaTextureAddressMode a0,
                        cudaTextureAddressMode a1, cudaTextureAddressMode a2) {
  cudaTextureDesc d;
  std::memset(&d, 0, sizeof d);
  d.normalizedCoords = normalized;
  d.filterMode = filter;
  d.addressMode[0] = a0;
  d.addressMode[1] = a1;
  d.addressMode[2] = a2;
  d.readMode = cudaReadModeElementType;
  return d;
}

cudaTextureObject_t textureOn(cudaArray_t array, const cudaTextureDesc& d) {
  cudaResourceDesc res;
  std::memset(&res, 0, sizeof res);
  res.resType = cudaResourceTypeArray;
  res.res.array.array = array;
  cudaTextureObject_t tex;
  CHECK_CUDA(cudaCreateTextureObject(&tex, &res, &d, nullptr));
  return tex;
}

cudaSurfaceObject_t surfaceOn(cudaArray_t array) {
  cudaResourceDesc res;
  std::memset(&res, 0, sizeof res);
  res.resType = cudaResourceTypeArray;
  res.res.array.array = array;
  cudaSurfaceObject_t surf;
  CHECK_CUDA(cudaCreateSurfaceObject(&surf, &res));
  return surf;
}

// An array to query and what txq or suq should answer for it.
struct ArrayCase {
  const char* what;
  cudaExtent extent;
  unsigned flags;
  unsigned width, height, depth, arraySize;
};

cudaArray_t array3D(cudaExtent extent, unsigned flags) {
  cudaChannelFormatDesc format = cudaCreateChannelDesc<float>();
  cudaArray_t array;
  CHECK_CUDA(cudaMalloc3DArray(&array, &format, extent, flags));
  return array;
}

void linearMemory() {
  float* data;
  CHECK_CUDA(cudaMalloc(&data, 10 * sizeof(float)));
  cudaResourceDesc res;
  std::memset(&res, 0, sizeof res);
  res.resType = cudaResourceTypeLinear;
  res.res.linear.devPtr = data;
  res.res.linear.desc = cudaCreateChannelDesc<float>();
  res.res.linear.sizeInBytes = 10 * sizeof(float);
  const cudaTextureDesc d = sampler(false, cudaFilterModePoint, cudaAddressModeClamp,
                                    cudaAddressModeClamp, cudaAddressModeClamp);
  cudaTextureObject_t tex;
  CHECK_CUDA(cudaCreateTextureObject(&tex, &res, &d, nullptr));
  const unsigned want[] = {10,           1,  1, 0, 0, 0, 0, kNearest, kClampToEdge, kClampToEdge,
                           kClampToEdge, 10, 1};
  expectTexture("10 floats of linear memory", tex, 0, want);
  CHECK_CUDA(cudaDestroyTextureObject(tex));
  CHECK_CUDA(cudaFree(data));
}

void pitched2D() {
  float* data;
  size_t pitch;
  CHECK_CUDA(cudaMallocPitch(&data, &pitch, 12 * sizeof(float), 5));
  cudaResourceDesc res;
  std::memset(&res, 0, sizeof res);
  res.resType = cudaResourceTypePitch2D;
  res.res.pitch2D.devPtr = data;
  res.res.pitch2D.desc = cudaCreateChannelDesc<float>();
  res.res.pitch2D.width = 12;
  res.res.pitch2D.height = 5;
  res.res.pitch2D.pitchInBytes = pitch;
  const cudaTextureDesc d = sampler(true, cudaFilterModeLinear, cudaAddressModeWrap,
                                    cudaAddressModeMirror, cudaAddressModeBorder);
  cudaTextureObject_t tex;
  CHECK_CUDA(cudaCreateTextureObject(&tex, &res, &d, nullptr));
  // Level 0 is the memory's extent; level 1 of a texture without levels has none.
  unsigned want[] = {12, 5, 1, 1, 0, 0, 0, kLinear, kWrap, kMirror, kClampToBorder, 12, 5};
  expectTexture("12x5 pitched floats, level 0", tex, 0, want);
  want[kLevelWidth] = want[kLevelHeight] = 0;
  expectTexture("12x5 pitched floats, level 1", tex, 1, want);
  CHECK_CUDA(cudaDestroyTextureObject(tex));
  CHECK_CUDA(cudaFree(data));
}

void arrays() {
  const cudaTextureDesc clamp = sampler(false, cudaFilterModePoint, cudaAddressModeClamp,
                                        cudaAddressModeClamp, cudaAddressModeClamp);
  const ArrayCase cases[] = {
      {"a 6x5x4 3D array", make_cudaExtent(6, 5, 4), 0, 6, 5, 4, 0},
      {"a 7x3 2D array of 5 layers", make_cudaExtent(7, 3, 5), cudaArrayLayered, 7, 3, 1, 5},
      {"a 9-element 1D array of 4 layers", make_cudaExtent(9, 0, 4), cudaArrayLayered, 9, 1, 1, 4},
      {"an 8x8 cubemap", make_cudaExtent(8, 8, 6), cudaArrayCubemap, 8, 8, 1, 0},
      {"a layered cubemap of two 4x4 cubes", make_cudaExtent(4, 4, 12),
       cudaArrayCubemap | cudaArrayLayered, 4, 4, 1, 2},
  };
  for (const ArrayCase& c : cases) {
    cudaArray_t array = array3D(c.extent, c.flags);
    cudaTextureObject_t tex = textureOn(array, clamp);
    const unsigned want[] = {
        c.width,      c.height,     c.depth,      0,       c.arraySize, 0, 0, kNearest,
        kClampToEdge, kClampToEdge, kClampToEdge, c.width, c.height};
    expectTexture(c.what, tex, 0, want);
    CHECK_CUDA(cudaDestroyTextureObject(tex));
    CHECK_CUDA(cudaFreeArray(array));
  }
}

void mipmapped() {
  cudaChannelFormatDesc format = cudaCreateChannelDesc<float>();
  cudaMipmappedArray_t levels;
  CHECK_CUDA(cudaMallocMipmappedArray(&levels, &format, make_cudaExtent(16, 8, 0), 4));
  cudaResourceDesc res;
  std::memset(&res, 0, sizeof res);
  res.resType = cudaResourceTypeMipmappedArray;
  res.res.mipmap.mipmap = levels;
  cudaTextureDesc d = sampler(true, cudaFilterModeLinear, cudaAddressModeWrap, cudaAddressModeClamp,
                              cudaAddressModeClamp);
  d.mipmapFilterMode = cudaFilterModeLinear;
  d.maxMipmapLevelClamp = 3;
  cudaTextureObject_t tex;
  CHECK_CUDA(cudaCreateTextureObject(&tex, &res, &d, nullptr));
  // Levels 16x8, 8x4, 4x2, 2x1; a fifth does not exist.
  const unsigned levelWidth[] = {16, 8, 4, 2, 0}, levelHeight[] = {8, 4, 2, 1, 0};
  for (int level = 0; level < 5; ++level) {
    const unsigned want[] = {16,
                             8,
                             1,
                             1,
                             0,
                             4,
                             0,
                             kLinear,
                             kWrap,
                             kClampToEdge,
                             kClampToEdge,
                             levelWidth[level],
                             levelHeight[level]};
    char what[64];
    std::snprintf(what, sizeof what, "a 16x8 mipmapped array of 4 levels, level %d", level);
    expectTexture(what, tex, level, want);
  }
  CHECK_CUDA(cudaDestroyTextureObject(tex));
  CHECK_CUDA(cudaFreeMipmappedArray(levels));
}

void surfaces() {
  const ArrayCase cases[] = {
      {"a 5x4 surface", make_cudaExtent(5, 4, 0), 0, 5, 4, 1, 0},
      {"a 5x4 surface of 3 layers", make_cudaExtent(5, 4, 3), cudaArrayLayered, 5, 4, 1, 3},
      {"a 4x4 cubemap's surface", make_cudaExtent(4, 4, 6), cudaArrayCubemap, 4, 4, 1, 6},
  };
  for (const ArrayCase& c : cases) {
    cudaArray_t array = array3D(c.extent, c.flags | cudaArraySurfaceLoadStore);
    cudaSurfaceObject_t surf = surfaceOn(array);
    const unsigned want[] = {c.width, c.height, c.depth, c.arraySize, 0};
    expectSurface(c.what, surf, want);
    CHECK_CUDA(cudaDestroySurfaceObject(surf));
    CHECK_CUDA(cudaFreeArray(array));
  }
}

}  // namespace

int main() {
  CHECK_CUDA(cudaMalloc(&answers, 16 * sizeof(unsigned)));
  linearMemory();
  pitched2D();
  arrays();
  mipmapped();
  surfaces();
  CHECK_CUDA(cudaFree(answers));
  return pass();
}
