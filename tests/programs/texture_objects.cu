// Texture and surface objects through the runtime API: tex1Dfetch on linear memory (zeros out of
// range), a 2D array with point and linear filtering and tex2Dgather, normalized coordinates with
// the wrap, clamp, mirror and border address modes, uint8/int8 read as normalized floats, a 3D
// array, a layered 2D array, a surface read/write round trip with the trap, clamp and zero boundary
// modes, and the descriptor checks. Sample points are chosen so the hardware's 8-bit filter weights
// are exact, so every expected value is exact too.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "self_check.h"

namespace {

__global__ void fetchLinear(cudaTextureObject_t t, float* out, int first, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex1Dfetch<float>(t, first + i);
}

__global__ void fetchLinearInt(cudaTextureObject_t t, int2* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex1Dfetch<int2>(t, i);
}

__global__ void sample2D(cudaTextureObject_t t, const float2* at, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex2D<float>(t, at[i].x, at[i].y);
}

__global__ void gather2D(cudaTextureObject_t t, const float2* at, float4* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex2Dgather<float4>(t, at[i].x, at[i].y, 0);
}

__global__ void sample1D(cudaTextureObject_t t, const float* at, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex1D<float>(t, at[i]);
}

__global__ void sample2DFloat4(cudaTextureObject_t t, float4* out, int w, int h) {
  int x = threadIdx.x, y = threadIdx.y;
  if (x < w && y < h) out[y * w + x] = tex2D<float4>(t, x + 0.5f, y + 0.5f);
}

__global__ void sample2DUchar4(cudaTextureObject_t t, uchar4* out, int w, int h) {
  int x = threadIdx.x, y = threadIdx.y;
  if (x < w && y < h) out[y * w + x] = tex2D<uchar4>(t, x + 0.5f, y + 0.5f);
}

__global__ void sample3D(cudaTextureObject_t t, const float4* at, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex3D<float>(t, at[i].x, at[i].y, at[i].z);
}

__global__ void sampleLayered(cudaTextureObject_t t, float* out, int w, int h, int layers) {
  int x = threadIdx.x, y = threadIdx.y, layer = threadIdx.z;
  if (x < w && y < h && layer < layers)
    out[(layer * h + y) * w + x] = tex2DLayered<float>(t, x + 0.5f, y + 0.5f, layer);
}

__global__ void surfaceScale(cudaSurfaceObject_t src, cudaSurfaceObject_t dst, int w, int h) {
  int x = threadIdx.x, y = threadIdx.y;
  if (x >= w || y >= h) return;
  float v;
  surf2Dread(&v, src, x * 4, y);
  surf2Dwrite(v * 2.0f + 1.0f, dst, x * 4, y);
}

// Out-of-range accesses: clamp reads the edge, zero reads 0 and drops the write.
__global__ void surfaceBoundaries(cudaSurfaceObject_t s, float* out, int w) {
  float v;
  surf2Dread(&v, s, (w + 3) * 4, 0, cudaBoundaryModeClamp);
  out[0] = v;
  surf2Dread(&v, s, -8, 1, cudaBoundaryModeClamp);
  out[1] = v;
  surf2Dread(&v, s, (w + 3) * 4, 0, cudaBoundaryModeZero);
  out[2] = v;
  surf2Dwrite(123.0f, s, w * 4, 0, cudaBoundaryModeZero);
  surf2Dwrite(-5.0f, s, 0, 100, cudaBoundaryModeZero);
}

template <class T>
T* deviceCopy(const std::vector<T>& host) {
  T* d = nullptr;
  CHECK_CUDA(cudaMalloc(&d, host.size() * sizeof(T)));
  CHECK_CUDA(cudaMemcpy(d, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

template <class T>
std::vector<T> hostCopy(const T* d, size_t n) {
  std::vector<T> host(n);
  CHECK_CUDA(cudaMemcpy(host.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
  return host;
}

cudaTextureDesc pointDesc() {
  cudaTextureDesc td{};
  td.addressMode[0] = td.addressMode[1] = td.addressMode[2] = cudaAddressModeClamp;
  td.filterMode = cudaFilterModePoint;
  td.readMode = cudaReadModeElementType;
  return td;
}

void linearFetch() {
  const int n = 1000;
  std::vector<float> values(n);
  for (int i = 0; i < n; ++i) values[i] = 0.5f * i - 7;
  float* buffer = deviceCopy(values);
  cudaResourceDesc rd{};
  rd.resType = cudaResourceTypeLinear;
  rd.res.linear.devPtr = buffer;
  rd.res.linear.desc = cudaCreateChannelDesc<float>();
  rd.res.linear.sizeInBytes = n * sizeof(float);
  cudaTextureDesc td = pointDesc();
  cudaTextureObject_t t = 0;
  CHECK_CUDA(cudaCreateTextureObject(&t, &rd, &td, nullptr));
  const int first = -4, count = n + 8;
  float* out = nullptr;
  CHECK_CUDA(cudaMalloc(&out, count * sizeof(float)));
  fetchLinear<<<(count + 127) / 128, 128>>>(t, out, first, count);
  CHECK_CUDA(cudaGetLastError());
  std::vector<float> got = hostCopy(out, count);
  for (int i = 0; i < count; ++i) {
    int at = first + i;
    float want = at >= 0 && at < n ? values[at] : 0.0f;
    CHECK(got[i] == want, "tex1Dfetch(%d) = %g, want %g", at, got[i], want);
  }
  cudaResourceDesc back{};
  CHECK_CUDA(cudaGetTextureObjectResourceDesc(&back, t));
  CHECK(back.resType == cudaResourceTypeLinear && back.res.linear.devPtr == buffer &&
            back.res.linear.sizeInBytes == n * sizeof(float),
        "resource descriptor read back");
  CHECK_CUDA(cudaDestroyTextureObject(t));

  // Two int channels, element type.
  std::vector<int2> pairs(64);
  for (int i = 0; i < 64; ++i) pairs[i] = make_int2(i * 3 - 50, -i);
  int2* pairBuffer = deviceCopy(pairs);
  rd.res.linear.devPtr = pairBuffer;
  rd.res.linear.desc = cudaCreateChannelDesc<int2>();
  rd.res.linear.sizeInBytes = 64 * sizeof(int2);
  CHECK_CUDA(cudaCreateTextureObject(&t, &rd, &td, nullptr));
  int2* pairOut = nullptr;
  CHECK_CUDA(cudaMalloc(&pairOut, 64 * sizeof(int2)));
  fetchLinearInt<<<1, 64>>>(t, pairOut, 64);
  std::vector<int2> gotPairs = hostCopy(pairOut, 64);
  for (int i = 0; i < 64; ++i)
    CHECK(gotPairs[i].x == pairs[i].x && gotPairs[i].y == pairs[i].y, "int2 fetch %d", i);
  CHECK_CUDA(cudaDestroyTextureObject(t));
  CHECK_CUDA(cudaFree(pairOut));
  CHECK_CUDA(cudaFree(pairBuffer));
  CHECK_CUDA(cudaFree(out));
  CHECK_CUDA(cudaFree(buffer));
  std::printf("1D linear fetch ok\n");
}

float texel2D(const std::vector<float>& v, int w, int h, int x, int y) {
  x = x < 0 ? 0 : x >= w ? w - 1 : x;
  y = y < 0 ? 0 : y >= h ? h - 1 : y;
  return v[y * w + x];
}

void array2D() {
  const int w = 16, h = 8;
  std::vector<float> v(w * h);
  for (int i = 0; i < w * h; ++i) v[i] = static_cast<float>((i * 37) % 101);
  cudaChannelFormatDesc cd = cudaCreateChannelDesc<float>();
  cudaArray_t array;
  CHECK_CUDA(cudaMallocArray(&array, &cd, w, h));
  CHECK_CUDA(cudaMemcpy2DToArray(array, 0, 0, v.data(), w * sizeof(float), w * sizeof(float), h,
                                 cudaMemcpyHostToDevice));
  cudaResourceDesc rd{};
  rd.resType = cudaResourceTypeArray;
  rd.res.array.array = array;
  std::vector<float2> at;
  for (int y = -1; y <= h; ++y)
    for (int x = -1; x <= w; ++x) at.push_back(make_float2(x + 0.75f, y + 0.5f));
  const int n = static_cast<int>(at.size());
  float2* atDev = deviceCopy(at);
  float* out = nullptr;
  CHECK_CUDA(cudaMalloc(&out, n * sizeof(float)));
  for (int linear = 0; linear < 2; ++linear) {
    cudaTextureDesc td = pointDesc();
    td.filterMode = linear ? cudaFilterModeLinear : cudaFilterModePoint;
    cudaTextureObject_t t = 0;
    CHECK_CUDA(cudaCreateTextureObject(&t, &rd, &td, nullptr));
    sample2D<<<(n + 127) / 128, 128>>>(t, atDev, out, n);
    CHECK_CUDA(cudaGetLastError());
    std::vector<float> got = hostCopy(out, n);
    for (int i = 0; i < n; ++i) {
      float x = at[i].x, y = at[i].y, want;
      if (!linear) {
        want = texel2D(v, w, h, static_cast<int>(std::floor(x)), static_cast<int>(std::floor(y)));
      } else {
        // x - 0.5 has the fraction 0.25, y - 0.5 none: exact in 8-bit weights.
        int x0 = static_cast<int>(std::floor(x - 0.5f)),
            y0 = static_cast<int>(std::floor(y - 0.5f));
        want = 0.75f * texel2D(v, w, h, x0, y0) + 0.25f * texel2D(v, w, h, x0 + 1, y0);
      }
      CHECK(std::fabs(got[i] - want) <= 1e-4f * std::fabs(want) + 1e-5f,
            "%s tex2D(%g, %g) = %g, want %g", linear ? "linear" : "point", x, y, got[i], want);
    }
    // tex2Dgather (tld4): the footprint's four texels whatever the filter, in the order
    // (x0, y0 + 1), (x0 + 1, y0 + 1), (x0 + 1, y0), (x0, y0).
    float4* gathered = nullptr;
    CHECK_CUDA(cudaMalloc(&gathered, n * sizeof(float4)));
    gather2D<<<(n + 127) / 128, 128>>>(t, atDev, gathered, n);
    CHECK_CUDA(cudaGetLastError());
    std::vector<float4> four = hostCopy(gathered, n);
    for (int i = 0; i < n; ++i) {
      int x0 = static_cast<int>(std::floor(at[i].x - 0.5f)),
          y0 = static_cast<int>(std::floor(at[i].y - 0.5f));
      const float want[4] = {texel2D(v, w, h, x0, y0 + 1), texel2D(v, w, h, x0 + 1, y0 + 1),
                             texel2D(v, w, h, x0 + 1, y0), texel2D(v, w, h, x0, y0)};
      const float got[4] = {four[i].x, four[i].y, four[i].z, four[i].w};
      for (int k = 0; k < 4; ++k) {
        CHECK(got[k] == want[k], "tex2Dgather(%g, %g)[%d] = %g, want %g", at[i].x, at[i].y, k,
              got[k], want[k]);
      }
    }
    CHECK_CUDA(cudaFree(gathered));
    if (linear) {
      cudaTextureDesc back{};
      CHECK_CUDA(cudaGetTextureObjectTextureDesc(&back, t));
      CHECK(back.filterMode == cudaFilterModeLinear && back.addressMode[0] == cudaAddressModeClamp,
            "texture descriptor read back");
    }
    CHECK_CUDA(cudaDestroyTextureObject(t));
  }
  CHECK_CUDA(cudaFree(out));
  CHECK_CUDA(cudaFree(atDev));
  CHECK_CUDA(cudaFreeArray(array));
  std::printf("2D array point and linear filtering, and gathers, ok\n");
}

void addressModes() {
  const int w = 8;
  std::vector<float> v(w);
  for (int i = 0; i < w; ++i) v[i] = 10.0f + i;
  cudaChannelFormatDesc cd = cudaCreateChannelDesc<float>();
  cudaArray_t array;
  CHECK_CUDA(cudaMallocArray(&array, &cd, w, 0));
  CHECK_CUDA(cudaMemcpy2DToArray(array, 0, 0, v.data(), w * sizeof(float), w * sizeof(float), 1,
                                 cudaMemcpyHostToDevice));
  cudaResourceDesc rd{};
  rd.resType = cudaResourceTypeArray;
  rd.res.array.array = array;
  std::vector<float> at;
  std::vector<int> index;
  for (int i = -20; i < 28; ++i) {
    at.push_back((i + 0.5f) / w);  // texel centres, in normalized coordinates
    index.push_back(i);
  }
  const int n = static_cast<int>(at.size());
  float* atDev = deviceCopy(at);
  float* out = nullptr;
  CHECK_CUDA(cudaMalloc(&out, n * sizeof(float)));
  const cudaTextureAddressMode modes[] = {cudaAddressModeWrap, cudaAddressModeClamp,
                                          cudaAddressModeMirror, cudaAddressModeBorder};
  const char* names[] = {"wrap", "clamp", "mirror", "border"};
  for (int m = 0; m < 4; ++m) {
    cudaTextureDesc td = pointDesc();
    td.addressMode[0] = modes[m];
    td.normalizedCoords = 1;
    td.borderColor[0] = -1.5f;
    cudaTextureObject_t t = 0;
    CHECK_CUDA(cudaCreateTextureObject(&t, &rd, &td, nullptr));
    sample1D<<<1, n>>>(t, atDev, out, n);
    CHECK_CUDA(cudaGetLastError());
    std::vector<float> got = hostCopy(out, n);
    for (int k = 0; k < n; ++k) {
      int i = index[k];
      float want;
      if (m == 0) {
        want = v[((i % w) + w) % w];
      } else if (m == 1) {
        want = v[i < 0 ? 0 : i >= w ? w - 1 : i];
      } else if (m == 2) {
        int p = ((i % (2 * w)) + 2 * w) % (2 * w);
        want = v[p < w ? p : 2 * w - 1 - p];
      } else {
        want = i < 0 || i >= w ? -1.5f : v[i];
      }
      CHECK(got[k] == want, "%s: tex1D(%g) = %g, want %g", names[m], at[k], got[k], want);
    }
    CHECK_CUDA(cudaDestroyTextureObject(t));
  }
  CHECK_CUDA(cudaFree(out));
  CHECK_CUDA(cudaFree(atDev));
  CHECK_CUDA(cudaFreeArray(array));
  std::printf("normalized coordinates with wrap, clamp, mirror and border ok\n");
}

void normalizedFloat() {
  const int w = 4, h = 3;
  std::vector<uchar4> v(w * h);
  for (int i = 0; i < w * h; ++i)
    v[i] = make_uchar4(static_cast<unsigned char>(i * 21), static_cast<unsigned char>(255 - i),
                       static_cast<unsigned char>(i == 0 ? 255 : i), 0);
  cudaChannelFormatDesc cd = cudaCreateChannelDesc<uchar4>();
  cudaArray_t array;
  CHECK_CUDA(cudaMallocArray(&array, &cd, w, h));
  CHECK_CUDA(cudaMemcpy2DToArray(array, 0, 0, v.data(), w * sizeof(uchar4), w * sizeof(uchar4), h,
                                 cudaMemcpyHostToDevice));
  cudaResourceDesc rd{};
  rd.resType = cudaResourceTypeArray;
  rd.res.array.array = array;
  cudaTextureDesc td = pointDesc();
  td.readMode = cudaReadModeNormalizedFloat;
  cudaTextureObject_t t = 0;
  CHECK_CUDA(cudaCreateTextureObject(&t, &rd, &td, nullptr));
  float4* out = nullptr;
  CHECK_CUDA(cudaMalloc(&out, w * h * sizeof(float4)));
  sample2DFloat4<<<1, dim3(w, h)>>>(t, out, w, h);
  CHECK_CUDA(cudaGetLastError());
  std::vector<float4> got = hostCopy(out, w * h);
  for (int i = 0; i < w * h; ++i) {
    const float want[4] = {v[i].x / 255.0f, v[i].y / 255.0f, v[i].z / 255.0f, v[i].w / 255.0f};
    const float have[4] = {got[i].x, got[i].y, got[i].z, got[i].w};
    for (int c = 0; c < 4; ++c)
      CHECK(std::fabs(have[c] - want[c]) <= 1e-6f,
            "normalized uint8 texel %d channel %d: %g, want %g", i, c, have[c], want[c]);
  }
  CHECK_CUDA(cudaDestroyTextureObject(t));
  // The same array read as its elements.
  td.readMode = cudaReadModeElementType;
  CHECK_CUDA(cudaCreateTextureObject(&t, &rd, &td, nullptr));
  uchar4* raw = nullptr;
  CHECK_CUDA(cudaMalloc(&raw, w * h * sizeof(uchar4)));
  sample2DUchar4<<<1, dim3(w, h)>>>(t, raw, w, h);
  std::vector<uchar4> gotRaw = hostCopy(raw, w * h);
  for (int i = 0; i < w * h; ++i)
    CHECK(std::memcmp(&gotRaw[i], &v[i], 4) == 0, "uint8 element texel %d", i);
  CHECK_CUDA(cudaDestroyTextureObject(t));
  CHECK_CUDA(cudaFree(raw));
  CHECK_CUDA(cudaFree(out));
  CHECK_CUDA(cudaFreeArray(array));

  // int8 reads as [-1, 1]: -128 and -127 are both -1.
  std::vector<char> s = {-128, -127, -64, 0, 1, 64, 127, 5};
  cudaChannelFormatDesc sd = cudaCreateChannelDesc<char>();
  CHECK_CUDA(cudaMallocArray(&array, &sd, 8, 0));
  CHECK_CUDA(cudaMemcpy2DToArray(array, 0, 0, s.data(), 8, 8, 1, cudaMemcpyHostToDevice));
  rd.res.array.array = array;
  td.readMode = cudaReadModeNormalizedFloat;
  CHECK_CUDA(cudaCreateTextureObject(&t, &rd, &td, nullptr));
  std::vector<float> at(8);
  for (int i = 0; i < 8; ++i) at[i] = i + 0.5f;
  float* atDev = deviceCopy(at);
  float* sOut = nullptr;
  CHECK_CUDA(cudaMalloc(&sOut, 8 * sizeof(float)));
  sample1D<<<1, 8>>>(t, atDev, sOut, 8);
  std::vector<float> gotS = hostCopy(sOut, 8);
  for (int i = 0; i < 8; ++i) {
    float want = s[i] == -128 ? -1.0f : s[i] / 127.0f;
    CHECK(std::fabs(gotS[i] - want) <= 1e-6f, "normalized int8 %d: %g, want %g", s[i], gotS[i],
          want);
  }
  CHECK_CUDA(cudaDestroyTextureObject(t));
  CHECK_CUDA(cudaFree(sOut));
  CHECK_CUDA(cudaFree(atDev));
  CHECK_CUDA(cudaFreeArray(array));
  std::printf("normalized-float read mode ok\n");
}

void array3D() {
  const int w = 4, h = 3, d = 5;
  std::vector<float> v(w * h * d);
  for (int i = 0; i < w * h * d; ++i) v[i] = static_cast<float>(i * 3 % 17);
  cudaChannelFormatDesc cd = cudaCreateChannelDesc<float>();
  cudaArray_t array;
  CHECK_CUDA(cudaMalloc3DArray(&array, &cd, make_cudaExtent(w, h, d)));
  cudaMemcpy3DParms p{};
  p.srcPtr = make_cudaPitchedPtr(v.data(), w * sizeof(float), w, h);
  p.dstArray = array;
  p.extent = make_cudaExtent(w, h, d);
  p.kind = cudaMemcpyHostToDevice;
  CHECK_CUDA(cudaMemcpy3D(&p));
  cudaResourceDesc rd{};
  rd.resType = cudaResourceTypeArray;
  rd.res.array.array = array;
  auto texel = [&](int x, int y, int z) {
    x = x < 0 ? 0 : x >= w ? w - 1 : x;
    y = y < 0 ? 0 : y >= h ? h - 1 : y;
    z = z < 0 ? 0 : z >= d ? d - 1 : z;
    return v[(z * h + y) * w + x];
  };
  std::vector<float4> at;
  for (int z = 0; z < d; ++z)
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x) at.push_back(make_float4(x + 1.0f, y + 0.5f, z + 0.75f, 0));
  const int n = static_cast<int>(at.size());
  float4* atDev = deviceCopy(at);
  float* out = nullptr;
  CHECK_CUDA(cudaMalloc(&out, n * sizeof(float)));
  for (int linear = 0; linear < 2; ++linear) {
    cudaTextureDesc td = pointDesc();
    td.filterMode = linear ? cudaFilterModeLinear : cudaFilterModePoint;
    cudaTextureObject_t t = 0;
    CHECK_CUDA(cudaCreateTextureObject(&t, &rd, &td, nullptr));
    sample3D<<<1, n>>>(t, atDev, out, n);
    CHECK_CUDA(cudaGetLastError());
    std::vector<float> got = hostCopy(out, n);
    for (int i = 0; i < n; ++i) {
      int x = static_cast<int>(at[i].x - 1), y = static_cast<int>(at[i].y - 0.5f),
          z = static_cast<int>(at[i].z - 0.75f);
      float want;
      if (!linear) {
        want = texel(x + 1, y, z);
      } else {
        // x: halfway between x and x+1; y: on texel y; z: a quarter past z.
        float a = 0.5f * (texel(x, y, z) + texel(x + 1, y, z));
        float b = 0.5f * (texel(x, y, z + 1) + texel(x + 1, y, z + 1));
        want = 0.75f * a + 0.25f * b;
      }
      CHECK(std::fabs(got[i] - want) <= 1e-4f * std::fabs(want) + 1e-5f,
            "%s tex3D at %d: %g, want %g", linear ? "linear" : "point", i, got[i], want);
    }
    CHECK_CUDA(cudaDestroyTextureObject(t));
  }
  CHECK_CUDA(cudaFree(out));
  CHECK_CUDA(cudaFree(atDev));
  CHECK_CUDA(cudaFreeArray(array));
  std::printf("3D array ok\n");
}

void layered() {
  const int w = 4, h = 2, layers = 3;
  std::vector<float> v(w * h * layers);
  for (int i = 0; i < w * h * layers; ++i) v[i] = 100.0f + i;
  cudaChannelFormatDesc cd = cudaCreateChannelDesc<float>();
  cudaArray_t array;
  CHECK_CUDA(cudaMalloc3DArray(&array, &cd, make_cudaExtent(w, h, layers), cudaArrayLayered));
  cudaMemcpy3DParms p{};
  p.srcPtr = make_cudaPitchedPtr(v.data(), w * sizeof(float), w, h);
  p.dstArray = array;
  p.extent = make_cudaExtent(w, h, layers);
  p.kind = cudaMemcpyHostToDevice;
  CHECK_CUDA(cudaMemcpy3D(&p));
  cudaResourceDesc rd{};
  rd.resType = cudaResourceTypeArray;
  rd.res.array.array = array;
  cudaTextureDesc td = pointDesc();
  cudaTextureObject_t t = 0;
  CHECK_CUDA(cudaCreateTextureObject(&t, &rd, &td, nullptr));
  float* out = nullptr;
  CHECK_CUDA(cudaMalloc(&out, v.size() * sizeof(float)));
  sampleLayered<<<1, dim3(w, h, layers)>>>(t, out, w, h, layers);
  CHECK_CUDA(cudaGetLastError());
  std::vector<float> got = hostCopy(out, v.size());
  for (size_t i = 0; i < v.size(); ++i) CHECK(got[i] == v[i], "layered texel %zu", i);
  CHECK_CUDA(cudaDestroyTextureObject(t));
  CHECK_CUDA(cudaFree(out));
  CHECK_CUDA(cudaFreeArray(array));
  std::printf("layered 2D array ok\n");
}

void surfaces() {
  const int w = 16, h = 4;
  std::vector<float> v(w * h);
  for (int i = 0; i < w * h; ++i) v[i] = i * 0.25f;
  cudaChannelFormatDesc cd = cudaCreateChannelDesc<float>();
  cudaArray_t src, dst;
  CHECK_CUDA(cudaMallocArray(&src, &cd, w, h, cudaArraySurfaceLoadStore));
  CHECK_CUDA(cudaMallocArray(&dst, &cd, w, h, cudaArraySurfaceLoadStore));
  CHECK_CUDA(cudaMemcpy2DToArray(src, 0, 0, v.data(), w * sizeof(float), w * sizeof(float), h,
                                 cudaMemcpyHostToDevice));
  cudaResourceDesc rd{};
  rd.resType = cudaResourceTypeArray;
  rd.res.array.array = src;
  cudaSurfaceObject_t s = 0, d = 0;
  CHECK_CUDA(cudaCreateSurfaceObject(&s, &rd));
  rd.res.array.array = dst;
  CHECK_CUDA(cudaCreateSurfaceObject(&d, &rd));
  surfaceScale<<<1, dim3(w, h)>>>(s, d, w, h);
  CHECK_CUDA(cudaGetLastError());
  std::vector<float> got(w * h);
  CHECK_CUDA(cudaMemcpy2DFromArray(got.data(), w * sizeof(float), dst, 0, 0, w * sizeof(float), h,
                                   cudaMemcpyDeviceToHost));
  for (int i = 0; i < w * h; ++i)
    CHECK(got[i] == v[i] * 2 + 1, "surface texel %d: %g, want %g", i, got[i], v[i] * 2 + 1);
  float* out = nullptr;
  CHECK_CUDA(cudaMalloc(&out, 3 * sizeof(float)));
  surfaceBoundaries<<<1, 1>>>(s, out, w);
  CHECK_CUDA(cudaGetLastError());
  std::vector<float> edge = hostCopy(out, 3);
  CHECK(edge[0] == v[w - 1] && edge[1] == v[w] && edge[2] == 0.0f,
        "surface clamp/zero reads: %g %g %g", edge[0], edge[1], edge[2]);
  std::vector<float> after(w * h);
  CHECK_CUDA(cudaMemcpy2DFromArray(after.data(), w * sizeof(float), src, 0, 0, w * sizeof(float), h,
                                   cudaMemcpyDeviceToHost));
  CHECK(after == v, "out-of-range writes with the zero boundary mode are dropped");
  cudaResourceDesc back{};
  CHECK_CUDA(cudaGetSurfaceObjectResourceDesc(&back, s));
  CHECK(back.resType == cudaResourceTypeArray && back.res.array.array == src,
        "surface resource descriptor read back");
  CHECK_CUDA(cudaDestroySurfaceObject(s));
  CHECK_CUDA(cudaDestroySurfaceObject(d));
  CHECK_CUDA(cudaFree(out));
  CHECK_CUDA(cudaFreeArray(src));
  CHECK_CUDA(cudaFreeArray(dst));
  std::printf("surface round trip and boundary modes ok\n");
}

void descriptorChecks() {
  float* buffer = nullptr;
  CHECK_CUDA(cudaMalloc(&buffer, 1 << 16));
  cudaTextureDesc td = pointDesc();
  cudaTextureObject_t t = 0;
  cudaResourceDesc rd{};
  rd.resType = cudaResourceTypePitch2D;
  rd.res.pitch2D.devPtr = buffer;
  rd.res.pitch2D.desc = cudaCreateChannelDesc<float>();
  rd.res.pitch2D.width = 10;
  rd.res.pitch2D.height = 10;
  rd.res.pitch2D.pitchInBytes = 40;  // not a multiple of TEXTURE_PITCH_ALIGNMENT
  int pitchAlignment = 0;
  CHECK_CUDA(cudaDeviceGetAttribute(&pitchAlignment, cudaDevAttrTexturePitchAlignment, 0));
  CHECK(pitchAlignment > 0 && 40 % pitchAlignment != 0, "pitch alignment %d", pitchAlignment);
  EXPECT_CUDA_ERROR(cudaCreateTextureObject(&t, &rd, &td, nullptr), cudaErrorInvalidValue);
  // A pitch smaller than a row: accepted, the rows overlapping (observed on driver 580.159.04,
  // H200).
  rd.res.pitch2D.pitchInBytes = 32;
  CHECK_CUDA(cudaCreateTextureObject(&t, &rd, &td, nullptr));
  CHECK_CUDA(cudaDestroyTextureObject(t));
  rd.res.pitch2D.pitchInBytes = 64;
  CHECK_CUDA(cudaCreateTextureObject(&t, &rd, &td, nullptr));
  CHECK_CUDA(cudaDestroyTextureObject(t));
  // Linear memory must be aligned to TEXTURE_ALIGNMENT.
  rd = {};
  rd.resType = cudaResourceTypeLinear;
  rd.res.linear.devPtr = buffer + 1;
  rd.res.linear.desc = cudaCreateChannelDesc<float>();
  rd.res.linear.sizeInBytes = 1024;
  EXPECT_CUDA_ERROR(cudaCreateTextureObject(&t, &rd, &td, nullptr), cudaErrorInvalidValue);
  EXPECT_CUDA_ERROR(cudaCreateTextureObject(&t, nullptr, &td, nullptr), cudaErrorInvalidValue);
  // A surface on an array made without cudaArraySurfaceLoadStore: accepted (observed on driver
  // 580.159.04, H200).
  cudaChannelFormatDesc cd = cudaCreateChannelDesc<float>();
  cudaArray_t plain;
  CHECK_CUDA(cudaMallocArray(&plain, &cd, 8, 8));
  rd = {};
  rd.resType = cudaResourceTypeArray;
  rd.res.array.array = plain;
  cudaSurfaceObject_t s = 0;
  CHECK_CUDA(cudaCreateSurfaceObject(&s, &rd));
  CHECK_CUDA(cudaDestroySurfaceObject(s));
  CHECK_CUDA(cudaFreeArray(plain));
  CHECK_CUDA(cudaFree(buffer));
  std::printf("descriptor checks ok\n");
}

}  // namespace

int main() {
  CHECK_CUDA(cudaSetDevice(0));
  int maxTexture1D = 0, textureAlignment = 0;
  CHECK_CUDA(cudaDeviceGetAttribute(&maxTexture1D, cudaDevAttrMaxTexture1DWidth, 0));
  CHECK_CUDA(cudaDeviceGetAttribute(&textureAlignment, cudaDevAttrTextureAlignment, 0));
  CHECK(maxTexture1D >= 65536 && textureAlignment > 0, "texture attributes %d %d", maxTexture1D,
        textureAlignment);
  linearFetch();
  array2D();
  addressModes();
  normalizedFloat();
  array3D();
  layered();
  surfaces();
  descriptorChecks();
  CHECK_CUDA(cudaDeviceSynchronize());
  return pass();
}
