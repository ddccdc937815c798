// CUB warp-wide primitives: WarpReduce (full and logical 16-lane warps, sum and max, and a
// partial warp with a valid-item count) and WarpScan (inclusive and exclusive sums).
#include <cub/warp/warp_reduce.cuh>
#include <cub/warp/warp_scan.cuh>
#include <cuda/functional>
#include <vector>

#include "self_check.h"

constexpr int kWarps = 4;

__global__ void warpReduceKernel(const int* in, int* sums, int* maxima, int* halfSums,
                                 int* partialSums, int validItems) {
  using Reduce = cub::WarpReduce<int>;
  using Reduce16 = cub::WarpReduce<int, 16>;
  __shared__ typename Reduce::TempStorage storage[kWarps];
  __shared__ typename Reduce16::TempStorage storage16[kWarps * 2];
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int value = in[threadIdx.x];
  // CUB requires __syncwarp() before temporary storage is reused.
  const int sum = Reduce(storage[warp]).Sum(value);
  __syncwarp();
  const int maximum = Reduce(storage[warp]).Reduce(value, cuda::maximum<>{});
  __syncwarp();
  const int half = Reduce16(storage16[threadIdx.x / 16]).Sum(value);
  __syncwarp();
  const int partial = Reduce(storage[warp]).Sum(value, validItems);
  if (lane == 0) {
    sums[warp] = sum;
    maxima[warp] = maximum;
    partialSums[warp] = partial;
  }
  if (lane % 16 == 0) halfSums[threadIdx.x / 16] = half;
}

__global__ void warpScanKernel(const int* in, int* inclusive, int* exclusive) {
  using Scan = cub::WarpScan<int>;
  __shared__ typename Scan::TempStorage storage[kWarps];
  const int warp = threadIdx.x / 32;
  int result;
  Scan(storage[warp]).InclusiveSum(in[threadIdx.x], result);
  inclusive[threadIdx.x] = result;
  __syncwarp();
  Scan(storage[warp]).ExclusiveSum(in[threadIdx.x], result);
  exclusive[threadIdx.x] = result;
}

int main() {
  const int n = kWarps * 32;
  std::vector<int> in(n);
  for (int i = 0; i < n; ++i) in[i] = (i * 53) % 97 - 40;
  int *din, *dsums, *dmaxima, *dhalf, *dpartial, *dinclusive, *dexclusive;
  CHECK_CUDA(cudaMalloc(&din, n * sizeof(int)));
  CHECK_CUDA(cudaMalloc(&dsums, kWarps * sizeof(int)));
  CHECK_CUDA(cudaMalloc(&dmaxima, kWarps * sizeof(int)));
  CHECK_CUDA(cudaMalloc(&dhalf, 2 * kWarps * sizeof(int)));
  CHECK_CUDA(cudaMalloc(&dpartial, kWarps * sizeof(int)));
  CHECK_CUDA(cudaMalloc(&dinclusive, n * sizeof(int)));
  CHECK_CUDA(cudaMalloc(&dexclusive, n * sizeof(int)));
  CHECK_CUDA(cudaMemcpy(din, in.data(), n * sizeof(int), cudaMemcpyHostToDevice));
  const int validItems = 21;
  warpReduceKernel<<<1, n>>>(din, dsums, dmaxima, dhalf, dpartial, validItems);
  CHECK_CUDA(cudaGetLastError());
  std::vector<int> sums(kWarps), maxima(kWarps), halves(2 * kWarps), partials(kWarps);
  CHECK_CUDA(cudaMemcpy(sums.data(), dsums, kWarps * sizeof(int), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(maxima.data(), dmaxima, kWarps * sizeof(int), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(halves.data(), dhalf, 2 * kWarps * sizeof(int), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(partials.data(), dpartial, kWarps * sizeof(int), cudaMemcpyDeviceToHost));
  for (int w = 0; w < kWarps; ++w) {
    int sum = 0, maximum = -1000, partial = 0, lowHalf = 0, highHalf = 0;
    for (int l = 0; l < 32; ++l) {
      const int v = in[w * 32 + l];
      sum += v;
      maximum = v > maximum ? v : maximum;
      if (l < validItems) partial += v;
      (l < 16 ? lowHalf : highHalf) += v;
    }
    CHECK(sums[w] == sum && maxima[w] == maximum && partials[w] == partial,
          "warp %d: sum %d max %d partial %d, expected %d %d %d", w, sums[w], maxima[w],
          partials[w], sum, maximum, partial);
    CHECK(halves[2 * w] == lowHalf && halves[2 * w + 1] == highHalf,
          "warp %d: 16-lane sums %d %d, expected %d %d", w, halves[2 * w], halves[2 * w + 1],
          lowHalf, highHalf);
  }
  std::printf("WarpReduce ok\n");

  warpScanKernel<<<1, n>>>(din, dinclusive, dexclusive);
  CHECK_CUDA(cudaGetLastError());
  std::vector<int> inclusive(n), exclusive(n);
  CHECK_CUDA(cudaMemcpy(inclusive.data(), dinclusive, n * sizeof(int), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(exclusive.data(), dexclusive, n * sizeof(int), cudaMemcpyDeviceToHost));
  for (int w = 0; w < kWarps; ++w) {
    int running = 0;
    for (int l = 0; l < 32; ++l) {
      const int i = w * 32 + l;
      // CUB's ExclusiveSum gives lane 0 the value 0.
      CHECK(exclusive[i] == running, "exclusive[%d] = %d, expected %d", i, exclusive[i], running);
      running += in[i];
      CHECK(inclusive[i] == running, "inclusive[%d] = %d, expected %d", i, inclusive[i], running);
    }
  }
  std::printf("WarpScan ok\n");
  CHECK_CUDA(cudaFree(din));
  CHECK_CUDA(cudaFree(dsums));
  CHECK_CUDA(cudaFree(dmaxima));
  CHECK_CUDA(cudaFree(dhalf));
  CHECK_CUDA(cudaFree(dpartial));
  CHECK_CUDA(cudaFree(dinclusive));
  CHECK_CUDA(cudaFree(dexclusive));
  return pass();
}
