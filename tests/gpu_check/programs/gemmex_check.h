// cublasGemmEx with 16-bit inputs (fp16 or bf16), fp32 output and fp32 compute: tensor cores on
// any GPU since Volta (bf16: Ampere). Shared by cublas_gemmex_fp16.cu and cublas_gemmex_bf16.cu.
#pragma once

#include <cublas_v2.h>

#include "toolkit_check.h"

template <typename Half>
int runGemmEx(const char* what, cudaDataType inputType, Half (*fromFloat)(float)) {
  const int m = 512, n = 256, k = 384;
  const float alpha = 1.0f, beta = 0.25f;
  auto toHalf = [&](const std::vector<float>& values) {
    std::vector<Half> out;
    for (float v : values) out.push_back(fromFloat(v));
    return out;
  };
  const std::vector<Half> a = toHalf(randomFloats(size_t(m) * k, 4)),
                          b = toHalf(randomFloats(size_t(k) * n, 5));
  const std::vector<float> c = randomFloats(size_t(m) * n, 6);

  cublasHandle_t handle;
  CHECK_STATUS(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);
  DeviceArray<Half> dA(a), dB(b);
  DeviceArray<float> dC(c);
  CHECK_STATUS(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, dA.get(), inputType,
                            m, dB.get(), inputType, k, &beta, dC.get(), CUDA_R_32F, m,
                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               CUBLAS_STATUS_SUCCESS);
  CHECK_CUDA(cudaDeviceSynchronize());
  // The inputs are exact in 16 bits; products are exact in fp32; only the fp32 sums round.
  checkAgainstReference(what, dC.download(), referenceGemm(m, n, k, alpha, a, b, beta, c), 1e-4);
  CHECK_STATUS(cublasDestroy(handle), CUBLAS_STATUS_SUCCESS);
  return pass();
}
