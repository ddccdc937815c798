// cuBLAS SGEMM (fp32, no TF32) against a float64 CPU reference, with alpha, beta and a
// transposed operand.
#include <cublas_v2.h>

#include "toolkit_check.h"

int main() {
  const int m = 256, n = 192, k = 320;
  const float alpha = 1.5f, beta = -0.5f;
  const auto a = randomFloats(size_t(m) * k, 1), bt = randomFloats(size_t(n) * k, 2),
             c = randomFloats(size_t(m) * n, 3);
  // B is given transposed (n x k, column-major); the reference needs it k x n.
  std::vector<float> b(size_t(k) * n);
  for (int j = 0; j < n; ++j)
    for (int p = 0; p < k; ++p) b[size_t(j) * k + p] = bt[size_t(p) * n + j];

  cublasHandle_t handle;
  CHECK_STATUS(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);
  CHECK_STATUS(cublasSetMathMode(handle, CUBLAS_PEDANTIC_MATH), CUBLAS_STATUS_SUCCESS);
  DeviceArray<float> dA(a), dBt(bt), dC(c);
  CHECK_STATUS(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_T, m, n, k, &alpha, dA.get(), m,
                           dBt.get(), n, &beta, dC.get(), m),
               CUBLAS_STATUS_SUCCESS);
  CHECK_CUDA(cudaDeviceSynchronize());
  checkAgainstReference("cublasSgemm 256x192x320 (B transposed)", dC.download(),
                        referenceGemm(m, n, k, alpha, a, b, beta, c), 3e-5);
  CHECK_STATUS(cublasDestroy(handle), CUBLAS_STATUS_SUCCESS);
  return pass();
}
