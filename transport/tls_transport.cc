#include "transport/tls_transport.h"

#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>

#include "transport/asio_error_kind.h"
#include "transport/framed_connection.h"
#include "transport/tcp_acceptor.h"
#include "transport/tcp_connector.h"
#include "transport/tcp_peer_watch.h"

namespace gpupool::transport {
namespace {

namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;
using asio::ip::tcp;

std::string describe(const boost::system::error_code& ec) {
  if (ec == asio::error::would_block || ec == asio::error::try_again) {
    return "timed out waiting for the peer";
  }
  if (ec == asio::error::eof || ec == ssl::error::stream_truncated) {
    return "connection closed by peer";
  }
  return ec.message();
}

// The SSL object's byte stream: the socket, read and written with MSG_DONTWAIT (so every SSL call
// returns at once and waiting happens outside the SSL lock, see TlsConnection::drive) and
// MSG_NOSIGNAL (a peer gone must not raise SIGPIPE in the client's host process). Guarded, like
// the SSL object that uses it, by TlsConnection::sslMutex_.
struct SocketBioState {
  int fd = -1;
  int lastErrno = 0;  // of the last failed call that was not a would-block
  bool eof = false;   // the peer closed its side
};

SocketBioState& stateOf(BIO* bio) { return *static_cast<SocketBioState*>(BIO_get_data(bio)); }

// After a failed send or recv: would-block asks OpenSSL to retry (TlsConnection::drive waits for
// the socket first, `direction` says which way: BIO_FLAGS_READ or BIO_FLAGS_WRITE); any other
// error is kept for TlsConnection::failure.
int socketCallFailed(BIO* bio, int direction) {
  if (errno == EAGAIN || errno == EWOULDBLOCK) {
    BIO_set_flags(bio, direction | BIO_FLAGS_SHOULD_RETRY);
  } else {
    stateOf(bio).lastErrno = errno;
  }
  return -1;
}

int socketBioWrite(BIO* bio, const char* data, int size) {
  BIO_clear_retry_flags(bio);
  ssize_t n;
  do {
    n = ::send(stateOf(bio).fd, data, static_cast<size_t>(size), MSG_DONTWAIT | MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  return n >= 0 ? static_cast<int>(n) : socketCallFailed(bio, BIO_FLAGS_WRITE);
}

int socketBioRead(BIO* bio, char* data, int size) {
  BIO_clear_retry_flags(bio);
  ssize_t n;
  do {
    n = ::recv(stateOf(bio).fd, data, static_cast<size_t>(size), MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  if (n == 0) stateOf(bio).eof = true;
  return n >= 0 ? static_cast<int>(n) : socketCallFailed(bio, BIO_FLAGS_READ);
}

long socketBioControl(BIO* bio, int command, long /*number*/, void* /*pointer*/) {
  if (command == BIO_CTRL_FLUSH) return 1;  // nothing is buffered here
  if (command == BIO_CTRL_EOF) return stateOf(bio).eof ? 1 : 0;
  return 0;
}

const BIO_METHOD* socketBioMethod() {
  static BIO_METHOD* method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "gpupool socket");
    if (!m) throw std::bad_alloc();
    BIO_meth_set_write(m, socketBioWrite);
    BIO_meth_set_read(m, socketBioRead);
    BIO_meth_set_ctrl(m, socketBioControl);
    return m;
  }();
  return method;
}

// TLS over a TCP socket, driven through OpenSSL directly: Asio's ssl::stream is one blocking state
// machine, and OpenSSL forbids two threads in one SSL object at once. Here every SSL call holds
// sslMutex_ only while it runs (it never blocks: the socket calls do not wait), and a call that
// must wait for the socket polls it with the lock released. So one thread can send while another
// receives (fullDuplex): a reader waiting for bytes does not hold up a writer, nor the reverse.
class TlsConnection final : public FramedConnection {
 public:
  TlsConnection(std::shared_ptr<asio::io_context> io, std::shared_ptr<ssl::context> context,
                tcp::socket socket, ssl::stream_base::handshake_type role,
                const std::string& hostName)
      : io_(std::move(io)),
        context_(std::move(context)),
        socket_(std::move(socket)),
        ssl_(SSL_new(context_->native_handle()), SSL_free),
        role_(role) {
    if (!ssl_) throw TransportError(TransportError::Kind::kUnavailable, "TLS session setup failed");
    boost::system::error_code ec;
    socket_.set_option(tcp::no_delay(true), ec);
    auto ep = socket_.remote_endpoint(ec);
    peer_ = ec ? "unknown" : ep.address().to_string() + ":" + std::to_string(ep.port());
    bio_.fd = socket_.native_handle();
    BIO* bio = BIO_new(socketBioMethod());
    if (!bio) throw TransportError(TransportError::Kind::kUnavailable, "TLS session setup failed");
    BIO_set_data(bio, &bio_);
    BIO_set_init(bio, 1);
    SSL_set_bio(ssl_.get(), bio, bio);  // the session owns it
    // A write that must wait is retried with the same bytes; partial writes let one call return
    // after each record. No renegotiation: then a write never waits for the peer's bytes, which
    // only the reading thread takes off the socket.
    SSL_set_mode(ssl_.get(), SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_set_options(ssl_.get(), SSL_OP_NO_RENEGOTIATION);
    if (role_ == ssl::stream_base::server) {
      SSL_set_accept_state(ssl_.get());
      SSL_set_num_tickets(ssl_.get(), 0);  // clients never resume a session
    } else {
      SSL_set_connect_state(ssl_.get());
    }
    if (role_ == ssl::stream_base::client && !hostName.empty()) {
      // SNI, and the name (or IP address) the certificate must carry.
      SSL_set_tlsext_host_name(ssl_.get(), hostName.c_str());
      SSL_set1_host(ssl_.get(), hostName.c_str());
    }
  }

  // The client handshakes at once, so a refused certificate is reported by connect. An accepted
  // connection handshakes on its first send or receive, whichever thread comes first.
  void handshake() {
    if (handshaken_.load(std::memory_order_acquire)) return;
    std::lock_guard lock(handshakeMutex_);
    if (handshaken_) return;
    // Bounded by the receive timeout; on the server, a peer that never completes it (one not
    // speaking TLS, or trickling) is closed by gpupoold's handshake deadline
    // (--handshake-deadline-ms), whose shutdown() wakes this wait.
    auto ec = drive([](SSL* ssl) { return SSL_do_handshake(ssl); }, receiveTimeoutMs_.load());
    if (ec) {
      // The peer learns at once (the connection object may outlive this failure for a while).
      shutdown();
      throw TransportError(TransportError::Kind::kUnavailable,
                           "TLS handshake with " + peer_ + " failed: " + describe(ec));
    }
    handshaken_.store(true, std::memory_order_release);
  }

  void shutdown() override {
    // Shutting the socket (not the TLS session) wakes a thread polling it.
    ::shutdown(bio_.fd, SHUT_RDWR);
  }

  std::string kind() const override { return "tls"; }
  std::string peer() const override { return peer_; }
  bool fullDuplex() const override { return true; }
  int readinessDescriptor() const override { return bio_.fd; }

  void setReceiveTimeoutMs(unsigned ms) override { receiveTimeoutMs_ = ms; }
  // The heartbeat of the TCP connection underneath (transport/tcp_peer_watch.h).
  void setDeadPeerTimeoutMs(unsigned ms) override { watch_.arm(bio_.fd, ms); }
  void checkPeer() override { watch_.look(); }

 protected:
  // Each SSL_write is at least one TLS record, so small parts (headers, messages) are gathered into
  // one; large ones (bulk) go without an extra copy.
  void writeAll(std::span<const ConstBuffer> parts) override {
    handshake();
    small_.clear();
    for (auto& b : parts) {
      if (b.size < kSmallPartBytes) {
        const auto* bytes = static_cast<const uint8_t*>(b.data);
        small_.insert(small_.end(), bytes, bytes + b.size);
        continue;
      }
      writeRecords(small_.data(), small_.size());
      small_.clear();
      writeRecords(b.data, b.size);
    }
    writeRecords(small_.data(), small_.size());
  }

  size_t readSome(void* dst, size_t max) override {
    handshake();
    size_t n = 0;
    auto ec = drive([&](SSL* ssl) { return SSL_read_ex(ssl, dst, max, &n); }, receiveTimeoutMs_);
    if (ec) failed("receive", ec);
    return n;
  }

  // The handshake, then records, as far as the bytes that have arrived go. A handshake that must
  // write while the socket is full waits for it (it is a few KiB, so that is rare and brief).
  size_t readAvailable(void* dst, size_t max) override {
    if (!handshaken_.load(std::memory_order_acquire)) {
      std::lock_guard handshaking(handshakeMutex_);
      std::lock_guard lock(sslMutex_);
      if (!handshaken_.load(std::memory_order_relaxed)) {
        if (!attempt([](SSL* ssl) { return SSL_do_handshake(ssl); }, "TLS handshake with " + peer_))
          return 0;
        handshaken_.store(true, std::memory_order_release);
      }
    }
    std::lock_guard lock(sslMutex_);
    size_t n = 0;
    if (!attempt([&](SSL* ssl) { return SSL_read_ex(ssl, dst, max, &n); }, "receive")) return 0;
    return n;
  }

 private:
  // Runs `call` once, under sslMutex_: true when it succeeded, false when it must wait for bytes
  // from the peer. Throws TransportError on failure, naming `what`.
  template <class Call>
  bool attempt(Call call, const std::string& what) {
    for (;;) {
      ERR_clear_error();
      bio_.lastErrno = 0;
      int result = call(ssl_.get());
      if (result > 0) return true;
      int error = SSL_get_error(ssl_.get(), result);
      if (error == SSL_ERROR_WANT_READ) return false;
      if (error != SSL_ERROR_WANT_WRITE) {
        auto ec = failure(error);
        throw TransportError(channelErrorKind(ec), what + " failed: " + describe(ec));
      }
      pollfd p{bio_.fd, POLLOUT, 0};
      if (::poll(&p, 1, kHandshakeWriteWaitMs) == 0)
        throw TransportError(TransportError::Kind::kTimeout,
                             what + " failed: the peer reads nothing");
    }
  }

  static constexpr size_t kSmallPartBytes = 16 * 1024;
  static constexpr int kHandshakeWriteWaitMs = 5000;

  void writeRecords(const void* data, size_t size) {
    const auto* bytes = static_cast<const uint8_t*>(data);
    while (size > 0) {
      size_t n = 0;
      // Retried with the same arguments after a wait, as OpenSSL requires.
      auto ec = drive([&](SSL* ssl) { return SSL_write_ex(ssl, bytes, size, &n); }, 0);
      if (ec) failed("send", ec);
      bytes += n;
      size -= n;
    }
  }

  // Runs `call` (an SSL function: > 0 on success) under sslMutex_ until it succeeds, waiting for
  // the socket between tries without the lock. Returns why it failed; would_block when the socket
  // stayed unreadable for `readTimeoutMs` (0 = forever).
  template <class Call>
  boost::system::error_code drive(Call call, unsigned readTimeoutMs) {
    for (;;) {
      short await = 0;
      {
        std::lock_guard lock(sslMutex_);
        ERR_clear_error();
        bio_.lastErrno = 0;
        int result = call(ssl_.get());
        if (result > 0) return {};
        int error = SSL_get_error(ssl_.get(), result);
        if (error == SSL_ERROR_WANT_READ) {
          await = POLLIN;
        } else if (error == SSL_ERROR_WANT_WRITE) {
          await = POLLOUT;
        } else {
          return failure(error);
        }
      }
      // A shutdown() makes the socket readable and writable (and POLLHUP), so this returns.
      // While the heartbeat is armed the wait looks at the peer every look interval.
      int waitMs = await == POLLIN && readTimeoutMs ? static_cast<int>(readTimeoutMs) : -1;
      int ready;
      do {
        ready = watch_.poll(bio_.fd, await, waitMs, await == POLLOUT ? "send" : "receive");
      } while (ready < 0 && errno == EINTR);
      if (ready == 0) return asio::error::would_block;
    }
  }

  // A failed send or receive: the heartbeat's judgement when it shut the socket down.
  [[noreturn]] void failed(const char* what, const boost::system::error_code& ec) const {
    if (std::string gone = watch_.gone(); !gone.empty())
      throw TransportError(TransportError::Kind::kTimeout, std::string(what) + " failed: " + gone);
    throw TransportError(channelErrorKind(ec), std::string(what) + " failed: " + describe(ec));
  }

  // Why an SSL call failed, as the error codes Asio's ssl::stream gave (describe() words them).
  // Called under sslMutex_, right after the call.
  boost::system::error_code failure(int sslError) const {
    if (sslError == SSL_ERROR_ZERO_RETURN) return asio::error::eof;  // the peer's close_notify
    if (sslError == SSL_ERROR_SYSCALL && bio_.lastErrno)
      return {bio_.lastErrno, boost::system::system_category()};
    if (bio_.eof) return ssl::error::stream_truncated;  // closed without close_notify
    if (unsigned long code = ERR_get_error())
      return {static_cast<int>(code), asio::error::get_ssl_category()};
    return ssl::error::unspecified_system_error;
  }

  std::shared_ptr<asio::io_context> io_;
  std::shared_ptr<ssl::context> context_;
  tcp::socket socket_;
  std::unique_ptr<SSL, decltype(&SSL_free)> ssl_;  // after socket_: freed before it closes
  ssl::stream_base::handshake_type role_;
  std::string peer_;
  std::mutex sslMutex_;  // held while an SSL call runs on ssl_ (and bio_), never while waiting
  SocketBioState bio_;
  std::mutex handshakeMutex_;
  std::atomic<bool> handshaken_{false};
  std::atomic<unsigned> receiveTimeoutMs_{0};  // 0: wait forever; set from either side
  std::vector<uint8_t> small_;                 // small parts of one write, gathered (send side)
  TcpPeerWatch watch_;
};

class TlsListener final : public Listener {
 public:
  TlsListener(const Endpoint& endpoint, std::shared_ptr<ssl::context> context)
      : context_(std::move(context)),
        io_(std::make_shared<asio::io_context>()),
        acceptor_(openTcpAcceptor(*io_, endpoint)),
        url_(boundEndpoint(acceptor_, endpoint).url()) {}

  std::unique_ptr<Connection> accept() override {
    int fd = ::accept4(acceptor_.native_handle(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0)
      throw TransportError(TransportError::Kind::kUnavailable,
                           std::string("accept failed: ") + std::strerror(errno));
    tcp::socket socket(*io_);
    boost::system::error_code ec;
    socket.assign(acceptor_.local_endpoint().protocol(), fd, ec);
    if (ec)
      throw TransportError(TransportError::Kind::kUnavailable, "accept failed: " + ec.message());
    return std::make_unique<TlsConnection>(io_, context_, std::move(socket),
                                           ssl::stream_base::server, "");
  }

  void shutdown() override { ::shutdown(acceptor_.native_handle(), SHUT_RDWR); }
  std::string url() const override { return url_; }

 private:
  std::shared_ptr<ssl::context> context_;
  std::shared_ptr<asio::io_context> io_;  // shared with the connections it accepts
  tcp::acceptor acceptor_;
  std::string url_;
};

bool verificationDisabled() {
  const char* v = std::getenv("GPU_POOL_TLS_VERIFY");
  return v && std::string(v) == "0";
}

}  // namespace

std::unique_ptr<Connection> tlsConnect(const Endpoint& endpoint, unsigned timeoutMs) {
  if (endpoint.scheme != "tls")
    throw TransportError(TransportError::Kind::kUnavailable,
                         "not a tls endpoint: " + endpoint.url());
  auto context = std::make_shared<ssl::context>(ssl::context::tls_client);
  context->set_options(ssl::context::no_sslv2 | ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                       ssl::context::no_tlsv1_1);
  boost::system::error_code ec;
  if (verificationDisabled()) {
    context->set_verify_mode(ssl::verify_none);
  } else {
    context->set_verify_mode(ssl::verify_peer);
    if (const char* ca = std::getenv("GPU_POOL_TLS_CA"); ca && *ca) {
      context->load_verify_file(ca, ec);
      if (ec)
        throw TransportError(TransportError::Kind::kUnavailable,
                             std::string("GPU_POOL_TLS_CA=") + ca + ": " + ec.message());
    } else {
      context->set_default_verify_paths(ec);
    }
  }
  auto io = connectorIoContext();
  tcp::socket socket = connectTcpSocket(*io, endpoint, timeoutMs);
  auto connection = std::make_unique<TlsConnection>(std::move(io), context, std::move(socket),
                                                    ssl::stream_base::client,
                                                    verificationDisabled() ? "" : endpoint.host);
  if (timeoutMs) connection->setReceiveTimeoutMs(timeoutMs);
  connection->handshake();
  connection->setReceiveTimeoutMs(0);
  return connection;
}

std::unique_ptr<Listener> tlsListen(const Endpoint& endpoint, const TlsServerFiles& files) {
  if (endpoint.scheme != "tls")
    throw TransportError(TransportError::Kind::kUnavailable,
                         "not a tls endpoint: " + endpoint.url());
  auto context = std::make_shared<ssl::context>(ssl::context::tls_server);
  context->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                       ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 |
                       ssl::context::single_dh_use);
  boost::system::error_code ec;
  context->use_certificate_chain_file(files.certificateChain, ec);
  if (ec)
    throw TransportError(TransportError::Kind::kUnavailable,
                         "TLS certificate " + files.certificateChain + ": " + ec.message());
  context->use_private_key_file(files.privateKey, ssl::context::pem, ec);
  if (ec)
    throw TransportError(TransportError::Kind::kUnavailable,
                         "TLS key " + files.privateKey + ": " + ec.message());
  return std::make_unique<TlsListener>(endpoint, std::move(context));
}

}  // namespace gpupool::transport
