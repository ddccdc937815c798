// cublasGemmEx, fp16 inputs, fp32 accumulate and output (tensor cores).
#include <cuda_fp16.h>

#include "gemmex_check.h"

int main() {
  return runGemmEx<__half>("cublasGemmEx fp16 512x256x384", CUDA_R_16F,
                           [](float v) { return __float2half(v); });
}
