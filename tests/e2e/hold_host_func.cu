// Holds a stream at a host function that never returns, so a test can kill the program while the
// server's stream waits at the function's gate: 64 MiB of device memory, a host function that
// prints READY and then blocks, and a memset queued behind it. Any CUDA error prints FAIL.
#include <cuda_runtime.h>
#include <unistd.h>

#include <cstdio>

namespace {

bool ok(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return true;
  std::printf("FAIL: %s: %s\n", what, cudaGetErrorName(status));
  return false;
}

void CUDART_CB blockForever(void*) {
  std::printf("READY\n");
  std::fflush(stdout);
  for (;;) pause();
}

}  // namespace

int main() {
  constexpr size_t kBytes = 64u << 20;
  void* memory = nullptr;
  cudaStream_t stream = nullptr;
  if (!ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate")) return 1;
  if (!ok(cudaMalloc(&memory, kBytes), "cudaMalloc")) return 1;
  if (!ok(cudaLaunchHostFunc(stream, blockForever, nullptr), "cudaLaunchHostFunc")) return 1;
  if (!ok(cudaMemsetAsync(memory, 0x5a, kBytes, stream), "cudaMemsetAsync")) return 1;
  for (;;) pause();  // until killed
}
