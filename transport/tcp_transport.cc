#include "transport/tcp_transport.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <atomic>
#include <boost/asio.hpp>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <future>

#include "transport/asio_error_kind.h"
#include "transport/tcp_acceptor.h"
#include "transport/tcp_connector.h"
#include "transport/tcp_peer_watch.h"

namespace gpupool::transport {
namespace {

using boost::asio::ip::tcp;

std::string describe(const boost::system::error_code& ec) {
  if (ec == boost::asio::error::would_block || ec == boost::asio::error::try_again) {
    return "timed out waiting for the peer";
  }
  if (ec == boost::asio::error::eof) return "connection closed by peer";
  return ec.message();
}

// One descriptor per connection: the server's connections share their listener's io_context
// (an io_context holds descriptors of its own), and nothing runs it: the socket calls here are
// synchronous.
//
// Full duplex: FramedConnection keeps send and receive state apart, and Asio's synchronous socket
// calls are plain sendmsg/recv/poll on the descriptor (the socket's state flags are only read),
// which the kernel allows from two threads at once.
class TcpConnection final : public FramedConnection {
 public:
  TcpConnection(std::shared_ptr<boost::asio::io_context> io, tcp::socket socket)
      : io_(std::move(io)), socket_(std::move(socket)) {
    boost::system::error_code ec;
    socket_.set_option(tcp::no_delay(true), ec);
    auto ep = socket_.remote_endpoint(ec);
    peer_ = ec ? "unknown" : ep.address().to_string() + ":" + std::to_string(ep.port());
  }

  ~TcpConnection() override {
    boost::system::error_code ec;
    socket_.close(ec);
  }

  void shutdown() override {
    boost::system::error_code ec;
    socket_.shutdown(tcp::socket::shutdown_both, ec);
  }

  std::string kind() const override { return "tcp"; }
  std::string peer() const override { return peer_; }
  bool fullDuplex() const override { return true; }
  int readinessDescriptor() const override {
    return const_cast<tcp::socket&>(socket_).native_handle();
  }

  // Enforced by polling before each read: Asio's blocking reads retry on EAGAIN, so SO_RCVTIMEO
  // alone would never fire.
  void setReceiveTimeoutMs(unsigned ms) override { receiveTimeoutMs_ = ms; }

  bool peerClosed() const override {
    pollfd p{const_cast<tcp::socket&>(socket_).native_handle(), POLLRDHUP, 0};
    return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
  }

  // The heartbeat: transport/tcp_peer_watch.h.
  void setDeadPeerTimeoutMs(unsigned ms) override { watch_.arm(socket_.native_handle(), ms); }
  void checkPeer() override { watch_.look(); }

 protected:
  void writeAll(std::span<const ConstBuffer> parts) override {
    if (!watch_.armed()) {
      buffers_.clear();
      for (auto& b : parts) buffers_.emplace_back(b.data, b.size);
      boost::system::error_code ec;
      boost::asio::write(socket_, buffers_, ec);
      if (ec) throw TransportError(channelErrorKind(ec), "send failed: " + describe(ec));
      return;
    }
    // Watched: a send the peer's window holds up waits in look-interval slices, looking.
    iovecs_.clear();
    for (auto& b : parts) {
      if (b.size) iovecs_.push_back({const_cast<void*>(b.data), b.size});
    }
    size_t next = 0;
    while (next < iovecs_.size()) {
      msghdr header{};
      header.msg_iov = &iovecs_[next];
      header.msg_iovlen = std::min<size_t>(iovecs_.size() - next, IOV_MAX);
      ssize_t sent = ::sendmsg(socket_.native_handle(), &header, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (sent < 0) {
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) failed("send", errno);
        awaitReady(POLLOUT, 0);
        continue;
      }
      auto left = static_cast<size_t>(sent);
      while (next < iovecs_.size() && left >= iovecs_[next].iov_len)
        left -= iovecs_[next++].iov_len;
      if (left) {
        iovecs_[next].iov_base = static_cast<char*>(iovecs_[next].iov_base) + left;
        iovecs_[next].iov_len -= left;
      }
    }
  }

  // One read of up to `max` bytes, waiting at most the receive timeout for the first byte.
  size_t readSome(void* dst, size_t max) override {
    if (unsigned timeoutMs = receiveTimeoutMs_; timeoutMs || watch_.armed()) {
      // What has arrived is taken at once; the wait, when there is none, may look and time out.
      if (size_t n = readAvailable(dst, max)) return n;
      awaitReady(POLLIN, timeoutMs);
    }
    boost::system::error_code ec;
    size_t n = socket_.read_some(boost::asio::buffer(dst, max), ec);
    if (ec) {
      if (std::string gone = watch_.gone(); !gone.empty())
        throw TransportError(TransportError::Kind::kTimeout, "receive failed: " + gone);
      throw TransportError(channelErrorKind(ec), "receive failed: " + describe(ec));
    }
    return n;
  }

  size_t readAvailable(void* dst, size_t max) override {
    ssize_t n;
    do {
      n = ::recv(socket_.native_handle(), dst, max, MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    if (n > 0) return static_cast<size_t>(n);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    if (n == 0) failed("receive", 0);
    failed("receive", errno);
  }

 private:
  // Waits until the socket is ready for `events` (or failed), looking at the peer every look
  // interval while the heartbeat is armed; timeoutMs (0: none) bounds a receive.
  void awaitReady(short events, unsigned timeoutMs) {
    const char* what = events == POLLOUT ? "send" : "receive";
    int ready;
    do {
      ready = watch_.poll(socket_.native_handle(), events,
                          timeoutMs ? static_cast<int>(timeoutMs) : -1, what);
    } while (ready < 0 && errno == EINTR);
    if (ready == 0) {
      throw TransportError(TransportError::Kind::kTimeout,
                           "receive failed: timed out, no data from the peer for " +
                               std::to_string(timeoutMs) + " ms");
    }
    if (ready < 0) failed(what, errno);
  }

  // A failed socket call: `error` is its errno (0: the peer closed the connection).
  [[noreturn]] void failed(const char* what, int error) const {
    if (std::string gone = watch_.gone(); !gone.empty())
      throw TransportError(TransportError::Kind::kTimeout, std::string(what) + " failed: " + gone);
    throw TransportError(TransportError::Kind::kDisconnected,
                         std::string(what) + " failed: " +
                             (error == 0 ? "connection closed by peer" : std::strerror(error)));
  }

  std::shared_ptr<boost::asio::io_context> io_;
  tcp::socket socket_;
  std::string peer_;
  std::vector<boost::asio::const_buffer> buffers_;  // gather list, reused across writes
  std::vector<iovec> iovecs_;                       // the same, for the watched sends
  TcpPeerWatch watch_;
  std::atomic<unsigned> receiveTimeoutMs_{0};  // 0: wait forever; set from either side
};

class TcpListener final : public Listener {
 public:
  explicit TcpListener(const Endpoint& endpoint)
      : io_(std::make_shared<boost::asio::io_context>()),
        acceptor_(openTcpAcceptor(*io_, endpoint)),
        url_(boundEndpoint(acceptor_, endpoint).url()) {}

  std::unique_ptr<Connection> accept() override {
    tcp::socket socket(*io_);
    boost::system::error_code ec;
    int fd = ::accept4(acceptor_.native_handle(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0)
      throw TransportError(TransportError::Kind::kUnavailable,
                           std::string("accept failed: ") + std::strerror(errno));
    socket.assign(acceptor_.local_endpoint().protocol(), fd, ec);
    if (ec)
      throw TransportError(TransportError::Kind::kUnavailable, "accept failed: " + ec.message());
    return std::make_unique<TcpConnection>(io_, std::move(socket));
  }

  void shutdown() override { ::shutdown(acceptor_.native_handle(), SHUT_RDWR); }

  std::string url() const override { return url_; }

 private:
  std::shared_ptr<boost::asio::io_context> io_;  // shared with the connections it accepts
  tcp::acceptor acceptor_;
  std::string url_;
};

}  // namespace

std::unique_ptr<Connection> tcpConnect(const Endpoint& endpoint, unsigned timeoutMs) {
  if (endpoint.scheme != "tcp")
    throw TransportError(TransportError::Kind::kUnavailable,
                         "not a tcp endpoint: " + endpoint.url());
  auto io = connectorIoContext();
  tcp::socket socket = connectTcpSocket(*io, endpoint, timeoutMs);
  return std::make_unique<TcpConnection>(std::move(io), std::move(socket));
}

std::unique_ptr<Listener> tcpListen(const Endpoint& endpoint) {
  if (endpoint.scheme != "tcp")
    throw TransportError(TransportError::Kind::kUnavailable,
                         "not a tcp endpoint: " + endpoint.url());
  return std::make_unique<TcpListener>(endpoint);
}

}  // namespace gpupool::transport
