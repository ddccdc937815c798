// Virtual memory management: physical allocations (cuMemCreate, cuMemRelease,
// cuMemRetainAllocationHandle), reserved address ranges (cuMemAddressReserve/Free), and mappings
// with their access (cuMemMap/Unmap, cuMemSetAccess/GetAccess). A physical allocation is charged
// to the tenant's quota at cuMemCreate and given back when the backend frees it (released and
// unmapped everywhere).
#include "server/handlers/request_table.h"

namespace gpupool::server {
namespace {

using wire::Request;

// The tenant gets back `bytes` the backend freed in context `id`.
void vmmGiveBack(RequestContext& request, uint64_t id, uint64_t bytes) {
  if (TenantSession* tenant = request.session.tenant.get(); tenant && bytes) {
    tenant->freed(id, bytes);
  }
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
        Status st = context.vmmCreate(m.getBytes(), &handle);
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
