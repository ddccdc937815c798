#include "transport/tcp_connector.h"

#include <poll.h>
#include <sys/socket.h>

#include <string>

#include "transport/connection.h"

namespace gpupool::transport {

using boost::asio::ip::tcp;

std::shared_ptr<boost::asio::io_context> connectorIoContext() {
  static const auto io = std::make_shared<boost::asio::io_context>();
  return io;
}

tcp::socket connectTcpSocket(boost::asio::io_context& io, const Endpoint& endpoint,
                             unsigned timeoutMs) {
  tcp::socket socket(io);
  boost::system::error_code ec;
  tcp::resolver resolver(io);
  auto results = resolver.resolve(endpoint.host, std::to_string(endpoint.port), ec);
  if (ec)
    throw TransportError(TransportError::Kind::kUnavailable,
                         "cannot resolve '" + endpoint.host + "': " + ec.message());
  std::string lastError = "no addresses";
  for (const auto& entry : results) {
    socket.close(ec);
    socket.open(entry.endpoint().protocol(), ec);
    if (ec) continue;
    // Non-blocking connect with poll, so the wait is ours to bound.
    socket.non_blocking(true, ec);
    socket.connect(entry.endpoint(), ec);
    if (ec == boost::asio::error::in_progress || ec == boost::asio::error::would_block) {
      pollfd p{socket.native_handle(), POLLOUT, 0};
      int r = ::poll(&p, 1, timeoutMs ? static_cast<int>(timeoutMs) : -1);
      if (r <= 0) {
        lastError = "connection timed out";
        continue;
      }
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(socket.native_handle(), SOL_SOCKET, SO_ERROR, &err, &len);
      ec = err ? boost::system::error_code(err, boost::system::system_category())
               : boost::system::error_code();
    }
    if (!ec) socket.non_blocking(false, ec);
    if (!ec) return socket;
    lastError = ec.message();
  }
  throw TransportError(TransportError::Kind::kUnavailable, lastError);
}

}  // namespace gpupool::transport
