// A matrix multiply written for 8x8 tiles whose block size comes from
// cuOccupancyMaxPotentialBlockSize, as driver-API programs size their launches: each block
// multiplies blockSize/64 tiles of C, one 8x8 tile per 64 threads, staging 8x8 tiles of A and B
// in dynamic shared memory sized per block size (the blockSizeToDynamicSMemSize callback). A
// block size that is not whole tiles would leave elements unwritten; the product is checked
// element by element. Also checks the occupancy answers against each other and against the
// function's attributes.
#include <cuda.h>

#include <vector>

#include "driver_check.h"

namespace {

constexpr int kTile = 8;
constexpr int kThreadsPerTile = kTile * kTile;
constexpr int kN = 96;  // C is kN x kN: 144 tiles, not a multiple of tiles per block
constexpr int kTilesPerRow = kN / kTile;

// C = A * B for row-major kN x kN matrices.
__global__ void tiledMatmul(const float* a, const float* b, float* c) {
  extern __shared__ float staged[];  // per tile: 8x8 of A, then 8x8 of B
  const int tileInBlock = threadIdx.x / kThreadsPerTile;
  const int tile = blockIdx.x * (blockDim.x / kThreadsPerTile) + tileInBlock;
  const int row = threadIdx.x % kThreadsPerTile / kTile;
  const int col = threadIdx.x % kTile;
  float* stagedA = staged + tileInBlock * 2 * kThreadsPerTile;
  float* stagedB = stagedA + kThreadsPerTile;
  const bool active = tile < kTilesPerRow * kTilesPerRow;
  const int cRow = tile / kTilesPerRow * kTile + row;
  const int cCol = tile % kTilesPerRow * kTile + col;
  float sum = 0.0f;
  for (int k0 = 0; k0 < kN; k0 += kTile) {
    if (active) {
      stagedA[row * kTile + col] = a[cRow * kN + k0 + col];
      stagedB[row * kTile + col] = b[(k0 + row) * kN + cCol];
    }
    __syncthreads();
    if (active) {
      for (int k = 0; k < kTile; ++k) sum += stagedA[row * kTile + k] * stagedB[k * kTile + col];
    }
    __syncthreads();
  }
  if (active) c[cRow * kN + cCol] = sum;
}

size_t stagedBytes(int blockSize) {
  return static_cast<size_t>(blockSize / kThreadsPerTile) * 2 * kThreadsPerTile * sizeof(float);
}

}  // namespace

int main() {
  CHECK_CUDA(cudaFree(nullptr));  // the primary context the driver calls use
  cudaFunction_t runtimeFunction;
  CHECK_CUDA(cudaGetFuncBySymbol(&runtimeFunction, reinterpret_cast<const void*>(tiledMatmul)));
  CUfunction function = reinterpret_cast<CUfunction>(runtimeFunction);
  CUdevice device;
  CHECK_CU(cuCtxGetDevice(&device));
  int smCount = 0, maxThreadsPerSm = 0;
  CHECK_CU(cuDeviceGetAttribute(&smCount, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device));
  CHECK_CU(cuDeviceGetAttribute(&maxThreadsPerSm,
                                CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, device));
  int registers = 0, maxThreads = 0;
  CHECK_CU(cuFuncGetAttribute(&registers, CU_FUNC_ATTRIBUTE_NUM_REGS, function));
  CHECK_CU(cuFuncGetAttribute(&maxThreads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, function));
  // What ptxas allocates for a kernel this size: tens of registers, not hundreds.
  CHECK(registers > 0 && registers <= 64, "the kernel reports %d registers per thread", registers);

  int minGridSize = 0, blockSize = 0;
  CHECK_CU(cuOccupancyMaxPotentialBlockSize(&minGridSize, &blockSize, function, stagedBytes, 0, 0));
  std::printf("registers %d, max threads %d: block size %d, min grid %d\n", registers, maxThreads,
              blockSize, minGridSize);
  CHECK(blockSize > 0 && blockSize <= maxThreads, "block size %d", blockSize);
  CHECK(blockSize % kThreadsPerTile == 0, "block size %d is not whole 8x8 tiles", blockSize);
  int blocksPerSm = 0;
  CHECK_CU(cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocksPerSm, function, blockSize,
                                                       stagedBytes(blockSize)));
  CHECK(minGridSize == blocksPerSm * smCount, "min grid %d, but %d blocks per SM on %d SMs",
        minGridSize, blocksPerSm, smCount);
  // No block size holds more threads per SM, and no larger one holds as many (the calculator
  // prefers the largest block of the best occupancy).
  const int best = blocksPerSm * blockSize;
  for (int size = 32; size <= maxThreads; size += 32) {
    int blocks = 0;
    CHECK_CU(
        cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, function, size, stagedBytes(size)));
    CHECK(blocks * size <= best, "block size %d holds %d threads per SM, more than %d", size,
          blocks * size, best);
    CHECK(size <= blockSize || blocks * size < best,
          "block size %d holds as many threads per SM (%d) as %d and is larger", size, best,
          blockSize);
  }
  CHECK(best <= maxThreadsPerSm, "%d threads per SM", best);

  std::vector<float> a(kN * kN), b(kN * kN), c(kN * kN, -1.0f);
  for (int i = 0; i < kN * kN; ++i) {
    a[i] = static_cast<float>(i % 7 - 3);  // small integers: every sum is exact
    b[i] = static_cast<float>(i % 5 - 2);
  }
  const size_t bytes = a.size() * sizeof(float);
  CUdeviceptr da, db, dc;
  CHECK_CU(cuMemAlloc(&da, bytes));
  CHECK_CU(cuMemAlloc(&db, bytes));
  CHECK_CU(cuMemAlloc(&dc, bytes));
  CHECK_CU(cuMemcpyHtoD(da, a.data(), bytes));
  CHECK_CU(cuMemcpyHtoD(db, b.data(), bytes));
  CHECK_CU(cuMemsetD32(dc, 0xFFFFFFFFu, kN * kN));  // NaN: any element left unwritten shows
  const int tilesPerBlock = blockSize / kThreadsPerTile;
  const unsigned grid = (kTilesPerRow * kTilesPerRow + tilesPerBlock - 1) / tilesPerBlock;
  void* params[] = {&da, &db, &dc};
  CHECK_CU(cuLaunchKernel(function, grid, 1, 1, blockSize, 1, 1,
                          static_cast<unsigned>(stagedBytes(blockSize)), nullptr, params, nullptr));
  CHECK_CU(cuCtxSynchronize());
  CHECK_CU(cuMemcpyDtoH(c.data(), dc, bytes));
  for (int i = 0; i < kN; ++i) {
    for (int j = 0; j < kN; ++j) {
      float expected = 0.0f;
      for (int k = 0; k < kN; ++k) expected += a[i * kN + k] * b[k * kN + j];
      CHECK(c[i * kN + j] == expected, "c[%d][%d] = %f, expected %f", i, j, c[i * kN + j],
            expected);
    }
  }
  std::printf("tiled matmul %dx%d with %u blocks of %d threads ok\n", kN, kN, grid, blockSize);
  CHECK_CU(cuMemFree(da));
  CHECK_CU(cuMemFree(db));
  CHECK_CU(cuMemFree(dc));
  return pass();
}
