// The TCP transport over real loopback sockets: framing, bulk handling, large payloads, and that
// every way a peer can misbehave ends in TransportError instead of a hang or a crash.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "transport/tcp_transport.h"

namespace gpupool::transport {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

struct BareTcpPair {
  std::unique_ptr<Listener> listener;
  std::unique_ptr<Connection> client;
  std::unique_ptr<Connection> server;
};

Endpoint endpointOf(const Listener& listener) {
  std::string error;
  auto endpoint = parseEndpoint(listener.url(), &error);
  if (!endpoint) throw std::runtime_error(error);
  return *endpoint;
}

// A TCP pair across which nothing has gone yet (loopback_pair.h's pairs exchange a hello frame).
// Connecting before accept() works because the listener is already listening: the kernel
// completes the handshake into the backlog.
BareTcpPair bareTcpPair() {
  BareTcpPair pair;
  pair.listener = tcpListen(Endpoint{"tcp", "127.0.0.1", 0});
  pair.client = tcpConnect(endpointOf(*pair.listener), 5000);
  pair.server = pair.listener->accept();
  // A broken test must fail, not hang the suite.
  pair.server->setReceiveTimeoutMs(20000);
  pair.client->setReceiveTimeoutMs(20000);
  return pair;
}

// A plain socket, for writing bytes the transport itself would never produce.
class RawSocket {
 public:
  explicit RawSocket(uint16_t port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      throw std::runtime_error(std::string("raw connect: ") + std::strerror(errno));
    }
  }
  ~RawSocket() { close(); }
  void write(const void* data, size_t size) {
    auto* p = static_cast<const char*>(data);
    while (size > 0) {
      ssize_t n = ::send(fd_, p, size, MSG_NOSIGNAL);
      if (n <= 0) throw std::runtime_error("raw write failed");
      p += n;
      size -= static_cast<size_t>(n);
    }
  }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

struct RawPair {
  std::unique_ptr<Listener> listener;
  std::unique_ptr<RawSocket> raw;
  std::unique_ptr<Connection> server;
};

RawPair rawPair() {
  RawPair pair;
  pair.listener = tcpListen(Endpoint{"tcp", "127.0.0.1", 0});
  pair.raw = std::make_unique<RawSocket>(endpointOf(*pair.listener).port);
  pair.server = pair.listener->accept();
  pair.server->setReceiveTimeoutMs(20000);
  return pair;
}

std::vector<std::byte> pattern(size_t size, uint8_t seed) {
  std::vector<std::byte> bytes(size);
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<std::byte>((i * 167 + seed) & 0xff);
  return bytes;
}

std::vector<std::byte> copyOf(std::span<const std::byte> bytes) {
  return {bytes.begin(), bytes.end()};
}

TEST(TcpTransportTest, ListeningOnPortZeroReportsTheRealPort) {
  auto listener = tcpListen(Endpoint{"tcp", "127.0.0.1", 0});
  Endpoint endpoint = endpointOf(*listener);
  EXPECT_EQ(endpoint.scheme, "tcp");
  EXPECT_EQ(endpoint.host, "127.0.0.1");
  EXPECT_NE(endpoint.port, 0);
}

TEST(TcpTransportTest, KindAndPeer) {
  auto pair = bareTcpPair();
  EXPECT_EQ(pair.client->kind(), "tcp");
  EXPECT_NE(pair.server->peer().find("127.0.0.1:"), std::string::npos) << pair.server->peer();
}

TEST(TcpTransportTest, FrameWithoutBulkGathersMessageParts) {
  auto pair = bareTcpPair();
  auto a = pattern(8, 1), b = pattern(24, 2);
  ConstBuffer parts[] = {{a.data(), a.size()}, {b.data(), b.size()}};
  pair.client->sendFrame(parts, {});
  ReceivedFrame frame = pair.server->receiveFrame();
  EXPECT_EQ(frame.bulkBytes, 0u);
  std::vector<std::byte> expected = a;
  expected.insert(expected.end(), b.begin(), b.end());
  EXPECT_EQ(copyOf(frame.message), expected);
  // The message is handed out 8-byte aligned so Cap'n Proto can read it in place.
  EXPECT_EQ(reinterpret_cast<uintptr_t>(frame.message.data()) % 8, 0u);
}

TEST(TcpTransportTest, BulkIsReadInPieces) {
  auto pair = bareTcpPair();
  auto message = pattern(16, 3);
  auto bulk1 = pattern(1000, 4), bulk2 = pattern(7001, 5);
  ConstBuffer messageParts[] = {{message.data(), message.size()}};
  ConstBuffer bulkParts[] = {
      {bulk1.data(), bulk1.size()}, {nullptr, 0}, {bulk2.data(), bulk2.size()}};
  pair.client->sendFrame(messageParts, bulkParts);

  ReceivedFrame frame = pair.server->receiveFrame();
  EXPECT_EQ(copyOf(frame.message), message);
  ASSERT_EQ(frame.bulkBytes, bulk1.size() + bulk2.size());
  std::vector<std::byte> expected = bulk1;
  expected.insert(expected.end(), bulk2.begin(), bulk2.end());
  // Piece sizes deliberately unrelated to how the sender split the bulk.
  std::vector<std::byte> received(expected.size());
  size_t offset = 0;
  for (size_t piece : {1u, 999u, 4000u, 3001u}) {
    pair.server->receiveBulk(received.data() + offset, piece);
    offset += piece;
  }
  ASSERT_EQ(offset, expected.size());
  EXPECT_EQ(received, expected);
}

TEST(TcpTransportTest, DiscardBulkSkipsToTheNextFrame) {
  auto pair = bareTcpPair();
  auto first = pattern(8, 6), second = pattern(32, 7), bulk = pattern(300000, 8);
  ConstBuffer firstParts[] = {{first.data(), first.size()}};
  ConstBuffer bulkParts[] = {{bulk.data(), bulk.size()}};
  ConstBuffer secondParts[] = {{second.data(), second.size()}};
  std::thread sender([&] {
    pair.client->sendFrame(firstParts, bulkParts);
    pair.client->sendFrame(secondParts, {});
  });
  ReceivedFrame frame = pair.server->receiveFrame();
  EXPECT_EQ(copyOf(frame.message), first);
  ASSERT_EQ(frame.bulkBytes, bulk.size());
  std::vector<std::byte> head(100);
  pair.server->receiveBulk(head.data(), head.size());
  EXPECT_TRUE(std::equal(head.begin(), head.end(), bulk.begin()));
  pair.server->discardBulk(bulk.size() - head.size());
  frame = pair.server->receiveFrame();
  EXPECT_EQ(copyOf(frame.message), second);
  EXPECT_EQ(frame.bulkBytes, 0u);
  sender.join();
}

TEST(TcpTransportTest, PendingBulkCountsDown) {
  auto pair = bareTcpPair();
  auto message = pattern(8, 20), bulk = pattern(1000, 21);
  ConstBuffer messageParts[] = {{message.data(), message.size()}};
  ConstBuffer bulkParts[] = {{bulk.data(), bulk.size()}};
  pair.client->sendFrame(messageParts, bulkParts);
  pair.server->receiveFrame();
  EXPECT_EQ(pair.server->pendingBulk(), 1000u);
  std::vector<std::byte> head(300);
  pair.server->receiveBulk(head.data(), head.size());
  EXPECT_EQ(pair.server->pendingBulk(), 700u);
  pair.server->discardBulk(700);
  EXPECT_EQ(pair.server->pendingBulk(), 0u);
}

TEST(TcpTransportTest, QueuedFramesLeaveInOrderWithTheNextSend) {
  auto pair = bareTcpPair();
  auto first = pattern(8, 22), second = pattern(16, 23), third = pattern(24, 24);
  auto bulk = pattern(100, 25);
  ConstBuffer firstParts[] = {{first.data(), first.size()}};
  ConstBuffer secondParts[] = {{second.data(), second.size()}};
  ConstBuffer thirdParts[] = {{third.data(), third.size()}};
  ConstBuffer bulkParts[] = {{bulk.data(), bulk.size()}};
  pair.client->sendFrameLater(firstParts, bulkParts);
  pair.client->sendFrameLater(secondParts, {});
  EXPECT_GT(pair.client->queuedBytes(), first.size() + second.size() + bulk.size());
  pair.client->sendFrame(thirdParts, {});
  EXPECT_EQ(pair.client->queuedBytes(), 0u);

  ReceivedFrame frame = pair.server->receiveFrame();
  EXPECT_EQ(copyOf(frame.message), first);
  ASSERT_EQ(frame.bulkBytes, bulk.size());
  std::vector<std::byte> received(bulk.size());
  pair.server->receiveBulk(received.data(), received.size());
  EXPECT_EQ(received, bulk);
  EXPECT_EQ(copyOf(pair.server->receiveFrame().message), second);
  EXPECT_EQ(copyOf(pair.server->receiveFrame().message), third);
}

TEST(TcpTransportTest, QueuedFramesCopyTheirBytesAndLeaveOnFlush) {
  auto pair = bareTcpPair();
  auto message = pattern(32, 26), bulk = pattern(500, 27);
  auto expectedMessage = message, expectedBulk = bulk;
  ConstBuffer messageParts[] = {{message.data(), message.size()}};
  ConstBuffer bulkParts[] = {{bulk.data(), bulk.size()}};
  pair.client->sendFrameLater(messageParts, bulkParts);
  // The caller may reuse its buffers as soon as sendFrameLater returns.
  std::fill(message.begin(), message.end(), std::byte{0});
  std::fill(bulk.begin(), bulk.end(), std::byte{0});
  pair.client->flush();
  EXPECT_EQ(pair.client->queuedBytes(), 0u);
  ReceivedFrame frame = pair.server->receiveFrame();
  EXPECT_EQ(copyOf(frame.message), expectedMessage);
  ASSERT_EQ(frame.bulkBytes, expectedBulk.size());
  std::vector<std::byte> received(expectedBulk.size());
  pair.server->receiveBulk(received.data(), received.size());
  EXPECT_EQ(received, expectedBulk);
}

TEST(TcpTransportTest, UnconsumedBulkIsAnError) {
  auto pair = bareTcpPair();
  auto message = pattern(8, 9), bulk = pattern(64, 10);
  ConstBuffer messageParts[] = {{message.data(), message.size()}};
  ConstBuffer bulkParts[] = {{bulk.data(), bulk.size()}};
  pair.client->sendFrame(messageParts, bulkParts);
  pair.client->sendFrame(messageParts, {});
  pair.server->receiveFrame();
  EXPECT_THROW(pair.server->receiveFrame(), TransportError);
}

TEST(TcpTransportTest, ReadingPastTheBulkIsAnError) {
  auto pair = bareTcpPair();
  auto message = pattern(8, 11), bulk = pattern(64, 12);
  ConstBuffer messageParts[] = {{message.data(), message.size()}};
  ConstBuffer bulkParts[] = {{bulk.data(), bulk.size()}};
  pair.client->sendFrame(messageParts, bulkParts);
  pair.server->receiveFrame();
  std::vector<std::byte> buffer(65);
  EXPECT_THROW(pair.server->receiveBulk(buffer.data(), 65), TransportError);
  EXPECT_THROW(pair.server->discardBulk(65), TransportError);
}

TEST(TcpTransportTest, ManyFramesInARowArriveInOrder) {
  auto pair = bareTcpPair();
  constexpr uint64_t kFrames = 5000;
  std::thread sender([&] {
    for (uint64_t i = 0; i < kFrames; ++i) {
      uint64_t words[2] = {i, ~i};
      uint32_t bulk = static_cast<uint32_t>(i * 2654435761u);
      ConstBuffer messageParts[] = {{words, sizeof words}};
      ConstBuffer bulkParts[] = {{&bulk, sizeof bulk}};
      pair.client->sendFrame(messageParts, i % 3 == 0 ? std::span<const ConstBuffer>(bulkParts)
                                                      : std::span<const ConstBuffer>());
    }
  });
  for (uint64_t i = 0; i < kFrames; ++i) {
    ReceivedFrame frame = pair.server->receiveFrame();
    ASSERT_EQ(frame.message.size(), 16u);
    uint64_t words[2];
    std::memcpy(words, frame.message.data(), sizeof words);
    ASSERT_EQ(words[0], i);
    ASSERT_EQ(words[1], ~i);
    ASSERT_EQ(frame.bulkBytes, i % 3 == 0 ? 4u : 0u);
    if (frame.bulkBytes) {
      uint32_t bulk = 0;
      pair.server->receiveBulk(&bulk, sizeof bulk);
      ASSERT_EQ(bulk, static_cast<uint32_t>(i * 2654435761u));
    }
  }
  sender.join();
}

TEST(TcpTransportTest, SixtyFourMiBBulkArrivesIntact) {
  auto pair = bareTcpPair();
  constexpr size_t kBytes = 64u << 20;
  auto bulk = pattern(kBytes, 13);
  auto message = pattern(8, 14);
  std::thread sender([&] {
    ConstBuffer messageParts[] = {{message.data(), message.size()}};
    ConstBuffer bulkParts[] = {{bulk.data(), bulk.size()}};
    pair.client->sendFrame(messageParts, bulkParts);
  });
  ReceivedFrame frame = pair.server->receiveFrame();
  ASSERT_EQ(frame.bulkBytes, kBytes);
  std::vector<std::byte> received(kBytes);
  pair.server->receiveBulk(received.data(), received.size());
  sender.join();
  EXPECT_TRUE(received == bulk);
}

TEST(TcpTransportTest, PeerCloseIsATransportErrorNotAHang) {
  auto pair = bareTcpPair();
  auto start = steady_clock::now();
  pair.client.reset();
  try {
    pair.server->receiveFrame();
    FAIL() << "receiveFrame returned after the peer closed";
  } catch (const TransportError& e) {
    EXPECT_NE(std::string(e.what()).find("closed"), std::string::npos) << e.what();
  }
  EXPECT_LT(steady_clock::now() - start, milliseconds(5000));
}

TEST(TcpTransportTest, PeerCloseInsideTheBulkIsATransportError) {
  auto pair = rawPair();
  FrameHeader header{kFrameMagic, 8, 1000};
  uint64_t message = 42;
  char partialBulk[10] = {};
  pair.raw->write(&header, sizeof header);
  pair.raw->write(&message, sizeof message);
  pair.raw->write(partialBulk, sizeof partialBulk);
  pair.raw->close();
  ReceivedFrame frame = pair.server->receiveFrame();
  EXPECT_EQ(frame.bulkBytes, 1000u);
  std::vector<char> buffer(1000);
  EXPECT_THROW(pair.server->receiveBulk(buffer.data(), buffer.size()), TransportError);
}

TEST(TcpTransportTest, GarbageHeaderIsATransportError) {
  auto pair = rawPair();
  const char garbage[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  pair.raw->write(garbage, sizeof garbage);
  try {
    pair.server->receiveFrame();
    FAIL() << "garbage accepted as a frame";
  } catch (const TransportError& e) {
    EXPECT_NE(std::string(e.what()).find("magic"), std::string::npos) << e.what();
  }
}

TEST(TcpTransportTest, MessageSizeNotAWholeNumberOfWordsIsATransportError) {
  auto pair = rawPair();
  FrameHeader header{kFrameMagic, 12, 0};
  pair.raw->write(&header, sizeof header);
  char message[12] = {};
  pair.raw->write(message, sizeof message);
  EXPECT_THROW(pair.server->receiveFrame(), TransportError);
}

TEST(TcpTransportTest, OversizedMessageHeaderIsRefusedBeforeAllocating) {
  auto pair = rawPair();
  FrameHeader header{kFrameMagic, static_cast<uint32_t>(kMaxMessageBytes + 8), 0};
  pair.raw->write(&header, sizeof header);
  try {
    pair.server->receiveFrame();
    FAIL() << "oversized message accepted";
  } catch (const TransportError& e) {
    EXPECT_NE(std::string(e.what()).find("message size"), std::string::npos) << e.what();
  }
}

TEST(TcpTransportTest, OversizedMessageIsRefusedBySender) {
  auto pair = bareTcpPair();
  std::vector<std::byte> big(kMaxMessageBytes + 8);
  ConstBuffer parts[] = {{big.data(), big.size()}};
  EXPECT_THROW(pair.client->sendFrame(parts, {}), TransportError);
}

TEST(TcpTransportTest, ReceiveTimeout) {
  auto pair = bareTcpPair();
  pair.server->setReceiveTimeoutMs(200);
  // If the timeout does not work, the watchdog unblocks the receive so the test fails, not hangs.
  std::atomic<bool> done{false}, watchdogFired{false};
  std::thread watchdog([&] {
    auto deadline = steady_clock::now() + milliseconds(5000);
    while (!done && steady_clock::now() < deadline) std::this_thread::sleep_for(milliseconds(10));
    if (!done) {
      watchdogFired = true;
      pair.server->shutdown();
    }
  });
  auto start = steady_clock::now();
  std::string error;
  try {
    pair.server->receiveFrame();
  } catch (const TransportError& e) {
    error = e.what();
  }
  done = true;
  watchdog.join();
  auto elapsed = steady_clock::now() - start;
  EXPECT_FALSE(watchdogFired) << "receiveFrame ignored the 200 ms receive timeout";
  EXPECT_NE(error.find("timed out"), std::string::npos) << "error: " << error;
  EXPECT_GE(elapsed, milliseconds(150));
}

TEST(TcpTransportTest, ShutdownUnblocksAReceiveInAnotherThread) {
  auto pair = bareTcpPair();
  std::thread stopper([&] {
    std::this_thread::sleep_for(milliseconds(100));
    pair.server->shutdown();
  });
  auto start = steady_clock::now();
  EXPECT_THROW(pair.server->receiveFrame(), TransportError);
  EXPECT_LT(steady_clock::now() - start, milliseconds(5000));
  stopper.join();
}

TEST(TcpTransportTest, ConnectingToAClosedPortFails) {
  uint16_t port;
  {
    auto listener = tcpListen(Endpoint{"tcp", "127.0.0.1", 0});
    port = endpointOf(*listener).port;
  }
  EXPECT_THROW(tcpConnect(Endpoint{"tcp", "127.0.0.1", port}, 2000), TransportError);
  EXPECT_THROW(tcpConnect(Endpoint{"tcp", "127.0.0.1", port}), TransportError);
}

TEST(TcpTransportTest, NonTcpSchemesAreRefused) {
  EXPECT_THROW(tcpConnect(Endpoint{"rdma", "127.0.0.1", 1}), TransportError);
  EXPECT_THROW(tcpListen(Endpoint{"rdma", "127.0.0.1", 0}), TransportError);
}

TEST(TcpTransportTest, ListenerShutdownEndsAccept) {
  auto listener = tcpListen(Endpoint{"tcp", "127.0.0.1", 0});
  std::thread stopper([&] {
    std::this_thread::sleep_for(milliseconds(100));
    listener->shutdown();
  });
  EXPECT_THROW(listener->accept(), TransportError);
  stopper.join();
}

}  // namespace
}  // namespace gpupool::transport
