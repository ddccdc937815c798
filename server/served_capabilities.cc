#include "server/served_capabilities.h"

namespace gpupool::server {

namespace {

constexpr const char* kNoVmm =
    "virtual memory management serves device memory only: no host or NUMA locations, compression "
    "or GPUDirect RDMA";
constexpr const char* kManagedAsMirror =
    "managed memory is served as device memory with a host mirror on the client, coherent at "
    "synchronization points (docs/architecture.md, Managed memory)";
constexpr const char* kNoConcurrentManaged =
    "the client's mirror and the device copy are made coherent at synchronization points only: "
    "the host may not touch managed memory while the device works on it";
constexpr const char* kHostIsRemote =
    "client host memory is on another machine: a pool GPU cannot address it";
// POSIX file descriptors of VMM allocations are served (cuMemExportToShareableHandle), so
// HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED passes through.
constexpr const char* kNoExport =
    "only VMM allocations are exported, as POSIX file descriptors: no fabric or Win32 handles, "
    "pool exports or dma-bufs";
constexpr const char* kServerLocal = "describes the GPU server's host, which the client cannot use";

constexpr WithheldCapability kWithheld[] = {
    {CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, 0, kHostIsRemote},
    {CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM, 0, kHostIsRemote},
    {CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS, 0, kHostIsRemote},
    {CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES, 0, kHostIsRemote},
    {CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED, 0, kHostIsRemote},
    {CU_DEVICE_ATTRIBUTE_ONLY_PARTIAL_HOST_NATIVE_ATOMIC_SUPPORTED, 0, kHostIsRemote},
    {CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES, 0, kServerLocal},
    {CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, 1, kManagedAsMirror},
    {CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, 0, kNoConcurrentManaged},
    {CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST, 0, kNoConcurrentManaged},
    {CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0, kNoVmm},
    {CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0, kNoVmm},
    {CU_DEVICE_ATTRIBUTE_GENERIC_COMPRESSION_SUPPORTED, 0, kNoVmm},
    {CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, 0, kNoVmm},
    {CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_HANDLE_SUPPORTED, 0, kNoExport},
    {CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_KMT_HANDLE_SUPPORTED, 0, kNoExport},
    {CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED, 0, kNoExport},
    {CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES, 0, kNoExport},
    {CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED, 0,
     "IPC event handles are served only by a backend that shares events between sessions (the "
     "emu; the cuda backend does not)"},
    {CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, 0, kNoExport},
    {CU_DEVICE_ATTRIBUTE_HOST_ALLOC_DMA_BUF_SUPPORTED, 0, kNoExport},
    {CU_DEVICE_ATTRIBUTE_HOST_NUMA_MULTINODE_IPC_SUPPORTED, 0, kNoExport},
    {CU_DEVICE_ATTRIBUTE_HOST_MEMORY_POOLS_SUPPORTED, 0, kHostIsRemote},
    {CU_DEVICE_ATTRIBUTE_HOST_NUMA_MEMORY_POOLS_SUPPORTED, 0, kHostIsRemote},
    {CU_DEVICE_ATTRIBUTE_COOPERATIVE_MULTI_DEVICE_LAUNCH, 0,
     "cuLaunchCooperativeKernelMultiDevice is not served (deprecated; launch on each device with "
     "cuLaunchCooperativeKernel)"},
    {CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED, 0, "multicast objects are not served yet"},
    {CU_DEVICE_ATTRIBUTE_SPARSE_CUDA_ARRAY_SUPPORTED, 0, "sparse CUDA arrays are not served yet"},
    {CU_DEVICE_ATTRIBUTE_DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED, 0,
     "CUDA arrays are not served yet"},
    {CU_DEVICE_ATTRIBUTE_TIMELINE_SEMAPHORE_INTEROP_SUPPORTED, 0,
     "external semaphores cannot reach a remote GPU"},
    {CU_DEVICE_ATTRIBUTE_D3D12_CIG_SUPPORTED, 0, "graphics interop cannot reach a remote GPU"},
    {CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED, 0, kServerLocal},
    {CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS, 0, kServerLocal},
    {CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING, 0, kServerLocal},
    {CU_DEVICE_ATTRIBUTE_MEM_DECOMPRESS_ALGORITHM_MASK, 0,
     "hardware decompression (cuMemBatchDecompressAsync) is not served"},
    {CU_DEVICE_ATTRIBUTE_MEM_DECOMPRESS_MAXIMUM_LENGTH, 0,
     "hardware decompression (cuMemBatchDecompressAsync) is not served"},
    {CU_DEVICE_ATTRIBUTE_NUMA_CONFIG, CU_DEVICE_NUMA_CONFIG_NONE, kServerLocal},
    {CU_DEVICE_ATTRIBUTE_NUMA_ID, -1, kServerLocal},
    {CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, -1, kServerLocal},
};

}  // namespace

std::span<const WithheldCapability> withheldCapabilities() { return kWithheld; }

std::vector<int32_t> servedAttributes(const std::vector<int32_t>& deviceAttributes,
                                      bool sessionsShareEvents) {
  std::vector<int32_t> served = deviceAttributes;
  for (const WithheldCapability& w : kWithheld) {
    if (static_cast<size_t>(w.attribute) < served.size()) served[w.attribute] = w.servedValue;
  }
  if (sessionsShareEvents && CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED < served.size()) {
    served[CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED] = 1;
  }
  return served;
}

}  // namespace gpupool::server
