// Holds a stream at a stream wait nothing meets while the program waits for that stream, so a test
// can kill the program while the server waits for the stream on the session's behalf: 64 MiB of
// device memory, cuStreamWaitValue32 on a word that stays 0, then READY and cudaStreamSynchronize.
// Any CUDA error prints FAIL.
#include <cuda.h>
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
  cudaStream_t stream = nullptr;
  if (!ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate")) return 1;
  if (!ok(cudaMalloc(&memory, kBytes), "cudaMalloc")) return 1;
  if (!ok(cudaMemset(memory, 0, kBytes), "cudaMemset")) return 1;
  CUresult r = cuStreamWaitValue32(stream, reinterpret_cast<CUdeviceptr>(memory), 1,
                                   CU_STREAM_WAIT_VALUE_EQ);
  if (r != CUDA_SUCCESS) {
    std::printf("FAIL: cuStreamWaitValue32: %d\n", static_cast<int>(r));
    return 1;
  }
  std::printf("READY\n");
  std::fflush(stdout);
  cudaError_t waited = cudaStreamSynchronize(stream);  // until killed
  std::printf("FAIL: the stream went past its wait (%s)\n", cudaGetErrorName(waited));
  return 1;
}
