// Per-thread local memory: a dynamically indexed array (a small per-thread histogram and an
// insertion sort), a local struct array, and generic pointers that may point to local, shared or
// global memory chosen at run time.
#include <algorithm>
#include <vector>

#include "self_check.h"

constexpr int kValues = 24;

__device__ __noinline__ int sumThrough(const int* values, int count) {
  int sum = 0;  // `values` is a generic pointer: local, shared or global
  for (int i = 0; i < count; ++i) sum += values[i] * (i + 1);
  return sum;
}

__global__ void localWork(const int* in, int* sorted, int* histograms, int* sums) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  int values[kValues];
  int histogram[8] = {0};
  for (int i = 0; i < kValues; ++i) {
    values[i] = in[t * kValues + i];
    ++histogram[values[i] & 7];
  }
  for (int i = 1; i < kValues; ++i) {  // insertion sort in local memory
    const int key = values[i];
    int j = i - 1;
    while (j >= 0 && values[j] > key) {
      values[j + 1] = values[j];
      --j;
    }
    values[j + 1] = key;
  }
  for (int i = 0; i < kValues; ++i) sorted[t * kValues + i] = values[i];
  for (int b = 0; b < 8; ++b) histograms[t * 8 + b] = histogram[b];

  __shared__ int shared[kValues];
  if (threadIdx.x == 0) {
    for (int i = 0; i < kValues; ++i) shared[i] = i - 3;
  }
  __syncthreads();
  const int* source = t % 3 == 0 ? values : t % 3 == 1 ? shared : in + t * kValues;
  sums[t] = sumThrough(source, kValues);
}

int main() {
  const int blocks = 2, threads = 48, n = blocks * threads;
  std::vector<int> in(n * kValues);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int>((i * 7919) % 1009) - 500;
  int *din, *dsorted, *dhist, *dsums;
  CHECK_CUDA(cudaMalloc(&din, in.size() * sizeof(int)));
  CHECK_CUDA(cudaMalloc(&dsorted, in.size() * sizeof(int)));
  CHECK_CUDA(cudaMalloc(&dhist, n * 8 * sizeof(int)));
  CHECK_CUDA(cudaMalloc(&dsums, n * sizeof(int)));
  CHECK_CUDA(cudaMemcpy(din, in.data(), in.size() * sizeof(int), cudaMemcpyHostToDevice));
  localWork<<<blocks, threads>>>(din, dsorted, dhist, dsums);
  CHECK_CUDA(cudaGetLastError());
  std::vector<int> sorted(in.size()), hist(n * 8), sums(n);
  CHECK_CUDA(
      cudaMemcpy(sorted.data(), dsorted, sorted.size() * sizeof(int), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(hist.data(), dhist, hist.size() * sizeof(int), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(sums.data(), dsums, sums.size() * sizeof(int), cudaMemcpyDeviceToHost));
  for (int t = 0; t < n; ++t) {
    std::vector<int> values(in.begin() + t * kValues, in.begin() + (t + 1) * kValues);
    int histogram[8] = {0};
    for (int v : values) ++histogram[v & 7];
    std::vector<int> original = values;
    std::sort(values.begin(), values.end());
    for (int i = 0; i < kValues; ++i) {
      CHECK(sorted[t * kValues + i] == values[i], "thread %d sorted[%d] = %d, expected %d", t, i,
            sorted[t * kValues + i], values[i]);
    }
    for (int b = 0; b < 8; ++b) {
      CHECK(hist[t * 8 + b] == histogram[b], "thread %d histogram[%d] = %d, expected %d", t, b,
            hist[t * 8 + b], histogram[b]);
    }
    int sum = 0;
    for (int i = 0; i < kValues; ++i) {
      const int v = t % 3 == 0 ? values[i] : t % 3 == 1 ? i - 3 : original[i];
      sum += v * (i + 1);
    }
    CHECK(sums[t] == sum, "thread %d generic-pointer sum %d, expected %d", t, sums[t], sum);
  }
  std::printf("local arrays and generic pointers ok\n");
  CHECK_CUDA(cudaFree(din));
  CHECK_CUDA(cudaFree(dsorted));
  CHECK_CUDA(cudaFree(dhist));
  CHECK_CUDA(cudaFree(dsums));
  return pass();
}
