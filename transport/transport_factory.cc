#include "transport/transport_factory.h"

#include "transport/tcp_transport.h"

namespace gpupool::transport {

std::unique_ptr<Connection> connectEndpoint(const Endpoint& endpoint, unsigned timeoutMs) {
  if (endpoint.scheme == "tcp") return tcpConnect(endpoint, timeoutMs);
  throw TransportError(endpoint.scheme + ":// is not available in this build");
}

std::unique_ptr<Listener> listenEndpoint(const Endpoint& endpoint) {
  if (endpoint.scheme == "tcp") return tcpListen(endpoint);
  throw TransportError(endpoint.scheme + ":// listening is not available in this build");
}

}  // namespace gpupool::transport
