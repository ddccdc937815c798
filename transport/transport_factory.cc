#include "transport/transport_factory.h"

#include <cstdlib>

#include "transport/rdma_transport.h"
#include "transport/tcp_transport.h"
#include "transport/tls_transport.h"

namespace gpupool::transport {

std::unique_ptr<Connection> connectEndpoint(const Endpoint& endpoint, unsigned timeoutMs) {
  if (endpoint.scheme == "tcp") return tcpConnect(endpoint, timeoutMs);
  if (endpoint.scheme == "tls") return tlsConnect(endpoint, timeoutMs);
  if (endpoint.scheme == "rdma") return rdmaConnect(endpoint, timeoutMs);
  throw TransportError(endpoint.scheme + ":// is not available in this build");
}

std::unique_ptr<Listener> listenEndpoint(const Endpoint& endpoint) {
  if (endpoint.scheme == "tcp") return tcpListen(endpoint);
  if (endpoint.scheme == "rdma") return rdmaListen(endpoint);
  if (endpoint.scheme == "tls") {
    // The server's certificate and key come from the environment here; gpupoold passes its
    // --tls-cert/--tls-key to tlsListen directly.
    const char* cert = std::getenv("GPU_POOL_TLS_CERT");
    const char* key = std::getenv("GPU_POOL_TLS_KEY");
    if (!cert || !key) throw TransportError("tls:// listening needs a certificate and a key");
    return tlsListen(endpoint, TlsServerFiles{cert, key});
  }
  throw TransportError(endpoint.scheme + ":// listening is not available in this build");
}

}  // namespace gpupool::transport
