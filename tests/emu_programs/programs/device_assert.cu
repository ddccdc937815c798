// A failing device assert: the launch itself succeeds, the next synchronization returns
// cudaErrorAssert, and the error is sticky. The program prints what it saw and exits with code 42
// (the runner expects exactly that); any other outcome exits 1.
#include <cassert>
#include <cstdio>

#include "self_check.h"

__global__ void checkPositive(const int* values, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) assert(values[i] > 0);
}

int main() {
  const int n = 64;
  int host[n];
  for (int i = 0; i < n; ++i) host[i] = i + 1;
  int* values;
  CHECK_CUDA(cudaMalloc(&values, sizeof(host)));
  CHECK_CUDA(cudaMemcpy(values, host, sizeof(host), cudaMemcpyHostToDevice));
  checkPositive<<<2, 32>>>(values, n);  // all positive: passes
  CHECK_CUDA(cudaDeviceSynchronize());
  std::printf("assert that holds: ok\n");

  host[37] = -5;
  CHECK_CUDA(cudaMemcpy(values, host, sizeof(host), cudaMemcpyHostToDevice));
  checkPositive<<<2, 32>>>(values, n);
  CHECK_CUDA(cudaGetLastError());  // the launch is valid; the failure comes at synchronization
  const cudaError_t status = cudaDeviceSynchronize();
  std::printf("cudaDeviceSynchronize after failing assert: %s\n", cudaGetErrorName(status));
  CHECK(status == cudaErrorAssert, "expected cudaErrorAssert");
  // Sticky: the context is unusable afterwards.
  const cudaError_t later = cudaMemcpy(host, values, sizeof(host), cudaMemcpyDeviceToHost);
  std::printf("later cudaMemcpy: %s\n", cudaGetErrorName(later));
  CHECK(later == cudaErrorAssert, "expected the assert error to be sticky");
  std::fflush(stdout);
  return 42;
}
