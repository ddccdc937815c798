// Device memory allocation, pinned host memory and pointer attributes (copies and memsets are in
// copy_api.cc).
//
// Device pointers are the server's addresses, unchanged. Pinned host memory is ordinary memory of
// this process, noted so that an RDMA connection registers it once and moves its bytes in place.
#include <sys/mman.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "client_log.h"
#include "device_address_reservations.h"
#include "driver_export.h"
#include "driver_state.h"
#include "graph_memory.h"
#include "host_function_fence.h"
#include "managed_memory.h"
#include "raw_enum.h"
#include "transport/pinned_memory.h"

using namespace gpupool::client;
using gpupool::transport::ConstBuffer;

namespace {

// Frees device memory of `ctx` on its server, posted. The server's free waits for the device.
CUresult postFree(ContextObject* ctx, CUdeviceptr dptr) {
  auto fence = HostFunctionFence::hold(HostFunctionFence::Work::kCall, fenceScopeOf(ctx));
  return ctx->server->post("cuMemFree", [&](wire::Request::Builder b) {
    auto m = b.initMemFree();
    m.setContext(ctx->remote);
    m.setAddress(dptr);
  });
}

CUresult allocate(CUdeviceptr* dptr, size_t bytes, size_t pitchWidth, unsigned elementSize,
                  size_t* pitch) {
  if (!dptr) return CUDA_ERROR_INVALID_VALUE;
  ContextObject* ctx = nullptr;
  if (CUresult r = currentRemoteContext(&ctx); r != CUDA_SUCCESS) return r;
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  uint64_t address = 0, rowPitch = 0, size = 0;
  CUresult r = requestDeviceRangeApart(
      "cuMemAlloc", *ctx->server,
      [&](uint64_t* at, uint64_t* bytesThere) {
        return ctx->server->call(
            "cuMemAlloc",
            [&](wire::Request::Builder b) {
              auto m = b.initMemAlloc();
              m.setContext(ctx->remote);
              m.setBytes(bytes);
              m.setPitchWidth(pitchWidth);
              m.setElementSize(elementSize);
            },
            {},
            [&](wire::Response::Reader reply, ReplyBulk&) {
              *at = reply.getMemAlloc().getAddress();
              rowPitch = reply.getMemAlloc().getPitch();
              *bytesThere = size = pitchWidth ? rowPitch * bytes : bytes;
              return CUDA_SUCCESS;
            });
      },
      [&](const std::vector<uint64_t>& overlapping) {
        for (uint64_t held : overlapping) postFree(ctx, held);
      },
      &address);
  if (r != CUDA_SUCCESS) return r;
  {
    std::lock_guard lock(DriverState::get().mutex);
    DriverState::get().deviceAllocations[address] = DeviceAllocation{size, ctx};
  }
  *dptr = address;
  if (pitch) *pitch = rowPitch;
  return CUDA_SUCCESS;
}

CUresult release(CUdeviceptr dptr) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (dptr == 0) return CUDA_SUCCESS;
  DeviceAllocation info;
  CUdeviceptr base = 0;
  if (!DriverState::get().findDevice(dptr, 0, &base, &info) || base != dptr ||
      !info.context->remote || info.vmm || info.ipcOpens) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (CUresult r = CUDA_SUCCESS;
      freeGraphAllocation(dptr, info.context, nullptr, 0, "cuMemFree", &r)) {
    return r;
  }
  if (info.managed) return freeManagedAllocation(dptr, info);
  {
    std::lock_guard lock(DriverState::get().mutex);
    DriverState::get().deviceAllocations.erase(dptr);
  }
  return postFree(info.context, dptr);
}

// Mapped pinned memory (DEVICEMAP) would hand a remote kernel an address of this host, which it
// cannot reach: refused, as the devices report CAN_MAP_HOST_MEMORY = 0 (except on shm sessions
// whose server maps it: shared_host_memory.h).
constexpr const char* kNoMappedHostMemory =
    "pinned host memory lives on the client host and a pool GPU cannot address it (devices "
    "report CAN_MAP_HOST_MEMORY = 0); allocate device memory and copy instead";

CUresult hostAllocate(void** pp, size_t bytes, unsigned flags) {
  if (!pp) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  constexpr unsigned kKnownFlags =
      CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED;
  if (flags & ~kKnownFlags) {
    return refuseCall(CUDA_ERROR_INVALID_VALUE,
                      "cuMemHostAlloc: unknown flag bits " + std::to_string(flags & ~kKnownFlags));
  }
  ContextObject* owner = DriverState::get().current();
  // Where the session maps pinned memory into device addresses, every allocation is mapped, as
  // under unified addressing on a GPU (the flag changes nothing there); elsewhere none can be.
  bool mapped = owner && owner->server && owner->server->mapsHostMemory();
  if ((flags & CU_MEMHOSTALLOC_DEVICEMAP) && !mapped) {
    return refuseCall(
        CUDA_ERROR_NOT_SUPPORTED,
        std::string("cuMemHostAlloc(CU_MEMHOSTALLOC_DEVICEMAP): ") + kNoMappedHostMemory);
  }
  if (bytes == 0) {
    *pp = nullptr;
    return CUDA_SUCCESS;
  }
  // Page-aligned and page-granular, as pinned memory is. A server on this host (shm) maps it from
  // a memory file, so copies of it need not carry its bytes; elsewhere it is ordinary memory of
  // this process.
  std::shared_ptr<SharedHostFile> file;
  void* p = nullptr;
  if (mapped) {
    // One address for the host and the current context's kernels (shared_host_memory.h).
    if (CUresult r = DriverState::get().ensureRemote(owner); r != CUDA_SUCCESS) return r;
    CUresult error = CUDA_SUCCESS;
    p = allocateMappedHostMemory(*owner->server, owner->remote, bytes, &file, &error);
    if (!p) return error;
  } else if (owner && owner->server && owner->server->sharesHostFiles()) {
    p = allocateSharedHostMemory(bytes, &file);
    if (!p && logLevel() >= 1)
      logLine(std::string("note: pinned memory in a memory file failed (") + std::strerror(errno) +
              "); this allocation's copies carry their bytes");
  }
  if (!p) {
    p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  }
  {
    std::lock_guard lock(DriverState::get().mutex);
    HostAllocation a;
    a.size = bytes;
    a.flags = flags;
    a.context = owner;
    a.file = std::move(file);
    DriverState::get().hostAllocations[reinterpret_cast<uintptr_t>(p)] = std::move(a);
  }
  // Lets an RDMA connection register it once and move its bytes without a copy.
  gpupool::transport::processPinnedMemory().note(p, bytes);
  *pp = p;
  return CUDA_SUCCESS;
}

}  // namespace

// ---- Allocation ----

GPUPOOL_DRIVER_API CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytes) {
  return allocate(dptr, bytes, 0, 0, nullptr);
}

GPUPOOL_DRIVER_API CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pitch, size_t widthBytes,
                                               size_t height, unsigned int elementSize) {
  if (!pitch || widthBytes == 0 || height == 0) return CUDA_ERROR_INVALID_VALUE;
  if (elementSize != 4 && elementSize != 8 && elementSize != 16) return CUDA_ERROR_INVALID_VALUE;
  return allocate(dptr, height, widthBytes, elementSize, pitch);
}

GPUPOOL_DRIVER_API CUresult cuMemFree_v2(CUdeviceptr dptr) { return release(dptr); }

GPUPOOL_DRIVER_API CUresult cuMemGetInfo_v2(size_t* freeBytes, size_t* totalBytes) {
  ContextObject* ctx = nullptr;
  if (CUresult r = currentRemoteContext(&ctx); r != CUDA_SUCCESS) return r;
  return ctx->server->call(
      "cuMemGetInfo", [&](wire::Request::Builder b) { b.setMemGetInfo(ctx->remote); }, {},
      [&](wire::Response::Reader reply, ReplyBulk&) {
        if (freeBytes) *freeBytes = reply.getMemInfo().getFree();
        if (totalBytes) *totalBytes = reply.getMemInfo().getTotal();
        return CUDA_SUCCESS;
      });
}

GPUPOOL_DRIVER_API CUresult cuMemGetAddressRange_v2(CUdeviceptr* base, size_t* size,
                                                    CUdeviceptr dptr) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  DeviceAllocation info;
  CUdeviceptr b = 0;
  if (!DriverState::get().findDevice(dptr, 0, &b, &info)) return CUDA_ERROR_NOT_FOUND;
  // NVIDIA's driver names no allocation for a module's __managed__ variables (it refuses, as the
  // pooled runs on a GPU showed); nor does this one, so the cuda backend chained in front of it
  // meets what it meets there.
  if (info.moduleVariable) return CUDA_ERROR_INVALID_VALUE;
  if (base) *base = b;
  if (size) *size = info.size;
  return CUDA_SUCCESS;
}

// ---- Host memory ----

GPUPOOL_DRIVER_API CUresult cuMemAllocHost_v2(void** pp, size_t bytes) {
  return hostAllocate(pp, bytes, 0);
}

GPUPOOL_DRIVER_API CUresult cuMemHostAlloc(void** pp, size_t bytes, unsigned int flags) {
  return hostAllocate(pp, bytes, flags);
}

GPUPOOL_DRIVER_API CUresult cuMemFreeHost(void* p) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  size_t size = 0;
  std::shared_ptr<SharedHostFile> file;
  {
    std::lock_guard lock(DriverState::get().mutex);
    auto& hosts = DriverState::get().hostAllocations;
    auto it = hosts.find(reinterpret_cast<uintptr_t>(p));
    if (it == hosts.end() || it->second.registered) return CUDA_ERROR_INVALID_VALUE;
    size = it->second.size;
    file = std::move(it->second.file);
    hosts.erase(it);
  }
  gpupool::transport::processPinnedMemory().forget(p);
  if (file) {
    releaseSharedHostMemory(*file);  // the servers unmap their views; the file closes with `file`
    unmapSharedHostMemory(p, *file);
  } else {
    munmap(p, size);
  }
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuMemHostRegister_v2(void* p, size_t bytes, unsigned int flags) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (!p || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  constexpr unsigned kKnownFlags = CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
                                   CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY;
  if (flags & ~kKnownFlags) {
    return refuseCall(CUDA_ERROR_INVALID_VALUE, "cuMemHostRegister: unknown flag bits " +
                                                    std::to_string(flags & ~kKnownFlags));
  }
  if (flags & CU_MEMHOSTREGISTER_DEVICEMAP) {
    return refuseCall(
        CUDA_ERROR_NOT_SUPPORTED,
        std::string("cuMemHostRegister(CU_MEMHOSTREGISTER_DEVICEMAP): ") + kNoMappedHostMemory);
  }
  if (flags & CU_MEMHOSTREGISTER_IOMEMORY) {
    return refuseCall(CUDA_ERROR_NOT_SUPPORTED,
                      "cuMemHostRegister(CU_MEMHOSTREGISTER_IOMEMORY): I/O memory of the client "
                      "host (a peer device's BAR) cannot be reached by a pool GPU");
  }
  if (DriverState::get().findHost(p)) return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  ContextObject* owner = DriverState::get().current();
  std::lock_guard lock(DriverState::get().mutex);
  HostAllocation registered;
  registered.size = bytes;
  registered.flags = flags;
  registered.registered = true;
  registered.context = owner;
  DriverState::get().hostAllocations[reinterpret_cast<uintptr_t>(p)] = std::move(registered);
  gpupool::transport::processPinnedMemory().note(p, bytes);
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuMemHostRegister(void* p, size_t bytes, unsigned int flags) {
  return cuMemHostRegister_v2(p, bytes, flags);
}

GPUPOOL_DRIVER_API CUresult cuMemHostUnregister(void* p) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  std::lock_guard lock(DriverState::get().mutex);
  auto& hosts = DriverState::get().hostAllocations;
  auto it = hosts.find(reinterpret_cast<uintptr_t>(p));
  if (it == hosts.end() || !it->second.registered) return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
  hosts.erase(it);
  gpupool::transport::processPinnedMemory().forget(p);
  return CUDA_SUCCESS;
}

// Whether `host` is pinned memory mapped into the current context's device addresses: only the
// context current at its allocation has it (shared_host_memory.h), so no other context is told
// of an address its kernels cannot reach.
namespace {
bool mappedForCurrentContext(const HostAllocation& host) {
  return host.file && host.file->deviceAddress && host.context == DriverState::get().current();
}
}  // namespace

// Mapped pinned memory has one address on both sides (shared_host_memory.h); other host memory
// has none on the device.
GPUPOOL_DRIVER_API CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr* pdptr, void* p,
                                                         unsigned int flags) {
  if (!pdptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  uintptr_t base = 0;
  HostAllocation info;
  if (!DriverState::get().findHost(p, &base, &info) || !mappedForCurrentContext(info)) {
    return refuseCall(CUDA_ERROR_INVALID_VALUE,
                      "cuMemHostGetDevicePointer: not pinned memory mapped for the current "
                      "context (memory is mapped into the context current when it was allocated, "
                      "on a session that serves it: docs/shm.md)");
  }
  *pdptr = info.file->deviceAddress + (reinterpret_cast<uintptr_t>(p) - base);
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuMemHostGetFlags(unsigned int* flags, void* p) {
  if (!flags) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  HostAllocation info;
  if (!DriverState::get().findHost(p, nullptr, &info)) return CUDA_ERROR_INVALID_VALUE;
  *flags = info.flags;
  return CUDA_SUCCESS;
}

// ---- Pointer attributes (answered locally) ----

namespace {

// The size of the value each attribute writes; 0 for an attribute this driver does not know.
size_t pointerAttributeSize(int attribute) {
  switch (attribute) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
      return sizeof(CUcontext);
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
      return sizeof(CUdeviceptr);
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
      return sizeof(void*);
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
      return sizeof(CUmemoryPool);
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
      return sizeof(unsigned long long);
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
      return sizeof(size_t);
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
      return sizeof(int);
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
    case CU_POINTER_ATTRIBUTE_MAPPED:
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
    case CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE:
      return sizeof(unsigned);
    default:
      return 0;
  }
}

// Writes `attribute` of `ptr` into `data`. Every attribute it answers is written; an attribute
// that does not apply to this kind of memory is CUDA_ERROR_INVALID_VALUE, as is an unknown pointer
// unless `lenient` (cuPointerGetAttributes, which reads unknown pointers as plain host memory).
CUresult pointerAttribute(void* data, int attribute, CUdeviceptr ptr, bool lenient) {
  auto& state = DriverState::get();
  DeviceAllocation dev;
  CUdeviceptr devBase = 0;
  HostAllocation host;
  uintptr_t hostBase = 0;
  bool isDevice = false;
  if (CUresult r = state.unifiedIsDevice("cuPointerGetAttribute", ptr, &isDevice, &devBase, &dev);
      r != CUDA_SUCCESS) {
    return r;
  }
  bool isHost = !isDevice && state.findHost(reinterpret_cast<void*>(ptr), &hostBase, &host);
  if (!isDevice && !isHost && !lenient) return CUDA_ERROR_INVALID_VALUE;
  bool mappedHost = isHost && mappedForCurrentContext(host);
  auto writeUnsigned = [data](unsigned v) { *static_cast<unsigned*>(data) = v; };
  switch (attribute) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
      *static_cast<CUcontext*>(data) =
          reinterpret_cast<CUcontext>(isDevice ? dev.context : (isHost ? host.context : nullptr));
      break;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      writeUnsigned(isDevice ? CU_MEMORYTYPE_DEVICE : (isHost ? CU_MEMORYTYPE_HOST : 0));
      break;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
      // Host memory is not mapped remotely, except mapped pinned memory, at the same address.
      if (!isDevice && !mappedHost) return CUDA_ERROR_INVALID_VALUE;
      *static_cast<CUdeviceptr*>(data) = ptr;
      break;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
      // Managed memory is host memory too, at the same address.
      if (!isHost && !(isDevice && dev.managed)) return CUDA_ERROR_INVALID_VALUE;
      *static_cast<void**>(data) = reinterpret_cast<void*>(ptr);
      break;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
      writeUnsigned(isDevice && dev.managed ? 1 : 0);
      break;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
      // cuIpcGetMemHandle serves cuMemAlloc memory on the emu backend (ipc_api.cc); the cuda
      // backend refuses it.
      writeUnsigned(isDevice && !dev.vmm && !dev.managed && !dev.pool && !dev.ipcOpens &&
                            dev.context->server && dev.context->server->backendKind() == "emu"
                        ? 1
                        : 0);
      break;
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:  // CU_MEM_HANDLE_TYPE_NONE: nothing exports
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
    case CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE:
      writeUnsigned(0);
      break;
    case CU_POINTER_ATTRIBUTE_MAPPED:
      writeUnsigned(isDevice || mappedHost ? 1 : 0);
      break;
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
      // The device reaches its own memory, and of this host's only mapped pinned memory.
      writeUnsigned(isDevice || mappedHost ? CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE
                                           : CU_POINTER_ATTRIBUTE_ACCESS_FLAG_NONE);
      break;
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
      writeUnsigned(isDevice ? dev.syncMemops : 1);
      break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
      *static_cast<int*>(data) = isDevice ? dev.context->device : -2;
      break;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
      *static_cast<unsigned long long*>(data) = isDevice ? dev.id : (isHost ? host.id : 0);
      break;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
      *static_cast<CUdeviceptr*>(data) = isDevice ? devBase : hostBase;
      break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
      *static_cast<size_t*>(data) = isDevice ? dev.size : host.size;
      break;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
      if (!isDevice) return CUDA_ERROR_INVALID_VALUE;
      *static_cast<CUmemoryPool*>(data) = dev.pool;
      break;
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
      // Each device allocation is one mapping the client sees.
      if (!isDevice) return CUDA_ERROR_INVALID_VALUE;
      *static_cast<CUdeviceptr*>(data) = devBase;
      break;
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
      if (!isDevice) return CUDA_ERROR_INVALID_VALUE;
      *static_cast<size_t*>(data) = dev.size;
      break;
    default:
      return refuseCall(CUDA_ERROR_INVALID_VALUE,
                        "cuPointerGetAttribute: unknown attribute " + std::to_string(attribute));
  }
  return CUDA_SUCCESS;
}

}  // namespace

GPUPOOL_DRIVER_API CUresult cuPointerGetAttribute(void* data, CUpointer_attribute attribute,
                                                  CUdeviceptr ptr) {
  if (!data) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  return pointerAttribute(data, rawEnumValue(attribute), ptr, false);
}

// Only CU_POINTER_ATTRIBUTE_SYNC_MEMOPS can be set, and only on device memory, as in the driver.
GPUPOOL_DRIVER_API CUresult cuPointerSetAttribute(const void* value, CUpointer_attribute attribute,
                                                  CUdeviceptr ptr) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (!value) return CUDA_ERROR_INVALID_VALUE;
  if (attribute != CU_POINTER_ATTRIBUTE_SYNC_MEMOPS) {
    return refuseCall(
        CUDA_ERROR_INVALID_VALUE,
        "cuPointerSetAttribute: only CU_POINTER_ATTRIBUTE_SYNC_MEMOPS can be set, not " +
            std::to_string(attribute));
  }
  auto& state = DriverState::get();
  std::lock_guard lock(state.mutex);
  auto it = state.deviceAllocations.upper_bound(ptr);
  if (it == state.deviceAllocations.begin() ||
      ptr - std::prev(it)->first >= std::prev(it)->second.size) {
    return refuseCall(CUDA_ERROR_INVALID_VALUE,
                      "cuPointerSetAttribute: not device memory of this process");
  }
  std::prev(it)->second.syncMemops = *static_cast<const unsigned*>(value) != 0;
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuPointerGetAttributes(unsigned int numAttributes,
                                                   CUpointer_attribute* attributes, void** data,
                                                   CUdeviceptr ptr) {
  if (!attributes || !data) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  // Unlike cuPointerGetAttribute, unknown pointers are not an error here: they read as
  // unregistered host memory. A pointer that is device and host memory at once is refused whole.
  if (bool isDevice = false; DriverState::get().unifiedIsDevice("cuPointerGetAttributes", ptr,
                                                                &isDevice) != CUDA_SUCCESS) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  for (unsigned i = 0; i < numAttributes; ++i) {
    if (!data[i]) continue;
    const int attribute = rawEnumValue(attributes[i]);
    size_t size = pointerAttributeSize(attribute);
    if (size == 0) {
      return refuseCall(CUDA_ERROR_INVALID_VALUE,
                        "cuPointerGetAttributes: unknown attribute " + std::to_string(attribute));
    }
    if (pointerAttribute(data[i], attribute, ptr, true) != CUDA_SUCCESS) {
      // An attribute that does not apply to this kind of memory reads as its null value.
      std::memset(data[i], 0, size);
    }
  }
  return CUDA_SUCCESS;
}
