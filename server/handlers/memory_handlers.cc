// Device memory: allocations charged to the tenant's quota, frees, memory info as the tenant sees
// it, address ranges and memsets.
#include "server/handlers/request_table.h"

namespace gpupool::server {
namespace {

using wire::Request;

Status memAlloc(RequestContext& request, Request::Reader r) {
  auto m = r.getMemAlloc();
  BackendContext* context = nullptr;
  if (Status st = request.context(m.getContext(), &context); !st.ok()) return st;
  uint64_t bytes = m.getBytes(), pitch = 0;
  if (uint64_t width = m.getPitchWidth()) {
    // Rows padded to 512 bytes, as the texture pitch alignment of real devices; `bytes` is the
    // row count.
    pitch = (width + 511) / 512 * 512;
    uint64_t height = m.getBytes();
    if (height == 0 || pitch > UINT64_MAX / height) {
      return Status::error(CUDA_ERROR_INVALID_VALUE, "invalid pitched allocation");
    }
    bytes = pitch * height;
  }
  uint64_t address = 0;
  auto allocate = [&](uint64_t* at) { return context->memAlloc(bytes, at); };
  if (Status st = chargedAllocation(request, *context, bytes, allocate, &address); !st.ok()) {
    return st;
  }
  auto out = request.reply.initMemAlloc();
  out.setAddress(address);
  out.setPitch(pitch);
  return Status::success();
}

Status memFree(RequestContext& request, Request::Reader r) {
  auto m = r.getMemFree();
  return request.withContext(m.getContext(), [&](BackendContext& context) {
    return chargedFree(request, context, m.getContext(), m.getAddress(),
                       [&] { return context.memFree(m.getAddress()); });
  });
}

Status memGetInfo(RequestContext& request, Request::Reader r) {
  return request.withContext(r.getMemGetInfo(), [&](BackendContext& context) {
    uint64_t freeBytes = 0, totalBytes = 0;
    Status st = context.memGetInfo(&freeBytes, &totalBytes);
    if (request.session.tenant) request.session.tenant->memoryView(&freeBytes, &totalBytes);
    auto out = request.reply.initMemInfo();
    out.setFree(freeBytes);
    out.setTotal(totalBytes);
    return st;
  });
}

Status memGetAddressRange(RequestContext& request, Request::Reader r) {
  auto m = r.getMemGetAddressRange();
  return request.withContext(m.getContext(), [&](BackendContext& context) {
    uint64_t base = 0, size = 0;
    Status st = context.memGetAddressRange(m.getAddress(), &base, &size);
    if (st.ok()) {
      auto out = request.reply.initAddressRange();
      out.setAddress(base);
      out.setBytes(size);
    }
    return st;
  });
}

Status memSet(RequestContext& request, Request::Reader r) {
  auto m = r.getMemset();
  return request.withContext(m.getContext(), [&](BackendContext& context) {
    return context.memset(m.getDst(), m.getValue(), m.getElementSize(), m.getWidth(), m.getHeight(),
                          m.getPitch(), m.getStream(), m.getAsync());
  });
}

constexpr RequestHandlerRow kRows[] = {
    {Request::MEM_ALLOC, memAlloc},      {Request::MEM_FREE, memFree},
    {Request::MEM_GET_INFO, memGetInfo}, {Request::MEM_GET_ADDRESS_RANGE, memGetAddressRange},
    {Request::MEMSET, memSet},
};

}  // namespace

std::span<const RequestHandlerRow> memoryHandlers() { return kRows; }

}  // namespace gpupool::server
