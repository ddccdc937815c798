// Runtime API profiler ranges, as NVIDIA's samples and torch.cuda.profiler use them: the timed work
// is bracketed by cudaProfilerStart/cudaProfilerStop, which succeed whether or not a profiler is
// attached (starting twice or stopping twice has no effect). The bracketed kernel's result is
// checked element by element.
#include <cuda_profiler_api.h>

#include <vector>

#include "self_check.h"

namespace {

__global__ void square(const int* in, int* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * in[i];
}

}  // namespace

int main() {
  const int n = 4099;  // not a multiple of the block
  std::vector<int> in(n), out(n, -1);
  for (int i = 0; i < n; ++i) in[i] = i - n / 2;
  int *din, *dout;
  CHECK_CUDA(cudaMalloc(&din, n * sizeof(int)));
  CHECK_CUDA(cudaMalloc(&dout, n * sizeof(int)));
  CHECK_CUDA(cudaMemcpy(din, in.data(), n * sizeof(int), cudaMemcpyHostToDevice));

  CHECK_CUDA(cudaProfilerStart());
  CHECK_CUDA(cudaProfilerStart());  // already started: no effect
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  CHECK_CUDA(cudaEventRecord(start));
  square<<<(n + 127) / 128, 128>>>(din, dout, n);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaEventRecord(stop));
  CHECK_CUDA(cudaEventSynchronize(stop));
  CHECK_CUDA(cudaProfilerStop());
  CHECK_CUDA(cudaProfilerStop());  // already stopped: no effect
  float ms = -1.0f;
  CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
  CHECK(ms >= 0.0f, "elapsed time %f ms is negative", ms);
  std::printf("profiled range: %d elements, elapsed %.3f ms\n", n, ms);

  CHECK_CUDA(cudaMemcpy(out.data(), dout, n * sizeof(int), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) {
    CHECK(out[i] == in[i] * in[i], "out[%d] = %d, expected %d", i, out[i], in[i] * in[i]);
  }
  std::printf("square: %d elements ok\n", n);
  CHECK_CUDA(cudaEventDestroy(start));
  CHECK_CUDA(cudaEventDestroy(stop));
  CHECK_CUDA(cudaFree(din));
  CHECK_CUDA(cudaFree(dout));
  return pass();
}
