// What the programs that share device memory between processes (ipc_memory_driver,
// vmm_shareable_driver) write and check: a pattern of each element's index and a salt, so each
// side can tell the other's writes from its own.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <vector>

#include "driver_check.h"

inline __host__ __device__ uint32_t sharedPattern(size_t i, uint32_t salt) {
  return static_cast<uint32_t>(i) * 2654435761u ^ salt;
}

__global__ void fillSharedPattern(uint32_t* p, size_t n, uint32_t salt) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    p[i] = sharedPattern(i, salt);
  }
}

inline void fillOnDevice(CUdeviceptr p, size_t count, uint32_t salt) {
  fillSharedPattern<<<64, 256>>>(reinterpret_cast<uint32_t*>(p), count, salt);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CU(cuCtxSynchronize());
}

// Fails unless the count elements at p hold the pattern of salt; `who` names the reader.
inline void checkHolds(CUdeviceptr p, size_t count, uint32_t salt, const char* who) {
  std::vector<uint32_t> host(count);
  CHECK_CU(cuMemcpyDtoH(host.data(), p, count * sizeof(uint32_t)));
  for (size_t i = 0; i < count; ++i) {
    const uint32_t want = sharedPattern(i, salt);
    CHECK(host[i] == want, "%s: element %zu reads %u, expected %u", who, i, host[i], want);
  }
}

// The runtime makes the primary context current; the driver calls then work in it.
inline void startPrimaryContext(CUcontext* context) {
  CHECK_CUDA(cudaFree(nullptr));
  CHECK_CU(cuCtxGetCurrent(context));
  CHECK(*context != nullptr, "no current context");
}
