// Pointer attributes (cuPointerGetAttribute, cuPointerGetAttributes, cuPointerSetAttribute) of
// device, pool and pinned host memory: every attribute they accept is written, SYNC_MEMOPS is set
// and read back, unknown ones are errors, and mapped host
// memory works exactly when the device says it can map host memory (CAN_MAP_HOST_MEMORY: 0 on a
// pool GPU whose client's host memory is on another machine; 1 on a local GPU, and over shm to a
// server that maps the client's pinned memory, docs/shm.md).
#include <cuda.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "driver_check.h"

namespace {

template <typename T>
T pointerAttribute(CUpointer_attribute attribute, const void* p) {
  T value{};
  CHECK_CU(cuPointerGetAttribute(&value, attribute, reinterpret_cast<CUdeviceptr>(p)));
  return value;
}

template <typename T>
T pointerAttribute(CUpointer_attribute attribute, CUdeviceptr p) {
  return pointerAttribute<T>(attribute, reinterpret_cast<const void*>(p));
}

void checkDeviceMemory(CUcontext context) {
  constexpr size_t kBytes = 1 << 20;
  CUdeviceptr a = 0;
  CHECK_CU(cuMemAlloc(&a, kBytes));
  const CUdeviceptr inside = a + 4096 + 12;
  CHECK(pointerAttribute<CUcontext>(CU_POINTER_ATTRIBUTE_CONTEXT, inside) == context,
        "device memory: wrong context");
  CHECK(
      pointerAttribute<unsigned>(CU_POINTER_ATTRIBUTE_MEMORY_TYPE, inside) == CU_MEMORYTYPE_DEVICE,
      "device memory: not of type DEVICE");
  CHECK(pointerAttribute<CUdeviceptr>(CU_POINTER_ATTRIBUTE_DEVICE_POINTER, inside) == inside,
        "device memory: DEVICE_POINTER is not the pointer itself");
  CHECK(pointerAttribute<CUdeviceptr>(CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, inside) == a,
        "device memory: RANGE_START_ADDR is not the allocation's start");
  CHECK(pointerAttribute<size_t>(CU_POINTER_ATTRIBUTE_RANGE_SIZE, inside) == kBytes,
        "device memory: RANGE_SIZE is not the allocation's size");
  CHECK(pointerAttribute<unsigned>(CU_POINTER_ATTRIBUTE_MAPPED, inside) == 1,
        "device memory: not MAPPED");
  CHECK(pointerAttribute<unsigned>(CU_POINTER_ATTRIBUTE_IS_MANAGED, inside) == 0,
        "device memory: IS_MANAGED");
  CHECK(pointerAttribute<int>(CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, inside) == 0,
        "device memory: wrong device ordinal");
  CHECK(pointerAttribute<unsigned>(CU_POINTER_ATTRIBUTE_ACCESS_FLAGS, inside) ==
            CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE,
        "device memory: the device cannot read and write it");
  CHECK(pointerAttribute<CUmemoryPool>(CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, inside) == nullptr,
        "cuMemAlloc memory names a memory pool");
  // The mapping holds the whole allocation (a driver may map more around it).
  const auto mappingBase = pointerAttribute<CUdeviceptr>(CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR, a);
  const auto mappingSize = pointerAttribute<size_t>(CU_POINTER_ATTRIBUTE_MAPPING_SIZE, a);
  CHECK(mappingBase <= a && mappingBase + mappingSize >= a + kBytes,
        "the mapping [0x%llx, +%zu) does not hold the allocation [0x%llx, +%zu)",
        static_cast<unsigned long long>(mappingBase), mappingSize,
        static_cast<unsigned long long>(a), kBytes);
  (void)pointerAttribute<unsigned long long>(CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID, a);

  // SYNC_MEMOPS is the one attribute that can be set, on device memory, and reads back as set.
  for (unsigned set : {0u, 1u}) {
    CHECK_CU(cuPointerSetAttribute(&set, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, inside));
    const auto got = pointerAttribute<unsigned>(CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, a);
    CHECK(got == set, "SYNC_MEMOPS set to %u reads %u", set, got);
  }
  const unsigned one = 1;
  expectError(cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_IS_MANAGED, a),
              CUDA_ERROR_INVALID_VALUE, "cuPointerSetAttribute(IS_MANAGED)");

  // Buffer ids are unique for the process's life, even where a new allocation reuses an address.
  const auto firstId = pointerAttribute<unsigned long long>(CU_POINTER_ATTRIBUTE_BUFFER_ID, a);
  CHECK_CU(cuMemFree(a));
  CUdeviceptr b = 0;
  CHECK_CU(cuMemAlloc(&b, kBytes));
  CHECK(pointerAttribute<unsigned long long>(CU_POINTER_ATTRIBUTE_BUFFER_ID, b) != firstId,
        "a new allocation has the buffer id of a freed one");
  CHECK_CU(cuMemFree(b));
  std::printf("device memory attributes ok\n");
}

void checkPoolMemory(CUdevice device) {
  int pools = 0;
  CHECK_CU(cuDeviceGetAttribute(&pools, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, device));
  if (!pools) {
    std::printf("pool memory: the device has no memory pools\n");
    return;
  }
  CUmemoryPool defaultPool = nullptr;
  CHECK_CU(cuDeviceGetDefaultMemPool(&defaultPool, device));
  CUdeviceptr p = 0;
  CHECK_CU(cuMemAllocAsync(&p, 4096, nullptr));
  CHECK(pointerAttribute<CUmemoryPool>(CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, p) == defaultPool,
        "cuMemAllocAsync memory does not name the device's default pool");
  CHECK_CU(cuMemFreeAsync(p, nullptr));
  CHECK_CU(cuStreamSynchronize(nullptr));
  std::printf("pool memory attributes ok\n");
}

void checkHostMemory(CUcontext context, CUdevice device) {
  void* host = nullptr;
  CHECK_CU(cuMemAllocHost(&host, 4096));
  CHECK(pointerAttribute<CUcontext>(CU_POINTER_ATTRIBUTE_CONTEXT, host) == context,
        "pinned memory: wrong context");
  CHECK(pointerAttribute<unsigned>(CU_POINTER_ATTRIBUTE_MEMORY_TYPE, host) == CU_MEMORYTYPE_HOST,
        "pinned memory: not of type HOST");
  CHECK(pointerAttribute<void*>(CU_POINTER_ATTRIBUTE_HOST_POINTER, host) == host,
        "pinned memory: HOST_POINTER is not the pointer itself");

  int canMap = 0;
  CHECK_CU(cuDeviceGetAttribute(&canMap, CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, device));
  CUdeviceptr mapped = 0;
  const CUresult devicePointer = cuPointerGetAttribute(&mapped, CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
                                                       reinterpret_cast<CUdeviceptr>(host));
  void* mappedAlloc = nullptr;
  const CUresult mappedAllocation = cuMemHostAlloc(&mappedAlloc, 4096, CU_MEMHOSTALLOC_DEVICEMAP);
  void* user = std::aligned_alloc(4096, 4096);
  CHECK(user != nullptr, "aligned_alloc failed");
  const CUresult mappedRegistration = cuMemHostRegister(user, 4096, CU_MEMHOSTREGISTER_DEVICEMAP);
  const CUresult getDevicePointer = cuMemHostGetDevicePointer(&mapped, host, 0);
  if (canMap) {
    // Under unified addressing every pinned allocation is mapped, at its own address.
    CHECK_CU(devicePointer);
    CHECK(mapped == reinterpret_cast<CUdeviceptr>(host), "DEVICE_POINTER is not the pointer");
    CHECK_CU(mappedAllocation);
    CHECK_CU(getDevicePointer);
    CHECK_CU(cuMemFreeHost(mappedAlloc));
    // A pool on the GPU's own host maps the memory it allocates, not memory a program registers
    // (docs/shm.md): that is refused as not supported, never faked.
    CHECK(mappedRegistration == CUDA_SUCCESS || mappedRegistration == CUDA_ERROR_NOT_SUPPORTED,
          "cuMemHostRegister(DEVICEMAP) failed other than as not supported");
    if (mappedRegistration == CUDA_SUCCESS) CHECK_CU(cuMemHostUnregister(user));
  } else {
    // Nothing may pretend that a kernel can reach this host's memory.
    expectError(devicePointer, CUDA_ERROR_INVALID_VALUE, "DEVICE_POINTER of pinned memory");
    CHECK(mappedAllocation != CUDA_SUCCESS, "cuMemHostAlloc(DEVICEMAP) succeeded");
    CHECK(mappedRegistration != CUDA_SUCCESS, "cuMemHostRegister(DEVICEMAP) succeeded");
    CHECK(getDevicePointer != CUDA_SUCCESS, "cuMemHostGetDevicePointer succeeded");
    CHECK(pointerAttribute<unsigned>(CU_POINTER_ATTRIBUTE_ACCESS_FLAGS, host) ==
              CU_POINTER_ATTRIBUTE_ACCESS_FLAG_NONE,
          "pinned memory: the device claims access to it");
  }
  std::free(user);
  CHECK_CU(cuMemFreeHost(host));
  // The value itself differs by transport (1 over shm to an emu server), so it is not printed.
  std::printf("pinned memory attributes ok\n");
}

void checkAttributeLists(CUcontext context) {
  CUdeviceptr a = 0;
  CHECK_CU(cuMemAlloc(&a, 256));
  unsigned memoryType = 0;
  CUcontext owner = nullptr;
  unsigned long long bufferId = 0;
  size_t rangeSize = 0;
  CUpointer_attribute attributes[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                      CU_POINTER_ATTRIBUTE_CONTEXT, CU_POINTER_ATTRIBUTE_BUFFER_ID,
                                      CU_POINTER_ATTRIBUTE_RANGE_SIZE};
  void* data[] = {&memoryType, &owner, &bufferId, &rangeSize};
  CHECK_CU(cuPointerGetAttributes(4, attributes, data, a));
  CHECK(memoryType == CU_MEMORYTYPE_DEVICE && owner == context && bufferId != 0 && rangeSize == 256,
        "cuPointerGetAttributes: type %u, context %p, buffer id %llu, range size %zu", memoryType,
        static_cast<void*>(owner), bufferId, rangeSize);

  // Memory the driver does not know reads as null values, without an error.
  int local = 0;
  memoryType = 7;
  owner = context;
  CHECK_CU(cuPointerGetAttributes(2, attributes, data, reinterpret_cast<CUdeviceptr>(&local)));
  CHECK(memoryType == 0 && owner == nullptr, "unknown memory: type %u, context %p", memoryType,
        static_cast<void*>(owner));
  expectError(cuPointerGetAttribute(&memoryType, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                    reinterpret_cast<CUdeviceptr>(&local)),
              CUDA_ERROR_INVALID_VALUE, "cuPointerGetAttribute of unknown memory");

  // An attribute no driver knows is an error, never a success that leaves the output unwritten.
  const auto unknown = static_cast<CUpointer_attribute>(1000);
  unsigned long long value = 0;
  expectError(cuPointerGetAttribute(&value, unknown, a), CUDA_ERROR_INVALID_VALUE,
              "cuPointerGetAttribute(attribute 1000)");
  void* one[] = {&value};
  expectError(cuPointerGetAttributes(1, const_cast<CUpointer_attribute*>(&unknown), one, a),
              CUDA_ERROR_INVALID_VALUE, "cuPointerGetAttributes(attribute 1000)");
  CHECK_CU(cuMemFree(a));
  std::printf("attribute lists ok\n");
}

}  // namespace

int main() {
  CHECK_CU(cuInit(0));
  CUdevice device = 0;
  CHECK_CU(cuDeviceGet(&device, 0));
  CUcontext context = nullptr;
  CHECK_CU(cuCtxCreate(&context, nullptr, 0, device));
  checkDeviceMemory(context);
  checkPoolMemory(device);
  checkHostMemory(context, device);
  checkAttributeLists(context);
  CHECK_CU(cuCtxDestroy(context));
  return pass();
}
