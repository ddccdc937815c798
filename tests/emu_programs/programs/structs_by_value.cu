// Structs passed to kernels by value (mixed member types and alignments, a nested array, a
// 16-byte aligned member), a struct returned from a __noinline__ device function, float4/int2
// vector loads and stores, and a struct pointer.
#include <cstdint>
#include <vector>

#include "self_check.h"

struct Params {
  char tag;
  double scale;
  int offsets[3];
  short small;
  float4 bias;
  unsigned long long mask;
};

struct Stats {
  float sum;
  float minimum;
  int count;
};

__device__ __noinline__ Stats accumulate(Stats s, float x) {
  s.sum += x;
  s.minimum = x < s.minimum ? x : s.minimum;
  s.count += 1;
  return s;
}

__global__ void useParams(Params p, const float4* in, float4* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float4 v = in[i];
  const float s = static_cast<float>(p.scale) + p.tag + p.offsets[i % 3] + p.small;
  out[i] = make_float4(v.x * s + p.bias.x, v.y * s + p.bias.y, v.z * s + p.bias.z,
                       ((p.mask >> (i % 64)) & 1) ? v.w : -v.w);
}

__global__ void reduceStats(const float* in, int n, Stats* result) {
  Stats s{0.0f, 1e30f, 0};
  for (int i = 0; i < n; ++i) s = accumulate(s, in[i]);
  *result = s;
}

__global__ void swapHalves(int2* pairs, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    const int2 p = pairs[i];
    pairs[i] = make_int2(p.y, p.x);
  }
}

int main() {
  Params p{};
  p.tag = 3;
  p.scale = 0.5;
  p.offsets[0] = 1;
  p.offsets[1] = 2;
  p.offsets[2] = 4;
  p.small = -2;
  p.bias = make_float4(1.0f, 2.0f, 3.0f, 4.0f);
  p.mask = 0xAAAA5555F0F00F0Full;
  const int n = 200;
  std::vector<float4> in(n), out(n);
  for (int i = 0; i < n; ++i) {
    in[i] = make_float4(static_cast<float>(i), static_cast<float>(-i),
                        0.25f * static_cast<float>(i), static_cast<float>(i + 1));
  }
  float4 *din, *dout;
  CHECK_CUDA(cudaMalloc(&din, n * sizeof(float4)));
  CHECK_CUDA(cudaMalloc(&dout, n * sizeof(float4)));
  CHECK_CUDA(cudaMemcpy(din, in.data(), n * sizeof(float4), cudaMemcpyHostToDevice));
  useParams<<<4, 64>>>(p, din, dout, n);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaMemcpy(out.data(), dout, n * sizeof(float4), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) {
    const float s = static_cast<float>(p.scale) + p.tag + p.offsets[i % 3] + p.small;
    const float w = ((p.mask >> (i % 64)) & 1) ? in[i].w : -in[i].w;
    CHECK(out[i].x == in[i].x * s + p.bias.x && out[i].y == in[i].y * s + p.bias.y &&
              out[i].z == in[i].z * s + p.bias.z && out[i].w == w,
          "element %d = (%f %f %f %f)", i, out[i].x, out[i].y, out[i].z, out[i].w);
  }
  std::printf("struct parameter ok\n");

  std::vector<float> values(37);
  for (int i = 0; i < 37; ++i) values[i] = static_cast<float>((i * 11) % 37) - 18.0f;
  float* dvalues;
  Stats* dstats;
  CHECK_CUDA(cudaMalloc(&dvalues, values.size() * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&dstats, sizeof(Stats)));
  CHECK_CUDA(
      cudaMemcpy(dvalues, values.data(), values.size() * sizeof(float), cudaMemcpyHostToDevice));
  reduceStats<<<1, 1>>>(dvalues, 37, dstats);
  CHECK_CUDA(cudaGetLastError());
  Stats stats;
  CHECK_CUDA(cudaMemcpy(&stats, dstats, sizeof(stats), cudaMemcpyDeviceToHost));
  float sum = 0.0f, minimum = 1e30f;
  for (float v : values) {
    sum += v;
    minimum = v < minimum ? v : minimum;
  }
  CHECK(stats.sum == sum && stats.minimum == minimum && stats.count == 37,
        "stats (%f, %f, %d), expected (%f, %f, 37)", stats.sum, stats.minimum, stats.count, sum,
        minimum);
  std::printf("struct returned by a device function ok\n");

  std::vector<int2> pairs(100);
  for (int i = 0; i < 100; ++i) pairs[i] = make_int2(i, -i * 3);
  int2* dpairs;
  CHECK_CUDA(cudaMalloc(&dpairs, pairs.size() * sizeof(int2)));
  CHECK_CUDA(cudaMemcpy(dpairs, pairs.data(), pairs.size() * sizeof(int2), cudaMemcpyHostToDevice));
  swapHalves<<<2, 64>>>(dpairs, 100);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaMemcpy(pairs.data(), dpairs, pairs.size() * sizeof(int2), cudaMemcpyDeviceToHost));
  for (int i = 0; i < 100; ++i) {
    CHECK(pairs[i].x == -i * 3 && pairs[i].y == i, "pair %d = (%d, %d)", i, pairs[i].x, pairs[i].y);
  }
  std::printf("int2 vector access ok\n");
  CHECK_CUDA(cudaFree(din));
  CHECK_CUDA(cudaFree(dout));
  CHECK_CUDA(cudaFree(dvalues));
  CHECK_CUDA(cudaFree(dstats));
  CHECK_CUDA(cudaFree(dpairs));
  return pass();
}
