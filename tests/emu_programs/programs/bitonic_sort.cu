// Sorting: a bitonic sort of 2048 keys with one launch per (k, j) step over global memory, a
// bitonic sort of 512 keys inside one block's shared memory, and an odd-even transposition sort
// of key/value pairs.
#include <algorithm>
#include <vector>

#include "self_check.h"

__global__ void bitonicStep(unsigned* data, int j, int k) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned partner = i ^ j;
  if (partner > i) {
    const bool ascending = (i & k) == 0;
    const unsigned a = data[i], b = data[partner];
    if ((a > b) == ascending) {
      data[i] = b;
      data[partner] = a;
    }
  }
}

// Sorts 2 * blockDim.x keys in shared memory (blockDim.x a power of two).
__global__ void bitonicShared(int* data) {
  extern __shared__ int keys[];
  const int n = 2 * blockDim.x;
  keys[threadIdx.x] = data[threadIdx.x];
  keys[threadIdx.x + blockDim.x] = data[threadIdx.x + blockDim.x];
  __syncthreads();
  for (int k = 2; k <= n; k *= 2) {
    for (int j = k / 2; j > 0; j /= 2) {
      for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const int partner = i ^ j;
        if (partner > i) {
          const bool ascending = (i & k) == 0;
          if ((keys[i] > keys[partner]) == ascending) {
            const int t = keys[i];
            keys[i] = keys[partner];
            keys[partner] = t;
          }
        }
      }
      __syncthreads();
    }
  }
  data[threadIdx.x] = keys[threadIdx.x];
  data[threadIdx.x + blockDim.x] = keys[threadIdx.x + blockDim.x];
}

struct Pair {
  float key;
  int value;
};

// Odd-even transposition sort of n pairs by key, one block, stable for equal keys because only
// strictly greater keys swap.
__global__ void oddEvenSort(Pair* pairs, int n) {
  for (int phase = 0; phase < n; ++phase) {
    for (int i = 2 * threadIdx.x + (phase & 1); i + 1 < n; i += 2 * blockDim.x) {
      if (pairs[i].key > pairs[i + 1].key) {
        const Pair t = pairs[i];
        pairs[i] = pairs[i + 1];
        pairs[i + 1] = t;
      }
    }
    __syncthreads();
  }
}

int main() {
  const int n = 2048;
  std::vector<unsigned> keys(n);
  unsigned state = 12345;
  for (auto& key : keys) {
    state = state * 1664525u + 1013904223u;
    key = state >> 8;
  }
  unsigned* dkeys;
  CHECK_CUDA(cudaMalloc(&dkeys, n * sizeof(unsigned)));
  CHECK_CUDA(cudaMemcpy(dkeys, keys.data(), n * sizeof(unsigned), cudaMemcpyHostToDevice));
  for (int k = 2; k <= n; k *= 2) {
    for (int j = k / 2; j > 0; j /= 2) bitonicStep<<<n / 256, 256>>>(dkeys, j, k);
  }
  CHECK_CUDA(cudaGetLastError());
  std::vector<unsigned> sorted(n);
  CHECK_CUDA(cudaMemcpy(sorted.data(), dkeys, n * sizeof(unsigned), cudaMemcpyDeviceToHost));
  std::sort(keys.begin(), keys.end());
  CHECK(sorted == keys, "global bitonic sort differs from std::sort");
  std::printf("bitonic sort of %d keys (66 launches) ok\n", n);

  const int m = 512;
  std::vector<int> small(m);
  for (int i = 0; i < m; ++i) small[i] = ((i * 7919) % 1000) - 500;
  int* dsmall;
  CHECK_CUDA(cudaMalloc(&dsmall, m * sizeof(int)));
  CHECK_CUDA(cudaMemcpy(dsmall, small.data(), m * sizeof(int), cudaMemcpyHostToDevice));
  bitonicShared<<<1, m / 2, m * sizeof(int)>>>(dsmall);
  CHECK_CUDA(cudaGetLastError());
  std::vector<int> smallSorted(m);
  CHECK_CUDA(cudaMemcpy(smallSorted.data(), dsmall, m * sizeof(int), cudaMemcpyDeviceToHost));
  std::sort(small.begin(), small.end());
  CHECK(smallSorted == small, "shared-memory bitonic sort differs from std::sort");
  std::printf("shared bitonic sort ok\n");

  const int p = 300;
  std::vector<Pair> pairs(p);
  for (int i = 0; i < p; ++i) pairs[i] = {static_cast<float>((i * 37) % 50) * 0.5f, i};
  Pair* dpairs;
  CHECK_CUDA(cudaMalloc(&dpairs, p * sizeof(Pair)));
  CHECK_CUDA(cudaMemcpy(dpairs, pairs.data(), p * sizeof(Pair), cudaMemcpyHostToDevice));
  oddEvenSort<<<1, 64>>>(dpairs, p);
  CHECK_CUDA(cudaGetLastError());
  std::vector<Pair> pairsSorted(p);
  CHECK_CUDA(cudaMemcpy(pairsSorted.data(), dpairs, p * sizeof(Pair), cudaMemcpyDeviceToHost));
  std::stable_sort(pairs.begin(), pairs.end(),
                   [](const Pair& a, const Pair& b) { return a.key < b.key; });
  for (int i = 0; i < p; ++i) {
    CHECK(pairsSorted[i].key == pairs[i].key && pairsSorted[i].value == pairs[i].value,
          "pair %d = (%f, %d), expected (%f, %d)", i, pairsSorted[i].key, pairsSorted[i].value,
          pairs[i].key, pairs[i].value);
  }
  std::printf("odd-even sort of pairs ok\n");
  CHECK_CUDA(cudaFree(dkeys));
  CHECK_CUDA(cudaFree(dsmall));
  CHECK_CUDA(cudaFree(dpairs));
  return pass();
}
