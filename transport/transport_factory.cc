#include "transport/transport_factory.h"

#include "transport/link_baseline.h"
#include "transport/rdma/baseline/rdma_baseline_client.h"
#include "transport/rdma/rdma_transport.h"
#include "transport/shm_transport.h"
#include "transport/tcp_transport.h"
#include "transport/tls_transport.h"

namespace gpupool::transport {
namespace {

PinnedMemory& pinnedOf(PinnedMemory* given) { return given ? *given : processPinnedMemory(); }

std::unique_ptr<Connection> rdmaOrTcp(const Endpoint& endpoint, const ConnectOptions& options) {
  std::string why = options.rdmaRefusal;
  if (why.empty()) {
    try {
      return rdmaConnect(endpoint, options.timeoutMs, pinnedOf(options.pinnedMemory));
    } catch (const TransportError& e) {
      why = e.what();
    }
  }
  if (options.warn) options.warn(endpoint.url() + ": RDMA not used (" + why + "); using TCP");
  Endpoint tcp = endpoint;
  tcp.scheme = "tcp";
  return tcpConnect(tcp, options.timeoutMs);
}

}  // namespace

std::string transportUnavailableReason(const std::string& scheme) {
  return scheme == "rdma" ? rdmaUnavailableReason() : std::string();
}

std::unique_ptr<Connection> connectEndpoint(const Endpoint& endpoint,
                                            const ConnectOptions& options) {
  if (endpoint.scheme == "tcp") return tcpConnect(endpoint, options.timeoutMs);
  if (endpoint.scheme == "tls") return tlsConnect(endpoint, options.timeoutMs);
  if (endpoint.scheme == "shm") return shmConnect(endpoint);
  if (endpoint.scheme == "rdma") {
    if (options.rdmaFallsBackToTcp) return rdmaOrTcp(endpoint, options);
    return rdmaConnect(endpoint, options.timeoutMs, pinnedOf(options.pinnedMemory));
  }
  throw TransportError(TransportError::Kind::kUnavailable,
                       endpoint.scheme + ":// is not available in this build");
}

std::unique_ptr<Connection> connectEndpoint(const Endpoint& endpoint, unsigned timeoutMs) {
  ConnectOptions options;
  options.timeoutMs = timeoutMs;
  return connectEndpoint(endpoint, options);
}

std::unique_ptr<Listener> listenEndpoint(const Endpoint& endpoint, const ListenOptions& options) {
  if (endpoint.scheme == "tcp") return tcpListen(endpoint);
  if (endpoint.scheme == "shm") return shmListen(endpoint, options.shmPollMax);
  if (endpoint.scheme == "rdma")
    return rdmaListen(endpoint, pinnedOf(options.pinnedMemory), options.rdmaPollMax);
  if (endpoint.scheme == "tls") {
    if (options.tlsCertificateChain.empty() || options.tlsPrivateKey.empty()) {
      throw TransportError(TransportError::Kind::kUnavailable,
                           "tls:// listening needs a certificate and a key");
    }
    return tlsListen(endpoint, TlsServerFiles{options.tlsCertificateChain, options.tlsPrivateKey});
  }
  throw TransportError(TransportError::Kind::kUnavailable,
                       endpoint.scheme + ":// listening is not available in this build");
}

std::unique_ptr<LinkBaseline> connectLinkBaseline(const Endpoint& endpoint,
                                                  uint32_t maxMessageBytes, uint64_t sinkBytes,
                                                  unsigned timeoutMs) {
  if (endpoint.scheme == "rdma") {
    return std::make_unique<RdmaBaselineClient>(endpoint, maxMessageBytes, sinkBytes, timeoutMs);
  }
  throw TransportError(TransportError::Kind::kUnavailable,
                       endpoint.scheme + ":// has no raw link baseline");
}

}  // namespace gpupool::transport
