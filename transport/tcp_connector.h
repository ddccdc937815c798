// The connecting TCP socket that the TCP and TLS transports share (TLS adds its handshake on top),
// so resolving, trying each address and bounding the wait are written once.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <memory>

#include "transport/endpoint.h"

namespace gpupool::transport {

// The io_context this process's connecting sockets share. Their calls are synchronous, so nothing
// runs it; sharing it spares each connection the descriptors an io_context holds (a process with
// many connections, such as the bench's idle clients, would hold four per connection).
std::shared_ptr<boost::asio::io_context> connectorIoContext();

// Resolves endpoint's host and port and connects to the first address that answers, waiting at
// most timeoutMs for each (0 = as long as the system does), so an unroutable host cannot hang the
// caller. Throws TransportError with the last reason when none connects.
boost::asio::ip::tcp::socket connectTcpSocket(boost::asio::io_context& io, const Endpoint& endpoint,
                                              unsigned timeoutMs);

}  // namespace gpupool::transport
