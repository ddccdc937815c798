// Contexts: creating one on a device the tenant may use (a green context when it names an SM
// count), destroying it with everything in it, synchronizing it, its limits (cuCtxSetLimit).
#include "server/handlers/request_table.h"
#include "server/pool_server.h"

namespace gpupool::server {
namespace {

using wire::Request;

Status create(RequestContext& request, Request::Reader r) {
  auto c = r.getCtxCreate();
  SessionState& session = request.session;
  auto device = static_cast<int>(c.getDevice());
  if (session.tenant) {
    if (Status st = session.tenant->checkDevice(device); !st.ok()) return st;
  }
  std::unique_ptr<BackendContext> created;
  Status st = c.getSmCount() != 0
                  ? session.backend.createGreenContext(c.getDevice(), c.getSmCount(), &created)
                  : session.backend.createContext(c.getDevice(), c.getFlags(), &created);
  if (!st.ok()) return st;
  created->setOwner("session " + std::to_string(session.id) +
                    (session.tenant ? " (tenant " + session.tenant->tenant() + ")" : ""));
  BackendContext& backend = *created;
  uint64_t id = session.contexts.add(device, std::move(created));
  // Kernel time is measured where a launch gate runs (a pool); the accounting says so otherwise.
  bool gated = session.tenant && session.tenant->gatesDevice(device);
  std::shared_ptr<KernelClock> kernelClock = session.accounting.contextCreated(device, gated);
  if (session.tenant) session.tenant->attachContext(id, device, backend, std::move(kernelClock));
  if (c.getSmCount() != 0) {
    // A green context is answered with its SM count beside its id, so a client can tell it from
    // the full-device context a server that predates green contexts would have made.
    auto green = request.reply.initGlobal();
    green.setAddress(id);
    green.setBytes(c.getSmCount());
  } else {
    request.reply.setHandle(id);
  }
  return Status::success();
}

Status destroy(RequestContext& request, Request::Reader r) {
  uint64_t id = r.getCtxDestroy();
  SessionState& session = request.session;
  int device = 0;
  std::shared_ptr<BackendContext> doomed = session.contexts.remove(id, &device);
  if (!doomed) return Status::error(CUDA_ERROR_INVALID_CONTEXT, "unknown context");
  session.accounting.contextDestroyed(device, doomed->memoryPeak());
  session.modulesLoaded -= session.modulesPerContext[id];
  session.modulesPerContext.erase(id);
  if (session.tenant) session.tenant->contextDestroyed(id);
  session.server.ipcMemory().withdrawContext(session.id, id);
  // A stream stopped at a host gate would keep the context from draining.
  session.hostGates.releaseContext(id);
  forgetContextGraphs(session, id);
  // Releases its memory, modules, streams and events (once a wait still running on it is done).
  doomed.reset();
  return Status::success();
}

Status synchronize(RequestContext& request, Request::Reader r) {
  BackendContext* context = nullptr;
  if (Status st = request.context(r.getCtxSynchronize(), &context); !st.ok()) return st;
  return context->synchronize();
}

// The ready check of a context synchronize: no work left (where the backend can tell).
Status idle(RequestContext& request, Request::Reader r) {
  BackendContext* context = nullptr;
  if (Status st = request.context(r.getCtxSynchronize(), &context); !st.ok()) return st;
  return context->idle();
}

// cuCtxSetLimit / cuCtxGetLimit, answered with the value the context holds afterwards.
Status limit(RequestContext& request, Request::Reader r) {
  auto l = r.getCtxLimit();
  BackendContext* context = nullptr;
  if (Status st = request.context(l.getContext(), &context); !st.ok()) return st;
  uint64_t held = 0;
  Status st = context->limit(l.getLimit(), l.getSet(), l.getValue(), &held);
  if (st.ok()) request.reply.setValue(static_cast<int64_t>(held));
  return st;
}

constexpr RequestHandlerRow kRows[] = {
    {Request::CTX_CREATE, create},
    {Request::CTX_LIMIT, limit},
    {Request::CTX_DESTROY, destroy},
    {Request::CTX_SYNCHRONIZE, synchronize, synchronize, idle},
};

}  // namespace

std::span<const RequestHandlerRow> contextHandlers() { return kRows; }

}  // namespace gpupool::server
