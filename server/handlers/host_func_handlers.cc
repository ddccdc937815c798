// Host functions (cuLaunchHostFunc, cuStreamAddCallback): gates in stream order that the client
// opens, waits for and releases (server/host_gates.h). The client runs the function itself.
#include "server/handlers/request_table.h"

namespace gpupool::server {
namespace {

using wire::Request;

Status openGate(RequestContext& request, Request::Reader r) {
  auto g = r.getHostGateOpen();
  return request.withContext(g.getContext(), [&](BackendContext& context) {
    HostGates& gates = request.session.hostGates;
    std::function<void()> work;
    if (Status st = gates.open(g.getContext(), g.getGate(), &work); !st.ok()) return st;
    Status st = context.streamHostWork(g.getStream(), std::move(work));
    if (!st.ok()) gates.abandon(g.getGate());
    return st;
  });
}

// Answers without blocking: when the gate is not reached yet (no waiter thread was free to wait
// for it), CUDA_ERROR_NOT_READY tells the client to ask again.
Status reached(RequestContext& request, Request::Reader r) {
  auto g = r.getHostGateWait();
  return request.withContext(g.getContext(), [&](BackendContext&) {
    return request.session.hostGates.reached(g.getContext(), g.getGate());
  });
}

// On a waiter thread: blocks until the stream reaches the gate (or teardown releases it).
Status waitReached(RequestContext& request, Request::Reader r) {
  auto g = r.getHostGateWait();
  return request.withContext(g.getContext(), [&](BackendContext&) {
    return request.session.hostGates.wait(g.getContext(), g.getGate());
  });
}

Status release(RequestContext& request, Request::Reader r) {
  auto g = r.getHostGateRelease();
  return request.withContext(g.getContext(), [&](BackendContext&) {
    return request.session.hostGates.release(g.getContext(), g.getGate());
  });
}

constexpr RequestHandlerRow kRows[] = {
    {Request::HOST_GATE_OPEN, openGate},
    {Request::HOST_GATE_WAIT, reached, waitReached, reached},
    {Request::HOST_GATE_RELEASE, release},
};

}  // namespace

std::span<const RequestHandlerRow> hostFuncHandlers() { return kRows; }

}  // namespace gpupool::server
