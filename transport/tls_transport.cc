#include "transport/tls_transport.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "transport/asio_error_kind.h"
#include "transport/framed_connection.h"
#include "transport/tcp_acceptor.h"
#include "transport/tcp_connector.h"

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

constexpr unsigned kServerHandshakeMs = 5000;

class TlsConnection final : public FramedConnection {
 public:
  TlsConnection(std::unique_ptr<asio::io_context> io, std::shared_ptr<ssl::context> context,
                tcp::socket socket, ssl::stream_base::handshake_type role,
                const std::string& hostName)
      : io_(std::move(io)),
        context_(std::move(context)),
        stream_(std::move(socket), *context_),
        role_(role) {
    boost::system::error_code ec;
    stream_.lowest_layer().set_option(tcp::no_delay(true), ec);
    auto ep = stream_.lowest_layer().remote_endpoint(ec);
    peer_ = ec ? "unknown" : ep.address().to_string() + ":" + std::to_string(ep.port());
    if (role_ == ssl::stream_base::client && !hostName.empty()) {
      // SNI, and the name the certificate must carry.
      SSL_set_tlsext_host_name(stream_.native_handle(), hostName.c_str());
      stream_.set_verify_callback(ssl::host_name_verification(hostName));
    }
  }

  ~TlsConnection() override {
    boost::system::error_code ec;
    stream_.lowest_layer().close(ec);
  }

  // The client handshakes at once, so a refused certificate is reported by connect.
  void handshake() {
    if (handshaken_) return;
    boost::system::error_code ec;
    // A peer that is not speaking TLS (e.g. a tcp:// client) must not hold a session forever.
    if (role_ == ssl::stream_base::server) setReceiveTimeoutMs(kServerHandshakeMs);
    stream_.handshake(role_, ec);
    if (ec) {
      // The peer learns at once (the connection object may outlive this failure for a while).
      shutdown();
      throw TransportError(TransportError::Kind::kUnavailable,
                           "TLS handshake with " + peer_ + " failed: " + describe(ec));
    }
    if (role_ == ssl::stream_base::server) setReceiveTimeoutMs(0);
    handshaken_ = true;
  }

  void shutdown() override {
    // Shutting the socket (not the TLS session) wakes a blocked read on another thread.
    ::shutdown(stream_.lowest_layer().native_handle(), SHUT_RDWR);
  }

  std::string kind() const override { return "tls"; }
  std::string peer() const override { return peer_; }

  void setReceiveTimeoutMs(unsigned ms) override {
    timeval tv{static_cast<time_t>(ms / 1000), static_cast<suseconds_t>((ms % 1000) * 1000)};
    ::setsockopt(stream_.lowest_layer().native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }

 protected:
  // Asio writes one TLS record per buffer, so small parts (headers, messages) are gathered into one
  // record; large ones (bulk) go without an extra copy.
  void writeAll(std::span<const ConstBuffer> parts) override {
    handshake();
    small_.clear();
    for (auto& b : parts) {
      if (b.size < kSmallPartBytes) {
        const auto* bytes = static_cast<const uint8_t*>(b.data);
        small_.insert(small_.end(), bytes, bytes + b.size);
        continue;
      }
      writeRecord(small_.data(), small_.size());
      small_.clear();
      writeRecord(b.data, b.size);
    }
    writeRecord(small_.data(), small_.size());
  }

  size_t readSome(void* dst, size_t max) override {
    handshake();
    boost::system::error_code ec;
    size_t n = stream_.read_some(asio::buffer(dst, max), ec);
    if (ec) throw TransportError(channelErrorKind(ec), "receive failed: " + describe(ec));
    return n;
  }

 private:
  static constexpr size_t kSmallPartBytes = 16 * 1024;

  void writeRecord(const void* data, size_t size) {
    if (!size) return;
    boost::system::error_code ec;
    asio::write(stream_, asio::buffer(data, size), ec);
    if (ec) throw TransportError(channelErrorKind(ec), "send failed: " + describe(ec));
  }

  std::unique_ptr<asio::io_context> io_;
  std::shared_ptr<ssl::context> context_;
  ssl::stream<tcp::socket> stream_;
  ssl::stream_base::handshake_type role_;
  bool handshaken_ = false;
  std::string peer_;
  std::vector<uint8_t> small_;  // small parts of one write, gathered
};

class TlsListener final : public Listener {
 public:
  TlsListener(const Endpoint& endpoint, std::shared_ptr<ssl::context> context)
      : context_(std::move(context)),
        io_(std::make_unique<asio::io_context>()),
        acceptor_(openTcpAcceptor(*io_, endpoint)),
        url_(boundEndpoint(acceptor_, endpoint).url()) {}

  std::unique_ptr<Connection> accept() override {
    int fd = ::accept4(acceptor_.native_handle(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0)
      throw TransportError(TransportError::Kind::kUnavailable,
                           std::string("accept failed: ") + std::strerror(errno));
    auto io = std::make_unique<asio::io_context>();
    tcp::socket socket(*io);
    boost::system::error_code ec;
    socket.assign(acceptor_.local_endpoint().protocol(), fd, ec);
    if (ec)
      throw TransportError(TransportError::Kind::kUnavailable, "accept failed: " + ec.message());
    return std::make_unique<TlsConnection>(std::move(io), context_, std::move(socket),
                                           ssl::stream_base::server, "");
  }

  void shutdown() override { ::shutdown(acceptor_.native_handle(), SHUT_RDWR); }
  std::string url() const override { return url_; }

 private:
  std::shared_ptr<ssl::context> context_;
  std::unique_ptr<asio::io_context> io_;
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
  auto io = std::make_unique<asio::io_context>();
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
