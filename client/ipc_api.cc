// CUDA IPC memory handles: cuIpcGetMemHandle, cuIpcOpenMemHandle, cuIpcCloseMemHandle; and event
// handles: cuIpcGetEventHandle, cuIpcOpenEventHandle.
//
// The server keeps the secret: a random 128-bit token per exported allocation, which it gives
// only to sessions of the exporter's tenant (server/ipc_memory_registry.h). The 64-byte handle
// carries that token and what the opening process needs to route it: the device's UUID (the
// devices two processes see may be numbered differently) and the allocation's size. Layout:
//   bytes 0-7 "GPPLIPC1", 8-23 the token, 24-39 the device UUID, 40-47 the size (little-endian),
//   48-63 zero.
// An opened allocation is entered as a device allocation of the opening context, so copies,
// kernels and pointer queries treat it as that context's memory; cuMemFree refuses it.
// An event handle carries its token the same way after "GPPLIPE1"; the opened event is an event of
// the opening context whose records and waits reach the exporter's (on backends that share events
// between sessions: the emu; devices say so in IPC_EVENT_SUPPORTED). Records of an interprocess
// event are synchronous calls (client/stream_event_api.cc), so a record made before a process tells
// another is on the server before the other's wait can be.
#include <cstring>
#include <mutex>
#include <string>

#include "client_log.h"
#include "device_address_reservations.h"
#include "driver_export.h"
#include "driver_state.h"
#include "host_function_fence.h"

using namespace gpupool::client;

namespace {

constexpr char kIpcMagic[8] = {'G', 'P', 'P', 'L', 'I', 'P', 'C', '1'};
constexpr char kIpcEventMagic[8] = {'G', 'P', 'P', 'L', 'I', 'P', 'E', '1'};
constexpr size_t kTokenAt = 8, kTokenBytes = 16, kUuidAt = 24, kSizeAt = 40;

void putLittleEndian(char* at, uint64_t value) {
  for (int i = 0; i < 8; ++i) at[i] = static_cast<char>(value >> (8 * i));
}

}  // namespace

GPUPOOL_DRIVER_API CUresult cuIpcGetMemHandle(CUipcMemHandle* handle, CUdeviceptr dptr) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (!handle) return CUDA_ERROR_INVALID_VALUE;
  DeviceAllocation info;
  CUdeviceptr base = 0;
  if (!DriverState::get().findDevice(dptr, 0, &base, &info) || base != dptr) {
    return refuseCall(CUDA_ERROR_INVALID_VALUE,
                      "cuIpcGetMemHandle: not the base of a cuMemAlloc allocation");
  }
  if (info.vmm || info.managed || info.pool || info.ipcOpens) {
    // As the driver: IPC handles are for cuMemAlloc memory (cuMemCreate memory is shared through
    // shareable handles, pool memory through cuMemPoolExportPointer).
    return refuseCall(CUDA_ERROR_INVALID_VALUE,
                      "cuIpcGetMemHandle: only cuMemAlloc allocations have IPC handles");
  }
  if (CUresult r = DriverState::get().ensureRemote(info.context); r != CUDA_SUCCESS) return r;
  uint64_t low = 0, high = 0;
  CUresult r = info.context->server->call(
      "cuIpcGetMemHandle",
      [&](wire::Request::Builder b) {
        auto m = b.initIpcMem();
        m.setContext(info.context->remote);
        m.setOp(wire::Request::IpcMemOp::GET);
        m.setAddress(dptr);
      },
      {},
      [&](wire::Response::Reader reply, ReplyBulk&) {
        low = reply.getGlobal().getAddress();
        high = reply.getGlobal().getBytes();
        return CUDA_SUCCESS;
      });
  if (r != CUDA_SUCCESS) return r;
  const DeviceSnapshot* device = DriverState::get().device(info.context->device);
  std::memset(handle->reserved, 0, sizeof(handle->reserved));
  std::memcpy(handle->reserved, kIpcMagic, sizeof(kIpcMagic));
  putLittleEndian(handle->reserved + kTokenAt, low);
  putLittleEndian(handle->reserved + kTokenAt + 8, high);
  if (device) std::memcpy(handle->reserved + kUuidAt, device->uuid.bytes, sizeof(CUuuid));
  putLittleEndian(handle->reserved + kSizeAt, info.size);
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuIpcOpenMemHandle_v2(CUdeviceptr* pdptr, CUipcMemHandle handle,
                                                  unsigned int flags) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (!pdptr) return CUDA_ERROR_INVALID_VALUE;
  if (flags & ~unsigned{CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS}) {
    return refuseCall(CUDA_ERROR_INVALID_VALUE,
                      "cuIpcOpenMemHandle: unknown flags " + std::to_string(flags));
  }
  ContextObject* ctx = nullptr;
  if (CUresult r = currentRemoteContext(&ctx); r != CUDA_SUCCESS) return r;
  if (std::memcmp(handle.reserved, kIpcMagic, sizeof(kIpcMagic)) != 0) {
    return refuseCall(CUDA_ERROR_INVALID_HANDLE,
                      "cuIpcOpenMemHandle: not an IPC memory handle of a gpupool server");
  }
  const DeviceSnapshot* device = DriverState::get().device(ctx->device);
  if (!device || std::memcmp(handle.reserved + kUuidAt, device->uuid.bytes, sizeof(CUuuid)) != 0) {
    return refuseCall(CUDA_ERROR_INVALID_DEVICE,
                      "cuIpcOpenMemHandle: the handle's memory is on another device than the "
                      "current context's, and pool devices do not map each other's memory");
  }
  uint64_t address = 0, size = 0;
  CUresult r = ctx->server->call(
      "cuIpcOpenMemHandle",
      [&](wire::Request::Builder b) {
        auto m = b.initIpcMem();
        m.setContext(ctx->remote);
        m.setOp(wire::Request::IpcMemOp::OPEN);
        m.setToken(capnp::Data::Reader(
            reinterpret_cast<const capnp::byte*>(handle.reserved + kTokenAt), kTokenBytes));
        m.setFlags(flags);
      },
      {},
      [&](wire::Response::Reader reply, ReplyBulk&) {
        address = reply.getGlobal().getAddress();
        size = reply.getGlobal().getBytes();
        return CUDA_SUCCESS;
      });
  if (r != CUDA_SUCCESS) return r;
  // The exporter's address, which this process cannot change: where it is host memory of this
  // process too, the calls that go by the address alone refuse pointers into it.
  const bool apart = keepFixedDeviceRangeApart(*ctx->server, "cuIpcOpenMemHandle", address, size);
  bool otherContext = false;
  {
    std::lock_guard lock(DriverState::get().mutex);
    auto& allocations = DriverState::get().deviceAllocations;
    auto it = allocations.find(address);
    if (it == allocations.end()) {
      DeviceAllocation opened{size, ctx};
      opened.ipcOpens = 1;
      opened.hostMemoryToo = !apart;
      allocations[address] = opened;
    } else if (it->second.context == ctx && it->second.ipcOpens) {
      ++it->second.ipcOpens;  // opened again: the same pointer, one more close to come
    } else {
      otherContext = true;
    }
  }
  if (otherContext) {
    // A handle may be opened by one context per device in a process, as the driver has it.
    (void)ctx->server->call(
        "cuIpcCloseMemHandle",
        [&](wire::Request::Builder b) {
          auto m = b.initIpcMem();
          m.setContext(ctx->remote);
          m.setOp(wire::Request::IpcMemOp::CLOSE);
          m.setAddress(address);
        },
        {}, [](wire::Response::Reader, ReplyBulk&) { return CUDA_SUCCESS; });
    return refuseCall(CUDA_ERROR_INVALID_CONTEXT,
                      "cuIpcOpenMemHandle: the handle is open in another context of this device");
  }
  *pdptr = address;
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuIpcOpenMemHandle(CUdeviceptr* pdptr, CUipcMemHandle handle,
                                               unsigned int flags) {
  return cuIpcOpenMemHandle_v2(pdptr, handle, flags);
}

GPUPOOL_DRIVER_API CUresult cuIpcCloseMemHandle(CUdeviceptr dptr) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  DeviceAllocation info;
  CUdeviceptr base = 0;
  if (!DriverState::get().findDevice(dptr, 0, &base, &info) || base != dptr || !info.ipcOpens) {
    return refuseCall(CUDA_ERROR_INVALID_VALUE,
                      "cuIpcCloseMemHandle: not an address cuIpcOpenMemHandle returned");
  }
  {
    std::lock_guard lock(DriverState::get().mutex);
    auto& allocations = DriverState::get().deviceAllocations;
    auto it = allocations.find(dptr);
    if (it != allocations.end() && --it->second.ipcOpens == 0) allocations.erase(it);
  }
  // The close waits for the device: for every context's functions.
  HostFunctionFence::await(HostFunctionFence::Work::kCall, FenceScope::any());
  return info.context->server->call(
      "cuIpcCloseMemHandle",
      [&](wire::Request::Builder b) {
        auto m = b.initIpcMem();
        m.setContext(info.context->remote);
        m.setOp(wire::Request::IpcMemOp::CLOSE);
        m.setAddress(dptr);
      },
      {}, [](wire::Response::Reader, ReplyBulk&) { return CUDA_SUCCESS; });
}

GPUPOOL_DRIVER_API CUresult cuIpcGetEventHandle(CUipcEventHandle* handle, CUevent event) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (!handle) return CUDA_ERROR_INVALID_VALUE;
  EventObject* e = asEvent(event);
  if (!e) return CUDA_ERROR_INVALID_HANDLE;
  const unsigned needed = CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING;
  if ((e->flags & needed) != needed) {
    return refuseCall(CUDA_ERROR_INVALID_VALUE,
                      "cuIpcGetEventHandle: the event was not created with CU_EVENT_INTERPROCESS "
                      "and CU_EVENT_DISABLE_TIMING");
  }
  if (CUresult r = DriverState::get().ensureRemote(e->context); r != CUDA_SUCCESS) return r;
  uint64_t low = 0, high = 0;
  CUresult r = e->context->server->call(
      "cuIpcGetEventHandle",
      [&](wire::Request::Builder b) {
        auto m = b.initIpcMem();
        m.setContext(e->context->remote);
        m.setOp(wire::Request::IpcMemOp::GET_EVENT);
        m.setEvent(e->remote);
      },
      {},
      [&](wire::Response::Reader reply, ReplyBulk&) {
        low = reply.getGlobal().getAddress();
        high = reply.getGlobal().getBytes();
        return CUDA_SUCCESS;
      });
  if (r != CUDA_SUCCESS) return r;
  std::memset(handle->reserved, 0, sizeof(handle->reserved));
  std::memcpy(handle->reserved, kIpcEventMagic, sizeof(kIpcEventMagic));
  putLittleEndian(handle->reserved + kTokenAt, low);
  putLittleEndian(handle->reserved + kTokenAt + 8, high);
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuIpcOpenEventHandle(CUevent* phEvent, CUipcEventHandle handle) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (!phEvent) return CUDA_ERROR_INVALID_VALUE;
  ContextObject* ctx = nullptr;
  if (CUresult r = currentRemoteContext(&ctx); r != CUDA_SUCCESS) return r;
  if (std::memcmp(handle.reserved, kIpcEventMagic, sizeof(kIpcEventMagic)) != 0) {
    return refuseCall(CUDA_ERROR_INVALID_HANDLE,
                      "cuIpcOpenEventHandle: not an IPC event handle of a gpupool server");
  }
  uint64_t id = 0;
  CUresult r = ctx->server->call(
      "cuIpcOpenEventHandle",
      [&](wire::Request::Builder b) {
        auto m = b.initIpcMem();
        m.setContext(ctx->remote);
        m.setOp(wire::Request::IpcMemOp::OPEN_EVENT);
        m.setToken(capnp::Data::Reader(
            reinterpret_cast<const capnp::byte*>(handle.reserved + kTokenAt), kTokenBytes));
      },
      {},
      [&](wire::Response::Reader reply, ReplyBulk&) {
        id = reply.getHandle();
        return CUDA_SUCCESS;
      });
  if (r != CUDA_SUCCESS) return r;
  // The flags every exportable event has.
  *phEvent = registerEvent(ctx, id, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING);
  return CUDA_SUCCESS;
}
