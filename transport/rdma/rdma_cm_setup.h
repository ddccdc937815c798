// rdma_cm steps that the connection, the listener and the raw-verbs baseline share
// (rdma_cm_setup.cc).
#pragma once

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <cstddef>
#include <string>
#include <vector>

#include "transport/endpoint.h"
#include "transport/rdma/rdma_wire.h"

namespace gpupool::transport::rdma {

// Waits for the next event on `channel` and returns it acknowledged; throws TransportError naming
// `what` when it is not `expected` or when timeoutMs passes. With `privateData`, the event's
// private data (the peer's accept or connect payload) is copied there first.
void awaitCmEvent(rdma_event_channel* channel, rdma_cm_event_type expected, unsigned timeoutMs,
                  const std::string& what, std::vector<std::byte>* privateData = nullptr);

// Owns an event channel and an id until handed on (set both to null then).
struct CmHandles {
  rdma_event_channel* channel = nullptr;
  rdma_cm_id* id = nullptr;
  CmHandles() = default;
  CmHandles(const CmHandles&) = delete;
  CmHandles& operator=(const CmHandles&) = delete;
  ~CmHandles();
};

// The active side's first steps: creates cm's channel and id and resolves the address and route
// to `endpoint` (its host must resolve to an address on an RDMA device). Throws TransportError.
void resolveRoute(const Endpoint& endpoint, unsigned timeoutMs, CmHandles& cm);

// What rdmaConnect and the baseline client do first: checks that `endpoint` is rdma:// and that
// verbs can be used here, then resolveRoute. Returns the timeout for each later step (0 = 5 s).
// Throws TransportError.
unsigned startActiveSide(const Endpoint& endpoint, unsigned timeoutMs, CmHandles& cm);

// The rdma_cm connection parameters both sides use (private data = ConnectParams).
rdma_conn_param connectionParameters(const ConnectParams* params, ibv_context* verbs);

}  // namespace gpupool::transport::rdma
