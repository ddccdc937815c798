// Cubemap textures and surfaces through the runtime API: texCubemap picks the face and the texel a
// direction points at (the CUDA Programming Guide's cubemap table), checked at every texel centre
// of every face from directions of several lengths; texCubemapLayered does the same in the second
// cube of a layered cubemap; surfCubemapwrite / surfCubemapread address faces as layers, and what
// they wrote is where cudaMemcpy3D finds it.
#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

#include "self_check.h"

namespace {

constexpr int kWidth = 4;  // texels along each side of a face
constexpr int kFaceTexels = kWidth * kWidth;

__host__ __device__ float texelValue(int layer, int x, int y) {
  return static_cast<float>(layer * 100 + y * kWidth + x);
}

// The direction, of length scale on the major axis, that points at the centre of texel (x, y) of
// `face`: the cubemap table read backwards (s and t the face coordinates in -1..1).
float3 directionTo(int face, int x, int y, float scale) {
  float s = 2 * (x + 0.5f) / kWidth - 1, t = 2 * (y + 0.5f) / kWidth - 1;
  float3 d;
  switch (face) {
    case 0:
      d = make_float3(1, -t, -s);
      break;  // +x: s = -z, t = -y
    case 1:
      d = make_float3(-1, -t, s);
      break;  // -x: s = z, t = -y
    case 2:
      d = make_float3(s, 1, t);
      break;  // +y: s = x, t = z
    case 3:
      d = make_float3(s, -1, -t);
      break;  // -y: s = x, t = -z
    case 4:
      d = make_float3(s, -t, 1);
      break;  // +z: s = x, t = -y
    default:
      d = make_float3(-s, -t, -1);
      break;  // -z: s = -x, t = -y
  }
  return make_float3(d.x * scale, d.y * scale, d.z * scale);
}

__global__ void sampleCube(cudaTextureObject_t tex, const float3* dirs, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = texCubemap<float>(tex, dirs[i].x, dirs[i].y, dirs[i].z);
}

__global__ void sampleCubeLayer(cudaTextureObject_t tex, const float3* dirs, int cube, float* out,
                                int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = texCubemapLayered<float>(tex, dirs[i].x, dirs[i].y, dirs[i].z, cube);
}

// Each thread writes one texel of one face, then (after a grid-wide pass) reads another back.
__global__ void writeFaces(cudaSurfaceObject_t surf) {
  int face = blockIdx.x, x = threadIdx.x % kWidth, y = threadIdx.x / kWidth;
  surfCubemapwrite(1000.0f + texelValue(face, x, y), surf, x * static_cast<int>(sizeof(float)), y,
                   face);
}

__global__ void readFaces(cudaSurfaceObject_t surf, float* out) {
  int face = blockIdx.x, x = threadIdx.x % kWidth, y = threadIdx.x / kWidth;
  float v;
  surfCubemapread(&v, surf, x * static_cast<int>(sizeof(float)), y, face);
  out[face * kFaceTexels + y * kWidth + x] = v;
}

cudaArray_t cubemapArray(int layers, unsigned flags) {
  cudaChannelFormatDesc format = cudaCreateChannelDesc<float>();
  cudaArray_t array;
  CHECK_CUDA(cudaMalloc3DArray(&array, &format, make_cudaExtent(kWidth, kWidth, layers), flags));
  std::vector<float> host(static_cast<size_t>(layers) * kFaceTexels);
  for (int l = 0; l < layers; ++l)
    for (int y = 0; y < kWidth; ++y)
      for (int x = 0; x < kWidth; ++x) host[(l * kWidth + y) * kWidth + x] = texelValue(l, x, y);
  cudaMemcpy3DParms copy = {};
  copy.srcPtr = make_cudaPitchedPtr(host.data(), kWidth * sizeof(float), kWidth, kWidth);
  copy.dstArray = array;
  copy.extent = make_cudaExtent(kWidth, kWidth, layers);
  copy.kind = cudaMemcpyHostToDevice;
  CHECK_CUDA(cudaMemcpy3D(&copy));
  return array;
}

cudaTextureObject_t textureOn(cudaArray_t array) {
  cudaResourceDesc res = {};
  res.resType = cudaResourceTypeArray;
  res.res.array.array = array;
  cudaTextureDesc desc = {};
  for (auto& mode : desc.addressMode) mode = cudaAddressModeClamp;
  desc.filterMode = cudaFilterModePoint;
  desc.readMode = cudaReadModeElementType;
  desc.normalizedCoords = 1;
  cudaTextureObject_t tex;
  CHECK_CUDA(cudaCreateTextureObject(&tex, &res, &desc, nullptr));
  return tex;
}

// Every texel centre of every face, at three lengths of direction.
std::vector<float3> allDirections(std::vector<float>* expected, int layerBase) {
  std::vector<float3> dirs;
  for (float scale : {1.0f, 0.25f, 37.0f})
    for (int face = 0; face < 6; ++face)
      for (int y = 0; y < kWidth; ++y)
        for (int x = 0; x < kWidth; ++x) {
          dirs.push_back(directionTo(face, x, y, scale));
          expected->push_back(texelValue(layerBase + face, x, y));
        }
  return dirs;
}

template <typename Launch>
void checkSamples(const char* what, int layerBase, Launch launch) {
  std::vector<float> expected;
  std::vector<float3> dirs = allDirections(&expected, layerBase);
  int n = static_cast<int>(dirs.size());
  float3* dDirs;
  float* dOut;
  CHECK_CUDA(cudaMalloc(&dDirs, n * sizeof(float3)));
  CHECK_CUDA(cudaMalloc(&dOut, n * sizeof(float)));
  CHECK_CUDA(cudaMemcpy(dDirs, dirs.data(), n * sizeof(float3), cudaMemcpyHostToDevice));
  launch(dDirs, dOut, n);
  CHECK_CUDA(cudaGetLastError());
  std::vector<float> got(n);
  CHECK_CUDA(cudaMemcpy(got.data(), dOut, n * sizeof(float), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) {
    CHECK(got[i] == expected[i], "%s: direction (%g, %g, %g) read %g, expected %g", what, dirs[i].x,
          dirs[i].y, dirs[i].z, got[i], expected[i]);
  }
  CHECK_CUDA(cudaFree(dDirs));
  CHECK_CUDA(cudaFree(dOut));
  std::printf("%s: %d directions, each to its face and texel\n", what, n);
}

}  // namespace

int main() {
  int width = 0, layeredLayers = 0;
  CHECK_CUDA(cudaDeviceGetAttribute(&width, cudaDevAttrMaxTextureCubemapWidth, 0));
  CHECK_CUDA(cudaDeviceGetAttribute(&layeredLayers, cudaDevAttrMaxTextureCubemapLayeredLayers, 0));
  CHECK(width >= kWidth && layeredLayers >= 12, "cubemap limits %d wide, %d layers", width,
        layeredLayers);

  cudaArray_t cube = cubemapArray(6, cudaArrayCubemap);
  cudaTextureObject_t tex = textureOn(cube);
  checkSamples("texCubemap", 0, [&](float3* dirs, float* out, int n) {
    sampleCube<<<(n + 63) / 64, 64>>>(tex, dirs, out, n);
  });

  cudaArray_t layered = cubemapArray(12, cudaArrayCubemap | cudaArrayLayered);
  cudaTextureObject_t layeredTex = textureOn(layered);
  checkSamples("texCubemapLayered, cube 1", 6, [&](float3* dirs, float* out, int n) {
    sampleCubeLayer<<<(n + 63) / 64, 64>>>(layeredTex, dirs, 1, out, n);
  });

  // Surfaces: faces are layers.
  cudaArray_t surfaceArray;
  cudaChannelFormatDesc format = cudaCreateChannelDesc<float>();
  CHECK_CUDA(cudaMalloc3DArray(&surfaceArray, &format, make_cudaExtent(kWidth, kWidth, 6),
                               cudaArrayCubemap | cudaArraySurfaceLoadStore));
  cudaResourceDesc res = {};
  res.resType = cudaResourceTypeArray;
  res.res.array.array = surfaceArray;
  cudaSurfaceObject_t surf;
  CHECK_CUDA(cudaCreateSurfaceObject(&surf, &res));
  writeFaces<<<6, kFaceTexels>>>(surf);
  CHECK_CUDA(cudaGetLastError());
  float* dOut;
  CHECK_CUDA(cudaMalloc(&dOut, 6 * kFaceTexels * sizeof(float)));
  readFaces<<<6, kFaceTexels>>>(surf, dOut);
  std::vector<float> read(6 * kFaceTexels), copied(6 * kFaceTexels);
  CHECK_CUDA(cudaMemcpy(read.data(), dOut, read.size() * sizeof(float), cudaMemcpyDeviceToHost));
  cudaMemcpy3DParms copy = {};
  copy.srcArray = surfaceArray;
  copy.dstPtr = make_cudaPitchedPtr(copied.data(), kWidth * sizeof(float), kWidth, kWidth);
  copy.extent = make_cudaExtent(kWidth, kWidth, 6);
  copy.kind = cudaMemcpyDeviceToHost;
  CHECK_CUDA(cudaMemcpy3D(&copy));
  for (int face = 0; face < 6; ++face)
    for (int i = 0; i < kFaceTexels; ++i) {
      float want = 1000.0f + texelValue(face, i % kWidth, i / kWidth);
      CHECK(read[face * kFaceTexels + i] == want, "surfCubemapread face %d texel %d: %g", face, i,
            read[face * kFaceTexels + i]);
      CHECK(copied[face * kFaceTexels + i] == want, "face %d texel %d copied out as %g", face, i,
            copied[face * kFaceTexels + i]);
    }
  std::printf("surfCubemapwrite / surfCubemapread: 6 faces as layers\n");

  CHECK_CUDA(cudaDestroySurfaceObject(surf));
  CHECK_CUDA(cudaDestroyTextureObject(tex));
  CHECK_CUDA(cudaDestroyTextureObject(layeredTex));
  CHECK_CUDA(cudaFreeArray(cube));
  CHECK_CUDA(cudaFreeArray(layered));
  CHECK_CUDA(cudaFreeArray(surfaceArray));
  CHECK_CUDA(cudaFree(dOut));
  return pass();
}
