// TCP implementation of the transport interface, on Boost.Asio synchronous sockets with TCP_NODELAY.
//
// Frame layout on the wire: FrameHeader (16 bytes, little endian), message bytes, bulk bytes.
#pragma once

#include <memory>

#include "transport/connection.h"
#include "transport/endpoint.h"

namespace gpupool::transport {

struct FrameHeader {
  uint32_t magic;
  uint32_t messageBytes;
  uint64_t bulkBytes;
};
static_assert(sizeof(FrameHeader) == 16);
constexpr uint32_t kFrameMagic = 0x4c505047;  // "GPPL"

// Connects to endpoint (scheme must be tcp). Throws TransportError with the reason on failure.
// timeoutMs bounds the connection attempt (0 = the OS default).
std::unique_ptr<Connection> tcpConnect(const Endpoint& endpoint, unsigned timeoutMs = 0);

// Binds and listens; port 0 picks a free port (see Listener::url()).
std::unique_ptr<Listener> tcpListen(const Endpoint& endpoint);

}  // namespace gpupool::transport
