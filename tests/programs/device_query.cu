// Queries every device through the runtime API and prints the results as stable key=value lines
// (nothing that changes between runs, such as free memory), so two runs can be compared. Checks
// that the properties agree with cudaDeviceGetAttribute and obey basic invariants.
#include <strings.h>

#include <cstring>

#include "self_check.h"

namespace {

void printUuid(int device, const cudaUUID_t& uuid) {
  std::printf("device%d.uuid=", device);
  for (unsigned char byte : uuid.bytes) std::printf("%02x", byte);
  std::printf("\n");
}

// Prints one attribute and checks it against the property the runtime reported.
void checkAttribute(int device, const char* name, cudaDeviceAttr attribute, long long expected) {
  int value = -1;
  CHECK_CUDA(cudaDeviceGetAttribute(&value, attribute, device));
  std::printf("device%d.attr.%s=%d\n", device, name, value);
  CHECK(value == expected, "device %d attribute %s is %d but cudaDeviceProp says %lld", device,
        name, value, expected);
}

void queryDevice(int device) {
  cudaDeviceProp prop;
  std::memset(&prop, 0, sizeof(prop));
  CHECK_CUDA(cudaGetDeviceProperties(&prop, device));
  std::printf("device%d.name=%s\n", device, prop.name);
  printUuid(device, prop.uuid);
  std::printf("device%d.compute_capability=%d.%d\n", device, prop.major, prop.minor);
  std::printf("device%d.total_global_mem=%zu\n", device, prop.totalGlobalMem);
  std::printf("device%d.shared_mem_per_block=%zu\n", device, prop.sharedMemPerBlock);
  std::printf("device%d.shared_mem_per_block_optin=%zu\n", device, prop.sharedMemPerBlockOptin);
  std::printf("device%d.regs_per_block=%d\n", device, prop.regsPerBlock);
  std::printf("device%d.warp_size=%d\n", device, prop.warpSize);
  std::printf("device%d.max_threads_per_block=%d\n", device, prop.maxThreadsPerBlock);
  std::printf("device%d.max_threads_dim=%d,%d,%d\n", device, prop.maxThreadsDim[0],
              prop.maxThreadsDim[1], prop.maxThreadsDim[2]);
  std::printf("device%d.max_grid_size=%d,%d,%d\n", device, prop.maxGridSize[0], prop.maxGridSize[1],
              prop.maxGridSize[2]);
  std::printf("device%d.total_const_mem=%zu\n", device, prop.totalConstMem);
  std::printf("device%d.multiprocessor_count=%d\n", device, prop.multiProcessorCount);
  std::printf("device%d.max_threads_per_multiprocessor=%d\n", device,
              prop.maxThreadsPerMultiProcessor);
  std::printf("device%d.l2_cache_size=%d\n", device, prop.l2CacheSize);
  std::printf("device%d.memory_bus_width=%d\n", device, prop.memoryBusWidth);
  std::printf("device%d.pci=%04x:%02x:%02x\n", device, prop.pciDomainID, prop.pciBusID,
              prop.pciDeviceID);
  std::printf("device%d.unified_addressing=%d\n", device, prop.unifiedAddressing);
  std::printf("device%d.managed_memory=%d\n", device, prop.managedMemory);
  std::printf("device%d.concurrent_kernels=%d\n", device, prop.concurrentKernels);
  std::printf("device%d.async_engine_count=%d\n", device, prop.asyncEngineCount);
  std::printf("device%d.integrated=%d\n", device, prop.integrated);

  CHECK(std::strlen(prop.name) > 0, "device %d has an empty name", device);
  CHECK(prop.major >= 1 && prop.minor >= 0, "device %d compute capability %d.%d", device,
        prop.major, prop.minor);
  CHECK(prop.warpSize == 32, "device %d warp size %d", device, prop.warpSize);
  CHECK(prop.totalGlobalMem > 0, "device %d has no global memory", device);
  CHECK(prop.multiProcessorCount >= 1, "device %d has %d SMs", device, prop.multiProcessorCount);
  CHECK(prop.maxThreadsPerBlock >= 64 && prop.maxThreadsPerBlock <= 1024,
        "device %d max threads per block %d", device, prop.maxThreadsPerBlock);
  CHECK(prop.maxThreadsDim[0] >= 1 && prop.maxThreadsDim[0] <= prop.maxThreadsPerBlock,
        "device %d max block x %d", device, prop.maxThreadsDim[0]);
  CHECK(prop.maxGridSize[0] >= 65535, "device %d max grid x %d", device, prop.maxGridSize[0]);
  CHECK(prop.sharedMemPerBlock >= 16 * 1024, "device %d shared memory per block %zu", device,
        prop.sharedMemPerBlock);
  CHECK(prop.unifiedAddressing == 1, "device %d lacks unified addressing (64-bit Linux has it)",
        device);

  checkAttribute(device, "compute_capability_major", cudaDevAttrComputeCapabilityMajor, prop.major);
  checkAttribute(device, "compute_capability_minor", cudaDevAttrComputeCapabilityMinor, prop.minor);
  checkAttribute(device, "multiprocessor_count", cudaDevAttrMultiProcessorCount,
                 prop.multiProcessorCount);
  checkAttribute(device, "max_threads_per_block", cudaDevAttrMaxThreadsPerBlock,
                 prop.maxThreadsPerBlock);
  checkAttribute(device, "warp_size", cudaDevAttrWarpSize, prop.warpSize);
  checkAttribute(device, "max_block_dim_x", cudaDevAttrMaxBlockDimX, prop.maxThreadsDim[0]);
  checkAttribute(device, "max_grid_dim_x", cudaDevAttrMaxGridDimX, prop.maxGridSize[0]);
  checkAttribute(device, "max_shared_memory_per_block", cudaDevAttrMaxSharedMemoryPerBlock,
                 static_cast<long long>(prop.sharedMemPerBlock));
  checkAttribute(device, "pci_bus_id", cudaDevAttrPciBusId, prop.pciBusID);
  checkAttribute(device, "pci_device_id", cudaDevAttrPciDeviceId, prop.pciDeviceID);
  checkAttribute(device, "l2_cache_size", cudaDevAttrL2CacheSize, prop.l2CacheSize);
  checkAttribute(device, "unified_addressing", cudaDevAttrUnifiedAddressing,
                 prop.unifiedAddressing);

  char busId[32] = {};
  CHECK_CUDA(cudaDeviceGetPCIBusId(busId, sizeof(busId), device));
  std::printf("device%d.pci_bus_id_string=%s\n", device, busId);
  // As NVIDIA's driver writes it: a domain of four hex digits when it fits in them.
  char expectedBusId[32] = {};
  std::snprintf(expectedBusId, sizeof(expectedBusId), "%04x:%02x:%02x.0", prop.pciDomainID,
                prop.pciBusID, prop.pciDeviceID);
  CHECK(strcasecmp(busId, expectedBusId) == 0, "cudaDeviceGetPCIBusId gave %s, expected %s", busId,
        expectedBusId);
  int sameDevice = -1;
  CHECK_CUDA(cudaDeviceGetByPCIBusId(&sameDevice, busId));
  CHECK(sameDevice == device, "cudaDeviceGetByPCIBusId(%s) gave %d, expected %d", busId, sameDevice,
        device);

  // Free memory varies between runs, so it is checked but not printed.
  CHECK_CUDA(cudaSetDevice(device));
  size_t freeBytes = 0, totalBytes = 0;
  CHECK_CUDA(cudaMemGetInfo(&freeBytes, &totalBytes));
  std::printf("device%d.mem_info_total=%zu\n", device, totalBytes);
  CHECK(totalBytes > 0 && freeBytes <= totalBytes, "device %d cudaMemGetInfo free %zu total %zu",
        device, freeBytes, totalBytes);
  CHECK(totalBytes <= prop.totalGlobalMem,
        "device %d cudaMemGetInfo total %zu > totalGlobalMem %zu", device, totalBytes,
        prop.totalGlobalMem);
}

}  // namespace

int main() {
  int driverVersion = 0, runtimeVersion = 0;
  CHECK_CUDA(cudaDriverGetVersion(&driverVersion));
  CHECK_CUDA(cudaRuntimeGetVersion(&runtimeVersion));
  std::printf("driver_version=%d\n", driverVersion);
  std::printf("runtime_version=%d\n", runtimeVersion);
  CHECK(runtimeVersion == CUDART_VERSION, "runtime version %d, built against %d", runtimeVersion,
        CUDART_VERSION);
  CHECK(driverVersion >= runtimeVersion, "driver version %d is older than the runtime %d",
        driverVersion, runtimeVersion);

  int count = 0;
  CHECK_CUDA(cudaGetDeviceCount(&count));
  std::printf("device_count=%d\n", count);
  CHECK(count >= 1, "no CUDA device");
  for (int device = 0; device < count; ++device) queryDevice(device);

  int current = -1;
  CHECK_CUDA(cudaGetDevice(&current));
  CHECK(current == count - 1, "cudaGetDevice gave %d after cudaSetDevice(%d)", current, count - 1);
  return pass();
}
