// Mapped pinned memory (cudaHostAllocMapped), zero-copy: where the session serves it (a client on
// the server's host, over shm, with a backend that maps its files), the device says it can map
// host memory, cudaHostGetDevicePointer gives the host's own address (unified addressing), a
// kernel reads what the host wrote there and the host reads what the kernel wrote once it has
// synchronized, with no copy, through either pointer, and the pointer's attributes say it is
// mapped host memory. Prints PASS. Where it is not served the attribute is 0 and the allocation
// fails: prints REFUSED and the error, and exits 0. Anything else prints FAIL and exits 1.
#include <cuda_runtime.h>

#include <cstdio>

namespace {

bool ok(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return true;
  std::printf("FAIL: %s: %s\n", what, cudaGetErrorName(status));
  return false;
}

__global__ void tripleAndMark(unsigned* v, size_t n, unsigned* marks) {
  size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < n) v[i] *= 3;
  if (i == 0) marks[0] = 0xC0FFEE;
}

}  // namespace

int main() {
  int canMap = -1;
  if (!ok(cudaDeviceGetAttribute(&canMap, cudaDevAttrCanMapHostMemory, 0), "attribute")) return 1;
  if (!ok(cudaSetDeviceFlags(cudaDeviceMapHost), "cudaSetDeviceFlags(cudaDeviceMapHost)")) return 1;
  constexpr size_t kWords = 3u << 18;  // 3 MiB: not a power of two
  unsigned* host = nullptr;
  cudaError_t allocated = cudaHostAlloc(&host, kWords * sizeof(unsigned), cudaHostAllocMapped);
  if (canMap == 0) {
    if (allocated == cudaSuccess) {
      std::printf("FAIL: mapped memory allocated on a device that cannot map host memory\n");
      return 1;
    }
    std::printf("REFUSED %s\n", cudaGetErrorName(allocated));
    return 0;
  }
  if (canMap != 1 || !ok(allocated, "cudaHostAlloc(cudaHostAllocMapped)")) return 1;
  unsigned* marks = nullptr;
  if (!ok(cudaHostAlloc(&marks, 4096, cudaHostAllocMapped), "cudaHostAlloc(marks)")) return 1;

  unsigned* device = nullptr;
  if (!ok(cudaHostGetDevicePointer(&device, host, 0), "cudaHostGetDevicePointer")) return 1;
  if (device != host) {
    std::printf("FAIL: device pointer %p is not the host pointer %p\n", static_cast<void*>(device),
                static_cast<void*>(host));
    return 1;
  }
  cudaPointerAttributes attributes{};
  if (!ok(cudaPointerGetAttributes(&attributes, host + 5), "cudaPointerGetAttributes")) return 1;
  if (attributes.type != cudaMemoryTypeHost || attributes.devicePointer != host + 5 ||
      attributes.hostPointer != host + 5) {
    std::printf("FAIL: attributes type %d device %p host %p\n", static_cast<int>(attributes.type),
                attributes.devicePointer, attributes.hostPointer);
    return 1;
  }
  unsigned flags = 0;
  if (!ok(cudaHostGetFlags(&flags, host), "cudaHostGetFlags")) return 1;
  if (!(flags & cudaHostAllocMapped)) {
    std::printf("FAIL: flags %u lack cudaHostAllocMapped\n", flags);
    return 1;
  }

  // Round 1 through the device pointer, round 2 through the host pointer itself.
  for (size_t i = 0; i < kWords; ++i) host[i] = static_cast<unsigned>(i);
  for (int round = 1; round <= 2; ++round) {
    marks[0] = 0;
    unsigned* v = round == 1 ? device : host;
    tripleAndMark<<<(kWords + 255) / 256, 256>>>(v, kWords, marks);
    if (!ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize")) return 1;
    unsigned factor = round == 1 ? 3 : 9;
    for (size_t i = 0; i < kWords; ++i) {
      if (host[i] != static_cast<unsigned>(i) * factor) {
        std::printf("FAIL: round %d: word %zu is %u, expected %u\n", round, i, host[i],
                    static_cast<unsigned>(i) * factor);
        return 1;
      }
    }
    if (marks[0] != 0xC0FFEE) {
      std::printf("FAIL: round %d: the kernel's mark is %x\n", round, marks[0]);
      return 1;
    }
  }

  // Copies name it like any pinned memory.
  unsigned* buffer = nullptr;
  if (!ok(cudaMalloc(&buffer, kWords * sizeof(unsigned)), "cudaMalloc") ||
      !ok(cudaMemcpy(buffer, host, kWords * sizeof(unsigned), cudaMemcpyHostToDevice), "H2D"))
    return 1;
  for (size_t i = 0; i < kWords; ++i) host[i] = 0;
  if (!ok(cudaMemcpy(host, buffer, kWords * sizeof(unsigned), cudaMemcpyDeviceToHost), "D2H"))
    return 1;
  for (size_t i = 0; i < kWords; ++i) {
    if (host[i] != static_cast<unsigned>(i) * 9) {
      std::printf("FAIL: copied word %zu is %u\n", i, host[i]);
      return 1;
    }
  }
  if (!ok(cudaFree(buffer), "cudaFree") || !ok(cudaFreeHost(host), "cudaFreeHost") ||
      !ok(cudaFreeHost(marks), "cudaFreeHost"))
    return 1;
  // Freed, it is gone for the device too.
  unsigned* stale = nullptr;
  if (cudaHostGetDevicePointer(&stale, host, 0) == cudaSuccess) {
    std::printf("FAIL: a freed allocation still has a device pointer\n");
    return 1;
  }
  cudaGetLastError();
  std::printf("PASS\n");
  return 0;
}
