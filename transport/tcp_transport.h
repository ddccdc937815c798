// TCP implementation of the transport interface, on Boost.Asio synchronous sockets with
// TCP_NODELAY.
//
// Frames as transport/framed_connection.h lays them out.
#pragma once

#include <memory>

#include "transport/connection.h"
#include "transport/endpoint.h"
#include "transport/framed_connection.h"  // FrameHeader, kFrameMagic

namespace gpupool::transport {

// Connects to endpoint (scheme must be tcp). Throws TransportError with the reason on failure.
// timeoutMs bounds the connection attempt (0 = the OS default).
std::unique_ptr<Connection> tcpConnect(const Endpoint& endpoint, unsigned timeoutMs = 0);

// Binds and listens; port 0 picks a free port (see Listener::url()).
std::unique_ptr<Listener> tcpListen(const Endpoint& endpoint);

}  // namespace gpupool::transport
