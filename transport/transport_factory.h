// One place that turns an endpoint URL into a connection or a listener, whatever its scheme, so
// callers (the client library, gpupoold, the CLI) need not know which transports exist.
#pragma once

#include <memory>

#include "transport/connection.h"
#include "transport/endpoint.h"

namespace gpupool::transport {

// Connects to `endpoint` by its scheme. Throws TransportError with the reason.
std::unique_ptr<Connection> connectEndpoint(const Endpoint& endpoint, unsigned timeoutMs);

// Listens on `endpoint` by its scheme. Throws TransportError with the reason.
std::unique_ptr<Listener> listenEndpoint(const Endpoint& endpoint);

}  // namespace gpupool::transport
