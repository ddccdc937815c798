// C = A * B with 16x16 shared-memory tiles, 2-D blocks and grids, and sizes that are not multiples
// of the tile (edge tiles load zeros).
#include <cmath>
#include <vector>

#include "self_check.h"

constexpr int kTile = 16;

__global__ void matmul(const float* a, const float* b, float* c, int m, int k, int n) {
  __shared__ float tileA[kTile][kTile];
  __shared__ float tileB[kTile][kTile];
  const int row = blockIdx.y * kTile + threadIdx.y;
  const int col = blockIdx.x * kTile + threadIdx.x;
  float sum = 0.0f;
  for (int t = 0; t < (k + kTile - 1) / kTile; ++t) {
    const int ak = t * kTile + threadIdx.x;
    const int bk = t * kTile + threadIdx.y;
    tileA[threadIdx.y][threadIdx.x] = row < m && ak < k ? a[row * k + ak] : 0.0f;
    tileB[threadIdx.y][threadIdx.x] = bk < k && col < n ? b[bk * n + col] : 0.0f;
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kTile; ++i) sum += tileA[threadIdx.y][i] * tileB[i][threadIdx.x];
    __syncthreads();
  }
  if (row < m && col < n) c[row * n + col] = sum;
}

int main() {
  const int m = 45, k = 37, n = 50;
  std::vector<float> a(m * k), b(k * n), c(m * n);
  // Small integers: every product and partial sum is exact, so any summation order gives the
  // same float.
  for (int i = 0; i < m * k; ++i) a[i] = static_cast<float>(i % 7 - 3);
  for (int i = 0; i < k * n; ++i) b[i] = static_cast<float>(i % 5 - 2);
  float *da, *db, *dc;
  CHECK_CUDA(cudaMalloc(&da, a.size() * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&db, b.size() * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&dc, c.size() * sizeof(float)));
  CHECK_CUDA(cudaMemcpy(da, a.data(), a.size() * sizeof(float), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(db, b.data(), b.size() * sizeof(float), cudaMemcpyHostToDevice));
  const dim3 block(kTile, kTile);
  const dim3 grid((n + kTile - 1) / kTile, (m + kTile - 1) / kTile);
  matmul<<<grid, block>>>(da, db, dc, m, k, n);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaMemcpy(c.data(), dc, c.size() * sizeof(float), cudaMemcpyDeviceToHost));
  for (int r = 0; r < m; ++r) {
    for (int col = 0; col < n; ++col) {
      float want = 0.0f;
      for (int i = 0; i < k; ++i) want += a[r * k + i] * b[i * n + col];
      CHECK(c[r * n + col] == want, "C[%d][%d] = %f, expected %f", r, col, c[r * n + col], want);
    }
  }
  std::printf("matmul %dx%dx%d ok\n", m, k, n);
  CHECK_CUDA(cudaFree(da));
  CHECK_CUDA(cudaFree(db));
  CHECK_CUDA(cudaFree(dc));
  return pass();
}
