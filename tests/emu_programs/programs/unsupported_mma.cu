// A kernel using a tensor-core form the emu device does not implement (inline
// `mma.sync.aligned.m8n8k4` with .f16 inputs, whose Volta quad-pair fragments the emu does not
// model): the module must fail to load with an error naming the instruction, instead of the
// kernel running wrongly. The program reports the first CUDA error it gets and exits with 44;
// it exits 1 if everything succeeds.
#include <cstdio>

#include "self_check.h"

__global__ void mmaKernel(const unsigned* a, const unsigned* b, float* d) {
  const int lane = threadIdx.x;
  float c[8] = {};
  asm volatile(
      "mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32 {%0, %1, %2, %3, %4, %5, %6, %7}, {%8, "
      "%9}, {%10, %11}, {%0, %1, %2, %3, %4, %5, %6, %7};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]), "+f"(c[4]), "+f"(c[5]), "+f"(c[6]),
        "+f"(c[7])
      : "r"(a[lane * 2]), "r"(a[lane * 2 + 1]), "r"(b[lane * 2]), "r"(b[lane * 2 + 1]));
  for (int i = 0; i < 8; ++i) d[lane * 8 + i] = c[i];
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
  REPORT_IF_FAILED(cudaMalloc(&b, 64 * sizeof(unsigned)));
  REPORT_IF_FAILED(cudaMalloc(&d, 256 * sizeof(float)));
  REPORT_IF_FAILED(cudaMemset(a, 0, 64 * sizeof(unsigned)));
  REPORT_IF_FAILED(cudaMemset(b, 0, 64 * sizeof(unsigned)));
  mmaKernel<<<1, 32>>>(a, b, d);
  REPORT_IF_FAILED(cudaGetLastError());
  REPORT_IF_FAILED(cudaDeviceSynchronize());
  FAIL("the mma.sync kernel ran on a device that cannot execute it");
}
