// Virtual memory management: cuMemGetAllocationGranularity, cuMemCreate/Release,
// cuMemAddressReserve/Free, cuMemMap/Unmap, cuMemSetAccess/GetAccess,
// cuMemGetAllocationPropertiesFromHandle and cuMemRetainAllocationHandle.
//
// The server keeps physical allocations, reservations and mappings in the context of the
// allocation's device (server/handlers/vmm_handlers.cc) and decides what a kernel or copy may
// reach. This file checks the arguments as the driver does, mints the handles the program sees and
// mirrors the mappings: the runs of adjacent read-write mappings are entered as device allocations
// (DriverState::deviceAllocations), so copies, memsets and pointer queries route there and may
// cross chunk boundaries, as on a GPU.
//
// Shareable handles: an allocation created with requestedHandleTypes POSIX_FILE_DESCRIPTOR may be
// exported (cuMemExportToShareableHandle) as a file descriptor (client/vmm_shareable_fd.h) that
// names the server's export token; a process of this host talking to the same server imports it
// (cuMemImportFromShareableHandle) as a handle to the same physical memory. Fabric and Win32
// handles are refused, as is cuMemMapArrayAsync (no sparse CUDA arrays: client/refused_calls.def).
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "client_log.h"
#include "device_address_reservations.h"
#include "driver_export.h"
#include "driver_state.h"
#include "host_function_fence.h"
#include "vmm_shareable_fd.h"

using namespace gpupool::client;

namespace {

// What every NVIDIA GPU since Pascal reports, both minimum and recommended; the server checks the
// same granularity.
constexpr size_t kVmmGranularity = 2u << 20;

struct VmmAllocation {
  CUmemAllocationProp prop{};
  size_t size = 0;
  ContextObject* context = nullptr;
  uint64_t remote = 0;    // the server's handle
  unsigned refs = 1;      // cuMemCreate, and one per cuMemRetainAllocationHandle, less releases
  unsigned mapped = 0;    // mappings of it; the entry lives while either count is nonzero
  bool imported = false;  // by cuMemImportFromShareableHandle
};
struct VmmReservation {
  size_t size = 0;
  ContextObject* context = nullptr;
};
struct VmmMapping {
  size_t size = 0;
  CUmemGenericAllocationHandle handle = 0;
  bool readWrite = false;
};

// The process's handles, reservations and mappings. Guarded by its own mutex; DriverState's is
// taken inside it, never the other way round.
struct VmmTable {
  std::mutex mutex;
  std::map<CUmemGenericAllocationHandle, VmmAllocation> allocations;
  std::map<CUdeviceptr, VmmReservation> reservations;
  std::map<CUdeviceptr, VmmMapping> mappings;
  CUmemGenericAllocationHandle next = 1;

  static VmmTable& get() {
    static VmmTable table;
    return table;
  }

  // The reservation containing [address, address+bytes), or end().
  std::map<CUdeviceptr, VmmReservation>::iterator reservationOf(CUdeviceptr address, size_t bytes) {
    auto it = reservations.upper_bound(address);
    if (it == reservations.begin()) return reservations.end();
    --it;
    if (address - it->first >= it->second.size || bytes > it->second.size - (address - it->first))
      return reservations.end();
    return it;
  }

  // Enters reservation `r`'s runs of adjacent read-write mappings as device allocations, in place
  // of what was entered for it before.
  void publish(CUdeviceptr base, const VmmReservation& r) {
    DriverState& state = DriverState::get();
    std::lock_guard lock(state.mutex);
    auto& entries = state.deviceAllocations;
    entries.erase(entries.lower_bound(base), entries.lower_bound(base + r.size));
    CUdeviceptr runStart = 0, runEnd = 0;
    auto flush = [&] {
      if (runEnd > runStart) {
        DeviceAllocation a{runEnd - runStart, r.context};
        a.vmm = true;
        entries[runStart] = a;
      }
      runStart = runEnd = 0;
    };
    for (auto it = mappings.lower_bound(base); it != mappings.end() && it->first < base + r.size;
         ++it) {
      if (!it->second.readWrite || it->first != runEnd) flush();
      if (!it->second.readWrite) continue;
      if (runEnd == 0) runStart = it->first;
      runEnd = it->first + it->second.size;
    }
    flush();
  }
};

bool vmmGranular(uint64_t v) { return v % kVmmGranularity == 0; }

// Checks a CUmemAllocationProp as cuMemCreate and cuMemGetAllocationGranularity do; features the
// pool does not serve are refused with the reason.
CUresult checkVmmProp(const char* call, const CUmemAllocationProp* prop) {
  if (!prop) return CUDA_ERROR_INVALID_VALUE;
  if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED) {
    return refuseCall(CUDA_ERROR_INVALID_VALUE,
                      std::string(call) + ": only CU_MEM_ALLOCATION_TYPE_PINNED allocations exist");
  }
  if (prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
    return refuseCall(CUDA_ERROR_NOT_SUPPORTED,
                      std::string(call) +
                          ": only device memory is served (host memory of the GPU's server would "
                          "not be reachable from this host)");
  }
  if (prop->location.id < 0 || prop->location.id >= DriverState::get().deviceCount()) {
    return CUDA_ERROR_INVALID_DEVICE;
  }
  return CUDA_SUCCESS;
}

// The context that holds `device`'s VMM objects: the current context when it is on that device,
// else the device's primary context.
CUresult vmmContext(int device, ContextObject** ctx) {
  ContextObject* current = DriverState::get().current();
  ContextObject* chosen =
      current && current->device == device ? current : DriverState::get().primaryContext(device);
  if (!chosen) return CUDA_ERROR_INVALID_CONTEXT;
  if (CUresult r = DriverState::get().ensureRemote(chosen); r != CUDA_SUCCESS) return r;
  *ctx = chosen;
  return CUDA_SUCCESS;
}

CUresult callHandle(ContextObject* ctx, const char* what, wire::Request::VmmHandleOp op,
                    uint64_t bytes, uint64_t address, uint64_t handle, uint64_t* out,
                    bool shareable = false) {
  return ctx->server->call(
      what,
      [&](wire::Request::Builder b) {
        auto m = b.initVmmHandle();
        m.setContext(ctx->remote);
        m.setOp(op);
        m.setBytes(bytes);
        m.setAddress(address);
        m.setHandle(handle);
        m.setShareable(shareable);
      },
      {},
      [&](wire::Response::Reader reply, ReplyBulk&) {
        if (out) *out = reply.getHandle();
        return CUDA_SUCCESS;
      });
}

CUresult callMap(ContextObject* ctx, const char* what, wire::Request::VmmMapOp op, uint64_t address,
                 uint64_t bytes, uint64_t handle, uint64_t offset, bool readWrite,
                 int64_t* value = nullptr) {
  return ctx->server->call(
      what,
      [&](wire::Request::Builder b) {
        auto m = b.initVmmMap();
        m.setContext(ctx->remote);
        m.setOp(op);
        m.setAddress(address);
        m.setBytes(bytes);
        m.setHandle(handle);
        m.setOffset(offset);
        m.setReadWrite(readWrite);
      },
      {},
      [&](wire::Response::Reader reply, ReplyBulk&) {
        if (value) *value = reply.getValue();
        return CUDA_SUCCESS;
      });
}

}  // namespace

GPUPOOL_DRIVER_API CUresult cuMemGetAllocationGranularity(size_t* granularity,
                                                          const CUmemAllocationProp* prop,
                                                          CUmemAllocationGranularity_flags option) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (!granularity) return CUDA_ERROR_INVALID_VALUE;
  if (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
      option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (CUresult r = checkVmmProp("cuMemGetAllocationGranularity", prop); r != CUDA_SUCCESS) return r;
  *granularity = kVmmGranularity;
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                                        const CUmemAllocationProp* prop, unsigned long long flags) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (!handle || flags != 0 || size == 0) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = checkVmmProp("cuMemCreate", prop); r != CUDA_SUCCESS) return r;
  if (!vmmGranular(size)) {
    return refuseCall(CUDA_ERROR_INVALID_VALUE,
                      "cuMemCreate: the size is not a multiple of the granularity (2 MiB)");
  }
  if ((prop->requestedHandleTypes & ~CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) != 0) {
    // The devices report HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED 1 and the others 0, as
    // NVIDIA's driver does on a device without them, and refuses the allocation: an allocation
    // that says it is exportable and then is not would be a lie. NCCL reads the attributes first.
    return refuseCall(
        CUDA_ERROR_NOT_SUPPORTED,
        "cuMemCreate: only POSIX file descriptor shareable handles are served (fabric "
        "and Win32 handles cannot name memory on the pool's GPU server); request "
        "CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR or CU_MEM_HANDLE_TYPE_NONE");
  }
  if (prop->allocFlags.compressionType != 0 || prop->allocFlags.gpuDirectRDMACapable != 0 ||
      prop->allocFlags.usage != 0) {
    return refuseCall(CUDA_ERROR_NOT_SUPPORTED,
                      "cuMemCreate: compressible, GPUDirect RDMA and tile-pool allocations are not "
                      "served");
  }
  ContextObject* ctx = nullptr;
  if (CUresult r = vmmContext(prop->location.id, &ctx); r != CUDA_SUCCESS) return r;
  uint64_t remote = 0;
  bool shareable = prop->requestedHandleTypes == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  if (CUresult r = callHandle(ctx, "cuMemCreate", wire::Request::VmmHandleOp::CREATE, size, 0, 0,
                              &remote, shareable);
      r != CUDA_SUCCESS) {
    return r;
  }
  VmmTable& table = VmmTable::get();
  std::lock_guard lock(table.mutex);
  CUmemGenericAllocationHandle h = table.next++;
  table.allocations[h] = VmmAllocation{*prop, size, ctx, remote, 1};
  *handle = h;
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  VmmTable& table = VmmTable::get();
  std::lock_guard lock(table.mutex);
  auto it = table.allocations.find(handle);
  if (it == table.allocations.end() || it->second.refs == 0) return CUDA_ERROR_INVALID_VALUE;
  VmmAllocation& a = it->second;
  CUresult r = callHandle(a.context, "cuMemRelease", wire::Request::VmmHandleOp::RELEASE, 0, 0,
                          a.remote, nullptr);
  if (r != CUDA_SUCCESS) return r;
  if (--a.refs == 0 && a.mapped == 0) table.allocations.erase(it);
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment,
                                                CUdeviceptr addr, unsigned long long flags) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (!ptr || size == 0 || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (!vmmGranular(size) || (alignment & (alignment - 1)) != 0 ||
      (alignment != 0 && !vmmGranular(alignment))) {
    return refuseCall(
        CUDA_ERROR_INVALID_VALUE,
        "cuMemAddressReserve: size and alignment must be multiples of the granularity "
        "(2 MiB), the alignment a power of two");
  }
  // A reservation is address space of the current context's device.
  ContextObject* ctx = nullptr;
  if (CUresult r = currentRemoteContext(&ctx); r != CUDA_SUCCESS) return r;
  uint64_t address = 0;
  bool hinted = vmmGranular(addr);  // the hint, only where usable, and only the first time
  CUresult r = requestDeviceRangeApart(
      "cuMemAddressReserve", *ctx->server,
      [&](uint64_t* at, uint64_t* bytesThere) {
        *bytesThere = size;
        return ctx->server->call(
            "cuMemAddressReserve",
            [&](wire::Request::Builder b) {
              auto m = b.initVmmAddress();
              m.setContext(ctx->remote);
              m.setFree(false);
              m.setAddress(std::exchange(hinted, false) ? addr : 0);
              m.setBytes(size);
              m.setAlignment(alignment);
            },
            {},
            [&](wire::Response::Reader reply, ReplyBulk&) {
              *at = reply.getHandle();
              return CUDA_SUCCESS;
            });
      },
      [&](const std::vector<uint64_t>& overlapping) {
        for (uint64_t held : overlapping) {
          ctx->server->post("cuMemAddressFree", [&](wire::Request::Builder b) {
            auto m = b.initVmmAddress();
            m.setContext(ctx->remote);
            m.setFree(true);
            m.setAddress(held);
            m.setBytes(size);
          });
        }
      },
      &address);
  if (r != CUDA_SUCCESS) return r;
  VmmTable& table = VmmTable::get();
  std::lock_guard lock(table.mutex);
  table.reservations[address] = VmmReservation{size, ctx};
  *ptr = address;
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  VmmTable& table = VmmTable::get();
  std::lock_guard lock(table.mutex);
  auto it = table.reservations.find(ptr);
  if (it == table.reservations.end() || it->second.size != size) return CUDA_ERROR_INVALID_VALUE;
  ContextObject* ctx = it->second.context;
  CUresult r = ctx->server->call("cuMemAddressFree", [&](wire::Request::Builder b) {
    auto m = b.initVmmAddress();
    m.setContext(ctx->remote);
    m.setFree(true);
    m.setAddress(ptr);
    m.setBytes(size);
  });
  if (r == CUDA_SUCCESS) table.reservations.erase(it);
  return r;
}

GPUPOOL_DRIVER_API CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                                     CUmemGenericAllocationHandle handle,
                                     unsigned long long flags) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (flags != 0 || size == 0) return CUDA_ERROR_INVALID_VALUE;
  VmmTable& table = VmmTable::get();
  std::lock_guard lock(table.mutex);
  auto a = table.allocations.find(handle);
  if (a == table.allocations.end() || a->second.refs == 0) return CUDA_ERROR_INVALID_HANDLE;
  auto reservation = table.reservationOf(ptr, size);
  if (reservation == table.reservations.end()) {
    return refuseCall(CUDA_ERROR_INVALID_VALUE,
                      "cuMemMap: the range is not inside one reservation");
  }
  if (reservation->second.context != a->second.context) {
    return refuseCall(
        CUDA_ERROR_NOT_SUPPORTED,
        "cuMemMap: the reservation and the allocation were made in different contexts "
        "or for different devices; the pool serves mappings within one context");
  }
  CUresult r = callMap(a->second.context, "cuMemMap", wire::Request::VmmMapOp::MAP, ptr, size,
                       a->second.remote, offset, false);
  if (r != CUDA_SUCCESS) return r;
  table.mappings[ptr] = VmmMapping{size, handle, false};
  a->second.mapped++;
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (size == 0) return CUDA_ERROR_INVALID_VALUE;
  VmmTable& table = VmmTable::get();
  std::lock_guard lock(table.mutex);
  auto reservation = table.reservationOf(ptr, size);
  if (reservation == table.reservations.end()) return CUDA_ERROR_INVALID_VALUE;
  // The server's unmap waits for the context's work, as a host function must not hold it.
  HostFunctionFence::await(HostFunctionFence::Work::kCall,
                           fenceScopeOf(reservation->second.context));
  CUresult r = callMap(reservation->second.context, "cuMemUnmap", wire::Request::VmmMapOp::UNMAP,
                       ptr, size, 0, 0, false);
  if (r != CUDA_SUCCESS) return r;
  for (auto m = table.mappings.lower_bound(ptr);
       m != table.mappings.end() && m->first < ptr + size;) {
    auto a = table.allocations.find(m->second.handle);
    if (a != table.allocations.end() && --a->second.mapped == 0 && a->second.refs == 0) {
      table.allocations.erase(a);
    }
    m = table.mappings.erase(m);
  }
  table.publish(reservation->first, reservation->second);
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size,
                                           const CUmemAccessDesc* desc, size_t count) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (!desc || count == 0 || size == 0) return CUDA_ERROR_INVALID_VALUE;
  VmmTable& table = VmmTable::get();
  std::lock_guard lock(table.mutex);
  auto reservation = table.reservationOf(ptr, size);
  if (reservation == table.reservations.end()) return CUDA_ERROR_INVALID_VALUE;
  ContextObject* ctx = reservation->second.context;
  for (size_t i = 0; i < count; ++i) {
    const CUmemAccessDesc& d = desc[i];
    if (d.location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
      return refuseCall(CUDA_ERROR_NOT_SUPPORTED,
                        "cuMemSetAccess: only device locations are served (the GPU server's host "
                        "memory is not this host's)");
    }
    if (d.location.id < 0 || d.location.id >= DriverState::get().deviceCount()) {
      return CUDA_ERROR_INVALID_DEVICE;
    }
    if (d.location.id != ctx->device) {
      return refuseCall(CUDA_ERROR_NOT_SUPPORTED,
                        "cuMemSetAccess: access from another device (peer access) is not served");
    }
    if (d.flags != CU_MEM_ACCESS_FLAGS_PROT_NONE && d.flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE) {
      return refuseCall(d.flags == CU_MEM_ACCESS_FLAGS_PROT_READ ? CUDA_ERROR_NOT_SUPPORTED
                                                                 : CUDA_ERROR_INVALID_VALUE,
                        "cuMemSetAccess: read-only access is not served; use PROT_READWRITE");
    }
  }
  bool readWrite = desc[count - 1].flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if (!readWrite) HostFunctionFence::await(HostFunctionFence::Work::kCall, fenceScopeOf(ctx));
  CUresult r = callMap(ctx, "cuMemSetAccess", wire::Request::VmmMapOp::SET_ACCESS, ptr, size, 0, 0,
                       readWrite);
  if (r != CUDA_SUCCESS) return r;
  // The server changes whole mappings; so does the mirror.
  auto it = table.mappings.upper_bound(ptr);
  if (it != table.mappings.begin()) --it;
  for (; it != table.mappings.end() && it->first < ptr + size; ++it) {
    if (it->first + it->second.size > ptr) it->second.readWrite = readWrite;
  }
  table.publish(reservation->first, reservation->second);
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuMemGetAccess(unsigned long long* flags, const CUmemLocation* location,
                                           CUdeviceptr ptr) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (!flags || !location) return CUDA_ERROR_INVALID_VALUE;
  if (location->type != CU_MEM_LOCATION_TYPE_DEVICE || location->id < 0 ||
      location->id >= DriverState::get().deviceCount()) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  VmmTable& table = VmmTable::get();
  std::lock_guard lock(table.mutex);
  auto reservation = table.reservationOf(ptr, 1);
  if (reservation == table.reservations.end()) return CUDA_ERROR_INVALID_VALUE;
  ContextObject* ctx = reservation->second.context;
  int64_t value = 0;
  CUresult r = callMap(ctx, "cuMemGetAccess", wire::Request::VmmMapOp::GET_ACCESS, ptr, 0, 0, 0,
                       false, &value);
  if (r != CUDA_SUCCESS) return r;
  // Another device never has access (cuMemSetAccess serves only the mapping's own).
  *flags = value && location->id == ctx->device ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE
                                                : CU_MEM_ACCESS_FLAGS_PROT_NONE;
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuMemGetAllocationPropertiesFromHandle(
    CUmemAllocationProp* prop, CUmemGenericAllocationHandle handle) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (!prop) return CUDA_ERROR_INVALID_VALUE;
  VmmTable& table = VmmTable::get();
  std::lock_guard lock(table.mutex);
  auto it = table.allocations.find(handle);
  if (it == table.allocations.end() || it->second.refs == 0) return CUDA_ERROR_INVALID_VALUE;
  *prop = it->second.prop;
  // An imported allocation reports no requested handle types (observed on driver 580.159.04,
  // H200).
  if (it->second.imported) prop->requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle,
                                                        void* addr) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (!handle) return CUDA_ERROR_INVALID_VALUE;
  auto address = reinterpret_cast<CUdeviceptr>(addr);
  VmmTable& table = VmmTable::get();
  std::lock_guard lock(table.mutex);
  auto m = table.mappings.upper_bound(address);
  if (m == table.mappings.begin()) return CUDA_ERROR_INVALID_VALUE;
  --m;
  if (address - m->first >= m->second.size) return CUDA_ERROR_INVALID_VALUE;
  auto a = table.allocations.find(m->second.handle);
  if (a == table.allocations.end()) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = callHandle(a->second.context, "cuMemRetainAllocationHandle",
                          wire::Request::VmmHandleOp::RETAIN, 0, address, 0, nullptr);
  if (r != CUDA_SUCCESS) return r;
  a->second.refs++;
  *handle = a->first;
  return CUDA_SUCCESS;
}

namespace {

CUresult refuseHandleType(const char* call, CUmemAllocationHandleType type) {
  if (type == CU_MEM_HANDLE_TYPE_FABRIC || type == CU_MEM_HANDLE_TYPE_WIN32 ||
      type == CU_MEM_HANDLE_TYPE_WIN32_KMT) {
    return refuseCall(CUDA_ERROR_NOT_SUPPORTED,
                      std::string(call) +
                          ": only CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR is served (fabric "
                          "handles need an NVLink fabric between client hosts, Win32 handles "
                          "Windows)");
  }
  return refuseCall(CUDA_ERROR_INVALID_VALUE,
                    std::string(call) + ": unknown handle type " + std::to_string(type));
}

// The pool device that is device `serverDevice` of the server `instance`, or -1.
int deviceOfServer(uint64_t instance, int serverDevice) {
  DriverState& state = DriverState::get();
  for (int d = 0; d < state.deviceCount(); ++d) {
    RemoteSession* server = state.serverOf(d);
    if (server && server->serverInstance() == instance && state.serverDeviceOf(d) == serverDevice) {
      return d;
    }
  }
  return -1;
}

}  // namespace

GPUPOOL_DRIVER_API CUresult cuMemExportToShareableHandle(void* shareableHandle,
                                                         CUmemGenericAllocationHandle handle,
                                                         CUmemAllocationHandleType handleType,
                                                         unsigned long long flags) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (!shareableHandle || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
    return refuseHandleType("cuMemExportToShareableHandle", handleType);
  }
  VmmTable& table = VmmTable::get();
  std::lock_guard lock(table.mutex);
  auto it = table.allocations.find(handle);
  if (it == table.allocations.end() || it->second.refs == 0) return CUDA_ERROR_INVALID_VALUE;
  VmmAllocation& a = it->second;
  if ((a.prop.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) == 0) {
    return refuseCall(CUDA_ERROR_INVALID_VALUE,
                      "cuMemExportToShareableHandle: the allocation was not created with "
                      "requestedHandleTypes CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR");
  }
  VmmShareableRecord record;
  CUresult r = a.context->server->call(
      "cuMemExportToShareableHandle",
      [&](wire::Request::Builder b) {
        auto m = b.initVmmHandle();
        m.setContext(a.context->remote);
        m.setOp(wire::Request::VmmHandleOp::EXPORT);
        m.setHandle(a.remote);
      },
      {},
      [&](wire::Response::Reader reply, ReplyBulk&) {
        uint64_t halves[2] = {reply.getGlobal().getAddress(), reply.getGlobal().getBytes()};
        for (size_t i = 0; i < sizeof(record.token); ++i) {
          record.token[i] = static_cast<uint8_t>(halves[i / 8] >> (8 * (i % 8)));
        }
        return CUDA_SUCCESS;
      });
  if (r != CUDA_SUCCESS) return r;
  record.serverInstance = a.context->server->serverInstance();
  record.serverDevice = DriverState::get().serverDeviceOf(a.context->device);
  record.bytes = a.size;
  record.prop = a.prop;
  int fd = writeVmmShareableFd(record);
  if (fd < 0) {
    return refuseCall(
        CUDA_ERROR_OPERATING_SYSTEM,
        std::string("cuMemExportToShareableHandle: no file descriptor: ") + std::strerror(errno));
  }
  *static_cast<int*>(shareableHandle) = fd;
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* handle,
                                                           void* osHandle,
                                                           CUmemAllocationHandleType shHandleType) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (!handle) return CUDA_ERROR_INVALID_VALUE;
  if (shHandleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
    return refuseHandleType("cuMemImportFromShareableHandle", shHandleType);
  }
  // For a POSIX file descriptor the handle is the descriptor itself, cast to a pointer.
  int fd = static_cast<int>(reinterpret_cast<intptr_t>(osHandle));
  VmmShareableRecord record;
  if (!readVmmShareableFd(fd, &record)) {
    return refuseCall(CUDA_ERROR_INVALID_VALUE,
                      "cuMemImportFromShareableHandle: file descriptor " + std::to_string(fd) +
                          " is not one cuMemExportToShareableHandle made");
  }
  int device = deviceOfServer(record.serverInstance, record.serverDevice);
  if (device < 0) {
    return refuseCall(CUDA_ERROR_INVALID_VALUE,
                      "cuMemImportFromShareableHandle: the file descriptor names memory of a pool "
                      "server (or device) this process does not use");
  }
  ContextObject* ctx = nullptr;
  if (CUresult r = vmmContext(device, &ctx); r != CUDA_SUCCESS) return r;
  uint64_t remote = 0, bytes = 0;
  CUresult r = ctx->server->call(
      "cuMemImportFromShareableHandle",
      [&](wire::Request::Builder b) {
        auto m = b.initVmmHandle();
        m.setContext(ctx->remote);
        m.setOp(wire::Request::VmmHandleOp::IMPORT);
        m.setToken(capnp::Data::Reader(record.token, sizeof(record.token)));
      },
      {},
      [&](wire::Response::Reader reply, ReplyBulk&) {
        remote = reply.getGlobal().getAddress();
        bytes = reply.getGlobal().getBytes();
        return CUDA_SUCCESS;
      });
  if (r != CUDA_SUCCESS) return r;
  CUmemAllocationProp prop = record.prop;
  prop.location.id = device;
  VmmTable& table = VmmTable::get();
  std::lock_guard lock(table.mutex);
  CUmemGenericAllocationHandle h = table.next++;
  VmmAllocation& a = table.allocations[h];
  a = VmmAllocation{prop, bytes, ctx, remote, 1};
  a.imported = true;
  *handle = h;
  return CUDA_SUCCESS;
}
