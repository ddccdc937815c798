// cuBLASLt: a matmul with a heuristic-chosen algorithm and a bias epilogue, fp32, against the CPU.
#include <cublasLt.h>

#include "toolkit_check.h"

int main() {
  const int m = 320, n = 256, k = 192;
  const float alpha = 1.0f, beta = 0.0f;
  const auto a = randomFloats(size_t(m) * k, 7), b = randomFloats(size_t(k) * n, 8),
             bias = randomFloats(m, 9);
  const std::vector<float> zero(size_t(m) * n, 0.0f);

  cublasLtHandle_t handle;
  CHECK_STATUS(cublasLtCreate(&handle), CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulDesc_t operation;
  CHECK_STATUS(cublasLtMatmulDescCreate(&operation, CUBLAS_COMPUTE_32F, CUDA_R_32F),
               CUBLAS_STATUS_SUCCESS);
  DeviceArray<float> dA(a), dB(b), dBias(bias), dD(zero);
  const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
  const float* biasPointer = dBias.get();
  CHECK_STATUS(cublasLtMatmulDescSetAttribute(operation, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                              sizeof(epilogue)),
               CUBLAS_STATUS_SUCCESS);
  CHECK_STATUS(cublasLtMatmulDescSetAttribute(operation, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                              &biasPointer, sizeof(biasPointer)),
               CUBLAS_STATUS_SUCCESS);
  cublasLtMatrixLayout_t layoutA, layoutB, layoutD;
  CHECK_STATUS(cublasLtMatrixLayoutCreate(&layoutA, CUDA_R_32F, m, k, m), CUBLAS_STATUS_SUCCESS);
  CHECK_STATUS(cublasLtMatrixLayoutCreate(&layoutB, CUDA_R_32F, k, n, k), CUBLAS_STATUS_SUCCESS);
  CHECK_STATUS(cublasLtMatrixLayoutCreate(&layoutD, CUDA_R_32F, m, n, m), CUBLAS_STATUS_SUCCESS);

  const size_t workspaceSize = 8 << 20;
  DeviceArray<unsigned char> workspace(workspaceSize);
  cublasLtMatmulPreference_t preference;
  CHECK_STATUS(cublasLtMatmulPreferenceCreate(&preference), CUBLAS_STATUS_SUCCESS);
  CHECK_STATUS(
      cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                           &workspaceSize, sizeof(workspaceSize)),
      CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulHeuristicResult_t heuristic = {};
  int found = 0;
  CHECK_STATUS(cublasLtMatmulAlgoGetHeuristic(handle, operation, layoutA, layoutB, layoutD, layoutD,
                                              preference, 1, &heuristic, &found),
               CUBLAS_STATUS_SUCCESS);
  CHECK(found == 1, "cublasLtMatmulAlgoGetHeuristic found no algorithm");
  CHECK_STATUS(cublasLtMatmul(handle, operation, &alpha, dA.get(), layoutA, dB.get(), layoutB,
                              &beta, dD.get(), layoutD, dD.get(), layoutD, &heuristic.algo,
                              workspace.get(), workspaceSize, 0),
               CUBLAS_STATUS_SUCCESS);
  CHECK_CUDA(cudaDeviceSynchronize());

  // The bias is one value per row, added after the product: beta = 1 on a C of repeated biases.
  std::vector<float> biasMatrix(size_t(m) * n);
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i) biasMatrix[size_t(j) * m + i] = bias[i];
  // CUBLAS_COMPUTE_32F never rounds to TF32 (only the *_FAST_TF32 modes do): fp32 sums only.
  checkAgainstReference("cublasLtMatmul 320x256x192 + bias", dD.download(),
                        referenceGemm(m, n, k, 1.0, a, b, 1.0, biasMatrix), 3e-5);

  cublasLtMatmulPreferenceDestroy(preference);
  cublasLtMatrixLayoutDestroy(layoutA);
  cublasLtMatrixLayoutDestroy(layoutB);
  cublasLtMatrixLayoutDestroy(layoutD);
  cublasLtMatmulDescDestroy(operation);
  CHECK_STATUS(cublasLtDestroy(handle), CUBLAS_STATUS_SUCCESS);
  return pass();
}
