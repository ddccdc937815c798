// Frames taken in without waiting (Connection::frameArrived, what gpupoold's event loop serves
// from) over TCP, TLS and shared memory on loopback: a frame counts as arrived only once its whole
// message is here, however its bytes trickle; a message larger than the receive buffer still
// arrives; the TLS handshake itself advances this way; several queued frames come out one by one;
// idle memory given back comes back when needed; a peer gone or a broken header is an error, not a
// frame.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <future>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "loopback_pair.h"
#include "transport/framed_connection.h"
#include "transport/transport_factory.h"

namespace gpupool::transport {
namespace {

using std::chrono::milliseconds;

// Waits (polling the readiness descriptor, as the event loop does) until a frame has arrived.

// The server side of a connection whose client is a bare socket, for bytes no Connection sends.
struct RawClient {
  std::unique_ptr<Listener> listener = listenOnLoopback("tcp");
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  std::unique_ptr<Connection> server;

  RawClient() {
    std::string error;
    Endpoint endpoint = parseEndpoint(listener->url(), &error).value();
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(endpoint.port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0)
      throw std::runtime_error("connect failed");
    server = listener->accept();
    server->setReceiveTimeoutMs(20000);
  }
  ~RawClient() { ::close(fd); }
  void send(const void* data, size_t size) {
    ASSERT_EQ(::send(fd, data, size, MSG_NOSIGNAL), static_cast<ssize_t>(size));
  }
};

std::vector<uint8_t> frameBytes(const std::vector<uint64_t>& message, const std::string& bulk) {
  FrameHeader header{kFrameMagic, static_cast<uint32_t>(message.size() * 8), bulk.size()};
  std::vector<uint8_t> bytes(sizeof header + message.size() * 8 + bulk.size());
  uint8_t* at = bytes.data();
  std::memcpy(at, &header, sizeof header);
  at += sizeof header;
  std::memcpy(at, message.data(), message.size() * 8);
  at += message.size() * 8;
  std::memcpy(at, bulk.data(), bulk.size());
  return bytes;
}

TEST(FrameArrivalTest, TrickledFrameArrivesOnlyWhenItsWholeMessageHas) {
  RawClient raw;
  auto message = words(5, 100);
  auto bytes = frameBytes(message, "bulk!");
  size_t messageEnd = bytes.size() - 5;
  for (size_t i = 0; i < messageEnd; ++i) {
    EXPECT_FALSE(raw.server->frameArrived()) << "after " << i << " bytes";
    raw.send(&bytes[i], 1);
    std::this_thread::sleep_for(milliseconds(1));
  }
  waitForFrame(*raw.server);
  // The bulk is not needed for the frame to count; it is read (waiting) afterwards.
  std::thread rest([&] {
    std::this_thread::sleep_for(milliseconds(50));
    raw.send(&bytes[messageEnd], 5);
  });
  ReceivedFrame frame = raw.server->receiveFrame();
  EXPECT_EQ(asWords(frame.message), message);
  ASSERT_EQ(frame.bulkBytes, 5u);
  char bulk[5];
  raw.server->receiveBulk(bulk, 5);
  rest.join();
  EXPECT_EQ(std::string(bulk, 5), "bulk!");
  EXPECT_FALSE(raw.server->frameArrived());
}

TEST(FrameArrivalTest, BrokenHeaderIsAnErrorNotAFrame) {
  RawClient raw;
  const char junk[16] = {'H', 'T', 'T', 'P'};
  raw.send(junk, sizeof junk);
  try {
    waitForFrame(*raw.server);
    ADD_FAILURE() << "a frame with a bad magic arrived";
  } catch (const TransportError& e) {
    EXPECT_EQ(e.kind(), TransportError::Kind::kMalformed) << e.what();
  }
}

class FrameArrivalOverTest : public ::testing::TestWithParam<std::string> {};
INSTANTIATE_TEST_SUITE_P(ByteStreams, FrameArrivalOverTest, ::testing::Values("tcp", "tls", "shm"),
                         [](const auto& info) { return info.param; });

// The server never receives in the blocking way: the TLS handshake, a message larger than the
// receive buffer with bulk behind it, queued frames, and memory given back between them.
TEST_P(FrameArrivalOverTest, HandshakeLargeMessageAndQueuedFramesWithoutBlockingReads) {
  auto listener = listenOnLoopback(GetParam());
  std::string error;
  Endpoint endpoint = parseEndpoint(listener->url(), &error).value();
  auto large = words(300 * 1024, 7);  // 2.4 MB of message
  std::string bulk(3 << 20, 'b');
  auto connecting = std::async(std::launch::async, [&] {
    auto client = connectEndpoint(endpoint, 20000);
    ConstBuffer message{large.data(), large.size() * 8};
    ConstBuffer bulkPart{bulk.data(), bulk.size()};
    client->sendFrame(std::span(&message, 1), std::span(&bulkPart, 1));
    for (uint64_t i = 0; i < 3; ++i) {
      ConstBuffer small{&i, sizeof i};
      client->sendFrameLater(std::span(&small, 1), {});
    }
    client->flush();
    return client;
  });
  auto server = listener->accept();
  server->setReceiveTimeoutMs(20000);
  ASSERT_GE(server->readinessDescriptor(), 0);

  waitForFrame(*server);
  ReceivedFrame frame = server->receiveFrame();
  EXPECT_EQ(asWords(frame.message), large);
  ASSERT_EQ(frame.bulkBytes, bulk.size());
  std::string got(bulk.size(), '\0');
  server->receiveBulk(got.data(), got.size());
  EXPECT_EQ(got, bulk);
  for (uint64_t i = 0; i < 3; ++i) {
    server->releaseIdleMemory();
    waitForFrame(*server);
    EXPECT_EQ(asWords(server->receiveFrame().message), std::vector<uint64_t>{i});
  }
  auto client = connecting.get();
  server->releaseIdleMemory();
  EXPECT_FALSE(server->frameArrived());

  // Replies go the other way as before.
  uint64_t answer = 42;
  ConstBuffer reply{&answer, sizeof answer};
  server->sendFrame(std::span(&reply, 1), {});
  client->setReceiveTimeoutMs(20000);
  EXPECT_EQ(asWords(client->receiveFrame().message), std::vector<uint64_t>{42});
}

TEST_P(FrameArrivalOverTest, PeerGoneIsAnError) {
  ConnectedPair pair = connectedPair(GetParam());
  pair.client.reset();
  try {
    waitForFrame(*pair.server);
    ADD_FAILURE() << "a frame arrived from a closed connection";
  } catch (const TransportError& e) {
    EXPECT_EQ(e.kind(), TransportError::Kind::kDisconnected) << e.what();
  }
}

}  // namespace
}  // namespace gpupool::transport
