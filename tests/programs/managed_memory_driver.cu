// Managed memory through the driver API, on the runtime's primary context: cuMemAllocManaged's
// arguments, host writes seen by a kernel and device writes seen by the host after
// cuCtxSynchronize, memsets and copies on managed memory, cuPointerGetAttribute(s),
// cuMemGetAddressRange, cuMemAdvise (both versions), cuMemPrefetchAsync,
// cuMemRangeGetAttribute(s), cuStreamAttachMemAsync's checks, the batch prefetch and discard
// calls' checks, and cuMemFree.
#include <cuda.h>

#include <cstdint>
#include <vector>

#include "driver_check.h"

namespace {

constexpr size_t kCount = 3 * 4096 / sizeof(uint32_t) + 5;  // three pages and a bit
constexpr size_t kBytes = kCount * sizeof(uint32_t);

__global__ void addIndex(uint32_t* data, size_t n) {
  size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < n) data[i] += static_cast<uint32_t>(i);
}

}  // namespace

int main() {
  CHECK_CUDA(cudaFree(nullptr));  // the runtime's primary context, current
  CUdevice device = 0;
  CHECK_CU(cuCtxGetDevice(&device));
  int managed = 0, concurrent = -1, pageable = -1;
  CHECK_CU(cuDeviceGetAttribute(&managed, CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, device));
  CHECK_CU(
      cuDeviceGetAttribute(&concurrent, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, device));
  CHECK_CU(cuDeviceGetAttribute(&pageable, CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS, device));
  CHECK(managed == 1, "MANAGED_MEMORY is %d", managed);

  CUdeviceptr p = 0;
  expectError(cuMemAllocManaged(&p, 0, CU_MEM_ATTACH_GLOBAL), CUDA_ERROR_INVALID_VALUE,
              "cuMemAllocManaged(0 bytes)");
  expectError(cuMemAllocManaged(&p, kBytes, CU_MEM_ATTACH_SINGLE), CUDA_ERROR_INVALID_VALUE,
              "cuMemAllocManaged(CU_MEM_ATTACH_SINGLE)");
  CHECK_CU(cuMemAllocManaged(&p, kBytes, CU_MEM_ATTACH_GLOBAL));
  auto* host = reinterpret_cast<uint32_t*>(p);

  // Attributes of the pointer and its range.
  unsigned isManaged = 0;
  CHECK_CU(cuPointerGetAttribute(&isManaged, CU_POINTER_ATTRIBUTE_IS_MANAGED, p + 8));
  CHECK(isManaged == 1, "IS_MANAGED %u", isManaged);
  void* hostPointer = nullptr;
  CHECK_CU(cuPointerGetAttribute(&hostPointer, CU_POINTER_ATTRIBUTE_HOST_POINTER, p));
  CHECK(hostPointer == host, "HOST_POINTER of managed memory");
  CUdeviceptr base = 0;
  size_t size = 0;
  CHECK_CU(cuMemGetAddressRange(&base, &size, p + 100));
  CHECK(base == p && size >= kBytes, "address range");
  CUdeviceptr plain = 0;
  CHECK_CU(cuMemAlloc(&plain, kBytes));
  CHECK_CU(cuPointerGetAttribute(&isManaged, CU_POINTER_ATTRIBUTE_IS_MANAGED, plain));
  CHECK(isManaged == 0, "IS_MANAGED of cuMemAlloc memory %u", isManaged);

  // Host writes, a kernel, cuCtxSynchronize, host reads.
  for (size_t i = 0; i < kCount; ++i) host[i] = 100;
  addIndex<<<static_cast<unsigned>((kCount + 127) / 128), 128>>>(host, kCount);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CU(cuCtxSynchronize());
  for (size_t i = 0; i < kCount; ++i) {
    CHECK(host[i] == 100 + i, "element %zu is %u", i, host[i]);
  }

  // A memset and copies through the driver API.
  CHECK_CU(cuMemsetD32(p, 7, kCount));
  CHECK_CU(cuCtxSynchronize());
  CHECK(host[0] == 7 && host[kCount - 1] == 7, "memset of managed memory");
  std::vector<uint32_t> staging(kCount, 9);
  CHECK_CU(cuMemcpyHtoD(p, staging.data(), kBytes));
  CHECK(host[kCount - 1] == 9, "cuMemcpyHtoD into managed memory: %u", host[kCount - 1]);
  host[3] = 33;
  CHECK_CU(cuMemcpyDtoD(plain, p, kBytes));
  CHECK_CU(cuMemcpyDtoH(staging.data(), plain, kBytes));
  CHECK(staging[3] == 33 && staging[4] == 9, "a host write before cuMemcpyDtoD");
  std::printf("managed memory in kernels, memsets and copies\n");

  // Advice and prefetch.
  CUmemLocation cpu{CU_MEM_LOCATION_TYPE_HOST, 0};
  CUmemLocation gpu{CU_MEM_LOCATION_TYPE_DEVICE, device};
  CHECK_CU(cuMemAdvise(p, kBytes, CU_MEM_ADVISE_SET_READ_MOSTLY, cpu));
  CHECK_CU(cuMemAdvise(p, 4096, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, cpu));
  CHECK_CU(cuMemPrefetchAsync(p, kBytes, cpu, 0, nullptr));
  expectError(cuMemPrefetchAsync(p, kBytes, cpu, 1, nullptr), CUDA_ERROR_INVALID_VALUE,
              "cuMemPrefetchAsync(flags 1)");
  if (!concurrent) {
    expectError(cuMemPrefetchAsync(p, kBytes, gpu, 0, nullptr), CUDA_ERROR_INVALID_DEVICE,
                "cuMemPrefetchAsync(to a device without concurrent managed access)");
    expectError(cuMemAdvise(p, kBytes, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, gpu),
                CUDA_ERROR_INVALID_DEVICE, "cuMemAdvise(preferred device)");
  }
  int readMostly = -1, preferred = 0, prefetched = 0;
  CUmem_range_attribute which[3] = {CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY,
                                    CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION,
                                    CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION};
  void* values[3] = {&readMostly, &preferred, &prefetched};
  size_t sizes[3] = {sizeof(int), sizeof(int), sizeof(int)};
  CHECK_CU(cuMemRangeGetAttributes(values, sizes, which, 3, p, 4096));
  CHECK(readMostly == 1 && preferred == CU_DEVICE_CPU && prefetched == CU_DEVICE_CPU,
        "range attributes of the first page: %d %d %d", readMostly, preferred, prefetched);
  CHECK_CU(cuMemRangeGetAttribute(&preferred, sizeof(int),
                                  CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, p, kBytes));
  CHECK(preferred == CU_DEVICE_INVALID, "preferred location of the whole range: %d", preferred);
  CUmemLocationType type = CU_MEM_LOCATION_TYPE_INVALID;
  CHECK_CU(cuMemRangeGetAttribute(&type, sizeof(type),
                                  CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE, p, kBytes));
  CHECK(type == CU_MEM_LOCATION_TYPE_HOST, "last prefetch location type %d", type);
  expectError(cuMemRangeGetAttribute(&preferred, 8, CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, p, 4096),
              CUDA_ERROR_INVALID_VALUE, "cuMemRangeGetAttribute(dataSize 8)");
  expectError(cuMemRangeGetAttribute(&preferred, sizeof(int), CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY,
                                     plain, 4096),
              CUDA_ERROR_INVALID_VALUE, "cuMemRangeGetAttribute(cuMemAlloc memory)");
  std::printf("advice, prefetch and range attributes\n");

  // Stream attachment.
  CUstream stream;
  CHECK_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));

  // The batch calls: their arguments as cuda.h documents them; with good ones, a device without
  // concurrent managed access refuses them (cuda.h: every device must have it), and nothing was
  // prefetched or discarded.
  {
    for (size_t i = 0; i < kCount; ++i) host[i] = static_cast<uint32_t>(3 * i);
    CUdeviceptr ranges[2] = {p, p + 4096};
    size_t lengths[2] = {4096, kBytes - 4096};
    CUmemLocation locations[2] = {cpu, cpu};
    size_t firsts[2] = {0, 1};
    const CUresult bad = CUDA_ERROR_INVALID_VALUE;
    expectError(cuMemPrefetchBatchAsync(ranges, lengths, 0, locations, firsts, 1, 0, stream), bad,
                "cuMemPrefetchBatchAsync(count 0)");
    expectError(cuMemPrefetchBatchAsync(nullptr, lengths, 2, locations, firsts, 1, 0, stream), bad,
                "cuMemPrefetchBatchAsync(no dptrs)");
    expectError(cuMemPrefetchBatchAsync(ranges, nullptr, 2, locations, firsts, 1, 0, stream), bad,
                "cuMemPrefetchBatchAsync(no sizes)");
    expectError(cuMemPrefetchBatchAsync(ranges, lengths, 2, locations, firsts, 1, 1, stream), bad,
                "cuMemPrefetchBatchAsync(flags 1)");
    expectError(cuMemPrefetchBatchAsync(ranges, lengths, 2, nullptr, firsts, 1, 0, stream), bad,
                "cuMemPrefetchBatchAsync(no locations)");
    expectError(cuMemPrefetchBatchAsync(ranges, lengths, 2, locations, firsts, 0, 0, stream), bad,
                "cuMemPrefetchBatchAsync(0 locations)");
    expectError(cuMemPrefetchBatchAsync(ranges, lengths, 1, locations, firsts, 2, 0, stream), bad,
                "cuMemPrefetchBatchAsync(more locations than ranges)");
    size_t notFromZero[1] = {1};
    expectError(cuMemPrefetchBatchAsync(ranges, lengths, 2, locations, notFromZero, 1, 0, stream),
                bad, "cuMemPrefetchBatchAsync(first index 1)");
    expectError(
        cuMemPrefetchBatchAsync(ranges, lengths, 2, locations, firsts, 1, 0, CU_STREAM_LEGACY), bad,
        "cuMemPrefetchBatchAsync(legacy NULL stream)");
    CUdeviceptr notManaged[2] = {p, plain};
    expectError(cuMemPrefetchBatchAsync(notManaged, lengths, 2, locations, firsts, 1, 0, stream),
                bad, "cuMemPrefetchBatchAsync(cuMemAlloc memory)");
    expectError(cuMemDiscardBatchAsync(ranges, lengths, 0, 0, stream), bad,
                "cuMemDiscardBatchAsync(count 0)");
    expectError(cuMemDiscardBatchAsync(nullptr, lengths, 2, 0, stream), bad,
                "cuMemDiscardBatchAsync(no dptrs)");
    expectError(cuMemDiscardBatchAsync(ranges, lengths, 2, 2, stream), bad,
                "cuMemDiscardBatchAsync(flags 2)");
    expectError(cuMemDiscardBatchAsync(notManaged, lengths, 2, 0, stream), bad,
                "cuMemDiscardBatchAsync(cuMemAlloc memory)");
    expectError(
        cuMemDiscardAndPrefetchBatchAsync(ranges, lengths, 2, nullptr, firsts, 1, 0, stream), bad,
        "cuMemDiscardAndPrefetchBatchAsync(no locations)");
    expectError(
        cuMemDiscardAndPrefetchBatchAsync(ranges, nullptr, 2, locations, firsts, 1, 0, stream), bad,
        "cuMemDiscardAndPrefetchBatchAsync(no sizes)");
    const CUresult good = concurrent ? CUDA_SUCCESS : CUDA_ERROR_NOT_SUPPORTED;
    expectError(cuMemPrefetchBatchAsync(ranges, lengths, 2, locations, firsts, 2, 0, stream), good,
                "cuMemPrefetchBatchAsync");
    // Two locations starting at the same range: the first applies to none (accepted on driver
    // 580.159.04, H200, which has concurrent managed access).
    size_t same[2] = {0, 0};
    expectError(cuMemPrefetchBatchAsync(ranges, lengths, 2, locations, same, 2, 0, stream), good,
                "cuMemPrefetchBatchAsync(indices not rising)");
    if (!concurrent) {
      expectError(cuMemDiscardBatchAsync(ranges, lengths, 2, 0, stream), good,
                  "cuMemDiscardBatchAsync");
      expectError(
          cuMemDiscardAndPrefetchBatchAsync(ranges, lengths, 2, locations, firsts, 1, 0, stream),
          good, "cuMemDiscardAndPrefetchBatchAsync");
    }
    CHECK_CU(cuStreamSynchronize(stream));
    for (size_t i = 0; i < kCount; ++i) {
      CHECK(host[i] == 3 * i, "element %zu is %u after the batch calls", i, host[i]);
    }
    std::printf("the batch prefetch and discard calls\n");
  }
  CHECK_CU(cuStreamAttachMemAsync(stream, p, 0, CU_MEM_ATTACH_SINGLE));
  CHECK_CU(cuStreamAttachMemAsync(stream, p, 0, CU_MEM_ATTACH_HOST));
  CHECK_CU(cuStreamAttachMemAsync(stream, p, 0, CU_MEM_ATTACH_GLOBAL));
  expectError(cuStreamAttachMemAsync(nullptr, p, 0, CU_MEM_ATTACH_SINGLE), CUDA_ERROR_INVALID_VALUE,
              "cuStreamAttachMemAsync(NULL stream, SINGLE)");
  expectError(cuStreamAttachMemAsync(stream, p, 0, 8), CUDA_ERROR_INVALID_VALUE,
              "cuStreamAttachMemAsync(flags 8)");
  if (!concurrent && !pageable) {
    expectError(cuStreamAttachMemAsync(stream, p, 4096, CU_MEM_ATTACH_GLOBAL),
                CUDA_ERROR_INVALID_VALUE, "cuStreamAttachMemAsync(part of an allocation)");
  }
  CHECK_CU(cuStreamSynchronize(stream));
  CHECK_CU(cuStreamDestroy(stream));
  std::printf("stream attachment\n");

  CHECK_CU(cuMemFree(plain));
  CHECK_CU(cuMemFree(p));
  expectError(cuPointerGetAttribute(&isManaged, CU_POINTER_ATTRIBUTE_IS_MANAGED, p),
              CUDA_ERROR_INVALID_VALUE, "cuPointerGetAttribute(freed managed memory)");
  return pass();
}
