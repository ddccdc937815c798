// The classic first CUDA program: c = a + b over a length that is not a multiple of the block,
// plus a grid-stride SAXPY with scalar parameters of several types. Checks every element.
#include <cmath>
#include <vector>

#include "self_check.h"

namespace {

__global__ void vectorAdd(const float* a, const float* b, float* c, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

// y = alpha * x + y, each thread striding over the whole array; `alpha` arrives as a double.
__global__ void saxpy(long long n, double alpha, const float* x, float* y) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    y[i] = static_cast<float>(alpha) * x[i] + y[i];
  }
}

}  // namespace

int main() {
  const int n = (1 << 20) + 3;
  const size_t bytes = n * sizeof(float);
  std::vector<float> a(n), b(n), c(n, -1.0f);
  for (int i = 0; i < n; ++i) {
    // Exactly representable inputs and sums, so the check can be exact.
    a[i] = static_cast<float>(i % 4096) * 0.5f;
    b[i] = static_cast<float>(i / 4096) * 2.0f;
  }
  float *da, *db, *dc;
  CHECK_CUDA(cudaMalloc(&da, bytes));
  CHECK_CUDA(cudaMalloc(&db, bytes));
  CHECK_CUDA(cudaMalloc(&dc, bytes + sizeof(float)));
  CHECK_CUDA(cudaMemset(dc, 0, bytes + sizeof(float)));
  CHECK_CUDA(cudaMemcpy(da, a.data(), bytes, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(db, b.data(), bytes, cudaMemcpyHostToDevice));

  const int block = 256;
  const int grid = (n + block - 1) / block;
  vectorAdd<<<grid, block>>>(da, db, dc, n);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<float> withGuard(n + 1);
  CHECK_CUDA(cudaMemcpy(withGuard.data(), dc, bytes + sizeof(float), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) {
    CHECK(withGuard[i] == a[i] + b[i], "vectorAdd: c[%d] = %f, expected %f", i, withGuard[i],
          a[i] + b[i]);
  }
  CHECK(withGuard[n] == 0.0f, "vectorAdd wrote past n (c[n] = %f)", withGuard[n]);
  std::printf("vectorAdd n=%d grid=%d block=%d ok\n", n, grid, block);

  // y starts as c; 40 blocks of 128 threads stride over n elements.
  const double alpha = 1.5;
  saxpy<<<40, 128>>>(n, alpha, da, dc);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaMemcpy(c.data(), dc, bytes, cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) {
    const float expected = static_cast<float>(alpha) * a[i] + (a[i] + b[i]);
    CHECK(std::fabs(c[i] - expected) <= 1e-6f * std::fabs(expected),
          "saxpy: y[%d] = %f, expected %f", i, c[i], expected);
  }
  std::printf("saxpy n=%d alpha=%.2f ok\n", n, alpha);

  CHECK_CUDA(cudaFree(da));
  CHECK_CUDA(cudaFree(db));
  CHECK_CUDA(cudaFree(dc));
  return pass();
}
