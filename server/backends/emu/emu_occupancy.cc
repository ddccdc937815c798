#include "server/backends/emu/emu_occupancy.h"

#include <cuda.h>

#include <algorithm>
#include <climits>
#include <span>

namespace gpupool::server::emu {

namespace {

int divideRoundUp(int x, int y) { return (x + y - 1) / y; }
int roundUp(int x, int y) { return y * divideRoundUp(x, y); }

// cudaOccSMemAllocationGranularity.
int sharedMemAllocationGranularity(const OccupancyDevice& d) {
  return d.computeMajor >= 8 ? 128 : 256;
}

// cudaOccRegAllocationMaxPerThread.
int maxRegistersPerThread(const OccupancyDevice& d) { return d.computeMajor >= 7 ? 256 : 255; }

// cudaOccRegAllocationGranularity: registers are allocated per warp, 256 at a time.
constexpr int kRegisterAllocationGranularity = 256;

// cudaOccSubPartitionsPerMultiprocessor.
int subPartitions(const OccupancyDevice& d) {
  return d.computeMajor == 6 && d.computeMinor == 0 ? 2 : 4;
}

// cudaOccMaxBlocksPerMultiprocessor.
int maxBlocksPerMultiprocessor(const OccupancyDevice& d) {
  switch (d.computeMajor) {
    case 3:
      return 16;
    case 7:
      return d.computeMinor == 5 ? 16 : 32;
    case 8:
      return d.computeMinor == 0 ? 32 : d.computeMinor == 9 ? 24 : 16;
    case 10:
      return d.computeMinor == 1 ? 24 : 32;
    case 11:
      return d.computeMinor == 0 ? 24 : 32;
    case 12:
      return 24;
    default:  // 5, 6, 9
      return 32;
  }
}

// cudaOccAlignUpShmemSizeVoltaPlus: the shared memory carveouts an SM can be configured with.
constexpr uint64_t K = 1024;
constexpr uint64_t kTuringCarveouts[] = {32 * K, 64 * K};
constexpr uint64_t kVoltaCarveouts[] = {0, 8 * K, 16 * K, 32 * K, 64 * K, 96 * K};
constexpr uint64_t kAmpereCarveouts[] = {0,      8 * K,   16 * K,  32 * K,
                                         64 * K, 100 * K, 132 * K, 164 * K};
constexpr uint64_t kHopperCarveouts[] = {0,       8 * K,   16 * K,  32 * K,  64 * K,
                                         100 * K, 132 * K, 164 * K, 196 * K, 228 * K};
// sm_86/89 and sm_12x.
constexpr uint64_t kSmallCarveouts[] = {0, 8 * K, 16 * K, 32 * K, 64 * K, 100 * K};

std::span<const uint64_t> carveouts(const OccupancyDevice& d) {
  if (d.computeMajor == 7) {
    if (d.computeMinor == 5) return kTuringCarveouts;
    return kVoltaCarveouts;
  }
  if (d.computeMajor == 8 && (d.computeMinor == 0 || d.computeMinor == 7)) return kAmpereCarveouts;
  if (d.computeMajor >= 9 && d.computeMajor <= 11) return kHopperCarveouts;
  return kSmallCarveouts;
}

// The smallest carveout that holds `bytes`, or 0 when none does.
uint64_t alignUpToCarveout(uint64_t bytes, const OccupancyDevice& d) {
  for (uint64_t carveout : carveouts(d)) {
    if (bytes <= carveout) return carveout;
  }
  return 0;
}

// cudaOccMaxBlocksPerSMWarpsLimit (partitioned global caching off).
int warpsLimit(const OccupancyDevice& d, int blockSize) {
  if (blockSize > d.maxThreadsPerBlock) return 0;
  return (d.maxThreadsPerMultiprocessor / d.warpSize) / divideRoundUp(blockSize, d.warpSize);
}

// cudaOccMaxBlocksPerSMRegsLimit (partitioned global caching off).
int registersLimit(const OccupancyDevice& d, const OccupancyFunction& f, int blockSize) {
  const int warpsPerBlock = divideRoundUp(blockSize, d.warpSize);
  const int regsPerWarp = roundUp(f.numRegs * d.warpSize, kRegisterAllocationGranularity);
  const int regsPerBlock = regsPerWarp * warpsPerBlock;
  // The hardware places a block's warps evenly over the sub-partitions.
  const int regsAssumedPerBlock = regsPerWarp * roundUp(warpsPerBlock, subPartitions(d));
  if (d.regsPerBlock < regsAssumedPerBlock || d.regsPerBlock < regsPerBlock ||
      f.numRegs > maxRegistersPerThread(d)) {
    return 0;
  }
  if (regsPerWarp == 0) return INT_MAX;
  const int warpsPerSubPartition = (d.regsPerMultiprocessor / subPartitions(d)) / regsPerWarp;
  return warpsPerSubPartition * subPartitions(d) / warpsPerBlock;
}

// cudaOccMaxBlocksPerSMSmemLimit and cudaOccSMemPerBlock, with the default carveout preference.
int sharedMemoryLimit(const OccupancyDevice& d, const OccupancyFunction& f,
                      uint64_t dynamicSharedBytes) {
  if (dynamicSharedBytes > f.maxDynamicSharedBytes) return 0;
  const uint64_t staticBytes = f.staticSharedBytes + d.reservedSharedMemPerBlock;
  const uint64_t perBlock = static_cast<uint64_t>(roundUp(
      static_cast<int>(staticBytes + dynamicSharedBytes), sharedMemAllocationGranularity(d)));
  // A function allowed more than the default per-block limit gets the opt-in limit.
  uint64_t blockLimit = staticBytes + f.maxDynamicSharedBytes > d.sharedMemPerBlock
                            ? d.sharedMemPerBlockOptin
                            : d.sharedMemPerBlock;
  if (d.computeMajor >= 8) blockLimit += d.reservedSharedMemPerBlock;
  if (perBlock > blockLimit) return 0;
  uint64_t perMultiprocessor = d.sharedMemPerMultiprocessor;  // before Volta: no carveouts
  if (d.computeMajor >= 7) {
    perMultiprocessor = alignUpToCarveout(perMultiprocessor, d);
    if (perMultiprocessor < perBlock) perMultiprocessor = alignUpToCarveout(perBlock, d);
  }
  if (perBlock == 0) return INT_MAX;
  return static_cast<int>(perMultiprocessor / perBlock);
}

}  // namespace

OccupancyDevice OccupancyDevice::fromAttributes(const std::vector<int32_t>& a) {
  OccupancyDevice d;
  d.computeMajor = a[CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR];
  d.computeMinor = a[CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR];
  d.warpSize = a[CU_DEVICE_ATTRIBUTE_WARP_SIZE];
  d.maxThreadsPerBlock = a[CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK];
  d.maxThreadsPerMultiprocessor = a[CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR];
  d.regsPerBlock = a[CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK];
  d.regsPerMultiprocessor = a[CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR];
  d.sharedMemPerBlock = static_cast<uint64_t>(a[CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK]);
  d.sharedMemPerBlockOptin =
      static_cast<uint64_t>(a[CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN]);
  d.sharedMemPerMultiprocessor =
      static_cast<uint64_t>(a[CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR]);
  d.reservedSharedMemPerBlock =
      static_cast<uint64_t>(a[CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK]);
  return d;
}

int maxActiveBlocksPerMultiprocessor(const OccupancyDevice& device,
                                     const OccupancyFunction& function, int blockSize,
                                     uint64_t dynamicSharedBytes) {
  if (blockSize <= 0 || blockSize > function.maxThreadsPerBlock) return 0;
  return std::max(0, std::min({registersLimit(device, function, blockSize),
                               warpsLimit(device, blockSize), maxBlocksPerMultiprocessor(device),
                               sharedMemoryLimit(device, function, dynamicSharedBytes)}));
}

}  // namespace gpupool::server::emu
