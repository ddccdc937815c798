// A kernel using a tensor-core instruction (inline `mma.sync`), which the emu device does not
// implement: the module must fail to load with an error naming the instruction, instead of the
// kernel running wrongly. The program reports the first CUDA error it gets and exits with 44;
// it exits 1 if everything succeeds.
#include <cstdio>

#include "self_check.h"

__global__ void mmaKernel(const unsigned* a, const unsigned* b, float* d) {
  const int lane = threadIdx.x;
  float c0 = 0.0f, c1 = 0.0f, c2 = 0.0f, c3 = 0.0f;
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5}, {%6}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3)
      : "r"(a[lane * 2]), "r"(a[lane * 2 + 1]), "r"(b[lane]));
  d[lane * 4 + 0] = c0;
  d[lane * 4 + 1] = c1;
  d[lane * 4 + 2] = c2;
  d[lane * 4 + 3] = c3;
}

#define REPORT_IF_FAILED(call)                                             \
  do {                                                                     \
    const cudaError_t status_ = (call);                                    \
    if (status_ != cudaSuccess) {                                          \
      std::printf("%s failed: %s: %s\n", #call, cudaGetErrorName(status_), \
                  cudaGetErrorString(status_));                            \
      std::fflush(stdout);                                                 \
      return 44;                                                           \
    }                                                                      \
  } while (0)

int main() {
  unsigned *a, *b;
  float* d;
  REPORT_IF_FAILED(cudaMalloc(&a, 64 * sizeof(unsigned)));
  REPORT_IF_FAILED(cudaMalloc(&b, 32 * sizeof(unsigned)));
  REPORT_IF_FAILED(cudaMalloc(&d, 128 * sizeof(float)));
  REPORT_IF_FAILED(cudaMemset(a, 0, 64 * sizeof(unsigned)));
  REPORT_IF_FAILED(cudaMemset(b, 0, 32 * sizeof(unsigned)));
  mmaKernel<<<1, 32>>>(a, b, d);
  REPORT_IF_FAILED(cudaGetLastError());
  REPORT_IF_FAILED(cudaDeviceSynchronize());
  FAIL("the mma.sync kernel ran on a device that cannot execute it");
}
