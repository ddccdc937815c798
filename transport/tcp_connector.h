// The connecting TCP socket that the TCP and TLS transports share (TLS adds its handshake on top),
// so resolving, trying each address and bounding the wait are written once.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "transport/endpoint.h"

namespace gpupool::transport {

// Resolves endpoint's host and port and connects to the first address that answers, waiting at
// most timeoutMs for each (0 = as long as the system does), so an unroutable host cannot hang the
// caller. Throws TransportError with the last reason when none connects.
boost::asio::ip::tcp::socket connectTcpSocket(boost::asio::io_context& io, const Endpoint& endpoint,
                                              unsigned timeoutMs);

}  // namespace gpupool::transport
