// The server's requests, one row per request kind, grouped by API family: the session looks each
// request up here (eRPC's handler table; GPGPU-Sim's opcodes.def).
//
// Adding a family means one file (say graph_handlers.cc, defining `graphHandlers()` that returns
// its rows) and one row in request_families.def. docs/architecture.md walks through an example.
#pragma once

#include <span>
#include <vector>

#include "protocol/gpupool.capnp.h"
#include "server/handlers/request_context.h"

namespace gpupool::server {

using RequestHandler = Status (*)(RequestContext&, wire::Request::Reader);

// A row's `handle` answers its request. A request that waits for the device (a synchronize, a
// device-to-host copy) also has `waitFor`, which blocks until the device has reached the point the
// request needs: the session runs it on a waiter thread and keeps serving the client's other calls
// meanwhile, then runs `handle`, which no longer blocks (docs/architecture.md, "Calls in flight").
// `ready`, where given, tells without blocking that no wait is needed (CUDA_SUCCESS), so an idle
// device is answered at once, with no thread handoff.
struct RequestHandlerRow {
  wire::Request::Which kind;
  RequestHandler handle;
  RequestHandler waitFor = nullptr;
  RequestHandler ready = nullptr;
};

class RequestTable {
 public:
  // Builds the table from every family of request_families.def; throws std::logic_error if two rows
  // claim one kind.
  RequestTable();
  // The handler of `kind`, or null when this server has none.
  RequestHandler find(wire::Request::Which kind) const;
  // The row of `kind`, or null when this server has none.
  const RequestHandlerRow* row(wire::Request::Which kind) const;

 private:
  std::vector<RequestHandlerRow> rows_;  // indexed by the kind's value; null handle = none
};

}  // namespace gpupool::server
