// cuSOLVER (dense): Cholesky factorization (potrf) of a symmetric positive definite matrix and a
// solve (potrs); the solution's residual is checked on the CPU.
#include <cusolverDn.h>

#include "toolkit_check.h"

int main() {
  const int n = 256, rhs = 3;
  // A = M M^T + n I: symmetric positive definite and well conditioned.
  const auto randomM = randomFloats(size_t(n) * n, 14);
  std::vector<double> a(size_t(n) * n);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      double sum = 0;
      for (int p = 0; p < n; ++p)
        sum += double(randomM[size_t(p) * n + i]) * randomM[size_t(p) * n + j];
      a[size_t(j) * n + i] = sum + (i == j ? n : 0);
    }
  }
  const auto randomB = randomFloats(size_t(n) * rhs, 15);
  const std::vector<double> b(randomB.begin(), randomB.end());

  cusolverDnHandle_t handle;
  CHECK_STATUS(cusolverDnCreate(&handle), CUSOLVER_STATUS_SUCCESS);
  DeviceArray<double> dA(a), dB(b);
  DeviceArray<int> info(std::vector<int>{-1});
  int workSize = 0;
  CHECK_STATUS(
      cusolverDnDpotrf_bufferSize(handle, CUBLAS_FILL_MODE_LOWER, n, dA.get(), n, &workSize),
      CUSOLVER_STATUS_SUCCESS);
  DeviceArray<double> work(workSize > 0 ? workSize : 1);
  CHECK_STATUS(cusolverDnDpotrf(handle, CUBLAS_FILL_MODE_LOWER, n, dA.get(), n, work.get(),
                                workSize, info.get()),
               CUSOLVER_STATUS_SUCCESS);
  CHECK_CUDA(cudaDeviceSynchronize());
  CHECK(info.download()[0] == 0, "potrf info = %d", info.download()[0]);
  CHECK_STATUS(cusolverDnDpotrs(handle, CUBLAS_FILL_MODE_LOWER, n, rhs, dA.get(), n, dB.get(), n,
                                info.get()),
               CUSOLVER_STATUS_SUCCESS);
  CHECK_CUDA(cudaDeviceSynchronize());
  CHECK(info.download()[0] == 0, "potrs info = %d", info.download()[0]);
  const std::vector<double> x = dB.download();

  double worst = 0;
  for (int c = 0; c < rhs; ++c) {
    double residual = 0, norm = 0;
    for (int i = 0; i < n; ++i) {
      double ax = 0;
      for (int j = 0; j < n; ++j) ax += a[size_t(j) * n + i] * x[size_t(c) * n + j];
      residual = std::max(residual, std::fabs(ax - b[size_t(c) * n + i]));
      norm = std::max(norm, std::fabs(b[size_t(c) * n + i]));
    }
    worst = std::max(worst, residual / norm);
  }
  CHECK(worst < 1e-10, "relative residual %.3g", worst);
  std::printf("cusolverDnDpotrf + potrs %dx%d, %d right-hand sides: relative residual %.3g\n", n, n,
              rhs, worst);
  CHECK_STATUS(cusolverDnDestroy(handle), CUSOLVER_STATUS_SUCCESS);
  return pass();
}
