// CUB block-wide primitives from the toolkit's header-only CUB: BlockReduce (sum and max),
// BlockScan (inclusive and exclusive sums) and BlockRadixSort (keys and key-value pairs), each
// with several items per thread where CUB supports it.
#include <algorithm>
#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cuda/functional>
#include <numeric>
#include <vector>

#include "self_check.h"

constexpr int kThreads = 128;
constexpr int kItems = 4;

__global__ void reduceKernel(const int* in, int* sums, int* maxima) {
  using Reduce = cub::BlockReduce<int, kThreads>;
  __shared__ typename Reduce::TempStorage storage;
  const int value = in[blockIdx.x * kThreads + threadIdx.x];
  const int sum = Reduce(storage).Sum(value);
  __syncthreads();  // the storage is reused
  const int maximum = Reduce(storage).Reduce(value, cuda::maximum<>{});
  if (threadIdx.x == 0) {
    sums[blockIdx.x] = sum;
    maxima[blockIdx.x] = maximum;
  }
}

__global__ void scanKernel(const int* in, int* inclusive, int* exclusive, int* totals) {
  using Scan = cub::BlockScan<int, kThreads>;
  __shared__ typename Scan::TempStorage storage;
  int items[kItems];
  const int base = blockIdx.x * kThreads * kItems + threadIdx.x * kItems;
  for (int k = 0; k < kItems; ++k) items[k] = in[base + k];
  int scanned[kItems];
  Scan(storage).InclusiveSum(items, scanned);
  for (int k = 0; k < kItems; ++k) inclusive[base + k] = scanned[k];
  __syncthreads();
  int total;
  Scan(storage).ExclusiveSum(items, scanned, total);
  for (int k = 0; k < kItems; ++k) exclusive[base + k] = scanned[k];
  if (threadIdx.x == 0) totals[blockIdx.x] = total;
}

__global__ void sortKernel(unsigned* keys, int* values) {
  using Sort = cub::BlockRadixSort<unsigned, kThreads, kItems, int>;
  __shared__ typename Sort::TempStorage storage;
  unsigned k[kItems];
  int v[kItems];
  const int base = blockIdx.x * kThreads * kItems + threadIdx.x * kItems;
  for (int i = 0; i < kItems; ++i) {
    k[i] = keys[base + i];
    v[i] = values[base + i];
  }
  Sort(storage).Sort(k, v);
  for (int i = 0; i < kItems; ++i) {
    keys[base + i] = k[i];
    values[base + i] = v[i];
  }
}

int main() {
  const int blocks = 3;
  const int n = blocks * kThreads;
  std::vector<int> in(n);
  for (int i = 0; i < n; ++i) in[i] = (i * 73) % 199 - 99;
  int *din, *dsums, *dmaxima;
  CHECK_CUDA(cudaMalloc(&din, n * sizeof(int)));
  CHECK_CUDA(cudaMalloc(&dsums, blocks * sizeof(int)));
  CHECK_CUDA(cudaMalloc(&dmaxima, blocks * sizeof(int)));
  CHECK_CUDA(cudaMemcpy(din, in.data(), n * sizeof(int), cudaMemcpyHostToDevice));
  reduceKernel<<<blocks, kThreads>>>(din, dsums, dmaxima);
  CHECK_CUDA(cudaGetLastError());
  std::vector<int> sums(blocks), maxima(blocks);
  CHECK_CUDA(cudaMemcpy(sums.data(), dsums, blocks * sizeof(int), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(maxima.data(), dmaxima, blocks * sizeof(int), cudaMemcpyDeviceToHost));
  for (int b = 0; b < blocks; ++b) {
    const auto first = in.begin() + b * kThreads, last = first + kThreads;
    const int sum = std::accumulate(first, last, 0);
    const int maximum = *std::max_element(first, last);
    CHECK(sums[b] == sum && maxima[b] == maximum, "block %d: sum %d max %d, expected %d %d", b,
          sums[b], maxima[b], sum, maximum);
  }
  std::printf("BlockReduce ok\n");

  const int m = blocks * kThreads * kItems;
  std::vector<int> values(m);
  for (int i = 0; i < m; ++i) values[i] = (i * 31) % 17 - 5;
  int *dvalues, *dinclusive, *dexclusive, *dtotals;
  CHECK_CUDA(cudaMalloc(&dvalues, m * sizeof(int)));
  CHECK_CUDA(cudaMalloc(&dinclusive, m * sizeof(int)));
  CHECK_CUDA(cudaMalloc(&dexclusive, m * sizeof(int)));
  CHECK_CUDA(cudaMalloc(&dtotals, blocks * sizeof(int)));
  CHECK_CUDA(cudaMemcpy(dvalues, values.data(), m * sizeof(int), cudaMemcpyHostToDevice));
  scanKernel<<<blocks, kThreads>>>(dvalues, dinclusive, dexclusive, dtotals);
  CHECK_CUDA(cudaGetLastError());
  std::vector<int> inclusive(m), exclusive(m), totals(blocks);
  CHECK_CUDA(cudaMemcpy(inclusive.data(), dinclusive, m * sizeof(int), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(exclusive.data(), dexclusive, m * sizeof(int), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(totals.data(), dtotals, blocks * sizeof(int), cudaMemcpyDeviceToHost));
  for (int b = 0; b < blocks; ++b) {
    int running = 0;
    for (int i = b * kThreads * kItems; i < (b + 1) * kThreads * kItems; ++i) {
      CHECK(exclusive[i] == running, "exclusive[%d] = %d, expected %d", i, exclusive[i], running);
      running += values[i];
      CHECK(inclusive[i] == running, "inclusive[%d] = %d, expected %d", i, inclusive[i], running);
    }
    CHECK(totals[b] == running, "block %d total %d, expected %d", b, totals[b], running);
  }
  std::printf("BlockScan ok\n");

  std::vector<unsigned> keys(m);
  std::vector<int> payload(m);
  unsigned state = 2024;
  for (int i = 0; i < m; ++i) {
    state = state * 1103515245u + 12345u;
    keys[i] = state % 5000u;  // duplicates: sorting must keep key-value pairs together
    payload[i] = i;
  }
  unsigned* dkeys;
  int* dpayload;
  CHECK_CUDA(cudaMalloc(&dkeys, m * sizeof(unsigned)));
  CHECK_CUDA(cudaMalloc(&dpayload, m * sizeof(int)));
  CHECK_CUDA(cudaMemcpy(dkeys, keys.data(), m * sizeof(unsigned), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(dpayload, payload.data(), m * sizeof(int), cudaMemcpyHostToDevice));
  sortKernel<<<blocks, kThreads>>>(dkeys, dpayload);
  CHECK_CUDA(cudaGetLastError());
  std::vector<unsigned> sortedKeys(m);
  std::vector<int> sortedPayload(m);
  CHECK_CUDA(cudaMemcpy(sortedKeys.data(), dkeys, m * sizeof(unsigned), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(sortedPayload.data(), dpayload, m * sizeof(int), cudaMemcpyDeviceToHost));
  for (int b = 0; b < blocks; ++b) {
    const int first = b * kThreads * kItems, last = first + kThreads * kItems;
    // Radix sort is stable: equal keys keep their original (index) order.
    std::vector<int> order(payload.begin() + first, payload.begin() + last);
    std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return keys[x] < keys[y]; });
    for (int i = first; i < last; ++i) {
      CHECK(sortedKeys[i] == keys[order[i - first]] && sortedPayload[i] == order[i - first],
            "sorted[%d] = (%u, %d), expected (%u, %d)", i, sortedKeys[i], sortedPayload[i],
            keys[order[i - first]], order[i - first]);
    }
  }
  std::printf("BlockRadixSort ok\n");
  CHECK_CUDA(cudaFree(din));
  CHECK_CUDA(cudaFree(dsums));
  CHECK_CUDA(cudaFree(dmaxima));
  CHECK_CUDA(cudaFree(dvalues));
  CHECK_CUDA(cudaFree(dinclusive));
  CHECK_CUDA(cudaFree(dexclusive));
  CHECK_CUDA(cudaFree(dtotals));
  CHECK_CUDA(cudaFree(dkeys));
  CHECK_CUDA(cudaFree(dpayload));
  return pass();
}
