// Hostile or broken clients at the wire level: the server refuses them with a reason where it
// can, drops them where it cannot, and in every case stays up for the next well-behaved client.
#include <arpa/inet.h>
#include <capnp/message.h>
#include <cuda.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>

#include "build_paths.h"
#include "child_process.h"
#include "gpupool_server.h"
#include "protocol/message_codec.h"
#include "transport/tcp_transport.h"

namespace gpupool::e2e {
namespace {

using std::chrono::seconds;

std::unique_ptr<transport::Connection> connectTo(const GpupoolServer& server) {
  std::string error;
  auto endpoint = transport::parseEndpoint(server.endpoint(), &error);
  if (!endpoint) throw std::runtime_error(error);
  auto connection = transport::tcpConnect(*endpoint, 5000);
  // A server that stops answering fails the test instead of hanging it.
  connection->setReceiveTimeoutMs(10000);
  return connection;
}

void sendHello(transport::Connection& connection, uint32_t version) {
  capnp::MallocMessageBuilder builder;
  auto hello = builder.initRoot<wire::Request>().initHello();
  hello.setProtocolVersion(version);
  hello.setPurpose(wire::Hello::Purpose::STATUS);
  hello.setClientName("malformed_traffic_test");
  protocol::sendMessage(connection, builder);
}

void sendRawFrame(transport::Connection& connection, const std::vector<uint64_t>& words) {
  transport::ConstBuffer parts[] = {{words.data(), words.size() * sizeof(uint64_t)}};
  connection.sendFrame(parts, {});
}

// Says a good Hello and checks the Welcome.
void handshake(transport::Connection& connection) {
  sendHello(connection, wire::PROTOCOL_VERSION);
  protocol::IncomingMessage in(connection);
  auto response = in.root<wire::Response>();
  ASSERT_EQ(response.getResult(), CUDA_SUCCESS) << response.getMessage().cStr();
  ASSERT_EQ(response.which(), wire::Response::WELCOME);
}

// Asks for the status on an established session: proof the session still works.
void expectStatusAnswered(transport::Connection& connection) {
  capnp::MallocMessageBuilder builder;
  builder.initRoot<wire::Request>().setStatus();
  protocol::sendMessage(connection, builder);
  protocol::IncomingMessage in(connection);
  auto response = in.root<wire::Response>();
  EXPECT_EQ(response.getResult(), CUDA_SUCCESS) << response.getMessage().cStr();
  EXPECT_EQ(response.which(), wire::Response::STATUS);
}

// Shuts `connection` down if it is still in use after `limit`, so that a server which never
// answers (or never closes) fails the test instead of hanging it.
class ConnectionWatchdog {
 public:
  ConnectionWatchdog(transport::Connection& connection, seconds limit)
      : thread_([this, &connection, limit] {
          std::unique_lock lock(mutex_);
          if (!wake_.wait_for(lock, limit, [this] { return done_; })) {
            fired_ = true;
            connection.shutdown();
          }
        }) {}
  ~ConnectionWatchdog() { stop(); }
  // Stops watching; returns whether the watchdog had to shut the connection down.
  bool stop() {
    {
      std::lock_guard lock(mutex_);
      done_ = true;
    }
    wake_.notify_one();
    if (thread_.joinable()) thread_.join();
    return fired_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable wake_;
  bool done_ = false;
  bool fired_ = false;
  std::thread thread_;
};

// The server ended the connection: the next receive fails rather than waiting forever.
void expectClosedByServer(transport::Connection& connection) {
  ConnectionWatchdog watchdog(connection, seconds(10));
  EXPECT_THROW(connection.receiveFrame(), transport::TransportError);
  EXPECT_FALSE(watchdog.stop()) << "the server kept the connection open after refusing it";
}

// The server still serves: a fresh status handshake works and a real program passes (vector_add:
// copies both ways and a kernel, in 0.3 s where memory_roundtrip's 256 MiB took 9 s per test).
void expectServerHealthy(GpupoolServer& server) {
  ASSERT_TRUE(server.running()) << server.log();
  auto connection = connectTo(server);
  handshake(*connection);
  expectStatusAnswered(*connection);
  ProgramResult result =
      runProgram(programPath("vector_add"), {}, clientEnvironment(server.endpoint()));
  EXPECT_TRUE(result.passed()) << result.describe();
}

class RawSocket {
 public:
  explicit RawSocket(uint16_t port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      throw std::runtime_error(std::string("raw connect failed: ") + std::strerror(errno));
    }
  }
  ~RawSocket() { ::close(fd_); }
  void write(const void* data, size_t size) {
    ASSERT_EQ(::send(fd_, data, size, MSG_NOSIGNAL), static_cast<ssize_t>(size));
  }
  // Whether the peer closed the connection within `timeoutMs` (reads and drops any bytes).
  bool closedByPeerWithin(int timeoutMs) {
    pollfd p{fd_, POLLIN, 0};
    while (::poll(&p, 1, timeoutMs) > 0) {
      char buffer[4096];
      ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
      if (n <= 0) return true;
    }
    return false;
  }

 private:
  int fd_;
};

TEST(MalformedTrafficTest, GarbageBytesAreDropped) {
  GpupoolServer server;
  {
    RawSocket raw(server.port());
    const char garbage[] =
        "GET / HTTP/1.1\r\nHost: gpupool\r\n\r\n................................";
    raw.write(garbage, sizeof garbage);
    EXPECT_TRUE(raw.closedByPeerWithin(10000)) << "the server kept a garbage connection open";
  }
  {
    // A valid header that promises more than it sends, then silence from a vanished peer.
    RawSocket raw(server.port());
    transport::FrameHeader header{transport::kFrameMagic, 4096, 1ull << 40};
    raw.write(&header, sizeof header);
  }
  expectServerHealthy(server);
}

TEST(MalformedTrafficTest, GarbageHelloIsRefused) {
  GpupoolServer server;
  {
    auto connection = connectTo(server);
    // One segment of two words whose root pointer points far outside the message.
    sendRawFrame(*connection, {0x0000000200000000ull, (1000ull << 2) | (1ull << 32), 0});
    protocol::IncomingMessage in(*connection);
    auto response = in.root<wire::Response>();
    EXPECT_NE(response.getResult(), CUDA_SUCCESS);
    EXPECT_NE(std::string(response.getMessage().cStr()).find("malformed"), std::string::npos)
        << response.getMessage().cStr();
    expectClosedByServer(*connection);
  }
  expectServerHealthy(server);
}

TEST(MalformedTrafficTest, GarbageMessageInAValidFrameIsAnsweredAndTheSessionGoesOn) {
  GpupoolServer server;
  auto connection = connectTo(server);
  handshake(*connection);
  sendRawFrame(*connection, {0x0000000200000000ull, (1000ull << 2) | (1ull << 32), 0});
  {
    protocol::IncomingMessage in(*connection);
    auto response = in.root<wire::Response>();
    EXPECT_EQ(response.getResult(), CUDA_ERROR_INVALID_VALUE);
    EXPECT_NE(std::string(response.getMessage().cStr()).find("malformed"), std::string::npos)
        << response.getMessage().cStr();
  }
  expectStatusAnswered(*connection);
  expectServerHealthy(server);
}

TEST(MalformedTrafficTest, GarbageSegmentTableInAValidFrameIsAnswered) {
  GpupoolServer server;
  auto connection = connectTo(server);
  handshake(*connection);
  // The segment table claims four billion segments.
  sendRawFrame(*connection, {0x00000000fffffffeull, 0, 0, 0});
  {
    ConnectionWatchdog watchdog(*connection, seconds(10));
    std::optional<protocol::IncomingMessage> answer;
    try {
      answer.emplace(*connection);
    } catch (const transport::TransportError& e) {
      FAIL() << "no answer to a malformed message (" << e.what() << "); the session was dropped";
    }
    ASSERT_FALSE(watchdog.stop()) << "no answer to a malformed message within 10 s";
    protocol::IncomingMessage& in = *answer;
    auto response = in.root<wire::Response>();
    EXPECT_EQ(response.getResult(), CUDA_ERROR_INVALID_VALUE);
    EXPECT_NE(std::string(response.getMessage().cStr()).find("malformed"), std::string::npos)
        << response.getMessage().cStr();
  }
  expectStatusAnswered(*connection);
  expectServerHealthy(server);
}

TEST(MalformedTrafficTest, WrongProtocolVersionIsRefusedNamingBothVersions) {
  GpupoolServer server;
  {
    auto connection = connectTo(server);
    constexpr uint32_t kFutureVersion = 4242;
    sendHello(*connection, kFutureVersion);
    protocol::IncomingMessage in(*connection);
    auto response = in.root<wire::Response>();
    EXPECT_EQ(response.getResult(), CUDA_ERROR_NOT_SUPPORTED);
    std::string message = response.getMessage().cStr();
    EXPECT_NE(message.find("version " + std::to_string(kFutureVersion)), std::string::npos)
        << message;
    EXPECT_NE(message.find("version " + std::to_string(wire::PROTOCOL_VERSION)), std::string::npos)
        << message;
    expectClosedByServer(*connection);
  }
  expectServerHealthy(server);
}

TEST(MalformedTrafficTest, RequestBeforeHelloIsRefused) {
  GpupoolServer server;
  {
    auto connection = connectTo(server);
    capnp::MallocMessageBuilder builder;
    builder.initRoot<wire::Request>().setCtxSynchronize(1);
    protocol::sendMessage(*connection, builder);
    protocol::IncomingMessage in(*connection);
    auto response = in.root<wire::Response>();
    EXPECT_NE(response.getResult(), CUDA_SUCCESS);
    EXPECT_NE(std::string(response.getMessage().cStr()).find("Hello"), std::string::npos)
        << response.getMessage().cStr();
    expectClosedByServer(*connection);
  }
  expectServerHealthy(server);
}

}  // namespace
}  // namespace gpupool::e2e
