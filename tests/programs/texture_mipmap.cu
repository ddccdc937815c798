// Textures on mipmapped arrays through the runtime API: tex2DLod picks the nearest level (mipmap
// filter point) or blends the two around the level of detail (linear); the sampler's bias and
// min/max level clamps move and bound it; tex2DGrad derives it from the derivative vectors; plain
// tex2D reads the most detailed level. Each level holds one value, so a read names the level (or
// the blend) it came from.
#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

#include "self_check.h"

namespace {

constexpr int kWidth = 16;  // level 0 is 16x16; levels 16, 8, 4, 2, 1
constexpr int kLevels = 5;

float levelValue(int level) { return 10.0f * (level + 1); }

struct Query {
  float lod;           // tex2DLod (gradients < 0: use lod)
  float dx[2], dy[2];  // tex2DGrad's derivative vectors, when dx[0] >= 0
};

__global__ void sample(cudaTextureObject_t tex, const Query* queries, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const Query q = queries[i];
  if (q.dx[0] >= 0) {
    out[i] = tex2DGrad<float>(tex, 0.3f, 0.6f, make_float2(q.dx[0], q.dx[1]),
                              make_float2(q.dy[0], q.dy[1]));
  } else if (q.lod < -100) {
    out[i] = tex2D<float>(tex, 0.3f, 0.6f);
  } else {
    out[i] = tex2DLod<float>(tex, 0.3f, 0.6f, q.lod);
  }
}

cudaTextureObject_t textureOn(cudaMipmappedArray_t array, cudaTextureFilterMode mipFilter,
                              float bias, float minClamp, float maxClamp) {
  cudaResourceDesc res = {};
  res.resType = cudaResourceTypeMipmappedArray;
  res.res.mipmap.mipmap = array;
  cudaTextureDesc desc = {};
  for (auto& mode : desc.addressMode) mode = cudaAddressModeClamp;
  desc.filterMode = cudaFilterModePoint;
  desc.readMode = cudaReadModeElementType;
  desc.normalizedCoords = 1;
  desc.mipmapFilterMode = mipFilter;
  desc.mipmapLevelBias = bias;
  desc.minMipmapLevelClamp = minClamp;
  desc.maxMipmapLevelClamp = maxClamp;
  cudaTextureObject_t tex;
  CHECK_CUDA(cudaCreateTextureObject(&tex, &res, &desc, nullptr));
  cudaTextureDesc back;
  CHECK_CUDA(cudaGetTextureObjectTextureDesc(&back, tex));
  CHECK(back.mipmapFilterMode == mipFilter && back.mipmapLevelBias == bias &&
            back.maxMipmapLevelClamp == maxClamp,
        "the texture's mipmap fields read back differ");
  return tex;
}

Query lod(float l) { return {l, {-1, 0}, {0, 0}}; }
Query plain() { return {-1000, {-1, 0}, {0, 0}}; }
Query grad(float dx0, float dx1, float dy0, float dy1) { return {0, {dx0, dx1}, {dy0, dy1}}; }

void check(const char* what, cudaTextureObject_t tex, const std::vector<Query>& queries,
           const std::vector<float>& expected) {
  int n = static_cast<int>(queries.size());
  Query* dq;
  float* dout;
  CHECK_CUDA(cudaMalloc(&dq, n * sizeof(Query)));
  CHECK_CUDA(cudaMalloc(&dout, n * sizeof(float)));
  CHECK_CUDA(cudaMemcpy(dq, queries.data(), n * sizeof(Query), cudaMemcpyHostToDevice));
  sample<<<1, 64>>>(tex, dq, dout, n);
  CHECK_CUDA(cudaGetLastError());
  std::vector<float> got(n);
  CHECK_CUDA(cudaMemcpy(got.data(), dout, n * sizeof(float), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) {
    CHECK(got[i] == expected[i], "%s, query %d (lod %g, dx %g,%g dy %g,%g): read %g, expected %g",
          what, i, queries[i].lod, queries[i].dx[0], queries[i].dx[1], queries[i].dy[0],
          queries[i].dy[1], got[i], expected[i]);
  }
  CHECK_CUDA(cudaFree(dq));
  CHECK_CUDA(cudaFree(dout));
  std::printf("%s: %d reads from the expected levels\n", what, n);
}

}  // namespace

int main() {
  int mipWidth = 0;
  CHECK_CUDA(cudaDeviceGetAttribute(&mipWidth, cudaDevAttrMaxTexture2DMipmappedWidth, 0));
  CHECK(mipWidth >= kWidth, "2D mipmapped texture width limit %d", mipWidth);

  cudaChannelFormatDesc format = cudaCreateChannelDesc<float>();
  cudaMipmappedArray_t array;
  CHECK_CUDA(
      cudaMallocMipmappedArray(&array, &format, make_cudaExtent(kWidth, kWidth, 0), kLevels));
  for (int l = 0; l < kLevels; ++l) {
    cudaArray_t level;
    CHECK_CUDA(cudaGetMipmappedArrayLevel(&level, array, l));
    int w = kWidth >> l;
    std::vector<float> texels(static_cast<size_t>(w) * w, levelValue(l));
    CHECK_CUDA(cudaMemcpy2DToArray(level, 0, 0, texels.data(), w * sizeof(float), w * sizeof(float),
                                   w, cudaMemcpyHostToDevice));
  }
  const float v0 = levelValue(0), v1 = levelValue(1), v2 = levelValue(2), v3 = levelValue(3),
              v4 = levelValue(4);

  // Nearest level; out of range clamps to the levels there are.
  cudaTextureObject_t nearest = textureOn(array, cudaFilterModePoint, 0, 0, kLevels - 1);
  check("tex2DLod, nearest level", nearest,
        {lod(0), lod(1), lod(2.4f), lod(2.6f), lod(3.4f), lod(10), lod(-2), plain()},
        {v0, v1, v2, v3, v3, v4, v0, v0});
  // Gradients: one texel of level 0 per step is level 0; 4 texels level 2; the longer of the two
  // vectors decides (8 texels along y: level 3).
  const float texel = 1.0f / kWidth;
  check("tex2DGrad, nearest level", nearest,
        {grad(texel, 0, 0, texel), grad(4 * texel, 0, 0, texel), grad(texel, 0, 0, 8 * texel),
         grad(0, 0, 0, 0), grad(32 * texel, 0, 0, 32 * texel)},
        {v0, v2, v3, v0, v4});
  // Linear between levels, at fractions exact in 8 bits.
  cudaTextureObject_t linear = textureOn(array, cudaFilterModeLinear, 0, 0, kLevels - 1);
  check("tex2DLod, levels blended", linear, {lod(1.25f), lod(2.5f), lod(0.75f), lod(4), lod(3)},
        {v1 + (v2 - v1) * 0.25f, v2 + (v3 - v2) * 0.5f, v0 + (v1 - v0) * 0.75f, v4, v3});
  // The bias moves the level of detail, the clamps bound it; a zeroed maximum clamp (the
  // descriptor's default) keeps every read on level 0.
  cudaTextureObject_t biased = textureOn(array, cudaFilterModePoint, 1, 0, kLevels - 1);
  check("mipmapLevelBias 1", biased, {lod(0), lod(2), lod(3.9f)}, {v1, v3, v4});
  cudaTextureObject_t clamped = textureOn(array, cudaFilterModePoint, 0, 2, 3);
  check("level clamps 2 to 3", clamped, {lod(0), lod(2), lod(3), lod(4)}, {v2, v2, v3, v3});
  cudaTextureObject_t zeroClamp = textureOn(array, cudaFilterModePoint, 0, 0, 0);
  check("maxMipmapLevelClamp 0", zeroClamp, {lod(0), lod(2), lod(4)}, {v0, v0, v0});

  for (cudaTextureObject_t t : {nearest, linear, biased, clamped, zeroClamp}) {
    CHECK_CUDA(cudaDestroyTextureObject(t));
  }
  CHECK_CUDA(cudaFreeMipmappedArray(array));
  return pass();
}
