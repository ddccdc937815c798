// Grid-stride loops with a size_t index and scalar parameters of several widths: a double-precision
// DAXPY, an integer polynomial over int64, and a launch with fewer threads than elements.
#include <cmath>
#include <cstdint>
#include <vector>

#include "self_check.h"

__global__ void daxpy(size_t n, double alpha, const double* x, double* y) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    y[i] = alpha * x[i] + y[i];
  }
}

// out[i] = i*i*k + (i ^ mask) - shift, all in 64-bit integers.
__global__ void polynomial(long long n, long long k, unsigned long long mask, short shift,
                           long long* out) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    out[i] = i * i * k + static_cast<long long>(static_cast<unsigned long long>(i) ^ mask) - shift;
  }
}

int main() {
  const size_t n = 7777;
  std::vector<double> x(n), y(n), expected(n);
  for (size_t i = 0; i < n; ++i) {
    x[i] = 0.5 * static_cast<double>(i) - 100.0;
    y[i] = 3.0 / static_cast<double>(i + 1);
  }
  const double alpha = -2.75;
  for (size_t i = 0; i < n; ++i) expected[i] = alpha * x[i] + y[i];
  double *dx, *dy;
  CHECK_CUDA(cudaMalloc(&dx, n * sizeof(double)));
  CHECK_CUDA(cudaMalloc(&dy, n * sizeof(double)));
  CHECK_CUDA(cudaMemcpy(dx, x.data(), n * sizeof(double), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(dy, y.data(), n * sizeof(double), cudaMemcpyHostToDevice));
  daxpy<<<7, 96>>>(n, alpha, dx, dy);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaMemcpy(y.data(), dy, n * sizeof(double), cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < n; ++i) {
    // One fma or one mul+add: both within an ulp or two of the host's result.
    const double tolerance = 1e-15 * (std::abs(expected[i]) + 1.0);
    CHECK(std::abs(y[i] - expected[i]) <= tolerance, "daxpy y[%zu] = %.17g, expected %.17g", i,
          y[i], expected[i]);
  }
  std::printf("daxpy ok\n");

  const long long m = 3001;
  const long long k = -12345;
  const unsigned long long mask = 0xF0F0F0F0F0F0F0F0ull;
  const short shift = -7;
  long long* dout;
  CHECK_CUDA(cudaMalloc(&dout, m * sizeof(long long)));
  polynomial<<<3, 64>>>(m, k, mask, shift, dout);
  CHECK_CUDA(cudaGetLastError());
  std::vector<long long> out(m);
  CHECK_CUDA(cudaMemcpy(out.data(), dout, m * sizeof(long long), cudaMemcpyDeviceToHost));
  for (long long i = 0; i < m; ++i) {
    const long long want =
        i * i * k + static_cast<long long>(static_cast<unsigned long long>(i) ^ mask) - shift;
    CHECK(out[i] == want, "polynomial[%lld] = %lld, expected %lld", i, out[i], want);
  }
  std::printf("polynomial ok\n");
  CHECK_CUDA(cudaFree(dx));
  CHECK_CUDA(cudaFree(dy));
  CHECK_CUDA(cudaFree(dout));
  return pass();
}
