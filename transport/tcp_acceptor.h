// The listening TCP socket that the TCP and TLS listeners share: both accept plain TCP
// connections (TLS adds its handshake per connection afterwards), so the set-up of the socket and
// its error messages are written once here rather than in each listener.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "transport/endpoint.h"

namespace gpupool::transport {

// Resolves endpoint's host and port as a passive address, opens, sets SO_REUSEADDR, binds and
// listens (backlog 128). Port 0 picks a free port. Throws TransportError on failure.
boost::asio::ip::tcp::acceptor openTcpAcceptor(boost::asio::io_context& io,
                                               const Endpoint& endpoint);

// endpoint with host and port replaced by the address the acceptor is bound to (the port that
// port 0 picked).
Endpoint boundEndpoint(const boost::asio::ip::tcp::acceptor& acceptor, const Endpoint& endpoint);

}  // namespace gpupool::transport
