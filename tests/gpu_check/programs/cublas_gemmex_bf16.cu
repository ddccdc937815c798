// cublasGemmEx, bf16 inputs, fp32 accumulate and output (tensor cores).
#include <cuda_bf16.h>

#include "gemmex_check.h"

int main() {
  return runGemmEx<__nv_bfloat16>("cublasGemmEx bf16 512x256x384", CUDA_R_16BF,
                                  [](float v) { return __float2bfloat16(v); });
}
