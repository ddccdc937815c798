// Stream-ordered allocation through the runtime: cudaMallocAsync and cudaFreeAsync on the
// device's default pool, a pool made with cudaMemPoolCreate (cudaMallocFromPoolAsync, and as the
// device's current pool), the pool attributes (release threshold, reuse policy, reserved and used
// memory with their high watermarks), cudaMemPoolTrimTo and pool access. Kernels and copies use
// the memory in stream order and the results are checked element by element.
#include <cstdint>
#include <vector>

#include "self_check.h"

namespace {

constexpr int kCount = 1 << 16;
constexpr size_t kBytes = kCount * sizeof(int);

__global__ void fill(int* out, int count, int base) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) out[i] = base + i;
}

__global__ void addOne(const int* in, int* out, int count) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) out[i] = in[i] + 1;
}

constexpr unsigned kThreads = 256;
constexpr unsigned kBlocks = (kCount + kThreads - 1) / kThreads;

uint64_t attribute(cudaMemPool_t pool, cudaMemPoolAttr which) {
  uint64_t value = 0;
  CHECK_CUDA(cudaMemPoolGetAttribute(pool, which, &value));
  return value;
}

void setThreshold(cudaMemPool_t pool, uint64_t bytes) {
  CHECK_CUDA(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &bytes));
  CHECK(attribute(pool, cudaMemPoolAttrReleaseThreshold) == bytes, "release threshold not kept");
}

void expectSequence(const std::vector<int>& host, int base, const char* what) {
  for (int i = 0; i < kCount; ++i) {
    CHECK(host[i] == base + i, "%s: element %d is %d, expected %d", what, i, host[i], base + i);
  }
}

// Fills a stream-ordered allocation, derives a second one from it, reads that back and frees
// both, all in stream order on `stream`; `allocate` makes each allocation.
template <typename Allocate>
void roundTrip(cudaStream_t stream, Allocate allocate, int base, const char* what) {
  int* first = nullptr;
  int* second = nullptr;
  allocate(&first);
  fill<<<kBlocks, kThreads, 0, stream>>>(first, kCount, base);
  allocate(&second);
  addOne<<<kBlocks, kThreads, 0, stream>>>(first, second, kCount);
  CHECK_CUDA(cudaFreeAsync(first, stream));
  std::vector<int> host(kCount);
  CHECK_CUDA(cudaMemcpyAsync(host.data(), second, kBytes, cudaMemcpyDeviceToHost, stream));
  CHECK_CUDA(cudaFreeAsync(second, stream));
  CHECK_CUDA(cudaStreamSynchronize(stream));
  expectSequence(host, base + 1, what);
}

}  // namespace

int main() {
  CHECK_CUDA(cudaSetDevice(0));
  int supported = 0;
  CHECK_CUDA(cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, 0));
  CHECK(supported == 1, "memory pools not supported (attribute %d)", supported);
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  // The default pool is the current one until another is set.
  cudaMemPool_t defaultPool, current;
  CHECK_CUDA(cudaDeviceGetDefaultMemPool(&defaultPool, 0));
  CHECK_CUDA(cudaDeviceGetMemPool(&current, 0));
  CHECK(current == defaultPool, "the current pool is not the default pool");

  // With the release threshold at its maximum the pool keeps what was freed, and reuses it.
  setThreshold(defaultPool, UINT64_MAX);
  roundTrip(
      stream, [&](int** p) { CHECK_CUDA(cudaMallocAsync(p, kBytes, stream)); }, 100,
      "default pool");
  CHECK(attribute(defaultPool, cudaMemPoolAttrUsedMemCurrent) == 0, "used memory after frees");
  uint64_t reserved = attribute(defaultPool, cudaMemPoolAttrReservedMemCurrent);
  CHECK(reserved >= 2 * kBytes, "the pool kept %llu bytes, expected at least %zu",
        static_cast<unsigned long long>(reserved), 2 * kBytes);
  CHECK(attribute(defaultPool, cudaMemPoolAttrUsedMemHigh) >= 2 * kBytes, "used high watermark");
  CHECK(attribute(defaultPool, cudaMemPoolAttrReservedMemHigh) >= reserved,
        "reserved high watermark");
  roundTrip(
      stream, [&](int** p) { CHECK_CUDA(cudaMallocAsync(p, kBytes, stream)); }, 200,
      "default pool, reused");
  CHECK(attribute(defaultPool, cudaMemPoolAttrReservedMemCurrent) == reserved,
        "the pool grew instead of reusing its memory");

  // High watermarks reset to the current value by setting 0, and to nothing else.
  uint64_t zero = 0, one = 1;
  CHECK_CUDA(cudaMemPoolSetAttribute(defaultPool, cudaMemPoolAttrUsedMemHigh, &zero));
  CHECK(attribute(defaultPool, cudaMemPoolAttrUsedMemHigh) == 0, "used high watermark not reset");
  CHECK_CUDA(cudaMemPoolSetAttribute(defaultPool, cudaMemPoolAttrReservedMemHigh, &zero));
  CHECK(attribute(defaultPool, cudaMemPoolAttrReservedMemHigh) == reserved,
        "reserved high watermark not reset to the current value");
  EXPECT_CUDA_ERROR(cudaMemPoolSetAttribute(defaultPool, cudaMemPoolAttrUsedMemHigh, &one),
                    cudaErrorInvalidValue);
  EXPECT_CUDA_ERROR(cudaMemPoolSetAttribute(defaultPool, cudaMemPoolAttrUsedMemCurrent, &zero),
                    cudaErrorInvalidValue);

  // Trimming gives unused memory back.
  CHECK_CUDA(cudaMemPoolTrimTo(defaultPool, 0));
  CHECK(attribute(defaultPool, cudaMemPoolAttrReservedMemCurrent) == 0, "trim kept memory");

  // With the threshold at 0 the pool keeps nothing past a synchronization.
  setThreshold(defaultPool, 0);
  roundTrip(
      stream, [&](int** p) { CHECK_CUDA(cudaMallocAsync(p, kBytes, stream)); }, 300,
      "default pool, threshold 0");
  CHECK(attribute(defaultPool, cudaMemPoolAttrReservedMemCurrent) == 0,
        "threshold 0 kept memory after a synchronization");

  // A pool of our own.
  cudaMemPoolProps props = {};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = 0;
  cudaMemPool_t pool;
  CHECK_CUDA(cudaMemPoolCreate(&pool, &props));
  setThreshold(pool, UINT64_MAX);
  roundTrip(
      stream, [&](int** p) { CHECK_CUDA(cudaMallocFromPoolAsync(p, kBytes, pool, stream)); }, 400,
      "created pool");
  CHECK(attribute(pool, cudaMemPoolAttrReservedMemCurrent) >= 2 * kBytes,
        "the created pool kept nothing");
  CHECK(attribute(defaultPool, cudaMemPoolAttrReservedMemCurrent) == 0,
        "the default pool served an allocation from the created pool");

  // Reuse policies read back as set.
  int opportunistic = -1;
  CHECK_CUDA(cudaMemPoolGetAttribute(pool, cudaMemPoolReuseAllowOpportunistic, &opportunistic));
  CHECK(opportunistic == 1, "opportunistic reuse is on by default (got %d)", opportunistic);
  int off = 0;
  CHECK_CUDA(cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowOpportunistic, &off));
  CHECK_CUDA(cudaMemPoolGetAttribute(pool, cudaMemPoolReuseAllowOpportunistic, &opportunistic));
  CHECK(opportunistic == 0, "opportunistic reuse not turned off");

  // The pool's own device has read-write access.
  cudaMemLocation location = {};
  location.type = cudaMemLocationTypeDevice;
  location.id = 0;
  cudaMemAccessFlags access = cudaMemAccessFlagsProtNone;
  CHECK_CUDA(cudaMemPoolGetAccess(&access, pool, &location));
  CHECK(access == cudaMemAccessFlagsProtReadWrite, "pool access is %d", static_cast<int>(access));

  // As the device's current pool, it serves cudaMallocAsync.
  CHECK_CUDA(cudaDeviceSetMemPool(0, pool));
  CHECK_CUDA(cudaDeviceGetMemPool(&current, 0));
  CHECK(current == pool, "the current pool was not set");
  int* fromCurrent = nullptr;
  CHECK_CUDA(cudaMallocAsync(&fromCurrent, kBytes, stream));
  CHECK(attribute(pool, cudaMemPoolAttrUsedMemCurrent) >= kBytes,
        "cudaMallocAsync did not use the current pool");
  CHECK_CUDA(cudaFreeAsync(fromCurrent, stream));
  CHECK_CUDA(cudaStreamSynchronize(stream));
  CHECK_CUDA(cudaDeviceSetMemPool(0, defaultPool));
  CHECK_CUDA(cudaMemPoolDestroy(pool));

  // Legacy default stream too.
  int* onLegacy = nullptr;
  CHECK_CUDA(cudaMallocAsync(&onLegacy, kBytes, 0));
  fill<<<kBlocks, kThreads>>>(onLegacy, kCount, 500);
  std::vector<int> host(kCount);
  CHECK_CUDA(cudaMemcpy(host.data(), onLegacy, kBytes, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaFreeAsync(onLegacy, 0));
  CHECK_CUDA(cudaDeviceSynchronize());
  expectSequence(host, 500, "legacy stream");

  CHECK_CUDA(cudaStreamDestroy(stream));
  std::printf("stream-ordered allocation: default pool, created pool, attributes, trim: ok\n");
  return pass();
}
