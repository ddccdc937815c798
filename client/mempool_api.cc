// Stream-ordered allocation and memory pools: cuMemAllocAsync, cuMemAllocFromPoolAsync,
// cuMemFreeAsync, default, current and created pools, pool attributes, trimming and access.
//
// The server keeps the pools (server/handlers/mempool_handlers.cc). An allocation is a call: the
// client cannot know which block the pool hands out, and the program needs the address at once.
// The server reserves the block when the call arrives, which CUDA allows (memory may exist before
// the stream reaches the allocation). A free is posted: it travels in order with the thread's
// other calls, and the server gives the block back to its pool when the stream reaches the free.
//
// Pools cannot be exported to other processes (no IPC): the export and import calls fail with
// CUDA_ERROR_NOT_SUPPORTED, and MEMPOOL_SUPPORTED_HANDLE_TYPES is 0.
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "client_log.h"
#include "device_address_reservations.h"
#include "driver_export.h"
#include "driver_state.h"
#include "graph_memory.h"
#include "stream_capture.h"

using namespace gpupool::client;

namespace {

bool validDevice(CUdevice dev) { return dev >= 0 && dev < DriverState::get().deviceCount(); }

// Per device: its default pool object (made on first use, kept for the process's life, as a
// device's default pool is) and the current pool that cuMemAllocAsync allocates from.
struct DevicePools {
  std::mutex mutex;
  std::map<CUdevice, std::unique_ptr<MemPoolObject>> defaults;
  std::map<CUdevice, MemPoolObject*> current;

  static DevicePools& get() {
    static DevicePools pools;
    return pools;
  }
  MemPoolObject* defaultPool(CUdevice dev) {
    std::lock_guard lock(mutex);
    auto& pool = defaults[dev];
    if (!pool) {
      pool = std::make_unique<MemPoolObject>();
      pool->device = dev;
      registerObject(pool.get());
    }
    return pool.get();
  }
  MemPoolObject* currentPool(CUdevice dev) {
    {
      std::lock_guard lock(mutex);
      auto it = current.find(dev);
      if (it != current.end()) return it->second;
    }
    return defaultPool(dev);
  }
  void setCurrent(CUdevice dev, MemPoolObject* pool) {
    std::lock_guard lock(mutex);
    current[dev] = pool;
  }
  // A destroyed pool stops being current: its device goes back to the default pool.
  void forget(MemPoolObject* pool) {
    std::lock_guard lock(mutex);
    auto it = current.find(pool->device);
    if (it != current.end() && it->second == pool) current.erase(it);
  }
};

// The server context that holds `pool`: a created pool's own; for a default pool, the current
// context when it is on the pool's device, else the device's primary context.
CUresult poolContext(MemPoolObject* pool, ContextObject** ctx) {
  ContextObject* chosen = pool->context;
  if (!chosen) {
    ContextObject* current = DriverState::get().current();
    chosen = current && current->device == pool->device
                 ? current
                 : DriverState::get().primaryContext(pool->device);
  }
  if (!chosen) return CUDA_ERROR_INVALID_CONTEXT;
  if (CUresult r = DriverState::get().ensureRemote(chosen); r != CUDA_SUCCESS) return r;
  *ctx = chosen;
  return CUDA_SUCCESS;
}

CUresult allocateFromPool(CUdeviceptr* dptr, size_t bytes, MemPoolObject* pool, CUstream stream) {
  if (!dptr || !pool) return CUDA_ERROR_INVALID_VALUE;
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  CaptureScope capturing;  // a capturing stream takes the allocation as an alloc node
  ContextObject* ctx = nullptr;
  uint64_t remoteStream = 0;
  if (CUresult r = resolveStream(stream, &ctx, &remoteStream); r != CUDA_SUCCESS) return r;
  if (pool->context ? pool->context != ctx : pool->device != ctx->device) {
    return refuseCall(CUDA_ERROR_INVALID_VALUE,
                      "cuMemAllocFromPoolAsync: the pool and the stream belong to different "
                      "contexts (a created pool serves the context it was created in)");
  }
  if (CUresult r = CUDA_SUCCESS; captureMemAlloc(stream, bytes, dptr, &r)) return r;
  uint64_t address = 0;
  CUresult r = requestDeviceRangeApart(
      "cuMemAllocAsync", *ctx->server,
      [&](uint64_t* at, uint64_t* bytesThere) {
        *bytesThere = bytes;
        return ctx->server->call(
            "cuMemAllocAsync",
            [&](wire::Request::Builder b) {
              auto m = b.initMemAllocAsync();
              m.setContext(ctx->remote);
              m.setPool(pool->remote);
              m.setBytes(bytes);
              m.setStream(remoteStream);
            },
            {},
            [&](wire::Response::Reader reply, ReplyBulk&) {
              *at = reply.getMemAlloc().getAddress();
              return CUDA_SUCCESS;
            });
      },
      [&](const std::vector<uint64_t>& overlapping) {
        // Freed in stream order, after the allocation that replaced them.
        for (uint64_t held : overlapping) {
          ctx->server->post("cuMemFreeAsync", [&](wire::Request::Builder b) {
            auto m = b.initMemFreeAsync();
            m.setContext(ctx->remote);
            m.setAddress(held);
            m.setStream(remoteStream);
          });
        }
      },
      &address);
  if (r != CUDA_SUCCESS) return r;
  {
    std::lock_guard lock(DriverState::get().mutex);
    DriverState::get().deviceAllocations[address] =
        DeviceAllocation{bytes, ctx, reinterpret_cast<CUmemoryPool>(pool)};
  }
  *dptr = address;
  return CUDA_SUCCESS;
}

CUresult allocateAsync(CUdeviceptr* dptr, size_t bytes, CUstream stream) {
  CaptureScope capturing;
  ContextObject* ctx = nullptr;
  uint64_t remoteStream = 0;
  if (CUresult r = resolveStream(stream, &ctx, &remoteStream); r != CUDA_SUCCESS) return r;
  return allocateFromPool(dptr, bytes, DevicePools::get().currentPool(ctx->device), stream);
}

CUresult freeAsync(CUdeviceptr dptr, CUstream stream) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (dptr == 0) return CUDA_SUCCESS;
  CaptureScope capturing;  // a capturing stream takes the free as a free node
  ContextObject* ctx = nullptr;
  uint64_t remoteStream = 0;
  if (CUresult r = resolveStream(stream, &ctx, &remoteStream); r != CUDA_SUCCESS) return r;
  if (CUresult r = CUDA_SUCCESS; captureMemFree(stream, dptr, &r)) return r;
  if (CUresult r = CUDA_SUCCESS;
      freeGraphAllocation(dptr, ctx, stream, remoteStream, "cuMemFreeAsync", &r)) {
    return r;
  }
  DeviceAllocation info;
  CUdeviceptr base = 0;
  if (!DriverState::get().findDevice(dptr, 0, &base, &info) || base != dptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (info.context != ctx) {
    return refuseCall(CUDA_ERROR_INVALID_VALUE,
                      "cuMemFreeAsync: the stream is not in the context of the allocation");
  }
  {
    std::lock_guard lock(DriverState::get().mutex);
    DriverState::get().deviceAllocations.erase(dptr);
  }
  return ctx->server->post("cuMemFreeAsync", [&](wire::Request::Builder b) {
    auto m = b.initMemFreeAsync();
    m.setContext(ctx->remote);
    m.setAddress(dptr);
    m.setStream(remoteStream);
  });
}

// Only device memory of one of the pool's devices, with no exportable handles, can be pooled.
CUresult checkLocation(const CUmemLocation* location, CUmemAllocationType type, const char* call) {
  if (!location) return CUDA_ERROR_INVALID_VALUE;
  if (type != CU_MEM_ALLOCATION_TYPE_PINNED || location->type != CU_MEM_LOCATION_TYPE_DEVICE) {
    return refuseCall(CUDA_ERROR_NOT_SUPPORTED,
                      std::string(call) +
                          ": only pools of device memory are supported (no host or "
                          "managed pools)");
  }
  if (!validDevice(location->id)) return CUDA_ERROR_INVALID_DEVICE;
  return CUDA_SUCCESS;
}

// The driver reads and writes the REUSE_* policies as int, the other attributes as cuuint64_t.
bool intAttribute(CUmemPool_attribute attribute) {
  return attribute == CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES ||
         attribute == CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC ||
         attribute == CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES;
}

CUresult poolAttribute(CUmemoryPool handle, CUmemPool_attribute attribute, void* value, bool set) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  MemPoolObject* pool = asMemPool(handle);
  if (!pool || !value) return CUDA_ERROR_INVALID_VALUE;
  ContextObject* ctx = nullptr;
  if (CUresult r = poolContext(pool, &ctx); r != CUDA_SUCCESS) return r;
  bool isInt = intAttribute(attribute);
  uint64_t written = 0;
  if (set) {
    written = isInt ? static_cast<uint64_t>(*static_cast<int*>(value) != 0)
                    : *static_cast<cuuint64_t*>(value);
  }
  uint64_t read = 0;
  CUresult r = ctx->server->call(
      set ? "cuMemPoolSetAttribute" : "cuMemPoolGetAttribute",
      [&](wire::Request::Builder b) {
        auto m = b.initMemPoolAttribute();
        m.setContext(ctx->remote);
        m.setPool(pool->remote);
        m.setAttribute(attribute);
        m.setSet(set);
        m.setValue(written);
      },
      {},
      [&](wire::Response::Reader reply, ReplyBulk&) {
        read = static_cast<uint64_t>(reply.getValue());
        return CUDA_SUCCESS;
      });
  if (r != CUDA_SUCCESS || set) return r;
  if (isInt) {
    *static_cast<int*>(value) = static_cast<int>(read);
  } else {
    *static_cast<cuuint64_t*>(value) = read;
  }
  return CUDA_SUCCESS;
}

CUresult noPoolSharing(const char* call) {
  return refuseCall(
      CUDA_ERROR_NOT_SUPPORTED,
      std::string(call) +
          ": memory pools cannot be shared between processes through gpupool (no IPC)");
}

}  // namespace

// ---- Stream-ordered allocation ----

GPUPOOL_DRIVER_API CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytes, CUstream stream) {
  return allocateAsync(dptr, bytes, stream);
}
GPUPOOL_DRIVER_API CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytes, CUstream stream) {
  PerThreadDefaultStream perThread;
  return allocateAsync(dptr, bytes, stream);
}
GPUPOOL_DRIVER_API CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytes,
                                                    CUmemoryPool pool, CUstream stream) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  return allocateFromPool(dptr, bytes, asMemPool(pool), stream);
}
GPUPOOL_DRIVER_API CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytes,
                                                         CUmemoryPool pool, CUstream stream) {
  PerThreadDefaultStream perThread;
  return cuMemAllocFromPoolAsync(dptr, bytes, pool, stream);
}
GPUPOOL_DRIVER_API CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream) {
  return freeAsync(dptr, stream);
}
GPUPOOL_DRIVER_API CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream) {
  PerThreadDefaultStream perThread;
  return freeAsync(dptr, stream);
}

// ---- Default and current pools ----

GPUPOOL_DRIVER_API CUresult cuDeviceGetDefaultMemPool(CUmemoryPool* pool, CUdevice dev) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (!pool) return CUDA_ERROR_INVALID_VALUE;
  if (!validDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  *pool = reinterpret_cast<CUmemoryPool>(DevicePools::get().defaultPool(dev));
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuDeviceGetMemPool(CUmemoryPool* pool, CUdevice dev) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (!pool) return CUDA_ERROR_INVALID_VALUE;
  if (!validDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  *pool = reinterpret_cast<CUmemoryPool>(DevicePools::get().currentPool(dev));
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool handle) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (!validDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  MemPoolObject* pool = asMemPool(handle);
  if (!pool || pool->device != dev) return CUDA_ERROR_INVALID_VALUE;
  DevicePools::get().setCurrent(dev, pool);
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuMemGetDefaultMemPool(CUmemoryPool* pool, CUmemLocation* location,
                                                   CUmemAllocationType type) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (CUresult r = checkLocation(location, type, "cuMemGetDefaultMemPool"); r != CUDA_SUCCESS) {
    return r;
  }
  return cuDeviceGetDefaultMemPool(pool, location->id);
}

GPUPOOL_DRIVER_API CUresult cuMemGetMemPool(CUmemoryPool* pool, CUmemLocation* location,
                                            CUmemAllocationType type) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (CUresult r = checkLocation(location, type, "cuMemGetMemPool"); r != CUDA_SUCCESS) return r;
  return cuDeviceGetMemPool(pool, location->id);
}

GPUPOOL_DRIVER_API CUresult cuMemSetMemPool(CUmemLocation* location, CUmemAllocationType type,
                                            CUmemoryPool pool) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (CUresult r = checkLocation(location, type, "cuMemSetMemPool"); r != CUDA_SUCCESS) return r;
  return cuDeviceSetMemPool(location->id, pool);
}

// ---- Created pools ----

GPUPOOL_DRIVER_API CUresult cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* props) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (!pool || !props) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = checkLocation(&props->location, props->allocType, "cuMemPoolCreate");
      r != CUDA_SUCCESS) {
    return r;
  }
  if (props->handleTypes != CU_MEM_HANDLE_TYPE_NONE) return noPoolSharing("cuMemPoolCreate");
  if (props->maxSize != 0) {
    return refuseCall(CUDA_ERROR_NOT_SUPPORTED,
                      "cuMemPoolCreate: a maximum pool size is not supported");
  }
  // The pool lives in the current context when it is on the pool's device (cudart's primary
  // context), else in the device's primary context.
  auto owner = std::make_unique<MemPoolObject>();
  owner->device = props->location.id;
  ContextObject* ctx = nullptr;
  if (CUresult r = poolContext(owner.get(), &ctx); r != CUDA_SUCCESS) return r;
  CUresult r = ctx->server->call(
      "cuMemPoolCreate", [&](wire::Request::Builder b) { b.setMemPoolCreate(ctx->remote); }, {},
      [&](wire::Response::Reader reply, ReplyBulk&) {
        owner->remote = reply.getHandle();
        return CUDA_SUCCESS;
      });
  if (r != CUDA_SUCCESS) return r;
  owner->context = ctx;
  registerObject(owner.get());
  *pool = reinterpret_cast<CUmemoryPool>(owner.release());
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuMemPoolDestroy(CUmemoryPool handle) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  MemPoolObject* pool = asMemPool(handle);
  if (!pool) return CUDA_ERROR_INVALID_VALUE;
  if (!pool->context) {
    return refuseCall(CUDA_ERROR_INVALID_VALUE,
                      "cuMemPoolDestroy: a default pool cannot be destroyed");
  }
  ContextObject* ctx = pool->context;
  CUresult r = ctx->server->call("cuMemPoolDestroy", [&](wire::Request::Builder b) {
    auto m = b.initMemPoolDestroy();
    m.setContext(ctx->remote);
    m.setPool(pool->remote);
  });
  if (r != CUDA_SUCCESS) return r;
  DevicePools::get().forget(pool);
  unregisterObject(pool);
  pool->tag = Tag::kDead;
  delete pool;
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuMemPoolTrimTo(CUmemoryPool handle, size_t minBytesToKeep) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  MemPoolObject* pool = asMemPool(handle);
  if (!pool) return CUDA_ERROR_INVALID_VALUE;
  ContextObject* ctx = nullptr;
  if (CUresult r = poolContext(pool, &ctx); r != CUDA_SUCCESS) return r;
  return ctx->server->call("cuMemPoolTrimTo", [&](wire::Request::Builder b) {
    auto m = b.initMemPoolTrimTo();
    m.setContext(ctx->remote);
    m.setPool(pool->remote);
    m.setMinBytesToKeep(minBytesToKeep);
  });
}

GPUPOOL_DRIVER_API CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attribute,
                                                  void* value) {
  return poolAttribute(pool, attribute, value, true);
}

GPUPOOL_DRIVER_API CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attribute,
                                                  void* value) {
  return poolAttribute(pool, attribute, value, false);
}

// ---- Access: a pool's memory is read-write on its own device; peer access is not offered ----

GPUPOOL_DRIVER_API CUresult cuMemPoolSetAccess(CUmemoryPool handle, const CUmemAccessDesc* map,
                                               size_t count) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  MemPoolObject* pool = asMemPool(handle);
  if (!pool || (!map && count)) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < count; ++i) {
    const CUmemAccessDesc& desc = map[i];
    if (desc.location.type != CU_MEM_LOCATION_TYPE_DEVICE || !validDevice(desc.location.id)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    bool own = desc.location.id == pool->device;
    if (own && desc.flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE) {
      return refuseCall(CUDA_ERROR_INVALID_VALUE,
                        "cuMemPoolSetAccess: a pool's own device always has read-write access");
    }
    if (!own && desc.flags != CU_MEM_ACCESS_FLAGS_PROT_NONE) {
      return refuseCall(CUDA_ERROR_NOT_SUPPORTED,
                        "cuMemPoolSetAccess: access to a pool from another device (peer access) is "
                        "not supported");
    }
  }
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuMemPoolGetAccess(CUmemAccess_flags* flags, CUmemoryPool handle,
                                               CUmemLocation* location) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  MemPoolObject* pool = asMemPool(handle);
  if (!pool || !flags || !location) return CUDA_ERROR_INVALID_VALUE;
  if (location->type != CU_MEM_LOCATION_TYPE_DEVICE || !validDevice(location->id)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *flags = location->id == pool->device ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE
                                        : CU_MEM_ACCESS_FLAGS_PROT_NONE;
  return CUDA_SUCCESS;
}

// ---- Sharing pools between processes: not offered ----

GPUPOOL_DRIVER_API CUresult cuMemPoolExportToShareableHandle(void*, CUmemoryPool,
                                                             CUmemAllocationHandleType,
                                                             unsigned long long) {
  return noPoolSharing("cuMemPoolExportToShareableHandle");
}
GPUPOOL_DRIVER_API CUresult cuMemPoolImportFromShareableHandle(CUmemoryPool*, void*,
                                                               CUmemAllocationHandleType,
                                                               unsigned long long) {
  return noPoolSharing("cuMemPoolImportFromShareableHandle");
}
GPUPOOL_DRIVER_API CUresult cuMemPoolExportPointer(CUmemPoolPtrExportData*, CUdeviceptr) {
  return noPoolSharing("cuMemPoolExportPointer");
}
GPUPOOL_DRIVER_API CUresult cuMemPoolImportPointer(CUdeviceptr*, CUmemoryPool,
                                                   CUmemPoolPtrExportData*) {
  return noPoolSharing("cuMemPoolImportPointer");
}
