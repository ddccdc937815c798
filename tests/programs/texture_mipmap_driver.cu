// Textures on mipmapped arrays through the driver API: cuMipmappedArrayCreate, each level filled
// through cuMipmappedArrayGetLevel and cuMemcpy3D, cuTexObjectCreate on the mipmapped array with
// the sampler's mipmap fields (read back by cuTexObjectGetTextureDesc), and a kernel launched with
// cuLaunchKernel reading tex2DLod at levels 0 to 3 and between two levels.
#include <cuda.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "driver_check.h"

namespace {

constexpr unsigned kWidth = 8;  // levels 8, 4, 2, 1
constexpr unsigned kLevels = 4;

__global__ void sampleLevels(CUtexObject tex, const float* lods, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex2DLod<float>(tex, 0.5f, 0.5f, lods[i]);
}

}  // namespace

int main() {
  usePrimaryContext();
  CUDA_ARRAY3D_DESCRIPTOR desc;
  std::memset(&desc, 0, sizeof desc);
  desc.Width = desc.Height = kWidth;
  desc.Format = CU_AD_FORMAT_FLOAT;
  desc.NumChannels = 1;
  CUmipmappedArray mipmapped;
  CHECK_CU(cuMipmappedArrayCreate(&mipmapped, &desc, kLevels));
  for (unsigned l = 0; l < kLevels; ++l) {
    CUarray level;
    CHECK_CU(cuMipmappedArrayGetLevel(&level, mipmapped, l));
    unsigned w = kWidth >> l;
    std::vector<float> texels(w * w, 100.0f * (l + 1));
    CUDA_MEMCPY3D copy;
    std::memset(&copy, 0, sizeof copy);
    copy.srcMemoryType = CU_MEMORYTYPE_HOST;
    copy.srcHost = texels.data();
    copy.srcPitch = w * sizeof(float);
    copy.srcHeight = w;
    copy.dstMemoryType = CU_MEMORYTYPE_ARRAY;
    copy.dstArray = level;
    copy.WidthInBytes = w * sizeof(float);
    copy.Height = w;
    copy.Depth = 1;
    CHECK_CU(cuMemcpy3D(&copy));
  }
  CUDA_RESOURCE_DESC res;
  std::memset(&res, 0, sizeof res);
  res.resType = CU_RESOURCE_TYPE_MIPMAPPED_ARRAY;
  res.res.mipmap.hMipmappedArray = mipmapped;
  CUDA_TEXTURE_DESC tdesc;
  std::memset(&tdesc, 0, sizeof tdesc);
  for (auto& mode : tdesc.addressMode) mode = CU_TR_ADDRESS_MODE_CLAMP;
  tdesc.filterMode = CU_TR_FILTER_MODE_POINT;
  tdesc.mipmapFilterMode = CU_TR_FILTER_MODE_LINEAR;
  tdesc.maxMipmapLevelClamp = kLevels - 1;
  tdesc.flags = CU_TRSF_NORMALIZED_COORDINATES;
  CUtexObject tex;
  CHECK_CU(cuTexObjectCreate(&tex, &res, &tdesc, nullptr));
  CUDA_TEXTURE_DESC back;
  CHECK_CU(cuTexObjectGetTextureDesc(&back, tex));
  CHECK(back.mipmapFilterMode == CU_TR_FILTER_MODE_LINEAR &&
            back.maxMipmapLevelClamp == static_cast<float>(kLevels - 1),
        "the texture's mipmap fields read back differ");
  CUDA_RESOURCE_DESC resBack;
  CHECK_CU(cuTexObjectGetResourceDesc(&resBack, tex));
  CHECK(resBack.resType == CU_RESOURCE_TYPE_MIPMAPPED_ARRAY &&
            resBack.res.mipmap.hMipmappedArray == mipmapped,
        "the texture's resource read back differs");

  const std::vector<float> lods = {0, 1, 2, 3, 1.5f, 7};
  const std::vector<float> expected = {100, 200, 300, 400, 250, 400};
  int n = static_cast<int>(lods.size());
  CUdeviceptr dLods, dOut;
  CHECK_CU(cuMemAlloc(&dLods, n * sizeof(float)));
  CHECK_CU(cuMemAlloc(&dOut, n * sizeof(float)));
  CHECK_CU(cuMemcpyHtoD(dLods, lods.data(), n * sizeof(float)));
  cudaFunction_t rf;
  CHECK_CUDA(cudaGetFuncBySymbol(&rf, reinterpret_cast<const void*>(sampleLevels)));
  void* args[] = {&tex, &dLods, &dOut, &n};
  CHECK_CU(cuLaunchKernel(reinterpret_cast<CUfunction>(rf), 1, 1, 1, 32, 1, 1, 0, nullptr, args,
                          nullptr));
  std::vector<float> got(n);
  CHECK_CU(cuMemcpyDtoH(got.data(), dOut, n * sizeof(float)));
  for (int i = 0; i < n; ++i) {
    CHECK(got[i] == expected[i], "tex2DLod at %g read %g, expected %g", lods[i], got[i],
          expected[i]);
  }
  std::printf("tex2DLod on a mipmapped array through the driver API: %d levels of detail\n", n);
  CHECK_CU(cuTexObjectDestroy(tex));
  CHECK_CU(cuMipmappedArrayDestroy(mipmapped));
  CHECK_CU(cuMemFree(dLods));
  CHECK_CU(cuMemFree(dOut));
  return pass();
}
