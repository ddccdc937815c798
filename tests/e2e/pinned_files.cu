// Copies between device memory and pinned host memory, checked byte for byte, for the tests of
// pinned memory that a server on the client's host maps from memory files (shm sessions): a
// synchronous copy has read its source before it returns, asynchronous ones in stream order,
// offsets inside the allocations, a kernel in between, and a copy too small to use the file.
// Prints READY with both pinned allocations alive and waits for a line on stdin; frees one,
// prints FREED and waits for another line; frees the other and prints PASS. Any error or wrong
// byte prints FAIL and exits 1.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>

namespace {

bool ok(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return true;
  std::printf("FAIL: %s: %s\n", what, cudaGetErrorName(status));
  return false;
}

unsigned pattern(size_t i, unsigned seed) { return static_cast<unsigned>(i * 2654435761u) ^ seed; }

bool check(const unsigned* got, size_t from, size_t to, unsigned seed, unsigned plus,
           const char* what) {
  for (size_t i = from; i < to; ++i) {
    if (got[i - from] != pattern(i, seed) + plus) {
      std::printf("FAIL: %s: word %zu is %u, expected %u\n", what, i, got[i - from],
                  pattern(i, seed) + plus);
      return false;
    }
  }
  return true;
}

void waitForLine() {
  char line[64];
  if (!std::fgets(line, sizeof line, stdin)) std::printf("stdin closed\n");
}

__global__ void addOne(unsigned* v, size_t n) {
  size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < n) v[i] += 1;
}

}  // namespace

int main() {
  constexpr size_t kWords = 1u << 20;  // 4 MiB
  constexpr size_t kBytes = kWords * sizeof(unsigned);
  constexpr size_t kOffsetWords = 3000;  // not page-aligned
  unsigned *a = nullptr, *b = nullptr, *d = nullptr;
  cudaStream_t stream;
  if (!ok(cudaMallocHost(&a, kBytes), "cudaMallocHost") ||
      !ok(cudaHostAlloc(&b, kBytes, cudaHostAllocPortable), "cudaHostAlloc") ||
      !ok(cudaMalloc(&d, kBytes), "cudaMalloc") || !ok(cudaStreamCreate(&stream), "stream"))
    return 1;

  // A synchronous copy has read its source when it returns: overwriting it then changes nothing.
  for (size_t i = 0; i < kWords; ++i) a[i] = pattern(i, 1);
  if (!ok(cudaMemcpy(d, a, kBytes, cudaMemcpyHostToDevice), "H2D")) return 1;
  std::memset(a, 0, kBytes);
  if (!ok(cudaMemcpy(b, d, kBytes, cudaMemcpyDeviceToHost), "D2H")) return 1;
  if (!check(b, 0, kWords, 1, 0, "synchronous round trip")) return 1;

  // A kernel, then an asynchronous copy back into the middle of b.
  addOne<<<(kWords + 255) / 256, 256, 0, stream>>>(d, kWords);
  std::memset(b, 0, kBytes);
  if (!ok(cudaMemcpyAsync(b + kOffsetWords, d + kOffsetWords, kBytes - kOffsetWords * 4,
                          cudaMemcpyDeviceToHost, stream),
          "D2H async") ||
      !ok(cudaStreamSynchronize(stream), "sync"))
    return 1;
  if (!check(b + kOffsetWords, kOffsetWords, kWords, 1, 1, "after the kernel")) return 1;
  if (b[kOffsetWords - 1] != 0) {
    std::printf("FAIL: the copy wrote before its destination\n");
    return 1;
  }

  // Asynchronous host-to-device from inside a, in stream order after a kernel.
  for (size_t i = 0; i < kWords; ++i) a[i] = pattern(i, 2);
  addOne<<<(kWords + 255) / 256, 256, 0, stream>>>(d, kWords);
  if (!ok(cudaMemcpyAsync(d, a + kOffsetWords, 1u << 20, cudaMemcpyHostToDevice, stream),
          "H2D async") ||
      !ok(cudaStreamSynchronize(stream), "sync"))
    return 1;
  if (!ok(cudaMemcpy(b, d, 1u << 20, cudaMemcpyDeviceToHost), "D2H")) return 1;
  if (!check(b, kOffsetWords, kOffsetWords + (1u << 18), 2, 0, "async from an offset")) return 1;

  // Small copies (through the ring) agree with the rest.
  if (!ok(cudaMemcpy(a + 5, d, 64, cudaMemcpyDeviceToHost), "small D2H")) return 1;
  if (!check(a + 5, kOffsetWords, kOffsetWords + 16, 2, 0, "small copy")) return 1;

  std::printf("READY\n");
  std::fflush(stdout);
  waitForLine();
  if (!ok(cudaFreeHost(a), "cudaFreeHost")) return 1;
  // A copy after the free still works from the other allocation.
  if (!ok(cudaMemcpy(b, d, kBytes, cudaMemcpyDeviceToHost), "D2H after a free")) return 1;
  if (!check(b, kOffsetWords, kOffsetWords + (1u << 18), 2, 0, "after a free")) return 1;
  std::printf("FREED\n");
  std::fflush(stdout);
  waitForLine();
  if (!ok(cudaFreeHost(b), "cudaFreeHost") || !ok(cudaFree(d), "cudaFree")) return 1;
  std::printf("PASS\n");
  return 0;
}
