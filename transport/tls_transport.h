// TLS over TCP (`tls://HOST:PORT`): the TCP transport's frames inside a TLS 1.2+ session
// (Boost.Asio ssl over OpenSSL), so tokens and memory contents cross untrusted networks encrypted.
//
// Contract:
// - tlsListen needs the server's certificate chain and private key (PEM files); a file that cannot
//   be loaded is a TransportError naming it. The TLS handshake of an accepted connection runs on
//   its first send or receive (whichever thread comes first), so a slow client never stalls
//   accept().
// - tlsConnect verifies the server's certificate against the CA file in GPU_POOL_TLS_CA (PEM), or
//   the system's trust store when it is unset, and checks the host name; GPU_POOL_TLS_VERIFY=0
//   turns verification off (for tests and self-signed setups; never for production).
// - Failures of the handshake or the channel are TransportErrors; after one the connection is
//   unusable. Connection::kind() is "tls"; connections are full duplex (Connection::fullDuplex).
#pragma once

#include <memory>
#include <string>

#include "transport/connection.h"
#include "transport/endpoint.h"

namespace gpupool::transport {

struct TlsServerFiles {
  std::string certificateChain;  // PEM
  std::string privateKey;        // PEM
};

std::unique_ptr<Connection> tlsConnect(const Endpoint& endpoint, unsigned timeoutMs = 0);
std::unique_ptr<Listener> tlsListen(const Endpoint& endpoint, const TlsServerFiles& files);

}  // namespace gpupool::transport
