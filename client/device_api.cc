// Initialization and device queries: answered from the snapshot taken at cuInit, never remotely.
#include <cstdio>
#include <cstring>

#include "callback_registry.h"
#include "driver_export.h"
#include "driver_state.h"
#include "raw_enum.h"

using namespace gpupool::client;

namespace {

const DeviceSnapshot* deviceOrNull(CUdevice dev, CUresult* r) {
  *r = requireInit();
  if (*r != CUDA_SUCCESS) return nullptr;
  const DeviceSnapshot* d = DriverState::get().device(dev);
  if (!d) *r = CUDA_ERROR_INVALID_DEVICE;
  return d;
}

// Device-memory budget callbacks, by device: never called, because no process of the pool runs
// over budget (each tenant is held to its quota by allocations over it failing with
// CUDA_ERROR_OUT_OF_MEMORY), which is the one notification cuda.h defines.
CallbackRegistry<CUasyncCallbackHandle>& budgetCallbacks() {
  static CallbackRegistry<CUasyncCallbackHandle> callbacks;
  return callbacks;
}

}  // namespace

GPUPOOL_DRIVER_API CUresult cuInit(unsigned int flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  return DriverState::get().initialize();
}

GPUPOOL_DRIVER_API CUresult cuDriverGetVersion(int* version) {
  if (!version) return CUDA_ERROR_INVALID_VALUE;
  // Before cuInit the runtime needs a version to accept us; afterwards the server's driver may be
  // older than the ABI this library speaks, and the lower of the two is the truth.
  int v = CUDA_VERSION;
  if (DriverState::get().initialized()) v = std::min(v, DriverState::get().driverVersion());
  *version = v;
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuDeviceGetCount(int* count) {
  if (!count) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  *count = DriverState::get().deviceCount();
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  if (!device) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (ordinal < 0 || ordinal >= DriverState::get().deviceCount()) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
  CUresult r;
  const DeviceSnapshot* d = deviceOrNull(dev, &r);
  if (!d) return r;
  if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  std::snprintf(name, static_cast<size_t>(len), "%s", d->name.c_str());
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  CUresult r;
  const DeviceSnapshot* d = deviceOrNull(dev, &r);
  if (!d) return r;
  if (!bytes) return CUDA_ERROR_INVALID_VALUE;
  *bytes = d->totalMemory;
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuDeviceTotalMem(unsigned int* bytes, CUdevice dev) {
  size_t total = 0;
  CUresult r = cuDeviceTotalMem_v2(&total, dev);
  if (r == CUDA_SUCCESS) *bytes = static_cast<unsigned int>(std::min<size_t>(total, UINT32_MAX));
  return r;
}

GPUPOOL_DRIVER_API CUresult cuDeviceGetAttribute(int* value, CUdevice_attribute attribute,
                                                 CUdevice dev) {
  CUresult r;
  const DeviceSnapshot* d = deviceOrNull(dev, &r);
  if (!d) return r;
  if (!value || attribute <= 0 || attribute >= CU_DEVICE_ATTRIBUTE_MAX) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *value = d->attribute(attribute);
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev) {
  CUresult r;
  const DeviceSnapshot* d = deviceOrNull(dev, &r);
  if (!d) return r;
  if (!uuid) return CUDA_ERROR_INVALID_VALUE;
  *uuid = d->uuid;
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice dev) {
  return cuDeviceGetUuid_v2(uuid, dev);
}

GPUPOOL_DRIVER_API CUresult cuDeviceGetPCIBusId(char* busId, int len, CUdevice dev) {
  CUresult r;
  const DeviceSnapshot* d = deviceOrNull(dev, &r);
  if (!d) return r;
  if (!busId || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  // As NVIDIA's driver writes it: the domain in four hex digits when it fits in them.
  std::snprintf(busId, static_cast<size_t>(len), "%04x:%02x:%02x.0",
                d->attribute(CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID),
                d->attribute(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID),
                d->attribute(CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID));
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuDeviceGetByPCIBusId(CUdevice* dev, const char* busId) {
  if (!dev || !busId) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  unsigned domain = 0, bus = 0, device = 0;
  if (std::sscanf(busId, "%x:%x:%x", &domain, &bus, &device) != 3) {
    domain = 0;
    if (std::sscanf(busId, "%x:%x", &bus, &device) != 2) return CUDA_ERROR_INVALID_VALUE;
  }
  for (int i = 0; i < DriverState::get().deviceCount(); ++i) {
    const DeviceSnapshot* d = DriverState::get().device(i);
    if (static_cast<unsigned>(d->attribute(CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID)) == domain &&
        static_cast<unsigned>(d->attribute(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID)) == bus &&
        static_cast<unsigned>(d->attribute(CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID)) == device) {
      *dev = i;
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_INVALID_DEVICE;
}

GPUPOOL_DRIVER_API CUresult cuDeviceComputeCapability(int* major, int* minor, CUdevice dev) {
  CUresult r;
  const DeviceSnapshot* d = deviceOrNull(dev, &r);
  if (!d) return r;
  if (!major || !minor) return CUDA_ERROR_INVALID_VALUE;
  *major = d->attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  *minor = d->attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuDeviceGetProperties(CUdevprop* prop, CUdevice dev) {
  CUresult r;
  const DeviceSnapshot* d = deviceOrNull(dev, &r);
  if (!d) return r;
  if (!prop) return CUDA_ERROR_INVALID_VALUE;
  prop->maxThreadsPerBlock = d->attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  for (int i = 0; i < 3; ++i) {
    prop->maxThreadsDim[i] = d->attribute(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X + i);
    prop->maxGridSize[i] = d->attribute(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X + i);
  }
  prop->sharedMemPerBlock = d->attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
  prop->totalConstantMemory = d->attribute(CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY);
  prop->SIMDWidth = d->attribute(CU_DEVICE_ATTRIBUTE_WARP_SIZE);
  prop->memPitch = d->attribute(CU_DEVICE_ATTRIBUTE_MAX_PITCH);
  prop->regsPerBlock = d->attribute(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK);
  prop->clockRate = d->attribute(CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
  prop->textureAlign = d->attribute(CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT);
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuDeviceCanAccessPeer(int* canAccess, CUdevice dev, CUdevice peer) {
  CUresult r;
  if (!deviceOrNull(dev, &r) || !deviceOrNull(peer, &r)) return r;
  if (!canAccess) return CUDA_ERROR_INVALID_VALUE;
  *canAccess = 0;  // devices of a pool do not map each other's memory
  return CUDA_SUCCESS;
}

// What the link between two pool devices offers: no direct access, no atomics, no arrays (peer
// copies are staged, client/copy_api.cc), consistent with cuDeviceCanAccessPeer.
GPUPOOL_DRIVER_API CUresult cuDeviceGetP2PAttribute(int* value, CUdevice_P2PAttribute attribute,
                                                    CUdevice src, CUdevice dst) {
  CUresult r;
  if (!deviceOrNull(src, &r) || !deviceOrNull(dst, &r)) return r;
  if (src == dst) return CUDA_ERROR_INVALID_DEVICE;
  if (!value) return CUDA_ERROR_INVALID_VALUE;
  switch (attribute) {
    case CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK:
    case CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED:
    case CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED:
    case CU_DEVICE_P2P_ATTRIBUTE_CUDA_ARRAY_ACCESS_SUPPORTED:
    case CU_DEVICE_P2P_ATTRIBUTE_ONLY_PARTIAL_NATIVE_ATOMIC_SUPPORTED:
      *value = 0;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

GPUPOOL_DRIVER_API CUresult cuDeviceGetP2PAtomicCapabilities(unsigned int* capabilities,
                                                             const CUatomicOperation* operations,
                                                             unsigned int count, CUdevice src,
                                                             CUdevice dst) {
  CUresult r;
  if (!deviceOrNull(src, &r) || !deviceOrNull(dst, &r)) return r;
  if (src == dst) return CUDA_ERROR_INVALID_DEVICE;
  if (!capabilities || !operations || count == 0) return CUDA_ERROR_INVALID_VALUE;
  for (unsigned i = 0; i < count; ++i) capabilities[i] = 0;  // no atomic works over the link
  return CUDA_SUCCESS;
}

// No atomic operation works natively between a pool GPU and this host: the host is another
// machine (HOST_NATIVE_ATOMIC_SUPPORTED reads 0), so every capability mask is empty.
GPUPOOL_DRIVER_API CUresult cuDeviceGetHostAtomicCapabilities(unsigned int* capabilities,
                                                              const CUatomicOperation* operations,
                                                              unsigned int count, CUdevice dev) {
  CUresult r;
  if (!deviceOrNull(dev, &r)) return r;
  if (!capabilities || !operations || count == 0) return CUDA_ERROR_INVALID_VALUE;
  for (unsigned i = 0; i < count; ++i) {
    const int op = rawEnumValue(operations[i]);
    if (op < 0 || op >= CU_ATOMIC_OPERATION_MAX) return CUDA_ERROR_INVALID_VALUE;
  }
  for (unsigned i = 0; i < count; ++i) capabilities[i] = 0;
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuModuleGetLoadingMode(CUmoduleLoadingMode* mode) {
  if (!mode) return CUDA_ERROR_INVALID_VALUE;
  // Lazy: modules travel to the server only when a kernel of theirs is first used.
  *mode = CU_MODULE_LAZY_LOADING;
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuDeviceGetExecAffinitySupport(int* pi, CUexecAffinityType,
                                                           CUdevice dev) {
  CUresult r;
  if (!deviceOrNull(dev, &r)) return r;
  if (!pi) return CUDA_ERROR_INVALID_VALUE;
  *pi = 0;
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuDeviceRegisterAsyncNotification(CUdevice dev,
                                                              CUasyncCallback callback, void*,
                                                              CUasyncCallbackHandle* handle) {
  CUresult r;
  if (!deviceOrNull(dev, &r)) return r;
  if (!callback || !handle) return CUDA_ERROR_INVALID_VALUE;
  *handle = budgetCallbacks().add(dev);
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuDeviceUnregisterAsyncNotification(CUdevice dev,
                                                                CUasyncCallbackHandle handle) {
  CUresult r;
  if (!deviceOrNull(dev, &r)) return r;
  return budgetCallbacks().remove(handle, dev) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
