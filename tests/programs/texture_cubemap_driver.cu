// Cubemap textures through the driver API: cuArray3DCreate (CUDA_ARRAY3D_CUBEMAP), cuMemcpy3D
// of the six faces, cuTexObjectCreate on the array, and a kernel launched with cuLaunchKernel that
// samples with texCubemap: each direction along a face's axis, and to each corner quadrant of a
// face, reads the texel the cubemap table names. The device reports its cubemap limits.
#include <cuda.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "driver_check.h"

namespace {

constexpr int kWidth = 2;  // 2x2 texels a face: each quadrant of a face is one texel

__global__ void sampleCube(CUtexObject tex, const float3* dirs, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = texCubemap<float>(tex, dirs[i].x, dirs[i].y, dirs[i].z);
}

}  // namespace

int main() {
  CUdevice dev = usePrimaryContext();
  int width = 0;
  CHECK_CU(cuDeviceGetAttribute(&width, CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_WIDTH, dev));
  CHECK(width >= kWidth, "cubemap width limit %d", width);

  CUDA_ARRAY3D_DESCRIPTOR desc;
  std::memset(&desc, 0, sizeof desc);
  desc.Width = desc.Height = kWidth;
  desc.Depth = 6;
  desc.Format = CU_AD_FORMAT_FLOAT;
  desc.NumChannels = 1;
  desc.Flags = CUDA_ARRAY3D_CUBEMAP;
  CUarray array;
  CHECK_CU(cuArray3DCreate(&array, &desc));
  // Texel (x, y) of face f holds f * 10 + y * 2 + x.
  std::vector<float> faces(6 * kWidth * kWidth);
  for (size_t i = 0; i < faces.size(); ++i) {
    faces[i] = static_cast<float>((i / 4) * 10 + i % 4);
  }
  CUDA_MEMCPY3D copy;
  std::memset(&copy, 0, sizeof copy);
  copy.srcMemoryType = CU_MEMORYTYPE_HOST;
  copy.srcHost = faces.data();
  copy.srcPitch = kWidth * sizeof(float);
  copy.srcHeight = kWidth;
  copy.dstMemoryType = CU_MEMORYTYPE_ARRAY;
  copy.dstArray = array;
  copy.WidthInBytes = kWidth * sizeof(float);
  copy.Height = kWidth;
  copy.Depth = 6;
  CHECK_CU(cuMemcpy3D(&copy));

  CUDA_RESOURCE_DESC res;
  std::memset(&res, 0, sizeof res);
  res.resType = CU_RESOURCE_TYPE_ARRAY;
  res.res.array.hArray = array;
  CUDA_TEXTURE_DESC tdesc;
  std::memset(&tdesc, 0, sizeof tdesc);
  for (auto& mode : tdesc.addressMode) mode = CU_TR_ADDRESS_MODE_CLAMP;
  tdesc.filterMode = CU_TR_FILTER_MODE_POINT;
  tdesc.flags = CU_TRSF_NORMALIZED_COORDINATES;
  CUtexObject tex;
  CHECK_CU(cuTexObjectCreate(&tex, &res, &tdesc, nullptr));
  CUDA_RESOURCE_DESC back;
  CHECK_CU(cuTexObjectGetResourceDesc(&back, tex));
  CHECK(back.resType == CU_RESOURCE_TYPE_ARRAY && back.res.array.hArray == array,
        "the texture's resource read back differs");

  // For each face: the quadrant (x, y) in face coordinates s = 2x - 1 +- 0.5, t likewise.
  std::vector<float3> dirs;
  std::vector<float> expected;
  for (int face = 0; face < 6; ++face) {
    for (int y = 0; y < kWidth; ++y) {
      for (int x = 0; x < kWidth; ++x) {
        float s = x ? 0.5f : -0.5f, t = y ? 0.5f : -0.5f;
        float3 d;
        switch (face) {
          case 0:
            d = make_float3(1, -t, -s);
            break;
          case 1:
            d = make_float3(-1, -t, s);
            break;
          case 2:
            d = make_float3(s, 1, t);
            break;
          case 3:
            d = make_float3(s, -1, -t);
            break;
          case 4:
            d = make_float3(s, -t, 1);
            break;
          default:
            d = make_float3(-s, -t, -1);
            break;
        }
        dirs.push_back(d);
        expected.push_back(static_cast<float>(face * 10 + y * 2 + x));
      }
    }
  }
  int n = static_cast<int>(dirs.size());
  CUdeviceptr dDirs, dOut;
  CHECK_CU(cuMemAlloc(&dDirs, n * sizeof(float3)));
  CHECK_CU(cuMemAlloc(&dOut, n * sizeof(float)));
  CHECK_CU(cuMemcpyHtoD(dDirs, dirs.data(), n * sizeof(float3)));
  cudaFunction_t rf;
  CHECK_CUDA(cudaGetFuncBySymbol(&rf, reinterpret_cast<const void*>(sampleCube)));
  void* args[] = {&tex, &dDirs, &dOut, &n};
  CHECK_CU(cuLaunchKernel(reinterpret_cast<CUfunction>(rf), 1, 1, 1, 32, 1, 1, 0, nullptr, args,
                          nullptr));
  std::vector<float> got(n);
  CHECK_CU(cuMemcpyDtoH(got.data(), dOut, n * sizeof(float)));
  for (int i = 0; i < n; ++i) {
    CHECK(got[i] == expected[i], "direction (%g, %g, %g) read %g, expected %g", dirs[i].x,
          dirs[i].y, dirs[i].z, got[i], expected[i]);
  }
  std::printf("texCubemap through the driver API: 24 directions to their faces and texels\n");
  CHECK_CU(cuTexObjectDestroy(tex));
  CHECK_CU(cuArrayDestroy(array));
  CHECK_CU(cuMemFree(dDirs));
  CHECK_CU(cuMemFree(dOut));
  return pass();
}
