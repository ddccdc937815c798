// Texture and surface objects through the driver API: cuTexObjectCreate on pitched memory with
// normalized coordinates and linear filtering, on a 1D int array with the border address mode;
// cuSurfObjectCreate on a 1D uchar4 array and a 3D short2 array (suld/sust .v4.b8 and .v2.b16);
// the descriptor queries, and the driver's errors for invalid descriptors.
#include <cuda.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "driver_check.h"

#define EXPECT_CU_ERROR(call, expected) expectError((call), (expected), #call)

namespace {

__global__ void samplePitched(CUtexObject t, const float2* at, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex2D<float>(t, at[i].x, at[i].y);
}

__global__ void sampleInt1D(CUtexObject t, int* out, int n) {
  int i = threadIdx.x;
  if (i < n) out[i] = tex1D<int>(t, i - 2 + 0.5f);
}

__global__ void invertBytes(CUsurfObject s, int w) {
  int x = threadIdx.x;
  if (x >= w) return;
  uchar4 v;
  surf1Dread(&v, s, x * 4);
  surf1Dwrite(make_uchar4(255 - v.x, 255 - v.y, 255 - v.z, 255 - v.w), s, x * 4);
}

__global__ void swapShorts(CUsurfObject s, int w, int h, int d) {
  int x = threadIdx.x, y = threadIdx.y, z = threadIdx.z;
  if (x >= w || y >= h || z >= d) return;
  short2 v = surf3Dread<short2>(s, x * 4, y, z);
  surf3Dwrite(make_short2(v.y, v.x), s, x * 4, y, z);
}

CUdeviceptr upload(const void* host, size_t bytes) {
  CUdeviceptr d;
  CHECK_CU(cuMemAlloc(&d, bytes));
  CHECK_CU(cuMemcpyHtoD(d, host, bytes));
  return d;
}

void pitchedLinearFilter() {
  const int w = 8, h = 4, pitchFloats = 64;  // 256-byte rows
  std::vector<float> host(pitchFloats * h, -99.0f);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) host[y * pitchFloats + x] = static_cast<float>(x * 10 + y);
  CUdeviceptr mem = upload(host.data(), host.size() * sizeof(float));
  CUDA_RESOURCE_DESC rd{};
  rd.resType = CU_RESOURCE_TYPE_PITCH2D;
  rd.res.pitch2D.devPtr = mem;
  rd.res.pitch2D.format = CU_AD_FORMAT_FLOAT;
  rd.res.pitch2D.numChannels = 1;
  rd.res.pitch2D.width = w;
  rd.res.pitch2D.height = h;
  rd.res.pitch2D.pitchInBytes = pitchFloats * sizeof(float);
  CUDA_TEXTURE_DESC td{};
  td.addressMode[0] = td.addressMode[1] = CU_TR_ADDRESS_MODE_CLAMP;
  td.filterMode = CU_TR_FILTER_MODE_LINEAR;
  td.flags = CU_TRSF_NORMALIZED_COORDINATES;
  CUtexObject t;
  CHECK_CU(cuTexObjectCreate(&t, &rd, &td, nullptr));
  auto texel = [&](int x, int y) {
    x = x < 0 ? 0 : x >= w ? w - 1 : x;
    y = y < 0 ? 0 : y >= h ? h - 1 : y;
    return host[y * pitchFloats + x];
  };
  // x: a quarter past a texel centre, y: halfway between two rows (normalized coordinates).
  std::vector<float2> at;
  std::vector<float> want;
  for (int y = -1; y < h; ++y)
    for (int x = -1; x < w; ++x) {
      at.push_back(make_float2((x + 0.75f) / w, (y + 1.0f) / h));
      want.push_back(0.5f * (0.75f * texel(x, y) + 0.25f * texel(x + 1, y)) +
                     0.5f * (0.75f * texel(x, y + 1) + 0.25f * texel(x + 1, y + 1)));
    }
  const int n = static_cast<int>(at.size());
  CUdeviceptr atDev = upload(at.data(), n * sizeof(float2));
  CUdeviceptr out;
  CHECK_CU(cuMemAlloc(&out, n * sizeof(float)));
  samplePitched<<<1, n>>>(t, reinterpret_cast<const float2*>(atDev), reinterpret_cast<float*>(out),
                          n);
  CHECK_CU(cuCtxSynchronize());
  std::vector<float> got(n);
  CHECK_CU(cuMemcpyDtoH(got.data(), out, n * sizeof(float)));
  for (int i = 0; i < n; ++i)
    CHECK(std::fabs(got[i] - want[i]) <= 1e-4f * std::fabs(want[i]) + 1e-5f,
          "pitched linear sample %d: %g, want %g", i, got[i], want[i]);
  CUDA_RESOURCE_DESC backRes{};
  CHECK_CU(cuTexObjectGetResourceDesc(&backRes, t));
  CHECK(backRes.resType == CU_RESOURCE_TYPE_PITCH2D && backRes.res.pitch2D.devPtr == mem &&
            backRes.res.pitch2D.pitchInBytes == 256 && backRes.res.pitch2D.width == 8,
        "cuTexObjectGetResourceDesc");
  CUDA_TEXTURE_DESC backTex{};
  CHECK_CU(cuTexObjectGetTextureDesc(&backTex, t));
  CHECK(backTex.filterMode == CU_TR_FILTER_MODE_LINEAR &&
            (backTex.flags & CU_TRSF_NORMALIZED_COORDINATES) != 0,
        "cuTexObjectGetTextureDesc");
  CUDA_RESOURCE_VIEW_DESC view{};
  // Created without a view: success (observed on driver 580.159.04, H200; the contents were not).
  CHECK_CU(cuTexObjectGetResourceViewDesc(&view, t));
  CHECK_CU(cuTexObjectDestroy(t));
  CHECK_CU(cuMemFree(out));
  CHECK_CU(cuMemFree(atDev));
  CHECK_CU(cuMemFree(mem));
  std::printf("pitched memory, normalized coordinates, linear filtering ok\n");
}

void intArrayBorder() {
  const int w = 6;
  CUDA_ARRAY_DESCRIPTOR ad{};
  ad.Width = w;
  ad.Format = CU_AD_FORMAT_SIGNED_INT32;
  ad.NumChannels = 1;
  CUarray array;
  CHECK_CU(cuArrayCreate(&array, &ad));
  const int values[w] = {-3, 7, 11, -100000, 42, 5};
  CHECK_CU(cuMemcpyHtoA(array, 0, values, sizeof values));
  CUDA_RESOURCE_DESC rd{};
  rd.resType = CU_RESOURCE_TYPE_ARRAY;
  rd.res.array.hArray = array;
  CUDA_TEXTURE_DESC td{};
  td.addressMode[0] = CU_TR_ADDRESS_MODE_BORDER;
  td.filterMode = CU_TR_FILTER_MODE_POINT;
  td.flags = CU_TRSF_READ_AS_INTEGER;
  CUtexObject t;
  CHECK_CU(cuTexObjectCreate(&t, &rd, &td, nullptr));
  const int n = w + 4;
  CUdeviceptr out;
  CHECK_CU(cuMemAlloc(&out, n * sizeof(int)));
  sampleInt1D<<<1, n>>>(t, reinterpret_cast<int*>(out), n);
  CHECK_CU(cuCtxSynchronize());
  std::vector<int> got(n);
  CHECK_CU(cuMemcpyDtoH(got.data(), out, n * sizeof(int)));
  for (int i = 0; i < n; ++i) {
    int x = i - 2;
    int want = x < 0 || x >= w ? 0 : values[x];  // border colour 0
    CHECK(got[i] == want, "int texel %d: %d, want %d", x, got[i], want);
  }
  CHECK_CU(cuTexObjectDestroy(t));
  CHECK_CU(cuMemFree(out));
  CHECK_CU(cuArrayDestroy(array));
  std::printf("1D int array, border address mode ok\n");
}

void surfaces() {
  const int w = 32;
  CUDA_ARRAY3D_DESCRIPTOR ad{};
  ad.Width = w;
  ad.Format = CU_AD_FORMAT_UNSIGNED_INT8;
  ad.NumChannels = 4;
  ad.Flags = CUDA_ARRAY3D_SURFACE_LDST;
  CUarray bytes;
  CHECK_CU(cuArray3DCreate(&bytes, &ad));
  std::vector<unsigned char> host(w * 4);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<unsigned char>(i * 5);
  CHECK_CU(cuMemcpyHtoA(bytes, 0, host.data(), host.size()));
  CUDA_RESOURCE_DESC rd{};
  rd.resType = CU_RESOURCE_TYPE_ARRAY;
  rd.res.array.hArray = bytes;
  CUsurfObject s;
  CHECK_CU(cuSurfObjectCreate(&s, &rd));
  invertBytes<<<1, w>>>(s, w);
  CHECK_CU(cuCtxSynchronize());
  std::vector<unsigned char> back(host.size());
  CHECK_CU(cuMemcpyAtoH(back.data(), bytes, 0, back.size()));
  for (size_t i = 0; i < host.size(); ++i) CHECK(back[i] == 255 - host[i], "inverted byte %zu", i);
  CUDA_RESOURCE_DESC backRes{};
  CHECK_CU(cuSurfObjectGetResourceDesc(&backRes, s));
  CHECK(backRes.resType == CU_RESOURCE_TYPE_ARRAY && backRes.res.array.hArray == bytes,
        "cuSurfObjectGetResourceDesc");
  CHECK_CU(cuSurfObjectDestroy(s));
  CHECK_CU(cuArrayDestroy(bytes));

  const int x = 4, y = 3, z = 2;
  ad = {};
  ad.Width = x;
  ad.Height = y;
  ad.Depth = z;
  ad.Format = CU_AD_FORMAT_SIGNED_INT16;
  ad.NumChannels = 2;
  ad.Flags = CUDA_ARRAY3D_SURFACE_LDST;
  CUarray shorts;
  CHECK_CU(cuArray3DCreate(&shorts, &ad));
  std::vector<int16_t> values(x * y * z * 2);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<int16_t>(i * 301 - 7000);
  CUDA_MEMCPY3D copy{};
  copy.srcMemoryType = CU_MEMORYTYPE_HOST;
  copy.srcHost = values.data();
  copy.srcPitch = x * 4;
  copy.srcHeight = y;
  copy.dstMemoryType = CU_MEMORYTYPE_ARRAY;
  copy.dstArray = shorts;
  copy.WidthInBytes = x * 4;
  copy.Height = y;
  copy.Depth = z;
  CHECK_CU(cuMemcpy3D(&copy));
  rd.res.array.hArray = shorts;
  CHECK_CU(cuSurfObjectCreate(&s, &rd));
  swapShorts<<<1, dim3(x, y, z)>>>(s, x, y, z);
  CHECK_CU(cuCtxSynchronize());
  std::vector<int16_t> swapped(values.size());
  copy = {};
  copy.srcMemoryType = CU_MEMORYTYPE_ARRAY;
  copy.srcArray = shorts;
  copy.dstMemoryType = CU_MEMORYTYPE_HOST;
  copy.dstHost = swapped.data();
  copy.dstPitch = x * 4;
  copy.dstHeight = y;
  copy.WidthInBytes = x * 4;
  copy.Height = y;
  copy.Depth = z;
  CHECK_CU(cuMemcpy3D(&copy));
  for (size_t i = 0; i < values.size(); i += 2)
    CHECK(swapped[i] == values[i + 1] && swapped[i + 1] == values[i], "swapped pair %zu", i / 2);
  CHECK_CU(cuSurfObjectDestroy(s));
  CHECK_CU(cuArrayDestroy(shorts));
  std::printf("1D and 3D surfaces ok\n");
}

void descriptorErrors() {
  CUdeviceptr mem;
  CHECK_CU(cuMemAlloc(&mem, 1 << 16));
  CUDA_TEXTURE_DESC td{};
  td.filterMode = CU_TR_FILTER_MODE_POINT;
  CUDA_RESOURCE_DESC rd{};
  rd.resType = CU_RESOURCE_TYPE_LINEAR;
  rd.res.linear.devPtr = mem;
  rd.res.linear.format = CU_AD_FORMAT_FLOAT;
  rd.res.linear.numChannels = 1;
  rd.res.linear.sizeInBytes = 4096;
  CUtexObject t;
  CHECK_CU(cuTexObjectCreate(&t, &rd, &td, nullptr));
  CHECK_CU(cuTexObjectDestroy(t));
  rd.res.linear.numChannels = 3;  // 1, 2 or 4
  EXPECT_CU_ERROR(cuTexObjectCreate(&t, &rd, &td, nullptr), CUDA_ERROR_INVALID_VALUE);
  rd.res.linear.numChannels = 1;
  rd.res.linear.devPtr = mem + 16;  // not TEXTURE_ALIGNMENT-aligned
  EXPECT_CU_ERROR(cuTexObjectCreate(&t, &rd, &td, nullptr), CUDA_ERROR_INVALID_VALUE);
  rd.res.linear.devPtr = mem;
  rd.flags = 1;  // must be 0
  EXPECT_CU_ERROR(cuTexObjectCreate(&t, &rd, &td, nullptr), CUDA_ERROR_INVALID_VALUE);
  rd.flags = 0;
  EXPECT_CU_ERROR(cuTexObjectCreate(&t, &rd, nullptr, nullptr), CUDA_ERROR_INVALID_VALUE);
  // A surface object needs an array.
  CUsurfObject s;
  expectError(cuSurfObjectCreate(&s, &rd), CUDA_ERROR_INVALID_VALUE,
              "cuSurfObjectCreate(linear memory)");
  rd = {};
  rd.resType = CU_RESOURCE_TYPE_PITCH2D;
  rd.res.pitch2D.devPtr = mem;
  rd.res.pitch2D.format = CU_AD_FORMAT_UNSIGNED_INT8;
  rd.res.pitch2D.numChannels = 1;
  rd.res.pitch2D.width = 100;
  rd.res.pitch2D.height = 10;
  int alignment = 0;
  CUdevice device;
  CHECK_CU(cuCtxGetDevice(&device));
  CHECK_CU(cuDeviceGetAttribute(&alignment, CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT, device));
  CHECK(alignment > 1, "TEXTURE_PITCH_ALIGNMENT %d", alignment);
  rd.res.pitch2D.pitchInBytes = 128 + alignment / 2;
  EXPECT_CU_ERROR(cuTexObjectCreate(&t, &rd, &td, nullptr), CUDA_ERROR_INVALID_VALUE);
  rd.res.pitch2D.pitchInBytes = 128;
  CHECK_CU(cuTexObjectCreate(&t, &rd, &td, nullptr));
  CHECK_CU(cuTexObjectDestroy(t));
  // A surface on an array made without CUDA_ARRAY3D_SURFACE_LDST: accepted, as cuda.h asks no
  // such flag of a surface object's array (observed on driver 580.159.04, H200).
  CUDA_ARRAY_DESCRIPTOR ad{};
  ad.Width = 16;
  ad.Format = CU_AD_FORMAT_FLOAT;
  ad.NumChannels = 1;
  CUarray array;
  CHECK_CU(cuArrayCreate(&array, &ad));
  rd = {};
  rd.resType = CU_RESOURCE_TYPE_ARRAY;
  rd.res.array.hArray = array;
  CHECK_CU(cuSurfObjectCreate(&s, &rd));
  CHECK_CU(cuSurfObjectDestroy(s));
  CHECK_CU(cuArrayDestroy(array));
  CHECK_CU(cuMemFree(mem));
  std::printf("descriptor errors ok\n");
}

}  // namespace

int main() {
  CHECK_CUDA(cudaSetDevice(0));
  CHECK_CUDA(cudaFree(nullptr));  // makes the primary context current
  pitchedLinearFilter();
  intArrayBorder();
  surfaces();
  descriptorErrors();
  return pass();
}
