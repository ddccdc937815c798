// The emu's occupancy calculator on an sm_90 (H100 SXM) profile: hand-computed cases from the
// formulas of cuda_occupancy.h, then a sweep against cuda_occupancy.h itself.
#include "server/backends/emu/emu_occupancy.h"

#include <cuda_occupancy.h>
#include <gtest/gtest.h>

namespace gpupool::server::emu {
namespace {

OccupancyDevice sm90() {
  OccupancyDevice d;
  d.computeMajor = 9;
  d.computeMinor = 0;
  d.warpSize = 32;
  d.maxThreadsPerBlock = 1024;
  d.maxThreadsPerMultiprocessor = 2048;
  d.regsPerBlock = 65536;
  d.regsPerMultiprocessor = 65536;
  d.sharedMemPerBlock = 48 * 1024;
  d.sharedMemPerBlockOptin = 227 * 1024;
  d.sharedMemPerMultiprocessor = 228 * 1024;
  d.reservedSharedMemPerBlock = 1024;
  return d;
}

// A kernel with the attributes a GPU reports for it; unless it opted in to more, its dynamic
// shared memory may fill the default 48 KiB per block.
OccupancyFunction kernel(int numRegs, uint64_t staticShared = 0, uint64_t optIn = 0) {
  OccupancyFunction f;
  f.numRegs = numRegs;
  f.staticSharedBytes = staticShared;
  f.maxDynamicSharedBytes = optIn ? optIn : 48 * 1024 - staticShared;
  return f;
}

int blocks(const OccupancyFunction& f, int blockSize, uint64_t dynamicShared = 0) {
  return maxActiveBlocksPerMultiprocessor(sm90(), f, blockSize, dynamicShared);
}

// Each expectation spells out the limiting formula (registers are allocated 256 per warp; an SM
// has 4 sub-partitions of 16384 registers; 64 warps, 32 blocks and 228 KiB of shared memory, which
// is allocated in 128-byte steps with 1 KiB reserved per block).
TEST(EmuOccupancy, RegisterLimitedCases) {
  // 32 regs: 1024 per warp, 16 warps per sub-partition, 64 per SM: 8 blocks of 8 warps.
  EXPECT_EQ(blocks(kernel(32), 256), 8);
  // 64 regs: 2048 per warp, 8 warps per sub-partition, 32 per SM: 4 blocks of 8 warps.
  EXPECT_EQ(blocks(kernel(64), 256), 4);
  // 40 regs: 1280 per warp, 12 warps per sub-partition (16384/1280), 48 per SM: 12 of 4 warps.
  EXPECT_EQ(blocks(kernel(40), 128), 12);
  // 37 regs: 1184 per warp rounds to 1280, as above.
  EXPECT_EQ(blocks(kernel(37), 128), 12);
  // 64 regs at 1024 threads: 65536 per block, exactly the per-block limit: 32 warps per SM, 1.
  EXPECT_EQ(blocks(kernel(64), 1024), 1);
  // 72 regs at 1024 threads: 2304 per warp, 73728 per block: over the limit, cannot run.
  EXPECT_EQ(blocks(kernel(72), 1024), 0);
  // 255 regs round to 8192 per warp; 32 warps need 262144: cannot run.
  EXPECT_EQ(blocks(kernel(255), 1024), 0);
}

TEST(EmuOccupancy, WarpAndBlockLimitedCases) {
  // 1000 threads take 32 warps: 2 blocks fill the 64 warps.
  EXPECT_EQ(blocks(kernel(16), 1000), 2);
  // 32 threads, 16 regs: 64 warps would fit, but an SM holds at most 32 blocks.
  EXPECT_EQ(blocks(kernel(16), 32), 32);
  // Over the kernel's own limit: 0.
  OccupancyFunction small = kernel(16);
  small.maxThreadsPerBlock = 256;
  EXPECT_EQ(maxActiveBlocksPerMultiprocessor(sm90(), small, 512, 0), 0);
  EXPECT_EQ(maxActiveBlocksPerMultiprocessor(sm90(), small, 256, 0), 8);
}

TEST(EmuOccupancy, SharedMemoryLimitedCases) {
  // 20000 dynamic + 1024 reserved = 21024, allocated as 21120: 233472 / 21120 = 11 blocks.
  EXPECT_EQ(blocks(kernel(16), 64, 20000), 11);
  // 4096 static + 8192 dynamic + 1024 = 13312: 17 blocks.
  EXPECT_EQ(blocks(kernel(16, 4096), 64, 8192), 17);
  // 60 KiB dynamic is over the 48 KiB a kernel may use unless it opts in to more: 0 ...
  EXPECT_EQ(blocks(kernel(32), 128, 60 * 1024), 0);
  // ... unless the kernel opted in to 100 KiB: 62464 per block, 3 per SM.
  EXPECT_EQ(blocks(kernel(32, 0, 100 * 1024), 128, 60 * 1024), 3);
  // More than it opted in to: 0.
  EXPECT_EQ(blocks(kernel(32, 0, 100 * 1024), 128, 101 * 1024), 0);
}

// The same answers as cuda_occupancy.h (NVIDIA's reference calculator) over registers, block
// sizes and shared memory.
TEST(EmuOccupancy, MatchesCudaOccupancyHeader) {
  const OccupancyDevice device = sm90();
  cudaOccDeviceProp properties;
  properties.computeMajor = device.computeMajor;
  properties.computeMinor = device.computeMinor;
  properties.maxThreadsPerBlock = device.maxThreadsPerBlock;
  properties.maxThreadsPerMultiprocessor = device.maxThreadsPerMultiprocessor;
  properties.regsPerBlock = device.regsPerBlock;
  properties.regsPerMultiprocessor = device.regsPerMultiprocessor;
  properties.warpSize = device.warpSize;
  properties.sharedMemPerBlock = device.sharedMemPerBlock;
  properties.sharedMemPerMultiprocessor = device.sharedMemPerMultiprocessor;
  properties.numSms = 132;
  properties.sharedMemPerBlockOptin = device.sharedMemPerBlockOptin;
  properties.reservedSharedMemPerBlock = device.reservedSharedMemPerBlock;
  cudaOccDeviceState state;
  int compared = 0;
  for (int regs = 0; regs <= 255; regs += 5) {
    for (uint64_t staticShared : {0, 1000, 40000}) {
      for (int blockSize = 1; blockSize <= 1024; blockSize += 47) {
        for (uint64_t dynamicShared : {0, 3000, 30000}) {
          const OccupancyFunction function = kernel(regs, staticShared);
          // As cuda_occupancy.h converts a function's cudaFuncAttributes.
          cudaOccFuncAttributes attributes;
          attributes.maxThreadsPerBlock = function.maxThreadsPerBlock;
          attributes.numRegs = regs;
          attributes.sharedSizeBytes = staticShared;
          attributes.shmemLimitConfig = FUNC_SHMEM_LIMIT_OPTIN;
          attributes.maxDynamicSharedSizeBytes = function.maxDynamicSharedBytes;
          attributes.numBlockBarriers = 1;
          cudaOccResult result;
          ASSERT_EQ(cudaOccMaxActiveBlocksPerMultiprocessor(&result, &properties, &attributes,
                                                            &state, blockSize, dynamicShared),
                    CUDA_OCC_SUCCESS);
          EXPECT_EQ(maxActiveBlocksPerMultiprocessor(device, function, blockSize, dynamicShared),
                    result.activeBlocksPerMultiprocessor)
              << regs << " regs, " << staticShared << "+" << dynamicShared << " shared, "
              << blockSize << " threads";
          ++compared;
        }
      }
    }
  }
  EXPECT_GT(compared, 1000);
}

}  // namespace
}  // namespace gpupool::server::emu
