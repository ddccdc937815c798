// An out-of-bounds store: the launch returns success, the next synchronization returns
// cudaErrorIllegalAddress, and the error is sticky (later calls, even a valid cudaMalloc, fail
// with it). Prints what it saw and exits with code 43 when all of that held; otherwise 1.
#include <cstdio>

#include "self_check.h"

__global__ void writeFar(int* data, long long offset) {
  if (threadIdx.x == 5)
    data[offset] = 1;  // far past any allocation
  else
    data[threadIdx.x] = threadIdx.x;
}

int main() {
  int* data;
  CHECK_CUDA(cudaMalloc(&data, 64 * sizeof(int)));
  writeFar<<<1, 32>>>(data, 0);  // offset 0: in bounds
  CHECK_CUDA(cudaDeviceSynchronize());
  std::printf("in-bounds launch ok\n");

  writeFar<<<1, 32>>>(data, 1ll << 36);  // 256 GiB past the allocation
  CHECK_CUDA(cudaGetLastError());
  const cudaError_t status = cudaDeviceSynchronize();
  std::printf("cudaDeviceSynchronize after the bad store: %s\n", cudaGetErrorName(status));
  CHECK(status == cudaErrorIllegalAddress, "expected cudaErrorIllegalAddress");
  int host = 0;
  const cudaError_t copy = cudaMemcpy(&host, data, sizeof(int), cudaMemcpyDeviceToHost);
  std::printf("later cudaMemcpy: %s\n", cudaGetErrorName(copy));
  CHECK(copy == cudaErrorIllegalAddress, "expected the error to be sticky for cudaMemcpy");
  void* more = nullptr;
  const cudaError_t alloc = cudaMalloc(&more, 16);
  std::printf("later cudaMalloc: %s\n", cudaGetErrorName(alloc));
  CHECK(alloc == cudaErrorIllegalAddress, "expected the error to be sticky for cudaMalloc");
  writeFar<<<1, 32>>>(data, 0);
  const cudaError_t launch = cudaDeviceSynchronize();
  std::printf("later launch: %s\n", cudaGetErrorName(launch));
  CHECK(launch == cudaErrorIllegalAddress, "expected the error to be sticky for launches");
  std::fflush(stdout);
  return 43;
}
