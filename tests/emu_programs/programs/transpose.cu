// Matrix transpose through a padded shared-memory tile (32x33 to avoid bank conflicts) with 32x8
// thread blocks, on a non-square matrix whose sizes are not multiples of the tile; plus a naive
// 3-D-indexed copy that checks threadIdx/blockIdx in all three dimensions.
#include <vector>

#include "self_check.h"

constexpr int kTile = 32;
constexpr int kRows = 8;

__global__ void transposeTiled(const float* in, float* out, int width, int height) {
  __shared__ float tile[kTile][kTile + 1];
  int x = blockIdx.x * kTile + threadIdx.x;
  int y = blockIdx.y * kTile + threadIdx.y;
  for (int j = 0; j < kTile; j += kRows) {
    if (x < width && y + j < height) tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * width + x];
  }
  __syncthreads();
  x = blockIdx.y * kTile + threadIdx.x;
  y = blockIdx.x * kTile + threadIdx.y;
  for (int j = 0; j < kTile; j += kRows) {
    if (x < height && y + j < width) out[(y + j) * height + x] = tile[threadIdx.x][threadIdx.y + j];
  }
}

// out[z][y][x] = code of (block, thread) coordinates.
__global__ void coordinates3d(int* out, int nx, int ny, int nz) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y = blockIdx.y * blockDim.y + threadIdx.y;
  const int z = blockIdx.z * blockDim.z + threadIdx.z;
  if (x < nx && y < ny && z < nz) {
    out[(z * ny + y) * nx + x] =
        x * 10000 + y * 100 + z + (gridDim.x * 1000000) + (blockDim.z == 2 ? 0 : -1000000000);
  }
}

int main() {
  const int width = 70, height = 45;
  std::vector<float> in(width * height), out(width * height);
  for (int i = 0; i < width * height; ++i) in[i] = static_cast<float>(i) * 0.5f;
  float *din, *dout;
  CHECK_CUDA(cudaMalloc(&din, in.size() * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&dout, out.size() * sizeof(float)));
  CHECK_CUDA(cudaMemcpy(din, in.data(), in.size() * sizeof(float), cudaMemcpyHostToDevice));
  const dim3 grid((width + kTile - 1) / kTile, (height + kTile - 1) / kTile);
  transposeTiled<<<grid, dim3(kTile, kRows)>>>(din, dout, width, height);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaMemcpy(out.data(), dout, out.size() * sizeof(float), cudaMemcpyDeviceToHost));
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      CHECK(out[x * height + y] == in[y * width + x], "out[%d][%d] = %f, expected %f", x, y,
            out[x * height + y], in[y * width + x]);
    }
  }
  std::printf("transpose %dx%d ok\n", width, height);

  const int nx = 13, ny = 7, nz = 5;
  int* dcoords;
  CHECK_CUDA(cudaMalloc(&dcoords, nx * ny * nz * sizeof(int)));
  const dim3 block(4, 3, 2);
  const dim3 grid3((nx + 3) / 4, (ny + 2) / 3, (nz + 1) / 2);
  coordinates3d<<<grid3, block>>>(dcoords, nx, ny, nz);
  CHECK_CUDA(cudaGetLastError());
  std::vector<int> coords(nx * ny * nz);
  CHECK_CUDA(
      cudaMemcpy(coords.data(), dcoords, coords.size() * sizeof(int), cudaMemcpyDeviceToHost));
  for (int z = 0; z < nz; ++z) {
    for (int y = 0; y < ny; ++y) {
      for (int x = 0; x < nx; ++x) {
        const int want = x * 10000 + y * 100 + z + static_cast<int>(grid3.x) * 1000000;
        const int got = coords[(z * ny + y) * nx + x];
        CHECK(got == want, "coords(%d,%d,%d) = %d, expected %d", x, y, z, got, want);
      }
    }
  }
  std::printf("3-D indexing ok\n");
  CHECK_CUDA(cudaFree(din));
  CHECK_CUDA(cudaFree(dout));
  CHECK_CUDA(cudaFree(dcoords));
  return pass();
}
