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

struct RequestHandlerRow {
  wire::Request::Which kind;
  RequestHandler handle;
};

class RequestTable {
 public:
  // Builds the table from every family of request_families.def; throws std::logic_error if two rows
  // claim one kind.
  RequestTable();
  // The handler of `kind`, or null when this server has none.
  RequestHandler find(wire::Request::Which kind) const;

 private:
  std::vector<RequestHandler> handlers_;  // indexed by the kind's value
};

}  // namespace gpupool::server
