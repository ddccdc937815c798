// c = a + b over a length that is not a multiple of the block size; the guard element after the
// end must stay untouched.
#include <vector>

#include "self_check.h"

__global__ void vectorAdd(const float* a, const float* b, float* c, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

int main() {
  const int n = 5000;
  std::vector<float> a(n), b(n), c(n + 1);
  for (int i = 0; i < n; ++i) {
    a[i] = 0.25f * static_cast<float>(i);
    b[i] = 1000.0f - static_cast<float>(i);
  }
  float *da, *db, *dc;
  CHECK_CUDA(cudaMalloc(&da, n * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&db, n * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&dc, (n + 1) * sizeof(float)));
  CHECK_CUDA(cudaMemset(dc, 0, (n + 1) * sizeof(float)));
  CHECK_CUDA(cudaMemcpy(da, a.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(db, b.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  const int block = 128;
  vectorAdd<<<(n + block - 1) / block, block>>>(da, db, dc, n);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaMemcpy(c.data(), dc, (n + 1) * sizeof(float), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) {
    CHECK(c[i] == a[i] + b[i], "c[%d] = %f, expected %f", i, c[i], a[i] + b[i]);
  }
  CHECK(c[n] == 0.0f, "kernel wrote past the end: c[n] = %f", c[n]);
  CHECK_CUDA(cudaFree(da));
  CHECK_CUDA(cudaFree(db));
  CHECK_CUDA(cudaFree(dc));
  return pass();
}
