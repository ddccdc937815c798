// Stream-ordered allocation through the driver API, on the runtime's primary context:
// cuMemAllocAsync, cuMemAllocFromPoolAsync and cuMemFreeAsync with memsets and copies in stream
// order, default and current pools (cuDeviceGetDefaultMemPool, cuDeviceGet/SetMemPool), a created
// pool (cuMemPoolCreate/Destroy), every pool attribute, cuMemPoolTrimTo, cuMemPoolSetAccess and
// GetAccess, and a freed block that the stream may reuse only once it reached the free.
#include <cuda.h>

#include <cstdint>
#include <vector>

#include "driver_check.h"

namespace {

constexpr size_t kCount = 1 << 15;
constexpr size_t kBytes = kCount * sizeof(uint32_t);

cuuint64_t attribute(CUmemoryPool pool, CUmemPool_attribute which) {
  cuuint64_t value = 0;
  CHECK_CU(cuMemPoolGetAttribute(pool, which, &value));
  return value;
}

int policy(CUmemoryPool pool, CUmemPool_attribute which) {
  int value = -1;
  CHECK_CU(cuMemPoolGetAttribute(pool, which, &value));
  return value;
}

// Fills an allocation of `pool` (null: the device's current pool) with `value` on `stream`,
// reads it back and frees it, all in stream order.
void fillReadFree(CUmemoryPool pool, CUstream stream, uint32_t value) {
  CUdeviceptr p = 0;
  if (pool) {
    CHECK_CU(cuMemAllocFromPoolAsync(&p, kBytes, pool, stream));
  } else {
    CHECK_CU(cuMemAllocAsync(&p, kBytes, stream));
  }
  CUdeviceptr base = 0;
  size_t size = 0;
  CHECK_CU(cuMemGetAddressRange(&base, &size, p + 4));
  CHECK(base == p && size >= kBytes, "address range of a pool allocation");
  CHECK_CU(cuMemsetD32Async(p, value, kCount, stream));
  std::vector<uint32_t> host(kCount);
  CHECK_CU(cuMemcpyDtoHAsync(host.data(), p, kBytes, stream));
  CHECK_CU(cuMemFreeAsync(p, stream));
  CHECK_CU(cuStreamSynchronize(stream));
  for (size_t i = 0; i < kCount; ++i) {
    CHECK(host[i] == value, "element %zu is 0x%x, expected 0x%x", i, host[i], value);
  }
}

}  // namespace

int main() {
  const CUdevice device = usePrimaryContext();
  int supported = 0;
  CHECK_CU(cuDeviceGetAttribute(&supported, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, device));
  CHECK(supported == 1, "memory pools not supported");
  CUstream stream;
  CHECK_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));

  CUmemoryPool defaultPool, current;
  CHECK_CU(cuDeviceGetDefaultMemPool(&defaultPool, device));
  CHECK_CU(cuDeviceGetMemPool(&current, device));
  CHECK(current == defaultPool, "the current pool is not the default pool");

  // Defaults: every reuse policy on, release threshold 0.
  CHECK(policy(defaultPool, CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES) == 1, "policy");
  CHECK(policy(defaultPool, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC) == 1, "policy");
  CHECK(policy(defaultPool, CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES) == 1, "policy");
  CHECK(attribute(defaultPool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD) == 0, "default threshold");

  fillReadFree(nullptr, stream, 0x11111111u);
  fillReadFree(defaultPool, stream, 0x22222222u);
  CHECK(attribute(defaultPool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) == 0, "used after free");
  CHECK(attribute(defaultPool, CU_MEMPOOL_ATTR_USED_MEM_HIGH) >= kBytes, "used high watermark");

  // A created pool that keeps its memory.
  CUmemPoolProps props = {};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = device;
  CUmemoryPool pool;
  CHECK_CU(cuMemPoolCreate(&pool, &props));
  cuuint64_t keepAll = UINT64_MAX;
  CHECK_CU(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keepAll));
  fillReadFree(pool, stream, 0x33333333u);
  cuuint64_t reserved = attribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT);
  CHECK(reserved >= kBytes, "the pool kept %llu bytes", static_cast<unsigned long long>(reserved));
  fillReadFree(pool, stream, 0x44444444u);
  CHECK(attribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == reserved, "the pool grew");

  // A block freed on one stream serves the next allocation on that stream.
  CUdeviceptr first = 0, again = 0;
  CHECK_CU(cuMemAllocFromPoolAsync(&first, kBytes, pool, stream));
  CHECK_CU(cuMemFreeAsync(first, stream));
  CHECK_CU(cuStreamSynchronize(stream));
  CHECK_CU(cuMemAllocFromPoolAsync(&again, kBytes, pool, stream));
  CHECK(again == first, "a freed block of the same stream was not reused");
  CHECK_CU(cuMemFreeAsync(again, stream));

  // Watermarks: reset by 0 only; the current values cannot be set.
  cuuint64_t zero = 0, one = 1;
  CHECK_CU(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &zero));
  CHECK_CU(cuStreamSynchronize(stream));
  CHECK(attribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH) ==
            attribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT),
        "reserved high watermark not reset");
  CHECK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &one) ==
            CUDA_ERROR_INVALID_VALUE,
        "a nonzero watermark was accepted");
  CHECK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &zero) ==
            CUDA_ERROR_INVALID_VALUE,
        "the reserved memory was set");

  // Trim keeps what is asked, then nothing.
  CHECK_CU(cuMemPoolTrimTo(pool, 0));
  CHECK(attribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == 0, "trim kept memory");

  // Access: read-write from the pool's device.
  CUmemAccessDesc desc = {};
  desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  desc.location.id = device;
  desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CHECK_CU(cuMemPoolSetAccess(pool, &desc, 1));
  CUmemAccess_flags flags = CU_MEM_ACCESS_FLAGS_PROT_NONE;
  CHECK_CU(cuMemPoolGetAccess(&flags, pool, &desc.location));
  CHECK(flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE, "pool access is %d", static_cast<int>(flags));

  // The created pool as the device's current pool.
  CHECK_CU(cuDeviceSetMemPool(device, pool));
  CHECK_CU(cuDeviceGetMemPool(&current, device));
  CHECK(current == pool, "current pool not set");
  fillReadFree(nullptr, stream, 0x55555555u);
  CHECK(attribute(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH) >= kBytes, "current pool unused");
  CHECK_CU(cuDeviceSetMemPool(device, defaultPool));

  // A default pool cannot be destroyed; a created one can.
  CHECK(cuMemPoolDestroy(defaultPool) != CUDA_SUCCESS, "the default pool was destroyed");
  CHECK_CU(cuMemPoolDestroy(pool));

  CHECK_CU(cuStreamDestroy(stream));
  std::printf("driver stream-ordered allocation: pools, attributes, trim, access: ok\n");
  return pass();
}
