// Virtual memory management: physical allocations (cuMemCreate, cuMemRelease,
// cuMemRetainAllocationHandle), reserved address ranges (cuMemAddressReserve/Free), and mappings
// with their access (cuMemMap/Unmap, cuMemSetAccess/GetAccess). A physical allocation is charged
// to the tenant's quota at cuMemCreate and given back when the backend frees it (released and
// unmapped everywhere). Shareable handles (cuMemExportToShareableHandle as a POSIX file
// descriptor): export publishes a physical allocation under a random token in the server's
// IpcMemoryRegistry, for sessions of the same tenant; import gives the importing context a handle
// to the same physical memory, charged nowhere again (the creator's charge stands).
#include <cstring>

#include "server/handlers/request_table.h"
#include "server/pool_server.h"

namespace gpupool::server {
namespace {

using wire::Request;

// The tenant gets back `bytes` the backend freed in context `id`.
void vmmGiveBack(RequestContext& request, uint64_t id, uint64_t bytes) {
  if (TenantSession* tenant = request.session.tenant.get(); tenant && bytes) {
    tenant->freed(id, bytes);
  }
}

uint64_t vmmTokenHalf(const IpcMemoryRegistry::Token& token, size_t from) {
  uint64_t value = 0;
  for (size_t i = 0; i < 8; ++i) value |= uint64_t{token[from + i]} << (8 * i);
  return value;
}

int vmmDeviceOfContext(const SessionContexts& contexts, uint64_t id) {
  int device = -1;
  contexts.forEach([&](uint64_t each, const SessionContexts::Entry& entry) {
    if (each == id) device = entry.device;
  });
  return device;
}

std::string vmmTenantOf(const SessionState& session) {
  return session.tenant ? session.tenant->tenant() : std::string();
}

Status vmmExport(RequestContext& request, BackendContext& context, uint64_t id, uint64_t handle) {
  SessionState& session = request.session;
  IpcMemoryRegistry::Export exported{vmmTenantOf(session),
                                     session.id,
                                     id,
                                     vmmDeviceOfContext(session.contexts, id),
                                     {},
                                     0,
                                     {},
                                     handle,
                                     {}};
  if (handle == 0) return Status::error(CUDA_ERROR_INVALID_VALUE, "no allocation handle");
  if (Status st = context.vmmExport(handle, &exported.vmm); !st.ok()) return st;
  IpcMemoryRegistry::Token token{};
  if (Status st = session.server.ipcMemory().publish(exported, &token); !st.ok()) return st;
  auto out = request.reply.initGlobal();
  out.setAddress(vmmTokenHalf(token, 0));
  out.setBytes(vmmTokenHalf(token, 8));
  return Status::success();
}

// The exporting session may import its own handle too, as a process may with NVIDIA's driver.
Status vmmImport(RequestContext& request, BackendContext& context, uint64_t id,
                 capnp::Data::Reader bytes) {
  SessionState& session = request.session;
  IpcMemoryRegistry::Token token{};
  if (bytes.size() != token.size()) {
    return Status::error(CUDA_ERROR_INVALID_VALUE, "malformed shareable handle token");
  }
  std::memcpy(token.data(), bytes.begin(), token.size());
  IpcMemoryRegistry::Export exported;
  if (Status st = session.server.ipcMemory().find(
          token, vmmTenantOf(session), IpcMemoryRegistry::Kind::kVmmAllocation, &exported);
      !st.ok()) {
    return st;
  }
  if (exported.device != vmmDeviceOfContext(session.contexts, id)) {
    return Status::error(CUDA_ERROR_INVALID_DEVICE,
                         "the shareable handle names memory of another device");
  }
  uint64_t handle = 0;
  if (Status st = context.vmmImport(exported.vmm, &handle); !st.ok()) return st;
  auto out = request.reply.initGlobal();
  out.setAddress(handle);
  out.setBytes(exported.vmm.bytes);
  return Status::success();
}

Status vmmHandle(RequestContext& request, Request::Reader r) {
  auto m = r.getVmmHandle();
  uint64_t id = m.getContext();
  return request.withContext(id, [&](BackendContext& context) {
    uint64_t handle = 0;
    switch (m.getOp()) {
      case wire::Request::VmmHandleOp::CREATE: {
        TenantSession* tenant = request.session.tenant.get();
        if (tenant) {
          settlePoolCharge(request, context, id);
          if (Status st = tenant->reserve(id, m.getBytes()); !st.ok()) return st;
        }
        Status st = context.vmmCreate(m.getBytes(), m.getShareable(), &handle);
        if (!st.ok()) {
          vmmGiveBack(request, id, m.getBytes());
          return st;
        }
        request.reply.setHandle(handle);
        return st;
      }
      case wire::Request::VmmHandleOp::RETAIN: {
        Status st = context.vmmRetain(m.getAddress(), &handle);
        if (st.ok()) request.reply.setHandle(handle);
        return st;
      }
      case wire::Request::VmmHandleOp::RELEASE: {
        uint64_t freed = 0;
        Status st = context.vmmRelease(m.getHandle(), &freed);
        vmmGiveBack(request, id, freed);
        return st;
      }
      case wire::Request::VmmHandleOp::EXPORT:
        return vmmExport(request, context, id, m.getHandle());
      case wire::Request::VmmHandleOp::IMPORT:
        return vmmImport(request, context, id, m.getToken());
    }
    return Status::error(CUDA_ERROR_INVALID_VALUE, "unknown allocation handle operation");
  });
}

Status vmmAddress(RequestContext& request, Request::Reader r) {
  auto m = r.getVmmAddress();
  return request.withContext(m.getContext(), [&](BackendContext& context) {
    if (m.getFree()) return context.vmmFree(m.getAddress(), m.getBytes());
    uint64_t address = 0;
    Status st = context.vmmReserve(m.getBytes(), m.getAlignment(), m.getAddress(), &address);
    if (st.ok()) request.reply.setHandle(address);
    return st;
  });
}

Status vmmMap(RequestContext& request, Request::Reader r) {
  auto m = r.getVmmMap();
  uint64_t id = m.getContext();
  return request.withContext(id, [&](BackendContext& context) {
    switch (m.getOp()) {
      case wire::Request::VmmMapOp::MAP:
        return context.vmmMap(m.getAddress(), m.getBytes(), m.getHandle(), m.getOffset());
      case wire::Request::VmmMapOp::UNMAP: {
        uint64_t freed = 0;
        Status st = context.vmmUnmap(m.getAddress(), m.getBytes(), &freed);
        vmmGiveBack(request, id, freed);
        return st;
      }
      case wire::Request::VmmMapOp::SET_ACCESS:
        return context.vmmSetAccess(m.getAddress(), m.getBytes(), m.getReadWrite());
      case wire::Request::VmmMapOp::GET_ACCESS: {
        bool readWrite = false;
        Status st = context.vmmGetAccess(m.getAddress(), &readWrite);
        if (st.ok()) request.reply.setValue(readWrite ? 1 : 0);
        return st;
      }
    }
    return Status::error(CUDA_ERROR_INVALID_VALUE, "unknown mapping operation");
  });
}

constexpr RequestHandlerRow kRows[] = {
    {Request::VMM_HANDLE, vmmHandle},
    {Request::VMM_ADDRESS, vmmAddress},
    {Request::VMM_MAP, vmmMap},
};

}  // namespace

std::span<const RequestHandlerRow> vmmHandlers() { return kRows; }

}  // namespace gpupool::server
