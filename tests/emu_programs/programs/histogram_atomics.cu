// A 64-bin byte histogram with per-block shared-memory atomics merged by global atomics, and one
// kernel exercising the other atomic operations users reach for (min/max, and/or/xor, exch, CAS
// loops, inc with wrap, float and double add, 64-bit add).
#include <vector>

#include "self_check.h"

constexpr int kBins = 64;

__global__ void histogram(const unsigned char* data, int n, unsigned* bins) {
  __shared__ unsigned local[kBins];
  for (int b = threadIdx.x; b < kBins; b += blockDim.x) local[b] = 0;
  __syncthreads();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    atomicAdd(&local[data[i] % kBins], 1u);
  }
  __syncthreads();
  for (int b = threadIdx.x; b < kBins; b += blockDim.x) atomicAdd(&bins[b], local[b]);
}

struct AtomicResults {
  int minValue, maxValue;
  unsigned andBits, orBits, xorBits;
  unsigned incCounter;
  int casSum;
  float floatSum;
  double doubleSum;
  unsigned long long wideSum;
};

// Every thread t contributes the value v = (t * 37) % 1001 - 500.
__global__ void atomicsKernel(AtomicResults* r, int* exchangeSlots) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  const int v = (t * 37) % 1001 - 500;
  atomicMin(&r->minValue, v);
  atomicMax(&r->maxValue, v);
  atomicAnd(&r->andBits, ~(1u << (t % 32)) | (t >= 32 ? 0xffffffffu : 0u));
  atomicOr(&r->orBits, 1u << (t % 29));
  atomicXor(&r->xorBits, static_cast<unsigned>(t) * 2654435761u);
  atomicInc(&r->incCounter, 99u);  // wraps to 0 after 99
  int old = r->casSum, assumed;
  do {
    assumed = old;
    old = atomicCAS(&r->casSum, assumed, assumed + v);
  } while (old != assumed);
  atomicAdd(&r->floatSum, 0.5f);
  atomicAdd(&r->doubleSum, static_cast<double>(v) * 0.25);
  atomicAdd(&r->wideSum, 0x100000000ull + static_cast<unsigned>(t));
  // Every thread swaps its id into one of 4 slots; the returned old values, plus the final
  // contents, must be a permutation of the ids and the initial -1s.
  const int previous = atomicExch(&exchangeSlots[t % 4], t);
  exchangeSlots[4 + t] = previous;
}

int main() {
  const int n = 50000;
  std::vector<unsigned char> data(n);
  for (int i = 0; i < n; ++i) data[i] = static_cast<unsigned char>((i * 131 + i / 7) & 0xff);
  unsigned char* ddata;
  unsigned* dbins;
  CHECK_CUDA(cudaMalloc(&ddata, n));
  CHECK_CUDA(cudaMalloc(&dbins, kBins * sizeof(unsigned)));
  CHECK_CUDA(cudaMemcpy(ddata, data.data(), n, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemset(dbins, 0, kBins * sizeof(unsigned)));
  histogram<<<12, 192>>>(ddata, n, dbins);
  CHECK_CUDA(cudaGetLastError());
  std::vector<unsigned> bins(kBins), expected(kBins, 0);
  CHECK_CUDA(cudaMemcpy(bins.data(), dbins, kBins * sizeof(unsigned), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) ++expected[data[i] % kBins];
  for (int b = 0; b < kBins; ++b) {
    CHECK(bins[b] == expected[b], "bin %d = %u, expected %u", b, bins[b], expected[b]);
  }
  std::printf("histogram ok\n");

  const int blocks = 6, threads = 128, total = blocks * threads;
  AtomicResults init{};
  init.minValue = 1 << 30;
  init.maxValue = -(1 << 30);
  init.andBits = 0xffffffffu;
  AtomicResults* dresults;
  int* dslots;
  CHECK_CUDA(cudaMalloc(&dresults, sizeof(AtomicResults)));
  CHECK_CUDA(cudaMalloc(&dslots, (4 + total) * sizeof(int)));
  CHECK_CUDA(cudaMemcpy(dresults, &init, sizeof(init), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemset(dslots, 0xff, 4 * sizeof(int)));
  atomicsKernel<<<blocks, threads>>>(dresults, dslots);
  CHECK_CUDA(cudaGetLastError());
  AtomicResults r;
  std::vector<int> slots(4 + total);
  CHECK_CUDA(cudaMemcpy(&r, dresults, sizeof(r), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(slots.data(), dslots, slots.size() * sizeof(int), cudaMemcpyDeviceToHost));

  int minValue = 1 << 30, maxValue = -(1 << 30), sum = 0;
  unsigned andBits = 0xffffffffu, orBits = 0, xorBits = 0;
  double doubleSum = 0;
  unsigned long long wideSum = 0;
  for (int t = 0; t < total; ++t) {
    const int v = (t * 37) % 1001 - 500;
    minValue = v < minValue ? v : minValue;
    maxValue = v > maxValue ? v : maxValue;
    sum += v;
    andBits &= ~(1u << (t % 32)) | (t >= 32 ? 0xffffffffu : 0u);
    orBits |= 1u << (t % 29);
    xorBits ^= static_cast<unsigned>(t) * 2654435761u;
    doubleSum += static_cast<double>(v) * 0.25;
    wideSum += 0x100000000ull + static_cast<unsigned>(t);
  }
  CHECK(r.minValue == minValue && r.maxValue == maxValue, "min/max %d/%d, expected %d/%d",
        r.minValue, r.maxValue, minValue, maxValue);
  CHECK(r.andBits == andBits && r.orBits == orBits && r.xorBits == xorBits,
        "and/or/xor %08x/%08x/%08x, expected %08x/%08x/%08x", r.andBits, r.orBits, r.xorBits,
        andBits, orBits, xorBits);
  CHECK(r.incCounter == static_cast<unsigned>(total % 100), "atomicInc counter %u, expected %u",
        r.incCounter, total % 100);
  CHECK(r.casSum == sum, "CAS-loop sum %d, expected %d", r.casSum, sum);
  CHECK(r.floatSum == 0.5f * total, "float atomicAdd %f, expected %f", r.floatSum, 0.5f * total);
  // Quarter-integers: every partial sum is exact in double, so the order does not matter.
  CHECK(r.doubleSum == doubleSum, "double atomicAdd %f, expected %f", r.doubleSum, doubleSum);
  CHECK(r.wideSum == wideSum, "64-bit atomicAdd %llx, expected %llx", r.wideSum, wideSum);
  std::vector<int> seen(total + 1, 0);  // seen[0] counts the -1s
  for (int value : slots) {
    CHECK(value >= -1 && value < total, "exchange produced %d", value);
    ++seen[value + 1];
  }
  CHECK(seen[0] == 4, "%d initial values survived the exchanges, expected 4", seen[0]);
  for (int t = 0; t < total; ++t)
    CHECK(seen[t + 1] == 1, "thread id %d seen %d times", t, seen[t + 1]);
  std::printf("atomics ok\n");
  CHECK_CUDA(cudaFree(ddata));
  CHECK_CUDA(cudaFree(dbins));
  CHECK_CUDA(cudaFree(dresults));
  CHECK_CUDA(cudaFree(dslots));
  return pass();
}
