// cudaFuncGetAttributes and the occupancy API answered for kernels with known resource use:
// static shared memory, a local array, __launch_bounds__; values must be sane and consistent
// with the device's limits.
#include "self_check.h"

__global__ void plain(float* out) { out[threadIdx.x] = threadIdx.x; }

__global__ void withShared(float* out) {
  __shared__ float buffer[1024];  // 4 KiB
  buffer[threadIdx.x] = threadIdx.x * 2.0f;
  __syncthreads();
  out[threadIdx.x] = buffer[1023 - threadIdx.x];
}

__global__ void __launch_bounds__(128) bounded(float* out) {
  out[blockIdx.x * 128 + threadIdx.x] = 1.0f;
}

__global__ void withLocal(const int* index, int* out) {
  int scratch[64];  // updated at data-dependent indices: must live in local memory
  for (int i = 0; i < 64; ++i) scratch[i] = i;
  for (int k = 0; k < 16; ++k) scratch[(index[k] + threadIdx.x) % 64] += k;
  out[threadIdx.x] = scratch[(index[0] * 7 + threadIdx.x) % 64];
}

int main() {
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, cc %d.%d, %d SMs, %d threads/block, %zu shared/block\n", prop.name,
              prop.major, prop.minor, prop.multiProcessorCount, prop.maxThreadsPerBlock,
              prop.sharedMemPerBlock);
  CHECK(prop.maxThreadsPerBlock >= 1024 || prop.maxThreadsPerBlock == 512, "maxThreadsPerBlock %d",
        prop.maxThreadsPerBlock);
  CHECK(prop.warpSize == 32, "warpSize %d", prop.warpSize);

  cudaFuncAttributes attrs;
  CHECK_CUDA(cudaFuncGetAttributes(&attrs, plain));
  CHECK(attrs.sharedSizeBytes == 0, "plain: shared %zu", attrs.sharedSizeBytes);
  CHECK(attrs.maxThreadsPerBlock > 0 && attrs.maxThreadsPerBlock <= prop.maxThreadsPerBlock,
        "plain: maxThreadsPerBlock %d", attrs.maxThreadsPerBlock);
  CHECK(attrs.numRegs >= 0 && attrs.numRegs <= 255, "plain: numRegs %d", attrs.numRegs);
  // ptxVersion is the virtual architecture the kernel's PTX targets (75 for compute_75), never
  // above the device's: CUB selects its tuning policies, and so which kernels exist, from it.
  const int deviceArch = prop.major * 10 + prop.minor;
  CHECK(attrs.ptxVersion >= 75 && attrs.ptxVersion <= deviceArch,
        "plain: ptxVersion %d for a compute capability %d device", attrs.ptxVersion, deviceArch);
  std::printf("plain: regs %d, shared %zu, local %zu, max threads %d, ptx %d, binary %d\n",
              attrs.numRegs, attrs.sharedSizeBytes, attrs.localSizeBytes, attrs.maxThreadsPerBlock,
              attrs.ptxVersion, attrs.binaryVersion);

  CHECK_CUDA(cudaFuncGetAttributes(&attrs, withShared));
  CHECK(attrs.sharedSizeBytes == 4096, "withShared: shared %zu, expected 4096",
        attrs.sharedSizeBytes);

  CHECK_CUDA(cudaFuncGetAttributes(&attrs, bounded));
  CHECK(attrs.maxThreadsPerBlock == 128, "bounded: maxThreadsPerBlock %d, expected 128",
        attrs.maxThreadsPerBlock);

  CHECK_CUDA(cudaFuncGetAttributes(&attrs, withLocal));
  CHECK(attrs.localSizeBytes >= 64 * sizeof(int) && attrs.localSizeBytes < 64 * 1024,
        "withLocal: local %zu, expected at least 256", attrs.localSizeBytes);

  int blocks = -1;
  CHECK_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, plain, 256, 0));
  CHECK(blocks >= 1 && blocks * 256 <= prop.maxThreadsPerMultiProcessor,
        "plain: %d blocks of 256 per SM (max %d threads per SM)", blocks,
        prop.maxThreadsPerMultiProcessor);
  int blocksShared = -1;
  CHECK_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocksShared, withShared, 32, 40000));
  CHECK(blocksShared >= 1 &&
            blocksShared * (40000 + 4096) <= static_cast<int>(prop.sharedMemPerMultiprocessor),
        "withShared: %d blocks with 44 KB each per SM (%zu shared per SM)", blocksShared,
        prop.sharedMemPerMultiprocessor);
  int minGrid = 0, blockSize = 0;
  CHECK_CUDA(cudaOccupancyMaxPotentialBlockSize(&minGrid, &blockSize, bounded, 0, 0));
  CHECK(blockSize > 0 && blockSize <= 128 && minGrid >= prop.multiProcessorCount,
        "bounded: potential block size %d (<= 128), min grid %d", blockSize, minGrid);
  std::printf("occupancy: plain %d blocks/SM, withShared %d blocks/SM, bounded block %d grid %d\n",
              blocks, blocksShared, blockSize, minGrid);

  // A launch larger than the bounds or the device limit is rejected.
  float* out;
  CHECK_CUDA(cudaMalloc(&out, 4096 * sizeof(float)));
  bounded<<<1, 256>>>(out);
  CHECK(cudaGetLastError() != cudaSuccess,
        "a 256-thread launch of a 128-thread-bounded kernel succeeded");
  plain<<<1, 2048>>>(out);
  const cudaError_t tooBig = cudaGetLastError();
  CHECK(tooBig == cudaErrorInvalidConfiguration || tooBig == cudaErrorInvalidValue,
        "a 2048-thread block gave %s", cudaGetErrorName(tooBig));
  // The context is still fine after a rejected launch.
  plain<<<1, 32>>>(out);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaDeviceSynchronize());
  CHECK_CUDA(cudaFree(out));
  return pass();
}
