// Holds 64 MiB of device memory until told to let go, so a test can look at the server meanwhile.
// Prints READY once the memory is allocated and written, waits for a line on stdin, frees the
// memory and prints PASS. Any CUDA error prints FAIL and exits 1.
#include <cuda_runtime.h>

#include <cstdio>

namespace {

bool ok(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return true;
  std::printf("FAIL: %s: %s\n", what, cudaGetErrorName(status));
  return false;
}

}  // namespace

int main() {
  constexpr size_t kBytes = 64u << 20;
  void* memory = nullptr;
  if (!ok(cudaMalloc(&memory, kBytes), "cudaMalloc")) return 1;
  if (!ok(cudaMemset(memory, 0x5a, kBytes), "cudaMemset")) return 1;
  if (!ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize")) return 1;
  std::printf("READY\n");
  std::fflush(stdout);
  char line[64];
  if (!std::fgets(line, sizeof line, stdin)) std::printf("stdin closed\n");
  if (!ok(cudaFree(memory), "cudaFree")) return 1;
  std::printf("PASS\n");
  return 0;
}
