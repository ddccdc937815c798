// The occupancy calculator of NVIDIA's cuda_occupancy.h (the documented reference for what
// cuOccupancyMaxActiveBlocksPerMultiprocessor answers), for the emu's devices: how many blocks of
// a kernel fit on one multiprocessor, limited by warps, blocks, registers and shared memory, with
// the allocation granularities of the device's compute capability. Partitioned global caching
// (sm_52 only) and block barriers (never the limit: every emu kernel uses one barrier) are left
// out.
#pragma once

#include <cstdint>
#include <vector>

namespace gpupool::server::emu {

// What the calculator needs to know about a device (cudaOccDeviceProp).
struct OccupancyDevice {
  int computeMajor = 8, computeMinor = 0;
  int warpSize = 32;
  int maxThreadsPerBlock = 1024;
  int maxThreadsPerMultiprocessor = 2048;
  int regsPerBlock = 65536;
  int regsPerMultiprocessor = 65536;
  uint64_t sharedMemPerBlock = 48 * 1024;
  uint64_t sharedMemPerBlockOptin = 163 * 1024;
  uint64_t sharedMemPerMultiprocessor = 164 * 1024;
  uint64_t reservedSharedMemPerBlock = 1024;

  // From a device's CUdevice_attribute values (indexed by attribute).
  static OccupancyDevice fromAttributes(const std::vector<int32_t>& attributes);
};

// What it needs to know about a kernel (cudaOccFuncAttributes).
struct OccupancyFunction {
  int maxThreadsPerBlock = 1024;
  int numRegs = 0;  // registers per thread, as cuFuncGetAttribute(NUM_REGS) reports them
  uint64_t staticSharedBytes = 0;
  // cuFuncGetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES): what cuda_occupancy.h takes from a
  // function's attributes (shmemLimitConfig FUNC_SHMEM_LIMIT_OPTIN).
  uint64_t maxDynamicSharedBytes = 48 * 1024;
};

// cudaOccMaxActiveBlocksPerMultiprocessor with the default cache and carveout preferences, for a
// function described by its attributes.
// 0 when a block of that size cannot run at all.
int maxActiveBlocksPerMultiprocessor(const OccupancyDevice& device,
                                     const OccupancyFunction& function, int blockSize,
                                     uint64_t dynamicSharedBytes);

}  // namespace gpupool::server::emu
