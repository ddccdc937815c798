// Stream-ordered allocation and memory pools: cuMemAllocFromPoolAsync (and cuMemAllocAsync, from
// the device's current pool), cuMemFreeAsync, created pools, trimming and pool attributes. A pool
// allocation is charged to the tenant's quota while it is in use, like a cuMemAlloc, and the memory
// the pools keep idle is charged too (settled after every pool request).
#include "server/handlers/request_table.h"

namespace gpupool::server {
namespace {

using wire::Request;

// Runs call(context) for the session's context `id`, then settles the tenant's charge for the
// memory the context's pools now keep idle.
template <typename Call>
Status withPools(RequestContext& request, uint64_t id, Call&& call) {
  return request.withContext(id, [&](BackendContext& context) {
    Status st = call(context);
    settlePoolCharge(request, context, id);
    return st;
  });
}

Status memAllocAsync(RequestContext& request, Request::Reader r) {
  auto m = r.getMemAllocAsync();
  return withPools(request, m.getContext(), [&](BackendContext& context) {
    auto allocate = [&](uint64_t* at) {
      return context.memAllocAsync(m.getPool(), m.getBytes(), m.getStream(), at);
    };
    uint64_t address = 0;
    Status st = chargedAllocation(request, context, m.getBytes(), allocate, &address);
    if (st.ok()) request.reply.initMemAlloc().setAddress(address);
    return st;
  });
}

Status memFreeAsync(RequestContext& request, Request::Reader r) {
  auto m = r.getMemFreeAsync();
  return withPools(request, m.getContext(), [&](BackendContext& context) {
    return chargedFree(request, context, m.getContext(), m.getAddress(),
                       [&] { return context.memFreeAsync(m.getAddress(), m.getStream()); });
  });
}

Status memPoolCreate(RequestContext& request, Request::Reader r) {
  return request.withContext(r.getMemPoolCreate(), [&](BackendContext& context) {
    uint64_t pool = 0;
    Status st = context.memPoolCreate(&pool);
    if (st.ok()) request.reply.setHandle(pool);
    return st;
  });
}

Status memPoolDestroy(RequestContext& request, Request::Reader r) {
  auto m = r.getMemPoolDestroy();
  return withPools(request, m.getContext(),
                   [&](BackendContext& context) { return context.memPoolDestroy(m.getPool()); });
}

Status memPoolTrimTo(RequestContext& request, Request::Reader r) {
  auto m = r.getMemPoolTrimTo();
  return withPools(request, m.getContext(), [&](BackendContext& context) {
    return context.memPoolTrimTo(m.getPool(), m.getMinBytesToKeep());
  });
}

Status memPoolAttribute(RequestContext& request, Request::Reader r) {
  auto m = r.getMemPoolAttribute();
  return withPools(request, m.getContext(), [&](BackendContext& context) {
    if (m.getSet()) return context.memPoolSetAttribute(m.getPool(), m.getAttribute(), m.getValue());
    uint64_t value = 0;
    Status st = context.memPoolGetAttribute(m.getPool(), m.getAttribute(), &value);
    if (st.ok()) request.reply.setValue(static_cast<int64_t>(value));
    return st;
  });
}

constexpr RequestHandlerRow kRows[] = {
    {Request::MEM_ALLOC_ASYNC, memAllocAsync},  {Request::MEM_FREE_ASYNC, memFreeAsync},
    {Request::MEM_POOL_CREATE, memPoolCreate},  {Request::MEM_POOL_DESTROY, memPoolDestroy},
    {Request::MEM_POOL_TRIM_TO, memPoolTrimTo}, {Request::MEM_POOL_ATTRIBUTE, memPoolAttribute},
};

}  // namespace

std::span<const RequestHandlerRow> memPoolHandlers() { return kRows; }

}  // namespace gpupool::server
