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

// How a handler runs. A device wait blocks until the device has done something (a synchronize):
// the session runs it on a waiter thread and keeps serving the client's other calls meanwhile, then
// sends its reply whenever it is done (docs/architecture.md, "Calls in flight").
enum class HandlerKind { kImmediate, kDeviceWait };

struct RequestHandlerRow {
  wire::Request::Which kind;
  RequestHandler handle;
  HandlerKind how = HandlerKind::kImmediate;
};

class RequestTable {
 public:
  // Builds the table from every family of request_families.def; throws std::logic_error if two rows
  // claim one kind.
  RequestTable();
  // The handler of `kind`, or null when this server has none.
  RequestHandler find(wire::Request::Which kind) const;
  // Whether `kind` is served as a device wait.
  bool waitsForDevice(wire::Request::Which kind) const;

 private:
  std::vector<RequestHandlerRow> rows_;  // indexed by the kind's value; null handle = none
};

}  // namespace gpupool::server
