#include "transport/tcp_acceptor.h"

#include <string>

#include "transport/connection.h"

namespace gpupool::transport {

using boost::asio::ip::tcp;

tcp::acceptor openTcpAcceptor(boost::asio::io_context& io, const Endpoint& endpoint) {
  boost::system::error_code ec;
  tcp::resolver resolver(io);
  auto results =
      resolver.resolve(endpoint.host, std::to_string(endpoint.port), tcp::resolver::passive, ec);
  if (ec || results.empty()) {
    throw TransportError(TransportError::Kind::kUnavailable,
                         "cannot resolve listen address '" + endpoint.host + "': " + ec.message());
  }
  tcp::endpoint ep = results.begin()->endpoint();
  tcp::acceptor acceptor(io);
  acceptor.open(ep.protocol(), ec);
  if (!ec) acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor.bind(ep, ec);
  // As many as the system allows (net.core.somaxconn): a pool server's clients may connect by
  // the thousand at once, and a connection the queue drops waits a second before it retries.
  if (!ec) acceptor.listen(tcp::acceptor::max_listen_connections, ec);
  if (ec)
    throw TransportError(TransportError::Kind::kUnavailable,
                         "cannot listen on " + endpoint.url() + ": " + ec.message());
  return acceptor;
}

Endpoint boundEndpoint(const tcp::acceptor& acceptor, const Endpoint& endpoint) {
  auto local = acceptor.local_endpoint();
  Endpoint actual = endpoint;
  actual.host = local.address().to_string();
  actual.port = local.port();
  return actual;
}

}  // namespace gpupool::transport
